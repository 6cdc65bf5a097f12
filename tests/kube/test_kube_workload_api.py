"""The Kubernetes Workload API (KEP-4671) with `lavaflow scheduler` against the API double:
1.35's `scheduling.k8s.io/v1alpha1` Workload (pods name their group with `spec.workloadRef`; no
status to write: Events and the pods' PodScheduled condition only) and 1.36's
`scheduling.k8s.io/v1alpha2` PodGroup (`spec.schedulingGroup`; its PodGroupScheduled condition);
a server that does not serve the API; a restarted scheduler. (The simulator:
tests/sim/test_workload_api.py. A real kube-apiserver 1.36 serving v1alpha2:
tests/kube/test_kube_real.py; no real 1.35 server, so v1alpha1 is tested here only.)"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, settled  # noqa: E402
from lavaflow.testing import fake_node  # noqa: E402

V1 = "scheduling.k8s.io/v1alpha1"
V2 = "scheduling.k8s.io/v1alpha2"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def workload(name: str, groups: dict[str, int | None], ns: str = "default") -> dict:
    """A v1alpha1 Workload; ``groups``: podGroup name -> minCount (None: the basic policy)."""
    return {
        "apiVersion": V1,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "podGroups": [
                {"name": g, "policy": {"basic": {}} if n is None else {"gang": {"minCount": n}}}
                for g, n in groups.items()
            ]
        },
    }


def pods(prefix: str, n: int, ref: dict, ns: str = "default", cpu: str = "1", field: str = "workloadRef") -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{prefix}-{i}", "namespace": ns, "annotations": {"sim.lavaflow.io/duration": "inf"}},
            "spec": {
                "schedulerName": "volcano",
                field: ref,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
        for i in range(n)
    ]


def v1alpha2_podgroup(name: str, min_count: int, ns: str = "default") -> dict:
    return {
        "apiVersion": V2,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def scheduled_condition(pod: dict) -> dict | None:
    return next((c for c in (pod.get("status") or {}).get("conditions", []) if c["type"] == "PodScheduled"), None)


def test_a_v1alpha1_gang_is_bound_whole_or_not_at_all_and_only_events_are_written():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="3")]) as c:
            c.start_controllers()  # lavaflow's PodGroup controller must leave these pods alone
            s = c.start_scheduler()
            await c.until_ready()
            await c.create([workload("train", {"workers": 4}), *pods("w", 4, {"name": "train", "podGroup": "workers"})])

            async def waiting():
                ps = await c.pods("default")
                conds = [scheduled_condition(p) for p in ps]
                events = [e for e in await c.objects("Event", "default") if e["reason"] == "Unschedulable"]
                ok = len(ps) == 4 and all(x and x["status"] == "False" for x in conds) and events
                return ok and (conds, events)

            conds, events = await c.wait_for(waiting, 10, "every pod PodScheduled=False and an Event on the Workload")
            assert "tasks in gang unschedulable" in conds[0]["message"], conds[0]
            ev = events[0]
            assert ev["involvedObject"]["apiVersion"] == V1 and ev["involvedObject"]["kind"] == "Workload"
            assert ev["involvedObject"]["name"] == "train" and ev["type"] == "Warning"
            assert ev["message"].startswith("podGroup 'workers' of Workload default/train: ")
            await settled(s)
            assert not c.bindings(), "part of the gang was bound"
            assert len([e for e in await c.objects("Event", "default") if e["reason"] == "Unschedulable"]) == 1
            # no Volcano PodGroup was made for these pods, and nothing was written to the Workload
            assert await c.objects("PodGroup", "default") == []
            assert c.double.call(lambda: c.double.counts.get("patch/Workload", 0)) == 0
            assert c.double.call(lambda: c.double.counts.get("update/Workload", 0)) == 0
            await c.create([fake_node("n1", cpu="1")])

            async def whole():
                return len(c.bindings()) == 4

            await c.wait_for(whole, 15, "all four bound once they fit")
            assert sorted(k for k, _ in c.bindings()) == [f"default/w-{i}" for i in range(4)]
            assert s.workloads.kinds == ["Workload", "SchedulingPodGroup"]
            job = s.cache.jobs["default/workload:train:workers"]
            assert job.min_available == 4

    run(scenario())


def test_replica_keys_are_separate_gangs_and_basic_pods_go_one_by_one():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="3")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            ref0 = {"name": "lws", "podGroup": "group", "podGroupReplicaKey": "0"}
            ref1 = {"name": "lws", "podGroup": "group", "podGroupReplicaKey": "1"}
            await c.create(
                [
                    workload("lws", {"group": 2, "side": None}),
                    *pods("r0", 2, ref0),
                    *pods("r1", 2, ref1),
                    *pods("b", 3, {"name": "lws", "podGroup": "side"}, cpu="0.5"),
                ]
            )
            await settled(s, ("default/r0-1", "default/r1-1", "default/b-2"))
            await settled(s)  # (the Workload's gangs formed in the first cycle, bound by the next)
            bound = sorted(k for k, _ in c.bindings())
            # 3 CPUs: one replica (2 CPUs) fits whole, the other not at all; basic pods fill the rest
            r0 = [k for k in bound if k.startswith("default/r0-")]
            r1 = [k for k in bound if k.startswith("default/r1-")]
            assert sorted((len(r0), len(r1))) == [0, 2], bound
            assert len([k for k in bound if k.startswith("default/b-")]) == 2, bound
            assert {"default/workload:lws:group:0", "default/workload:lws:group:1"} <= set(s.cache.jobs)
            assert s.cache.jobs["default/workload:lws:side"].min_available == 1

    run(scenario())


def test_a_v1alpha2_podgroup_is_gang_scheduled_and_gets_its_condition():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="2")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            pg = v1alpha2_podgroup("job-0", 3)
            pg["spec"]["podGroupTemplateRef"] = {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}}
            await c.create([pg])
            # a condition another component wrote (kube-scheduler's preemption): left as it is
            other = {
                "type": "DisruptionTarget",
                "status": "False",
                "reason": "Other",
                "message": "written by someone else",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            await c.api.request(
                "PATCH",
                "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/job-0/status",
                body={"status": {"conditions": [other]}},
                content_type="application/merge-patch+json",
            )
            await c.create(pods("p", 3, {"podGroupName": "job-0"}, field="schedulingGroup"))

            def ours(g: dict) -> dict | None:
                conds = (g.get("status") or {}).get("conditions") or []
                assert [x for x in conds if x["type"] == "DisruptionTarget"] == [other], conds
                return next((x for x in conds if x["type"] == "PodGroupScheduled"), None)

            async def unschedulable():
                cond = ours((await c.objects("SchedulingPodGroup", "default"))[0])
                return cond and cond["status"] == "False" and cond

            cond = await c.wait_for(unschedulable, 10, "PodGroupScheduled=False")
            assert cond["type"] == "PodGroupScheduled" and cond["reason"] == "Unschedulable"
            assert "tasks in gang unschedulable" in cond["message"]
            assert not c.bindings()
            await c.create([fake_node("n1", cpu="1")])

            async def scheduled():
                cond = ours((await c.objects("SchedulingPodGroup", "default"))[0])
                return len(c.bindings()) == 3 and cond and cond["status"] == "True" and cond

            cond = await c.wait_for(scheduled, 15, "all bound and PodGroupScheduled=True")
            assert cond["reason"] == "Scheduled" and cond["lastTransitionTime"]
            await settled(s)
            patches = c.double.call(lambda: c.double.counts["patch/SchedulingPodGroup"])
            await settled(s)  # a status equal to the server's is not written again
            assert c.double.call(lambda: c.double.counts["patch/SchedulingPodGroup"]) == patches
            ours((await c.objects("SchedulingPodGroup", "default"))[0])  # the other condition kept

    run(scenario())


def test_the_unschedulable_event_gives_the_reason_once_all_the_pods_exist():
    """Issue 36: the Event is recorded once per wait, and was recorded while the gang's pods were
    still being created ("3/1 tasks in gang unschedulable: not enough valid tasks for gang
    scheduling: 1 valid, 3 minAvailable"), so the PodGroup kept saying so once they all existed. Here one pod comes, a
    cycle sees it alone, then the other two: the one Event gives the reason the whole gang does
    not fit."""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="2")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            made = pods("p", 3, {"podGroupName": "job-0"}, field="schedulingGroup")
            await c.create([v1alpha2_podgroup("job-0", 3), made[0]])

            async def seen_alone():
                pg = s.cache.jobs.get("default/podgroup:job-0")
                return pg is not None and len(pg.tasks) == 1 and s.cycles >= at + 2

            at = s.cycles
            await c.wait_for(seen_alone, 10, "a cycle over the gang's first pod alone")
            # (a gang whose pods are not all created gets no PodScheduled=False on its pods: its
            # PodGroup says why, as in Volcano)
            assert not [p for p in await c.pods("default") if scheduled_condition(p)]
            await c.create(made[1:])

            async def unschedulable_events():
                return [e for e in await c.objects("Event", "default") if e["reason"] == "Unschedulable"]

            events = await c.wait_for(unschedulable_events, 10, "the Unschedulable Event")
            await settled(s)  # (a few more cycles: no second Event)
            await settled(s)
            events = await unschedulable_events()
            assert len(events) == 1, events
            message = events[0]["message"]
            assert message.startswith("PodGroup default/job-0: "), message
            assert "/3 tasks in gang unschedulable" in message and "valid tasks" not in message, message
            assert not c.bindings()

    run(scenario())


def test_a_server_without_the_api_leaves_the_feature_off():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            c.double.unserve(V1)
            c.double.unserve(V2)
            s = c.start_scheduler()
            await c.until_ready()

            async def ready():
                return s.ready and s.cycles > 0

            await c.wait_for(ready, 10, "the scheduler's informers synced and a cycle run")
            # a pod naming a Workload on such a server is a member of nothing: it waits
            await c.create(pods("orphan", 1, {"name": "w", "podGroup": "g"}))
            await settled(s, ("default/orphan-0",))
            assert s.workloads.kinds == [] and not s.workloads.enabled
            assert not any(":" in k for k in s.cache.jobs), "a gang was made without the API"
            assert "Workload" not in s.store.informers and "SchedulingPodGroup" not in s.store.informers
            # the probes were the only requests: 404s, never a watch
            assert c.double.call(lambda: c.double.counts.get("list/Workload", 0)) == 0  # unserved: never routed
            assert not c.bindings()

    run(scenario())


def test_a_workload_created_after_its_pods_takes_them_in():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            await c.create(pods("late", 2, {"name": "later", "podGroup": "g"}))
            await settled(s, ("default/late-0", "default/late-1"))
            assert not c.bindings(), "a pod of a Workload not yet seen was bound"
            assert not any(k.startswith("default/workload:") for k in s.cache.jobs if s.cache.jobs[k].pg is not None)
            await c.create([workload("later", {"g": 2})])

            async def both():
                return len(c.bindings()) == 2

            await c.wait_for(both, 10, "both pods bound once their Workload exists")

    run(scenario())


def test_restarted_scheduler_takes_the_bound_gang_over_without_admitting_it_again():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="3")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            await c.create([workload("r", {"g": 3}), *pods("r", 3, {"name": "r", "podGroup": "g"})])

            async def bound():
                return len(c.bindings()) == 3

            await c.wait_for(bound, 15, "the gang bound")
            await c.kill_scheduler(s)
            s2 = c.start_scheduler(identity="sched-b")

            async def taken_over():
                job = s2.cache.jobs.get("default/workload:r:g")
                ok = job is not None and job.pg is not None and job.pg.status.phase in ("Inqueue", "Running")
                return ok and job

            job = await c.wait_for(taken_over, 10, "the gang known to the new scheduler as admitted")
            assert job.min_available == 3 and job.ready_num == 3
            await settled(s2)
            assert len(c.bindings()) == 3, "a pod was bound twice"

    run(scenario())


def test_a_gang_half_bound_by_a_dead_leader_is_completed():
    """2 of 4 pods bound (the leader died mid-gang) on a node that holds exactly the gang: the new
    scheduler completes it."""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            members = pods("h", 4, {"name": "h", "podGroup": "g"})
            for p in members[:2]:
                p["spec"]["nodeName"] = "n0"
            await c.create([workload("h", {"g": 4}), *members])
            c.start_scheduler()

            async def whole():
                ps = await c.pods("default")
                return len(ps) == 4 and all(p["spec"].get("nodeName") for p in ps)

            await c.wait_for(whole, 15, "the gang completed")
            assert sorted(k for k, _ in c.bindings()) == ["default/h-2", "default/h-3"]
            assert c.double.call(lambda: c.double.counts.get("patch/PodGroup", 0)) == 0

    run(scenario())
