"""The job controller writes at the server's pace (issue 40), against the API double.

A Job's pods go out in slow-start batches (1, 2, 4, ...; the next only after one without an
error), inside the client's QPS budget; a key's writes are sent while the next keys sync, so no
Job waits for another's PodGroup, pods or status; a Job's PodGroup exists before its pods; and a
create the server refuses is an error line with the object and the HTTP status, a metric, and a
retry with back-off.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from test_kube_e2e import many_jobs  # noqa: E402

from kube_harness import Cluster, controllers_settled, settled  # noqa: E402
from lavaflow.kube.client import ClientConfig, KubeClient, RateLimiter  # noqa: E402
from lavaflow.testing import ApiDouble  # noqa: E402

REFUSED = "lavaflow_api_writes_refused_total"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def enqueue_all(c: Cluster, n: int) -> list[dict]:
    """Stand in for the scheduler's enqueue action: the first ``n`` PodGroups to Inqueue."""
    pgs = await c.wait_for(lambda: _podgroups(c, n), 20, f"{n} PodGroups")
    for pg in pgs:
        ns, name = pg["metadata"]["namespace"], pg["metadata"]["name"]
        path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups/{name}/status"
        await c.api.request(
            "PATCH", path, body={"status": {"phase": "Inqueue"}}, content_type="application/merge-patch+json"
        )
    return pgs


async def _podgroups(c: Cluster, n: int) -> list[dict] | None:
    pgs = await c.objects("PodGroup")
    return pgs if len(pgs) >= n else None


async def _pods(c: Cluster, n: int) -> list[dict] | None:
    pods = await c.pods()
    return pods if len(pods) >= n else None


async def one_job_enqueued(c: Cluster, replicas: int, prefix: str, hold: float) -> None:
    """Pod creates answered ``hold`` seconds late, the controllers started, one Job of
    ``replicas`` pods created and its PodGroup enqueued."""
    c.double.hold("Pod", "create", hold)
    c.start_controllers()
    await c.until_ready()
    await c.create(many_jobs(1, replicas, prefix=prefix))
    await enqueue_all(c, 1)


