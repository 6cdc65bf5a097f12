"""lavaflow over Volcano's own CRDs (issue 40), against the API double.

Volcano's PodGroup CRD has no status subresource: ``.../podgroups/NAME/status`` is answered 404
and status is written on the object itself. The processes learn from discovery which kinds have
the subresource, follow it when it goes away while they run, and report every write the server
refuses (an error line and ``lavaflow_api_writes_refused_total``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, load_example  # noqa: E402
from lavaflow.api.kinds import kind_info  # noqa: E402
from lavaflow.kube.client import ApiError, ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.store import KubeStore  # noqa: E402
from lavaflow.scheduler.model import Eviction, EvictionCause  # noqa: E402
from lavaflow.testing import ApiDouble, fake_node  # noqa: E402

PODGROUP = kind_info("PodGroup")
QUEUE = kind_info("Queue")
REFUSED = "lavaflow_api_writes_refused_total"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def phase(obj) -> str:
    return (obj.get("status") or {}).get("state", {}).get("phase") or (obj.get("status") or {}).get("phase", "")


async def jobs_done(c: Cluster, n: int) -> bool:
    jobs = await c.objects("Job")
    return len(jobs) == n and all(phase(j) in ("Completed", "Failed") for j in jobs)


def renamed(objs: list[dict], suffix: str) -> list[dict]:
    """The example's Job under another name (so one cluster runs it more than once)."""
    out = []
    for d in objs:
        d = dict(d, metadata=dict(d["metadata"]))
        d["metadata"]["name"] += suffix
        out.append(d)
    return out


class Seen:
    """What ``view(obj)`` gave for every object of ``kind`` on the server while it ran (polled)."""

    def __init__(self, c: Cluster, kind: str = "PodGroup", view=phase) -> None:
        self.c, self.kind, self.view = c, kind, view
        self.seen: list = []
        self.task = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            for obj in await self.c.objects(self.kind):
                self.seen.append(self.view(obj))
            await asyncio.sleep(0.02)

    def stop(self) -> list:
        self.task.cancel()
        return self.seen


@contextlib.asynccontextmanager
async def mpi_cluster(*without_status: str):
    """The MPI example's nodes, these kinds served without a status subresource, the controllers
    and the scheduler running: (cluster, the example's objects, scheduler, controllers)."""
    nodes, objs, held = load_example("mpi-hello.yaml")
    async with Cluster(nodes, held) as c:
        for kind in without_status:
            c.double.without_status_subresource(kind)
        ctrl = c.start_controllers()
        s = c.start_scheduler()
        await c.until_ready()
        yield c, objs, s, ctrl


def refused(metrics, kind: str, verb: str, code: int) -> float:
    labels = {"kind": kind, "verb": verb, "code": str(code)}
    return metrics.registry.get_sample_value(REFUSED, labels) or 0.0


def test_volcano_job_runs_over_a_podgroup_crd_without_status_subresource(caplog):
    """Volcano's PodGroup CRD as it ships: no status subresource. The PodGroup goes Inqueue and
    Running, the pods are bound and the job completes; nothing is refused."""

    async def scenario():
        async with mpi_cluster("PodGroup") as (c, objs, s, ctrl):
            phases = Seen(c)
            await c.create(objs)
            await c.wait_for(lambda: jobs_done(c, 1), 20, "the job to finish")
            seen = phases.stop()
            assert [phase(j) for j in await c.objects("Job")] == ["Completed"]
            assert {"Inqueue", "Running"} <= set(seen), seen
            assert len(c.bindings()) == 4
            assert s.store.has_status(PODGROUP) is False and ctrl.store.has_status(PODGROUP) is False
            assert s.store.has_status(QUEUE) is True
            assert not s.store.refusals and not ctrl.store.refusals
            assert "PodGroup (scheduling.volcano.sh/v1beta1): served without a status subresource" in caplog.text

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


