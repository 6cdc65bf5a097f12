"""The scheduler and controller processes end to end against the in-process API double.

Fake nodes, a fake kubelet (bound pods become Running, then Succeeded after
their scaled ``sim.lavaflow.io/duration``), the admission webhook's logic in
the API's request path.
"""

from __future__ import annotations

import asyncio
import collections
import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, lease_tries, load_example, node_usage, settled  # noqa: E402
from lavaflow.testing import fake_node  # noqa: E402


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def phase(obj) -> str:
    return (obj.get("status") or {}).get("state", {}).get("phase") or (obj.get("status") or {}).get("phase", "")


async def job_done(c: Cluster) -> bool:
    jobs = await c.objects("Job")
    return bool(jobs) and all(phase(j) in ("Completed", "Failed") for j in jobs)


def assert_no_double_binding(c: Cluster) -> None:
    keys = [k for k, _ in c.bindings()]
    dup = [k for k, n in collections.Counter(keys).items() if n > 1]
    assert not dup, f"pods bound twice: {dup}"
    attempts = c.double.call(lambda: dict(c.double.binding_attempts))
    assert all(n == 1 for n in attempts.values()), {k: n for k, n in attempts.items() if n > 1}


@pytest.mark.parametrize("example,pods", [("mpi-hello.yaml", 4), ("tensorflow-benchmark.yaml", 3)])
def test_volcano_job_is_bound_as_a_gang_and_completes(example, pods):
    async def scenario():
        nodes, objs, held = load_example(example)
        async with Cluster(nodes, held) as c:
            c.start_controllers()
            s = c.start_scheduler()
            await c.until_ready()
            await c.create(objs)
            await c.wait_for(lambda: job_done(c), 20, "the job to finish")
            jobs = await c.objects("Job")
            assert [phase(j) for j in jobs] == ["Completed"]
            binds = c.bindings()
            assert len(binds) == pods
            # One cycle placed the whole gang: every pod's binding came from the same decision batch.
            assert s.writer.bind_failures == 0
            assert_no_double_binding(c)
            # The pods kept every template field lavaflow does not model.
            job_doc = next(o for o in objs if o["kind"] == "Job")
            want_image = job_doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"]
            assert want_image

    run(scenario())


def test_gang_waits_all_or_nothing_and_explains_why():
    """A job that does not fit gets no pod bound and an Unschedulable PodGroup with the gang's reason; a new node unblocks it."""

    async def scenario():
        _, objs, _ = load_example("mpi-hello.yaml")
        async with Cluster([fake_node("small-0", cpu="3", memory="4Gi")]) as c:
            c.start_controllers()
            c.start_scheduler()
            await c.until_ready()
            await c.create(objs)

            async def explained():
                pgs = await c.objects("PodGroup")
                conds = [
                    x
                    for pg in pgs
                    for x in (pg.get("status") or {}).get("conditions", [])
                    if x["type"] == "Unschedulable"
                ]
                return conds

            conds = await c.wait_for(explained, 15, "an Unschedulable PodGroup condition")
            assert conds[0]["status"] == "True"
            assert conds[0]["message"].startswith("4/4 tasks in gang unschedulable")
            assert c.bindings() == []

            async def unschedulable_event():
                # Events go out after bindings and status writes: wait for them (a busy machine delays them).
                events = await c.objects("Event")
                return any(e["reason"] == "Unschedulable" and e["involvedObject"]["kind"] == "PodGroup" for e in events)

            await c.wait_for(unschedulable_event, 15, "an Unschedulable Event on the PodGroup")
            await c.create([fake_node("small-1", cpu="3", memory="4Gi")])

            async def all_bound():
                pods = await c.pods()
                return len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)

            await c.wait_for(all_bound, 15, "the gang to be bound")
            assert len(c.bindings()) == 4
            assert_no_double_binding(c)

    run(scenario())


def spark_style(n_pods: int = 3, cpu: str = "1") -> list[dict]:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "spark-pi-pg", "namespace": "spark"},
        "spec": {"minMember": 3, "minResources": {"cpu": "3", "memory": "3Gi"}, "queue": "default"},
    }
    pods = []
    for i in range(n_pods):
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"spark-pi-{i}",
                    "namespace": "spark",
                    "annotations": {"scheduling.k8s.io/group-name": "spark-pi-pg", "sim.lavaflow.io/duration": "inf"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [
                        {
                            "name": "spark",
                            "image": "apache/spark:3.5.2",
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                        }
                    ],
                },
            }
        )
    return [pg, *pods]


