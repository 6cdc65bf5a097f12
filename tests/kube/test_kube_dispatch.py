"""How the Kubernetes scheduler applies decisions: bindings ahead of status writes, status writes
coalesced per object, events best effort; and a PodGroup status the session decided is the
cache's at once, so later cycles neither re-enqueue the job nor write the same status again."""

from __future__ import annotations

import asyncio
import functools

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from lavaflow.kube.client import ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.dispatch import Dispatcher  # noqa: E402
from lavaflow.kube.scheduler_process import KubeScheduler  # noqa: E402
from lavaflow.testing import ApiDouble, fake_node  # noqa: E402


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def _recorder(log: list, name: str, delay: float = 0.0):
    async def work():
        log.append(("start", name))
        await asyncio.sleep(delay)
        log.append(("end", name))

    return work


def test_decisions_go_before_status_and_status_before_events():
    async def scenario():
        d = Dispatcher(workers=1)
        log: list = []
        d.event(_recorder(log, "event"))
        d.status("pg-a", _recorder(log, "status-a"))
        d.decision(_recorder(log, "bind-1"))
        d.decision(_recorder(log, "bind-2"))
        assert await d.drain(5)
        assert [n for what, n in log if what == "start"] == ["bind-1", "bind-2", "status-a", "event"]
        await d.stop()

    run(scenario())


def test_an_urgent_status_goes_ahead_of_decisions_once_per_object():
    """A PodGroup leaving Pending gates its pods' creation: its status does not wait behind the
    bindings, and is still written once, with the newest work, never twice at once."""

    async def scenario():
        d = Dispatcher(workers=1)
        log: list = []
        d.decision(_recorder(log, "bind-1"))
        d.status("pg-a", _recorder(log, "status-a"))
        d.status("pg-b", _recorder(log, "status-b-old"), urgent=True)
        d.status("pg-b", _recorder(log, "status-b"))  # newer work for an urgent key: still urgent
        d.decision(_recorder(log, "bind-2"))
        assert await d.drain(5)
        assert [n for what, n in log if what == "start"] == ["status-b", "bind-1", "bind-2", "status-a"]
        await d.stop()

    run(scenario())


def test_status_is_coalesced_per_object_and_one_object_is_never_written_twice_at_once():
    async def scenario():
        d = Dispatcher(workers=4, status_workers=4)
        log: list = []
        d.status("pg-a", _recorder(log, "a-old"))
        d.status("pg-b", _recorder(log, "b"))
        d.status("pg-a", _recorder(log, "a-new"))  # replaces a-old, keeps a's place in line
        assert await d.drain(5)
        assert [n for what, n in log if what == "start"] == ["a-new", "b"]

        log.clear()
        started, gate = asyncio.Event(), asyncio.Event()

        async def a1():
            log.append(("start", "a1"))
            started.set()
            await gate.wait()
            log.append(("end", "a1"))

        d.status("pg-a", a1)
        await asyncio.wait_for(started.wait(), 5)  # a1 runs now
        d.status("pg-a", _recorder(log, "a2"))  # queued while a1 runs: the idle workers must leave it
        gate.set()
        assert await d.drain(5)
        assert log == [("start", "a1"), ("end", "a1"), ("start", "a2"), ("end", "a2")]
        await d.stop()

    run(scenario())


def test_status_is_not_starved_by_a_stream_of_decisions():
    async def scenario():
        d = Dispatcher(workers=1, max_status_delay=0.05)
        log: list = []
        d.status("pg-a", _recorder(log, "status"))
        for i in range(40):
            d.decision(_recorder(log, f"bind-{i}", delay=0.005))
        assert await d.drain(5)
        order = [n for what, n in log if what == "start"]
        assert order.index("status") < order.index("bind-39")
        await d.stop()

    run(scenario())


def test_events_beyond_the_backlog_are_dropped_and_counted():
    async def scenario():
        d = Dispatcher(workers=1, event_backlog=3)
        log: list = []
        d.decision(_recorder(log, "bind", delay=0.02))
        for i in range(5):
            d.event(_recorder(log, f"event-{i}"))
        assert await d.drain(5)
        assert [n for what, n in log if what == "start"] == ["bind", "event-2", "event-3", "event-4"]
        assert d.events_dropped == 2
        await d.stop()

    run(scenario())


def test_a_failing_write_does_not_stop_the_workers():
    async def scenario():
        d = Dispatcher(workers=1)
        log: list = []

        async def boom():
            raise RuntimeError("server said no")

        d.decision(boom)
        d.decision(_recorder(log, "next"))
        assert await d.drain(5)
        assert log == [("start", "next"), ("end", "next")] and d.failed == 1
        await d.stop()

    run(scenario())


# ---------------------------------------------------------------------- against the API double

GROUPS = 12