def test_queue_status_is_written_on_a_queue_crd_without_status_subresource():
    """A Queue CRD without a status subresource: the scheduler's allocation and the controller's
    counts and state are written on the Queue itself."""

    async def scenario():
        async with mpi_cluster("Queue", "PodGroup") as (c, objs, s, ctrl):
            statuses = Seen(c, "Queue", lambda q: q["metadata"]["name"] == "default" and q.get("status") or {})
            await c.create(objs)
            await c.wait_for(lambda: jobs_done(c, 1), 20, "the job to finish")
            seen = statuses.stop()
            # the scheduler's allocation, and the controller's state and count of running PodGroups
            assert any(st.get("allocated") == {"cpu": "3.5", "pods": "4"} for st in seen), seen
            assert any(st.get("running") == 1 and st.get("state") == "Open" for st in seen), seen
            assert s.store.has_status(QUEUE) is False and ctrl.store.has_status(QUEUE) is False
            assert not s.store.refusals and not ctrl.store.refusals

    run(scenario())


def test_status_subresource_removed_and_restored_while_running(caplog):
    """The PodGroup CRD replaced by Volcano's (no status subresource) while the processes run:
    the first status write answered 404 for an object that exists turns the kind over to writes on
    the object, with a warning, and the next jobs run; put back, status goes through it again."""

    async def scenario():
        async with mpi_cluster() as (c, objs, s, ctrl):
            await c.create(renamed(objs, "-a"))
            await c.wait_for(lambda: jobs_done(c, 1), 20, "the first job to finish")
            assert s.store.has_status(PODGROUP) is True
            c.double.without_status_subresource("PodGroup")
            phases = Seen(c)
            await c.create(renamed(objs, "-b"))
            await c.wait_for(lambda: jobs_done(c, 2), 20, "the second job to finish")
            assert "Inqueue" in phases.stop()
            assert s.store.has_status(PODGROUP) is False
            assert "served without a status subresource" in caplog.text
            assert "answered 404 while the object exists" in caplog.text
            c.double.with_status_subresource("PodGroup")
            await c.create(renamed(objs, "-c"))
            await c.wait_for(lambda: jobs_done(c, 3), 20, "the third job to finish")
            assert s.store.has_status(PODGROUP) is True
            assert not s.store.refusals and not ctrl.store.refusals
            assert len(c.bindings()) == 12

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


def test_refused_writes_are_logged_as_errors_and_counted(caplog):
    """A status patch, a pod creation and a binding the server refuses: one error line each naming
    the kind, the object, the verb and the HTTP status, and the counter of each process; the job
    still completes once the next writes go through."""

    async def scenario():
        async with mpi_cluster("PodGroup") as (c, objs, s, ctrl):
            c.double.fail_next("PodGroup", "patch", 422)
            c.double.fail_next("Pod", "create", 403)
            c.double.fail_next("Pod", "bind", 500)
            await c.create(objs)
            await c.wait_for(lambda: jobs_done(c, 1), 20, "the job to finish")
            errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            pg = next(e for e in errors if "patch PodGroup" in e)
            assert "default/lm-mpi-job-" in pg and "HTTP 422 Invalid: injected 422 for patch PodGroup" in pg
            assert any("create Pod default/lm-mpi-job-" in e and "HTTP 403 Forbidden" in e for e in errors), errors
            assert any("bind Pod default/lm-mpi-job-" in e and "HTTP 500 InternalError" in e for e in errors), errors
            assert refused(s.metrics, "PodGroup", "patch", 422) == 1
            assert refused(s.metrics, "Pod", "bind", 500) == 1
            assert refused(ctrl.metrics, "Pod", "create", 403) == 1
            assert s.store.refusals == {("PodGroup", "patch", 422): 1, ("Pod", "bind", 500): 1}

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