def test_spark_style_podgroup_is_all_or_nothing():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="2", memory="8Gi")]) as c:
            c.start_controllers()
            s = c.start_scheduler()
            await c.until_ready()
            await c.create(spark_style())

            async def unschedulable():
                pg = (await c.objects("PodGroup", "spark"))[0]
                return any(x["type"] == "Unschedulable" for x in (pg.get("status") or {}).get("conditions", []))

            await c.wait_for(unschedulable, 10, "the PodGroup to be reported unschedulable")

            async def explained():
                pods = await c.pods("spark")
                conds = [
                    next((x for x in p["status"].get("conditions", []) if x["type"] == "PodScheduled"), None)
                    for p in pods
                ]
                return all(x and x["status"] == "False" for x in conds) and conds

            conds = await c.wait_for(explained, 10, "PodScheduled=False on every pod (kubectl describe pod)")
            assert conds[0]["reason"] == "Unschedulable"
            assert conds[0]["message"].startswith("3/3 tasks in gang unschedulable"), conds[0]["message"]

            async def failed_scheduling():
                # Events go out after bindings and status writes: wait for them (a busy machine delays them).
                events = await c.objects("Event", "spark")
                return any(e["reason"] == "FailedScheduling" and e["involvedObject"]["kind"] == "Pod" for e in events)

            await c.wait_for(failed_scheduling, 10, "a FailedScheduling Event on a pod")
            await settled(s)
            assert c.bindings() == [], "a partial gang was bound"
            await c.create([fake_node("n1", cpu="2", memory="8Gi")])

            async def bound():
                pods = await c.pods("spark")
                return all(p["spec"].get("nodeName") for p in pods)

            await c.wait_for(bound, 10, "all three pods bound")
            assert sorted(k for k, _ in c.bindings()) == ["spark/spark-pi-0", "spark/spark-pi-1", "spark/spark-pi-2"]
            pg = (await c.objects("PodGroup", "spark"))[0]

            async def running():
                pg = (await c.objects("PodGroup", "spark"))[0]
                return pg["status"].get("phase") == "Running" and pg["status"].get("running") == 3

            await c.wait_for(running, 10, "PodGroup Running with 3 running")
            del pg

    run(scenario())


def test_spark_deadlock_resolves():
    async def scenario():
        nodes, objs, held = load_example("spark-wordcount.yaml")
        async with Cluster(nodes, held) as c:
            c.start_controllers()
            c.start_scheduler()
            await c.until_ready()
            await c.create(objs)

            async def finished():
                pods = await c.pods("spark")
                return len(pods) == 18 and all(p["status"]["phase"] == "Succeeded" for p in pods)

            await c.wait_for(finished, 30, "all six applications to finish")
            assert_no_double_binding(c)

            async def statuses():
                pgs = await c.objects("PodGroup", "spark")
                q = next(q for q in await c.objects("Queue") if q["metadata"]["name"] == "default")
                return (
                    all(pg["status"]["phase"] == "Completed" for pg in pgs) and q["status"].get("completed") == 6 and q
                )

            q = await c.wait_for(statuses, 10, "PodGroups Completed and counted in the queue")
            assert q["status"]["state"] == "Open"

    run(scenario())


def many_jobs(n: int, replicas: int, cpu: str = "1", prefix: str = "job") -> list[dict]:
    out = []
    for i in range(n):
        out.append(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": f"{prefix}-{i}", "namespace": "default"},
                "spec": {
                    "schedulerName": "volcano",
                    "minAvailable": replicas,
                    "tasks": [
                        {
                            "name": "w",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"annotations": {"sim.lavaflow.io/duration": "inf"}},
                                "spec": {
                                    "containers": [
                                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                                    ]
                                },
                            },
                        }
                    ],
                },
            }
        )
    return out