def _objects() -> list[dict]:
    docs: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        },
    ]
    for i in range(GROUPS):
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"pg-{i}", "namespace": "ns"},
                "spec": {"minMember": 1, "queue": "default"},
            }
        )
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p-{i}",
                    "namespace": "ns",
                    "annotations": {"scheduling.k8s.io/group-name": f"pg-{i}"},
                },
                "spec": {
                    "schedulerName": "lavaflow",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    return docs


async def _scheduler(double: ApiDouble) -> KubeScheduler:
    for n in range(2):
        double.put_object(fake_node(f"n{n}", cpu="16", memory="64Gi"))
    for d in _objects():
        double.put_object(d)
    s = KubeScheduler(
        KubeClient(ClientConfig(server=double.url, qps=0)), scheduler_names=("lavaflow",), emit_events=False
    )
    await s.start()
    assert await s.store.wait_synced(5)
    return s


def test_podgroup_status_is_the_caches_at_once_and_written_once():
    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        try:
            s = await _scheduler(double)
            await s.cycle()
            # before any status write came back, the cache already has the decided phase
            phases = {job.pg.status.phase for job in s.cache.jobs.values() if job.pg is not None}
            assert phases == {"Running"}
            await s.cycle()
            await s.cycle()
            await s.idle(10)
            await s.cycle()
            await s.idle(10)
            assert double.counts["bind/Pod"] == GROUPS
            assert double.counts["patch/PodGroup"] == GROUPS  # one write per group, however many cycles
            written = {pg["metadata"]["name"]: pg["status"]["phase"] for pg in double.snapshot("PodGroup")}
            assert written == {f"pg-{i}": "Running" for i in range(GROUPS)}
            assert not s.writer.pg_wanted
            await s.shutdown(1)
            await s.client.close()
        finally:
            double.stop()

    run(scenario())


def test_a_failed_status_write_is_decided_and_written_again():
    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        try:
            s = await _scheduler(double)
            double.fail_next("PodGroup", "patch", 500, 1)
            await s.cycle()
            await s.idle(10)
            assert len(s.writer.pg_wanted) == 0
            await s.cycle()  # the group whose write failed is back to the server's view: decided again
            await s.idle(10)
            assert double.counts["patch/PodGroup"] == GROUPS + 1
            written = {pg["metadata"]["name"]: pg.get("status", {}).get("phase") for pg in double.snapshot("PodGroup")}
            assert written == {f"pg-{i}": "Running" for i in range(GROUPS)}
            await s.shutdown(1)
            await s.client.close()
        finally:
            double.stop()

    run(scenario())


def test_a_scheduler_that_loses_leadership_drops_what_it_has_not_sent():
    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        try:
            s = await _scheduler(double)
            gate, started = asyncio.Event(), asyncio.Event()

            async def stuck():
                started.set()
                await gate.wait()

            s.dispatch.workers = 1
            s.dispatch.decision(stuck)  # occupies the only worker
            s.writer.bind_now("ns/p-0", "n0")
            s.writer.bind_now("ns/p-1", "n1")
            await asyncio.wait_for(started.wait(), 5)
            assert s.dispatch.waiting()["decision"] == 2
            await s.step_down()
            gate.set()
            # Had a binding been kept, it would have gone out by the time the dispatcher is idle.
            assert await s.dispatch.drain(5)
            assert s.dispatch.pending == 0 and not s.writer.inflight
            assert double.counts["bind/Pod"] == 0
            await s.shutdown(1)
            await s.client.close()
        finally:
            double.stop()

    run(scenario())


def test_eviction_rate_limiter_lets_a_burst_through_then_spaces_evictions():
    from lavaflow.kube.dispatch import RateLimiter

    now = [100.0]
    rl = RateLimiter(rate=10.0, burst=3, clock=lambda: now[0])
    assert [rl.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    waits = [rl.reserve() for _ in range(3)]  # queued behind each other, 0.1 s apart
    assert [round(w, 6) for w in waits] == [0.1, 0.2, 0.3]
    now[0] += 10.0  # long idle: the bucket refills to its burst, no more
    assert [rl.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rl.reserve() > 0


def test_scheduler_counts_rate_limited_evictions_in_metrics():
    from prometheus_client import generate_latest

    from lavaflow.kube.metrics import SchedulerMetrics

    m = SchedulerMetrics()
    m.evictions_delayed.inc()
    text = generate_latest(m.registry).decode()
    assert "lavaflow_evictions_rate_limited_total 1.0" in text


def test_status_writes_keep_going_while_a_cycle_holds_the_store_lock():
    """A long session holds the store lock; status writers must not wait for it after each write
    (only status_workers writes per cycle would finish: hours for a large first start)."""

    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        try:
            s = await _scheduler(double)
            s.dispatch.status_workers = 2
            for i in range(GROUPS):
                key = f"ns/pg-{i}"
                s.writer.pg_wanted[key] = {"phase": "Inqueue", "running": 0, "succeeded": 0, "failed": 0}
            async with s.store.lock:  # as a scheduling cycle does for its whole length
                for i in range(GROUPS):
                    s.dispatch.status(
                        ("PodGroup", f"ns/pg-{i}"), functools.partial(s.writer.write_podgroup, f"ns/pg-{i}")
                    )
                for _ in range(200):
                    if double.counts["patch/PodGroup"] >= GROUPS:
                        break
                    await asyncio.sleep(0.01)
                assert double.counts["patch/PodGroup"] == GROUPS
            await s.idle(5)
            assert not s.writer.pg_wanted  # settled once the lock was free
            phases = {job.pg.status.phase for job in s.cache.jobs.values() if job.pg is not None}
            assert phases == {"Inqueue"}
            await s.shutdown(1)
            await s.client.close()
        finally:
            double.stop()

    run(scenario())


def test_a_graceful_stop_sends_decided_bindings_but_drops_status_writes_and_events():
    async def scenario():
        d = Dispatcher(workers=1)
        log: list = []
        d.decision(_recorder(log, "bind", delay=0.02))
        d.status("pg-a", _recorder(log, "status"))
        d.event(_recorder(log, "event"))
        await asyncio.sleep(0)
        assert d.drop_optional() == {"status": 1, "event": 1}
        assert await d.drain(5)
        assert [n for what, n in log if what == "start"] == ["bind"]
        await d.stop()

    run(scenario())