def test_expected_races_are_not_reported_as_refusals(caplog):
    """A binding answered 409 (already bound), a status write to a PodGroup that is gone and a
    delete of an object already deleted are races, not refusals: no error line, nothing counted."""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            ctrl = c.start_controllers()
            s = c.start_scheduler()
            await c.until_ready()
            c.double.fail_next("Pod", "bind", 409)
            await c.create(
                [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": "p", "namespace": "default"},
                        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
                    }
                ]
            )
            await c.wait_for(lambda: _bound(c, "default/p"), 10, "the pod bound after the 409")
            with pytest.raises(ApiError) as gone:
                await s.store.patch("PodGroup", "default/none", {"status": {"phase": "Inqueue"}}, status=True)
            assert gone.value.not_found
            assert s.store.has_status(PODGROUP) is True  # a 404 for an object that is gone changes nothing
            assert await s.store.adelete("PodGroup", "default/none") is None
            assert not s.store.refusals and not ctrl.store.refusals
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


async def _bound(c: Cluster, key: str) -> bool:
    ns, name = key.split("/")
    return any(p["metadata"]["name"] == name and p["spec"].get("nodeName") for p in await c.pods(ns))


def test_refused_evictions_and_events_are_errors(caplog):
    """An eviction the server refuses (429: a disruption budget) and an Event it refuses (403) are
    error lines and counted; an eviction of a pod that is gone is not."""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "busybox"}]},
            }
            await c.create([pod])
            c.double.fail_next("Pod", "evict", 429)
            await s.writer.evict("default/p", Eviction(EvictionCause.PREEMPT, "preempt"))
            await s.writer.evict("default/none", Eviction(EvictionCause.PREEMPT, "preempt"))
            c.double.fail_next("Event", "create", 403)
            await s.writer.event("Pod", "default/p", "Normal", "Scheduled", "hello")
            errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert any("evict Pod default/p" in e and "HTTP 429 TooManyRequests" in e for e in errors), errors
            assert any("create Event about Pod default/p" in e and "HTTP 403 Forbidden" in e for e in errors), errors
            assert refused(s.metrics, "Pod", "evict", 429) == 1
            assert refused(s.metrics, "Event", "create", 403) == 1
            assert s.store.refusals == {("Pod", "evict", 429): 1, ("Event", "create", 403): 1}

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


def test_discovery_documents_of_the_api_double():
    async def scenario():
        double = ApiDouble().start()
        client = KubeClient(ClientConfig(server=double.url, qps=0, burst=0))
        try:
            core = await client.request("GET", "/api/v1")
            names = {r["name"] for r in core["resources"]}
            assert {"pods", "pods/status", "pods/binding", "pods/eviction", "nodes", "configmaps"} <= names
            assert "configmaps/status" not in names
            double.without_status_subresource("PodGroup")
            volcano = await client.request("GET", "/apis/scheduling.volcano.sh/v1beta1")
            assert volcano["groupVersion"] == "scheduling.volcano.sh/v1beta1"
            names = {r["name"] for r in volcano["resources"]}
            assert names == {"podgroups", "queues", "queues/status"}
            pg = next(r for r in volcano["resources"] if r["name"] == "podgroups")
            assert pg["namespaced"] is True and pg["kind"] == "PodGroup" and "patch" in pg["verbs"]
            double.unserve("scheduling.volcano.sh/v1beta1")
            with pytest.raises(ApiError) as exc:
                await client.request("GET", "/apis/scheduling.volcano.sh/v1beta1")
            assert exc.value.not_found
        finally:
            await client.close()
            double.stop()

    run(scenario())


