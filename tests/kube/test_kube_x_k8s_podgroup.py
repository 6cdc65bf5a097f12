"""scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1) with `lavaflow scheduler` against the
API double: gangs by label, status written to the status subresource in that API's form,
scheduleTimeoutSeconds, and a server without the CRD."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, settled  # noqa: E402
from lavaflow.testing import fake_node  # noqa: E402

LABEL = "scheduling.x-k8s.io/pod-group"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def group(name: str, min_member: int, ns: str = "ml", **spec) -> dict:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, **spec},
    }


def pods(name: str, n: int, ns: str = "ml", cpu: str = "1", scheduler: str = "volcano") -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": ns,
                "labels": {LABEL: name},
                "annotations": {"sim.lavaflow.io/duration": "inf"},
            },
            "spec": {
                "schedulerName": scheduler,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
        for i in range(n)
    ]


def scheduled_condition(pod: dict) -> dict | None:
    return next((c for c in (pod.get("status") or {}).get("conditions", []) if c["type"] == "PodScheduled"), None)


def test_labelled_pods_are_bound_as_a_gang_and_the_status_is_written_in_its_own_form():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="3")]) as c:
            c.start_controllers()
            s = c.start_scheduler()
            await c.until_ready()
            g = group("g", 4)
            g["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "llm",
                    "uid": "u-1",
                    "controller": True,
                }
            ]
            await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, g, *pods("g", 5)])

            async def waiting():
                pg = (await c.objects("CoschedulingPodGroup", "ml"))[0]
                ps = await c.pods("ml")
                conds = [scheduled_condition(p) for p in ps]
                ok = (pg.get("status") or {}).get("phase") == "Scheduling" and all(
                    x and x["status"] == "False" for x in conds
                )
                return ok and (pg, conds)

            pg, conds = await c.wait_for(waiting, 10, "the group Scheduling and every pod PodScheduled=False")
            # the fields and phases of the upstream CRD (scheduler-plugins v0.26.7 and later)
            assert set(pg["status"]) == {"phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime"}
            assert pg["status"]["scheduleStartTime"] and pg["status"]["running"] == 0
            assert pg["status"]["occupiedBy"] == "ml/llm"  # the PodGroup's owner (the TrainJob)
            assert (
                conds[0]["message"].startswith("5/5 tasks in gang unschedulable")
                or "tasks in gang unschedulable" in conds[0]["message"]
            )
            await settled(s)
            assert not c.bindings(), "part of the gang was bound"
            # lavaflow's PodGroup controller made no Volcano PodGroup for the labelled pods
            assert await c.objects("PodGroup", "ml") == []
            await c.create([fake_node("n1", cpu="2")])

            async def running():
                pg = (await c.objects("CoschedulingPodGroup", "ml"))[0]
                st = pg.get("status") or {}
                return st.get("phase") == "Running" and st.get("running") == 5 and st

            st = await c.wait_for(running, 15, "the group Running with 5 running")
            assert st["scheduleStartTime"] == pg["status"]["scheduleStartTime"]  # kept from the first try
            assert sorted(k for k, _ in c.bindings()) == [f"ml/g-{i}" for i in range(5)]
            assert s.cosched.enabled
            # a status equal to the server's is not written again
            await settled(s)
            patches = c.double.call(lambda: c.double.counts["patch/CoschedulingPodGroup"])
            await settled(s)
            assert c.double.call(lambda: c.double.counts["patch/CoschedulingPodGroup"]) == patches

    run(scenario())


def test_schedule_timeout_is_reported_on_the_group_and_its_pods():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="2")]) as c:
            c.start_scheduler()
            await c.until_ready()
            await c.create([group("t", 3, ns="default", scheduleTimeoutSeconds=1), *pods("t", 3, ns="default")])

            async def timed_out():
                events = [e for e in await c.objects("Event", "default") if e["reason"] == "ScheduleTimeout"]
                ps = await c.pods("default")
                conds = [scheduled_condition(p) for p in ps]
                return (
                    events
                    and all(x and "scheduleTimeoutSeconds (1s)" in x["message"] for x in conds)
                    and (events, conds)
                )

            events, conds = await c.wait_for(timed_out, 15, "a ScheduleTimeout Event and the pods' messages")
            assert events[0]["involvedObject"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
            assert events[0]["involvedObject"]["name"] == "t" and events[0]["type"] == "Warning"
            assert conds[0]["message"].startswith(
                "PodGroup default/t not scheduled within scheduleTimeoutSeconds (1s): "
            )
            assert "tasks in gang unschedulable" in conds[0]["message"]
            pg = (await c.objects("CoschedulingPodGroup", "default"))[0]
            assert pg["status"]["phase"] == "Scheduling"  # still tried, as coscheduling does
            assert not c.bindings()

    run(scenario())


def test_a_server_without_the_crd_leaves_the_feature_off():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            c.double.fail_next("CoschedulingPodGroup", "list", 404)
            s = c.start_scheduler()
            await c.until_ready()

            async def ready():
                return s.ready

            await c.wait_for(ready, 10, "the scheduler's informers synced")
            await c.create(pods("solo", 1, ns="default"))
            await settled(s, ("default/solo-0",))
            # probed once (the 404), never watched; the scheduler runs without it
            assert c.double.call(lambda: c.double.counts["list/CoschedulingPodGroup"]) == 1
            assert not s.cosched.enabled and "CoschedulingPodGroup" not in s.store.informers
            assert s.cycles > 0
            # a labelled pod without a served group is not a member of anything: it waits (no PodGroup)
            assert not c.bindings()

    run(scenario())


def test_restarted_scheduler_takes_over_a_running_group_without_admitting_it_again():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="3")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            await c.create([group("r", 3, ns="default", minResources={"cpu": "3"}), *pods("r", 3, ns="default")])

            async def running():
                pg = (await c.objects("CoschedulingPodGroup", "default"))[0]
                return (pg.get("status") or {}).get("phase") == "Running"

            await c.wait_for(running, 15, "the group Running")
            await c.kill_scheduler(s)
            s2 = c.start_scheduler(identity="sched-b")
            await settled(s2)
            job = s2.cache.jobs["default/r"]
            assert job.pg is not None and job.pg.status.phase == "Running" and job.min_available == 3
            assert len(c.bindings()) == 3
            pg = (await c.objects("CoschedulingPodGroup", "default"))[0]
            assert pg["status"]["phase"] == "Running" and pg["status"]["running"] == 3

    run(scenario())


def test_a_volcano_podgroup_of_the_same_name_is_the_one_used():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="2")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            volcano = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "dup", "namespace": "default"},
                "spec": {"minMember": 1, "queue": "default"},
            }
            # minMember 5 here would never fit: the Volcano PodGroup (minMember 1) decides
            await c.create([volcano, group("dup", 5, ns="default"), *pods("dup", 1, ns="default")])

            async def bound_and_running():
                vpg = (await c.objects("PodGroup", "default"))[0]
                return bool(c.bindings()) and (vpg.get("status") or {}).get("phase") == "Running"

            await c.wait_for(bound_and_running, 15, "the pod bound and the Volcano PodGroup Running")
            await settled(s)
            xpg = (await c.objects("CoschedulingPodGroup", "default"))[0]
            assert not xpg.get("status"), "the scheduler-plugins PodGroup of a Volcano name got a status"

    run(scenario())


def test_a_failed_binding_puts_the_labelled_pod_back_into_its_group():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            c.double.fail_next("Pod", "bind", 500, 1)
            s = c.start_scheduler()
            await c.until_ready()
            await c.create([group("f", 2, ns="default"), *pods("f", 2, ns="default")])

            async def all_bound():
                return len({k for k, _ in c.bindings()}) == 2

            await c.wait_for(all_bound, 15, "both pods bound after a failed binding")
            assert s.writer.bind_failures == 1

    run(scenario())


@pytest.mark.parametrize("phase", ["Scheduling", "PreScheduling"])
def test_a_group_half_bound_by_a_dead_leader_is_completed(phase):
    """2 of 4 pods bound and the status still Scheduling with none running (the leader died before
    the kubelet started them; PreScheduling: as an older lavaflow or scheduler-plugins controller
    left it), on a node that holds exactly the gang: the new scheduler completes it rather than
    admitting it again (which would count its bound pods twice and never fit)."""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            from lavaflow.api.kinds import kind_info as resource
            from lavaflow.kube.client import MERGE_PATCH

            members = pods("h", 4, ns="default")
            for p in members[:2]:
                p["spec"]["nodeName"] = "n0"
            await c.create([group("h", 4, ns="default", minResources={"cpu": "4"}), *members])
            await c.api.request(
                "PATCH",
                resource("CoschedulingPodGroup").path("default", "h", "status"),
                body={"status": {"phase": phase, "scheduleStartTime": "2026-01-01T00:00:00Z"}},
                content_type=MERGE_PATCH,
            )
            c.start_scheduler()

            async def whole():
                ps = await c.pods("default")
                st = (await c.objects("CoschedulingPodGroup", "default"))[0].get("status") or {}
                return all(p["spec"].get("nodeName") for p in ps) and st.get("phase") == "Running" and st

            st = await c.wait_for(whole, 15, "the gang completed and Running")
            assert st["running"] == 4 and st["scheduleStartTime"] == "2026-01-01T00:00:00Z"
            assert sorted(k for k, _ in c.bindings()) == ["default/h-2", "default/h-3"]
            # every status went to the scheduler-plugins object, none to a Volcano PodGroup path
            assert c.double.call(lambda: c.double.counts.get("patch/PodGroup", 0)) == 0

    run(scenario())