def test_killed_scheduler_restarts_without_losing_or_double_binding():
    async def scenario():
        nodes = [fake_node(f"n{i}", cpu="4", memory="16Gi") for i in range(6)]
        async with Cluster(nodes, lease=True) as c:
            c.start_controllers()
            first = c.start_scheduler("sched-a", bind_workers=2)
            await c.until_ready()
            await c.create(many_jobs(10, 2))  # 20 pods of 1 CPU on 24 CPUs
            await c.wait_for(lambda: _bound_at_least(c, 4), 15, "some pods bound")
            await c.kill_scheduler(first)
            bound_before = len(c.bindings())
            # Jobs that arrive without a scheduler (the first may have bound all 20 pods before it
            # was killed: the controllers create pods fast): only the restarted one can bind them.
            await c.create(many_jobs(2, 2, cpu="1", prefix="late"))
            second = c.start_scheduler("sched-b")
            await c.wait_for(lambda: _bound_at_least(c, 24), 20, "every pod bound after the restart")
            assert second.elector.is_leader
            assert len(c.bindings()) == 24 > bound_before
            assert_no_double_binding(c)
            usage = node_usage(await c.pods())
            assert all(v <= 4 for v in usage.values()), usage
            # A second replica waiting for the lease binds nothing.
            standby = c.start_scheduler("sched-c")
            tries = lease_tries(standby)
            await c.wait_for(lambda: tries, 10, "the standby, synced, trying for the lease")
            assert not any(tries)
            assert not standby.elector.is_leader and standby.writer.bound == 0

    run(scenario())


async def _bound_at_least(c: Cluster, n: int) -> bool:
    pods = await c.pods()
    return sum(1 for p in pods if p["spec"].get("nodeName")) >= n