def test_rate_limiter_lets_a_burst_through_then_paces_at_qps():
    now = [50.0]
    rl = RateLimiter(qps=20.0, burst=3, clock=lambda: now[0])
    assert [rl.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [round(rl.reserve(), 6) for _ in range(3)] == [0.05, 0.1, 0.15]  # queued 1/qps apart
    assert rl.delayed == 3
    now[0] += 60.0  # idle: the bucket refills to the burst, no further
    assert [rl.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rl.reserve() > 0
    assert RateLimiter(qps=0, burst=1).reserve() == 0.0  # qps 0: unlimited


def test_client_requests_keep_to_qps_after_the_burst():
    """Twelve requests at QPS 20, burst 4: four at once, the other eight 50 ms apart."""

    async def scenario():
        double = ApiDouble().start()
        try:
            client = KubeClient(ClientConfig(server=double.url, qps=20.0, burst=4))
            t0 = time.monotonic()
            await asyncio.gather(*(client.request("GET", "/api/v1/namespaces/default/pods") for _ in range(12)))
            took = time.monotonic() - t0
            await client.close()
        finally:
            double.stop()
        assert took >= 8 / 20 - 0.02, took
        assert client.limiter.delayed == 8

    run(scenario())


def test_a_jobs_pods_go_out_in_slow_start_batches():
    """15 pods, each create answered 150 ms late: in flight 1, then 2, then 4, then the last 8."""

    async def scenario():
        async with Cluster() as c:
            await one_job_enqueued(c, 15, "big", 0.15)
            await c.wait_for(lambda: _pods(c, 15), 20, "15 pods")
            assert c.double.held_peaks[("Pod", "create")] == [1, 2, 4, 8]

    run(scenario())


def test_jobs_do_not_wait_for_each_others_writes():
    """Eight Jobs whose PodGroup creates each take 300 ms: all eight are under way at once (the
    controller syncs the next Jobs meanwhile), and so are their pods once the groups are Inqueue."""

    async def scenario():
        async with Cluster() as c:
            c.double.hold("PodGroup", "create", 0.3)
            c.double.hold("Pod", "create", 0.3)
            c.start_controllers()
            await c.until_ready()
            await c.create(many_jobs(8, 2))
            t0 = time.monotonic()
            await enqueue_all(c, 8)
            assert max(c.double.held_peaks[("PodGroup", "create")]) == 8
            assert time.monotonic() - t0 < 8 * 0.3  # not one after another
            await c.wait_for(lambda: _pods(c, 16), 20, "16 pods")
            # each job's first batch (one pod) went out beside the other jobs'
            assert max(c.double.held_peaks[("Pod", "create")]) >= 8

    run(scenario())


def test_a_job_changed_while_its_pods_are_being_created_gets_each_pod_once(caplog):
    """The Job is written to (a label, three times) while its pods' creates are under way (400 ms
    each): its key is dirty again, but it is synced only once those writes have ended and their
    results are in the cache, so each pod is sent once and no pod is taken for another object's."""

    async def scenario():
        async with Cluster() as c:
            await one_job_enqueued(c, 6, "touched", 0.4)
            path = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/touched-0"
            for i in range(3):
                await asyncio.sleep(0.2)
                await c.api.request(
                    "PATCH",
                    path,
                    body={"metadata": {"labels": {"touched": str(i)}}},
                    content_type="application/merge-patch+json",
                )
            await c.wait_for(lambda: _pods(c, 6), 20, "6 pods")
            await controllers_settled(c.controllers)  # (a late duplicate would show here)
            assert c.double.counts["create/Pod"] == 6
            assert c.double.held_peaks[("Pod", "create")] == [1, 2, 3]
            taken = [r.getMessage() for r in caplog.records if "is taken by another object" in r.getMessage()]
            assert not taken, taken

    with caplog.at_level(logging.INFO, logger="lavaflow"):
        run(scenario())


def test_at_most_concurrent_syncs_jobs_have_writes_under_way():
    """The bound on concurrency: with --concurrent-syncs 3, eight Jobs' PodGroup creates (300 ms
    each) go out three at a time, the other Jobs waiting their turn (none is lost)."""

    async def scenario():
        async with Cluster() as c:
            c.double.hold("PodGroup", "create", 0.3)
            c.start_controllers(concurrent_syncs=3)
            await c.until_ready()
            await c.create(many_jobs(8, 2))
            await c.wait_for(lambda: _podgroups(c, 8), 20, "8 PodGroups")
            assert max(c.double.held_peaks[("PodGroup", "create")]) == 3

    run(scenario())


def test_a_jobs_podgroup_exists_before_its_pods():
    """As in Volcano: the PodGroup is created first, and no pod is created while it is Pending."""

    async def scenario():
        async with Cluster() as c:
            c.start_controllers()
            await c.until_ready()
            await c.create(many_jobs(1, 3, prefix="ordered"))
            await c.wait_for(lambda: _podgroups(c, 1), 20, "the PodGroup")
            await controllers_settled(c.controllers)
            assert await c.pods() == []  # Pending: no pod yet
            (pg,) = await enqueue_all(c, 1)
            pods = await c.wait_for(lambda: _pods(c, 3), 20, "3 pods")
            pg_rv = int(pg["metadata"]["resourceVersion"])
            assert all(int(p["metadata"]["resourceVersion"]) > pg_rv for p in pods)
            assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods} == {
                pg["metadata"]["name"]
            }

    run(scenario())


def test_a_refused_create_stops_the_batches_is_reported_and_retried(caplog):
    """The first pod of a Job is refused (HTTP 500): nothing more of that sync is sent, an error
    line names the pod and the status, the metric counts it, and after a back-off the sync starts
    again from one pod and creates all ten."""

    async def scenario():
        async with Cluster() as c:
            c.double.hold("Pod", "create", 0.05)
            c.double.fail_next("Pod", "create", 500)
            ctrl = c.start_controllers()
            await c.until_ready()
            await c.create(many_jobs(1, 10, prefix="refused"))
            await enqueue_all(c, 1)
            await c.wait_for(lambda: _pods(c, 10), 20, "10 pods")
            assert c.double.held_peaks[("Pod", "create")] == [1, 1, 2, 4, 3]
            assert c.double.counts["create/Pod"] == 11
            errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert any(
                "refused to create Pod default/refused-0-w-0" in e and "HTTP 500 InternalError" in e for e in errors
            ), errors
            labels = {"kind": "Pod", "verb": "create", "code": "500"}
            assert ctrl.metrics.registry.get_sample_value(REFUSED, labels) == 1
            retried = [r.getMessage() for r in caplog.records if "JobController default/refused-0" in r.getMessage()]
            assert retried and "(retry 1)" in retried[0], retried

    with caplog.at_level(logging.INFO, logger="lavaflow.kube"):
        run(scenario())


def test_each_pod_is_one_request_and_keeps_its_templates_unmodelled_fields():
    """The template as written is read once per version of the Job and shared by its pods: each
    pod keeps the fields lavaflow does not model, and costs one request (its status is the
    server's Pending, nothing to write after the create)."""

    async def scenario():
        async with Cluster() as c:
            c.start_controllers()
            await c.until_ready()
            (doc,) = many_jobs(1, 4, prefix="kept")
            container = doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
            container["volumeMounts"] = [{"name": "x", "mountPath": "/x"}]
            container["livenessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 7}
            await c.create([doc])
            await enqueue_all(c, 1)
            pods = await c.wait_for(lambda: _pods(c, 4), 20, "4 pods")
            for p in pods:
                (got,) = p["spec"]["containers"]
                assert got["volumeMounts"] == [{"name": "x", "mountPath": "/x"}]
                assert got["livenessProbe"] == {"exec": {"command": ["true"]}, "periodSeconds": 7}
            assert c.double.counts["create/Pod"] == 4
            assert c.double.counts["update/Pod"] == 0

    run(scenario())


def test_pods_of_a_gang_still_being_created_get_no_condition_writes():
    """A gang with fewer pods than its minMember (its controller is still creating them, batch by
    batch) is explained on its PodGroup only, as Volcano does: its pods are not written again
    with every new batch. Once all exist and still do not fit, each pod says why."""
    from test_kube_e2e import spark_style

    from lavaflow.testing import fake_node

    async def scenario():
        async with Cluster([fake_node("n0", cpu="2", memory="8Gi")]) as c:
            c.start_controllers()
            s = c.start_scheduler()
            await c.until_ready()
            pg, *pods = spark_style()
            await c.create([pg, *pods[:2]])

            async def podgroup_explained():
                (got,) = await c.objects("PodGroup", "spark")
                return any(x["type"] == "Unschedulable" for x in (got.get("status") or {}).get("conditions", []))

            await c.wait_for(podgroup_explained, 10, "the PodGroup to be reported unschedulable")
            await settled(s)  # several cycles
            await settled(s)
            assert c.double.counts["patch/Pod"] == 0
            await c.create(pods[2:])

            async def pods_explained():
                got = await c.pods("spark")
                conds = [
                    next((x for x in p["status"].get("conditions", []) if x["type"] == "PodScheduled"), None)
                    for p in got
                ]
                return len(conds) == 3 and all(x and x["status"] == "False" for x in conds)

            await c.wait_for(pods_explained, 10, "PodScheduled=False on every pod once the gang is whole")

    run(scenario())


def test_a_retried_failure_logs_the_exception_type_even_without_a_message():
    from lavaflow.kube.controller_process import _said

    assert _said(KeyError()) == "KeyError"
    assert _said(ValueError("no such task")) == "ValueError: no such task"