class _NoDiscovery:
    """A client whose every discovery request fails as ``error`` says."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.asked: list[str] = []

    async def request(self, method: str, path: str, **kw):
        self.asked.append(path)
        raise self.error


@pytest.mark.parametrize(
    "error",
    [ApiError(403, {"reason": "Forbidden", "message": "no"}, "GET", "/apis"), ConnectionError("refused")],
)
def test_failed_discovery_falls_back_to_the_table_of_kinds(error):
    async def scenario():
        client = _NoDiscovery(error)
        store = KubeStore(client)  # type: ignore[arg-type]
        store.inform("PodGroup")
        store.inform("Pod")
        await store.discover()
        assert sorted(client.asked) == ["/api/v1", "/apis/scheduling.volcano.sh/v1beta1"]
        assert store.has_status(PODGROUP) is True and store.has_status(kind_info("Pod")) is True
        assert store.status_subresource == {}

    run(scenario())


def test_empty_volcano_names_are_left_out_of_what_is_written():
    """Volcano's Queue CRD holds spec.parent to a DNS pattern, which "" fails (a real server
    refused lavaflow's root queue with 422): empty queue, parent and priorityClassName names of
    Volcano's kinds are written as absent, as Volcano's Go types write them."""
    from lavaflow.api.volcano import PodGroup
    from lavaflow.controllers.queue import builtin_queues
    from lavaflow.kube import codec

    root, default = builtin_queues()
    assert "parent" not in codec.encode(root, QUEUE)["spec"]
    assert codec.encode(default, QUEUE)["spec"]["parent"] == "root"
    pg = PodGroup.model_validate({"metadata": {"name": "p", "namespace": "d"}, "spec": {"minMember": 1}})
    assert "queue" not in codec.encode(pg, PODGROUP)["spec"]
    assert codec.decode(PODGROUP, codec.encode(pg, PODGROUP)).spec.queue == ""


def test_an_empty_pod_overhead_is_not_written():
    """kube-apiserver refuses a pod with ``overhead: {}`` and no RuntimeClass (403); a Job lavaflow
    writes (a JobFlow's) passed the empty overhead of its model to every pod it made."""
    from lavaflow.api.core import Pod
    from lavaflow.api.volcano import Job
    from lavaflow.kube import codec

    pod = Pod.model_validate({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    assert "overhead" not in codec.encode(pod, kind_info("Pod"))["spec"]
    template = {"spec": {"containers": [{"name": "c"}]}}
    job = Job.model_validate({"metadata": {"name": "j"}, "spec": {"tasks": [{"name": "t", "template": template}]}})
    assert "overhead" not in codec.encode(job, kind_info("Job"))["spec"]["tasks"][0]["template"]["spec"]
    given = {"containers": [{"name": "c"}], "overhead": {"cpu": "250m"}}
    pod = Pod.model_validate({"metadata": {"name": "p"}, "spec": given})
    assert codec.encode(pod, kind_info("Pod"))["spec"]["overhead"] == {"cpu": "0.25"}


def test_a_refused_lease_write_is_an_error_and_counted(caplog):
    """Leader election's Lease writes too: a creation refused (403) is an error line and counted;
    the candidate tries again and leads."""

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")], lease=True) as c:
            c.double.fail_next("Lease", "create", 403)
            s = c.start_scheduler()

            async def leads():
                return s.elector.is_leader

            await c.wait_for(leads, 15, "the scheduler to lead")
            errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert any("create Lease default/lavaflow-scheduler" in e and "HTTP 403 Forbidden" in e for e in errors)
            assert refused(s.metrics, "Lease", "create", 403) == 1

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


def test_store_updates_follow_the_status_subresource_as_it_goes_and_comes_back(caplog):
    """The controllers' writes (whole-object updates): a status update answered 404 on /status
    for a Queue that exists goes on the object instead; once the subresource is back, a status the
    object write did not keep goes through it again."""
    from lavaflow.controllers.queue import builtin_queues

    async def scenario():
        double = ApiDouble().start()
        client = KubeClient(ClientConfig(server=double.url, qps=0, burst=0))
        store = KubeStore(client)
        store.inform("Queue")
        try:
            await store.start()
            await store.wait_synced(10)
            await store.acreate(builtin_queues()[0])  # root, Open
            double.without_status_subresource("Queue")
            for state, has in (("Closed", False), ("Open", True)):
                queue = store.get("Queue", "root").model_copy(deep=True)
                queue.status.state = state
                await store.aupdate(queue)
                assert double.get("Queue", "root")["status"]["state"] == state
                assert store.has_status(QUEUE) is has
                double.with_status_subresource("Queue")
            assert "answered 404 while the object exists" in caplog.text
            assert "served with a status subresource: status is written through it" in caplog.text
            assert not store.refusals
        finally:
            await store.stop()
            await client.close()
            double.stop()

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())