def test_410_gone_triggers_a_relist_and_nothing_is_missed():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="8")]) as c:
            c.start_controllers()
            s = c.start_scheduler()
            await c.until_ready()
            await c.create(spark_style(3))
            await c.wait_for(lambda: _bound_at_least(c, 3), 10, "first gang bound")
            c.double.compact()
            pods = spark_style(3)
            for d in pods:
                d["metadata"]["name"] = d["metadata"]["name"].replace("spark-pi", "second")
                if d["kind"] == "Pod":
                    d["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "second-pg"
            await c.create(pods)
            await c.wait_for(lambda: _bound_at_least(c, 6), 10, "second gang bound after the relist")
            assert s.store.informers["Pod"].relists >= 1
            assert c.controllers.store.informers["Pod"].relists >= 1
            assert s.store.informers["Pod"].bookmarks >= 0

    run(scenario())


def test_409_conflicts_are_retried_on_a_fresh_copy():
    async def scenario():
        nodes, objs, held = load_example("tensorflow-benchmark.yaml")
        async with Cluster(nodes, held) as c:
            ctrl = c.start_controllers()
            c.start_scheduler()
            await c.until_ready()
            c.double.fail_next("Job", "update", 409, 3)
            await c.create(objs)
            await c.wait_for(lambda: job_done(c), 20, "the job to finish despite conflicts")
            assert ctrl.store.conflicts >= 3

    run(scenario())


def test_hard_network_topology_gang_lands_in_one_hypernode_on_a_cluster():
    """HyperNodes are watched when network-topology-aware is configured; the gang's pods share one."""
    from lavaflow.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, load_scheduler_conf

    conf = load_scheduler_conf(DEFAULT_SCHEDULER_CONF + "  - name: network-topology-aware\n")

    def hypernode(name: str, pattern: str) -> dict:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]},
        }

    pods = spark_style(n_pods=3, cpu="2")
    pods[0]["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    pods[0]["spec"]["minResources"] = {"cpu": "6", "memory": "3Gi"}

    async def scenario():
        # Rack a (one node) is too small for the gang; binpack alone would start there and split it.
        nodes = [fake_node("a-0", cpu="4")] + [fake_node(f"b-{i}", cpu="4") for i in range(2)]
        async with Cluster(nodes) as c:
            c.start_controllers()
            await c.create([hypernode("sa", "^a-"), hypernode("sb", "^b-")])
            c.start_scheduler(conf=conf)
            await c.until_ready()
            await c.create(pods)

            async def bound():
                got = await c.pods("spark")
                return len(got) == 3 and all(p["spec"].get("nodeName") for p in got) and got

            got = await c.wait_for(bound, 20, "the gang to be bound")
            assert len({p["spec"]["nodeName"][0] for p in got}) == 1, [p["spec"]["nodeName"] for p in got]

    run(scenario())


def test_scheduler_command_pauses_the_collector_while_its_informers_sync():
    """`lavaflow scheduler` (pause_gc_while_syncing) collects no garbage while the first lists are
    applied and through its first cycle, then freezes what they built and turns the collector
    back on; it still binds."""
    import gc

    seen: list[bool] = []

    async def scenario():
        _, objs, _ = load_example("mpi-hello.yaml")
        async with Cluster([fake_node("n0", cpu="8", memory="16Gi")]) as c:
            c.start_controllers()
            s = c.start_scheduler(pause_gc_while_syncing=True)
            start = s.store.start
            run_once = s.scheduler.run_once

            async def start_and_look() -> None:
                seen.append(gc.isenabled())  # while the informers list
                await start()

            def run_once_and_look(now: float):  # (in the session's thread)
                if len(seen) == 1:
                    seen.append(gc.isenabled())  # the first cycle
                return run_once(now)

            s.store.start = start_and_look  # type: ignore[method-assign]
            s.scheduler.run_once = run_once_and_look  # type: ignore[method-assign]
            await c.until_ready()
            await c.create(objs)
            await c.wait_for(lambda: _async_value(len(c.bindings()) == 4), 15, "the gang bound")
            seen.append(gc.isenabled())
            return gc.get_freeze_count()

    was = gc.isenabled()
    try:
        frozen = asyncio.run(scenario())
    finally:
        gc.unfreeze()
        if was:
            gc.enable()
    assert seen == [False, False, True]
    assert frozen > 0


def test_a_scheduler_that_never_cycles_turns_the_collector_back_on_after_a_while(monkeypatch):
    """A standby waiting for the lease runs no cycle: the collector, paused while its informers
    synced, is resumed after _GC_PAUSE_LIMIT all the same."""
    import gc

    from lavaflow.kube import scheduler_process

    monkeypatch.setattr(scheduler_process, "_GC_PAUSE_LIMIT", 1.0)
    seen: list[bool] = []

    async def scenario():
        async with Cluster([fake_node("n0", cpu="8", memory="16Gi")]) as c:
            s = c.start_scheduler(pause_gc_while_syncing=True)

            async def no_cycles(stop: asyncio.Event) -> None:
                await stop.wait()

            s._loop = no_cycles  # type: ignore[method-assign]
            await c.until_ready()
            seen.append(gc.isenabled())  # just after the sync: still paused
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not gc.isenabled():
                await asyncio.sleep(0.05)
            seen.append(gc.isenabled())

    was = gc.isenabled()
    try:
        asyncio.run(scenario())
    finally:
        gc.unfreeze()
        if was:
            gc.enable()
    assert seen == [False, True]


async def _async_value(v):
    return v


def test_abort_and_resume_commands_on_a_cluster():
    """bus.volcano.sh Commands through the controller process: AbortJob deletes a running job's
    pods and leaves it Aborted, ResumeJob runs it again; each Command is consumed (deleted). (The
    Command was consumed in its watch handler, which on a cluster runs on the event loop, where
    the store cannot write: the handler raised and nothing happened.)"""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            c.start_controllers()
            c.start_scheduler()
            await c.until_ready()
            job = many_jobs(1, 2)[0]
            await c.create([job])

            async def job_is(phase_: str, bound: int):
                jobs = await c.objects("Job")
                pods = [p for p in await c.pods() if p["spec"].get("nodeName")]
                return phase(jobs[0]) == phase_ and len(pods) == bound and jobs[0]

            async def consumed():
                return not await c.objects("Command")

            uid = (await c.wait_for(lambda: job_is("Running", 2), 15, "the job Running"))["metadata"]["uid"]
            for action, then, bound in (("AbortJob", "Aborted", 0), ("ResumeJob", "Running", 2)):
                target = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "job-0", "uid": uid}
                command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "action": action}
                await c.create([{**command, "metadata": {"name": action.lower()}, "target": target}])
                await c.wait_for(lambda then=then, bound=bound: job_is(then, bound), 15, f"the job {then}")
                await c.wait_for(consumed, 10, f"the {action} Command consumed")

    run(scenario())
