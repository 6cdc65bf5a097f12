"""Failover safety on the API double: a leader that cannot prove it still holds the lease sends
nothing, and a gang a dead leader left half-bound is completed by the next one."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, settled, wait_for  # noqa: E402
from lavaflow.cli.processes import _run_component  # noqa: E402
from lavaflow.kube.client import ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.codec import micro_time  # noqa: E402
from lavaflow.kube.controller_process import KubeControllers  # noqa: E402
from lavaflow.kube.leader import LeaderElector, LostLeadership  # noqa: E402
from lavaflow.kube.scheduler_process import KubeScheduler  # noqa: E402
from lavaflow.scheduler.framework.memo import MISS  # noqa: E402
from lavaflow.scheduler.model import Eviction, EvictionCause  # noqa: E402
from lavaflow.scheduler.scheduler import PREPARED  # noqa: E402
from lavaflow.testing import ApiDouble, fake_node  # noqa: E402


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def _client(double: ApiDouble) -> KubeClient:
    return KubeClient(ClientConfig(server=double.url, qps=0))


def _pod(name: str, group: str, cpu: str = "1", node: str | None = None) -> dict:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "lavaflow",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    if node is not None:
        pod["spec"]["nodeName"] = node  # bound, not yet started by a kubelet
    return pod


def _podgroup(name: str, members: int, cpu: int, phase: str | None = "Pending") -> dict:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": members, "queue": "default", "minResources": {"cpu": str(cpu)}},
    }
    if phase is not None:
        pg["status"] = {"phase": phase}
    return pg


def test_elector_refuses_to_lead_past_its_renew_deadline_and_renew_loop_steps_down():
    async def scenario():
        double = ApiDouble().start()
        client = _client(double)
        try:
            a = LeaderElector(client, "l", "default", "a", lease_duration=3, renew_deadline=2, retry_period=0.5)
            assert await a.acquire()
            assert a.holding() and 1.9 < a.fence_left() <= 2
            # As if the process had been frozen (SIGSTOP) for longer than the renew deadline:
            a.renewed_at = time.monotonic() - 2.5
            assert a.is_leader and not a.holding() and a.fence_left() < 0
            with pytest.raises(LostLeadership):
                await asyncio.wait_for(a.renew_loop(), 2)
            assert not a.is_leader
            with pytest.raises(ValueError):
                LeaderElector(client, "l", "default", "b", lease_duration=2, renew_deadline=2)
        finally:
            await client.close()
            double.stop()

    run(scenario())


def test_a_leader_past_its_renew_deadline_sends_no_binding_or_eviction():
    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        double.put_object(fake_node("n0", cpu="4", memory="16Gi"))
        double.put_object(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default"},
                "spec": {"weight": 1},
            }
        )
        double.put_object(_podgroup("g", 2, 2, phase="Inqueue"))
        for i in range(2):
            double.put_object(_pod(f"p-{i}", "g"))
        client = _client(double)
        elector = LeaderElector(
            client, "lavaflow-scheduler", "default", "frozen", lease_duration=3, renew_deadline=2, retry_period=0.5
        )
        s = KubeScheduler(client, scheduler_names=("lavaflow",), emit_events=False, elector=elector)
        try:
            await s.start()
            assert await s.store.wait_synced(5)
            assert await elector.acquire()
            elector.renewed_at = time.monotonic() - 5  # woke up from a long freeze
            # A cycle decides nothing from the stale view ...
            await s.cycle()
            # ... and writes decided before the freeze are refused when their turn comes.
            s.writer.bind_now("ns/p-0", "n0")
            s.dispatch.decision(lambda: s.writer.evict("ns/p-1", Eviction(EvictionCause.PREEMPT, "preempt")))
            await s.idle(5)
            assert double.counts["bind/Pod"] == 0
            assert double.counts.get("create/Eviction", 0) == 0 and not any("evict" in k.lower() for k in double.counts)
            assert s.writer.fenced == 2 and not s.writer.inflight
            # A binding that passed the check and then waited in the client's rate limiter while
            # the process froze is stopped right before it leaves.
            elector.renewed_at = time.monotonic()
            real_acquire = client.limiter.acquire

            async def frozen_while_waiting():
                elector.renewed_at = time.monotonic() - 5
                await real_acquire()

            client.limiter.acquire = frozen_while_waiting
            s.writer.bind_now("ns/p-0", "n0")
            await s.idle(5)
            client.limiter.acquire = real_acquire
            assert double.counts["bind/Pod"] == 0 and s.writer.fenced == 3 and not s.writer.inflight
            # Renewed again: the same cycle binds the gang.
            elector.renewed_at = time.monotonic()
            await s.cycle()
            await s.idle(5)
            assert double.counts["bind/Pod"] == 2
        finally:
            await s.shutdown(1)
            await client.close()
            double.stop()

    run(scenario())


def _cluster_of_2_cpu_nodes(n: int) -> ApiDouble:
    """An API double with ``n`` nodes of 2 CPUs and the ``default`` queue."""
    double = ApiDouble(bookmark_interval=0.05).start()
    for i in range(n):
        double.put_object(fake_node(f"n{i}", cpu="2", memory="8Gi"))
    double.put_object(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        }
    )
    return double


def _start_scheduler(double: ApiDouble):
    """A scheduler (no leader election) running over ``double``: (client, scheduler, stop, task)."""
    client = _client(double)
    s = KubeScheduler(client, scheduler_names=("lavaflow",), emit_events=False)
    stop = asyncio.Event()
    return client, s, stop, asyncio.get_running_loop().create_task(s.run(stop))


async def _stop_scheduler(double: ApiDouble, client: KubeClient, s: KubeScheduler, stop, task) -> None:
    stop.set()
    await asyncio.wait_for(task, 5)
    await s.shutdown(1)
    await client.close()
    double.stop()


def test_a_gang_half_bound_by_a_dead_leader_is_completed_on_a_cluster_filled_exactly():
    """Two nodes of 2 CPUs, one gang of 4 x 1 CPU (minResources 4 CPUs) of which the dead leader
    bound 2 without writing Inqueue: the new leader must bind the other 2, not refuse the gang."""

    async def scenario():
        double = _cluster_of_2_cpu_nodes(2)
        double.put_object(_podgroup("g", 4, 4, phase="Pending"))
        double.put_object(_pod("p-0", "g", node="n0"))
        double.put_object(_pod("p-1", "g", node="n0"))
        double.put_object(_pod("p-2", "g"))
        double.put_object(_pod("p-3", "g"))
        client, s, stop, task = _start_scheduler(double)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and double.counts["bind/Pod"] < 2:
                await asyncio.sleep(0.05)
            pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in double.snapshot("Pod")}
            assert pods == {"p-0": "n0", "p-1": "n0", "p-2": "n1", "p-3": "n1"}

            def admitted() -> bool:
                return double.snapshot("PodGroup")[0].get("status", {}).get("phase") in ("Inqueue", "Running")

            await wait_for(admitted, 10, "the PodGroup Inqueue or Running on the server")
        finally:
            await _stop_scheduler(double, client, s, stop, task)

    run(scenario())


def test_gangs_half_bound_by_a_dead_leader_are_completed_before_one_it_admitted_but_did_not_start():
    """Five nodes of 2 CPUs; gangs g0, g1, g2 of 4 x 1 CPU. The dead leader admitted all three
    (g1's Inqueue reached the server, g0's and g2's did not) and bound one pod each of g0 and g2.
    Room is left for two gangs: the new leader completes g0 and g2 (g1 waits), instead of binding
    g1 whole and leaving a quarter-bound gang holding its node for as long as the others run."""

    async def scenario():
        double = _cluster_of_2_cpu_nodes(5)
        for g, phase in (("g0", "Pending"), ("g1", "Inqueue"), ("g2", "Pending")):
            double.put_object(_podgroup(g, 4, 4, phase=phase))
            for i in range(4):
                node = {("g0", 0): "n0", ("g2", 0): "n2"}.get((g, i))
                double.put_object(_pod(f"{g}-{i}", g, node=node))
        client, s, stop, task = _start_scheduler(double)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and double.counts["bind/Pod"] < 6:
                await asyncio.sleep(0.05)

            def seen_bound() -> bool:  # the scheduler's informers have the bindings: its view is final
                return sum(p.spec.node_name is not None for p in s.store.list("Pod")) >= 8

            await wait_for(seen_bound, 10, "the scheduler's informers to see 8 pods bound")
            await settled(s)  # a cycle over that view ran and its writes went out: g1 must still wait
            per_gang: dict[str, int] = {}
            usage: dict[str, int] = {}
            for p in double.snapshot("Pod"):
                node = p["spec"].get("nodeName")
                g = p["metadata"]["name"].rsplit("-", 1)[0]
                per_gang[g] = per_gang.get(g, 0) + (node is not None)
                if node is not None:
                    usage[node] = usage.get(node, 0) + 1
            assert per_gang == {"g0": 4, "g1": 0, "g2": 4}
            assert all(v <= 2 for v in usage.values()), usage
        finally:
            await _stop_scheduler(double, client, s, stop, task)

    run(scenario())


def test_jobs_are_prepared_while_the_informers_sync_and_preparing_stops_at_the_first_cycle():
    """Restart over running gangs: what the first session would work out per job is worked out
    while the process waits for its first cycle (here: until the test runs one), oldest-touched
    job first; the first cycle stops it, and schedules as usual."""

    async def scenario():
        double = _cluster_of_2_cpu_nodes(2)
        for g in range(3):
            double.put_object(_podgroup(f"r{g}", 1, 1, phase="Running"))
            double.put_object(_pod(f"r{g}-0", f"r{g}", node=f"n{g % 2}"))
        double.put_object(_podgroup("new", 1, 1))
        double.put_object(_pod("new-0", "new"))
        client = _client(double)
        s = KubeScheduler(client, scheduler_names=("lavaflow",), emit_events=False)
        s._preparing = asyncio.get_running_loop().create_task(s._prepare_jobs())
        try:
            await wait_for(lambda: s._touched is not None, 5, "the preparing to start")
            s.cache.pg_jobs = {}  # as scheduled_jobs() does when it sorts: a new dict, read anew
            await s.start()
            assert await s.store.wait_synced(10)
            deadline = time.monotonic() + 10
            jobs = s.cache.scheduled_jobs()
            while time.monotonic() < deadline and not all(
                PREPARED.get(job, job.version) is not MISS for job in jobs.values()
            ):
                await asyncio.sleep(0.02)
            assert sorted(jobs) == ["ns/new", "ns/r0", "ns/r1", "ns/r2"]
            assert all(PREPARED.get(job, job.version) is not MISS for job in jobs.values())
            assert s._touched == {}
            await s.cycle()
            assert s._preparing is None and s._touched is None  # stopped: sessions and preparing never overlap
            await s.idle(5)
            assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in double.snapshot("Pod")}["new-0"] in (
                "n0",
                "n1",
            )
        finally:
            await s.shutdown(1)
            await client.close()
            double.stop()

    run(scenario())


def test_a_job_touched_again_goes_to_the_end_of_those_to_prepare_and_one_without_pods_after_all():
    async def scenario():
        double = _cluster_of_2_cpu_nodes(1)
        client = _client(double)
        s = KubeScheduler(client, scheduler_names=("lavaflow",), emit_events=False)
        s._touched = {}
        from lavaflow.api.core import Pod
        from lavaflow.api.volcano import PodGroup

        s.on_pod("ADDED", Pod.model_validate(_pod("b-0", "b")), None)
        s.on_podgroup("ADDED", PodGroup.model_validate(_podgroup("a", 1, 1)), None)
        s.on_podgroup("ADDED", PodGroup.model_validate(_podgroup("b", 1, 1)), None)
        s.on_podgroup("ADDED", PodGroup.model_validate(_podgroup("c", 1, 1)), None)
        assert list(s._touched) == ["ns/b"] and list(s._bare) == ["ns/a", "ns/c"]  # (no pods yet: last)
        s.on_pod("ADDED", Pod.model_validate(_pod("a-0", "a")), None)
        s.on_pod("ADDED", Pod.model_validate({**_pod("x", "a"), "metadata": {"name": "x", "namespace": "ns"}}), None)
        s.on_pod("ADDED", Pod.model_validate(_pod("b-1", "b")), None)
        assert list(s._touched) == ["ns/a", "ns/b"]  # a pod of no gang touches none
        assert list(s._bare) == ["ns/c"]
        await client.close()
        double.stop()

    run(scenario())


def test_a_failure_while_preparing_jobs_is_logged_and_scheduling_goes_on(caplog):
    async def scenario():
        double = _cluster_of_2_cpu_nodes(1)
        double.put_object(_podgroup("g", 1, 1))
        double.put_object(_pod("g-0", "g"))
        client = _client(double)
        s = KubeScheduler(client, scheduler_names=("lavaflow",), emit_events=False)

        def broken(jobs):
            raise RuntimeError("a plugin's bug")

        s.scheduler.prepare_jobs = broken  # type: ignore[method-assign]
        s._preparing = asyncio.get_running_loop().create_task(s._prepare_jobs())
        try:
            await s.start()
            assert await s.store.wait_synced(10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not s._preparing.done():
                await asyncio.sleep(0.02)
            assert s._preparing.done() and s._touched is None
            await s.cycle()
            await s.idle(5)
            assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in double.snapshot("Pod")} == {"g-0": "n0"}
        finally:
            await s.shutdown(1)
            await client.close()
            double.stop()

    with caplog.at_level("ERROR", logger="lavaflow.kube"):
        run(scenario())
    assert "preparing jobs ahead of the first cycle failed" in caplog.text


def test_a_standby_started_just_before_the_leader_dies_takes_over_within_the_lease_duration_and_a_second():
    """Issue 36: with a 4 s lease a cold standby took 8.5-9.6 s to replace a killed leader. It read
    the Lease only once its caches had filled (seconds at 1,000 nodes), counted the lease from that
    first reading, and read it every retry period only, so it saw the leader's last renewal late.
    Here the standby's caches take 2.5 s to fill, and the leader is killed 0.2 s after the standby
    started: the Lease must change hands within the lease duration + 1 s of the kill, and not
    before the dead leader's renew deadline (it could still have been writing until then)."""
    lease = 4.0

    async def scenario():
        async with Cluster([fake_node("n0", cpu="4")], lease=True) as c:
            a = c.start_scheduler("sched-a", lease_duration=lease)
            await c.wait_for(_leads(a), 10, "sched-a leading")
            b = c.start_scheduler("sched-b", lease_duration=lease)
            fill = b.store.start

            async def slow_fill():  # the informers' first lists, as on a large cluster
                await asyncio.sleep(2.5)
                await fill()

            b.store.start = slow_fill  # type: ignore[method-assign]
            await asyncio.sleep(0.2)
            died = time.monotonic()
            await c.kill_scheduler(a)

            async def held_by_b():
                lease_obj = c.double.get("Lease", "default/lavaflow-scheduler")
                return lease_obj["spec"].get("holderIdentity") == "sched-b"

            await c.wait_for(held_by_b, 15, "sched-b holding the Lease")
            took = time.monotonic() - died
            assert b.elector.is_leader
            assert a.elector.renew_deadline < took <= lease + 1.0, took

    run(scenario())


def _leads(s: KubeScheduler):
    async def check():
        return s.elector is not None and s.elector.is_leader

    return check


def test_a_leader_whose_lease_is_taken_steps_down_with_one_line_and_exit_code_0(tmp_path):
    """``lavaflow scheduler`` leading, then another holder in the Lease (a standby that took it
    while this one was cut off): the process says so in one log line and exits 0 (its Deployment
    restarts it as a standby), not with a traceback."""
    double = ApiDouble(bookmark_interval=0.05).start()
    proc = None
    try:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: d\n"
            f"clusters: [{{name: d, cluster: {{server: '{double.url}'}}}}]\n"
            "users: [{name: u, user: {}}]\n"
            "contexts: [{name: d, context: {cluster: d, user: u}}]\n"
        )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        log = tmp_path / "scheduler.log"
        cmd = [
            sys.executable, "-m", "lavaflow.cli", "scheduler", "--kubeconfig", str(kubeconfig),
            "--lock-namespace", "default", "--leader-elect-lease-duration", "3s",
            "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "300ms",
            "--listen-address", "127.0.0.1", "--listen-port", str(port),
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=dict(os.environ))
        deadline = time.monotonic() + 60
        lease = None
        while time.monotonic() < deadline and proc.poll() is None:
            lease = double.get("Lease", "default/lavaflow-scheduler")
            if lease is not None and lease["spec"].get("holderIdentity"):
                break
            time.sleep(0.05)
        assert lease is not None and lease["spec"].get("holderIdentity"), log.read_text()
        lease["spec"].update(holderIdentity="usurper", renewTime=micro_time(time.time()), leaseDurationSeconds=30)
        double.put_object(lease)
        assert proc.wait(timeout=30) == 0, log.read_text()
        lines = log.read_text().splitlines()
        assert "Traceback" not in log.read_text(), lines
        said = [line for line in lines if "lost lease" in line]
        assert len(said) == 1, lines
        assert "now held by usurper" in said[0] and "stepping down" in said[0], said
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        double.stop()


def test_the_controller_steps_down_the_same_way(caplog):
    """``lavaflow controller`` runs through the same code as the scheduler's command: its Lease
    taken, it stops with one line and returns normally (exit code 0), leaving the Lease to its new
    holder (its graceful stop releases only a Lease it holds)."""

    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        client = _client(double)
        try:
            elector = LeaderElector(
                client, "ctl", "default", "ctl-a", lease_duration=3, renew_deadline=2, retry_period=0.2
            )
            ctrl = KubeControllers(client, elector=elector, resync=0.2)
            run = asyncio.create_task(_run_component(ctrl, client, "127.0.0.1", 0))
            deadline = time.monotonic() + 20
            while not elector.is_leader and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert elector.is_leader
            lease = double.get("Lease", "default/ctl")
            lease["spec"].update(holderIdentity="ctl-b", renewTime=micro_time(time.time()), leaseDurationSeconds=30)
            double.put_object(lease)
            await asyncio.wait_for(run, 10)  # returns: no exception out of the command
            said = [r.getMessage() for r in caplog.records if "lost lease" in r.getMessage()]
            assert said == ["ctl-a lost lease default/ctl (now held by ctl-b); stepping down: exiting"], said
            assert double.get("Lease", "default/ctl")["spec"]["holderIdentity"] == "ctl-b"
        finally:
            double.stop()

    caplog.set_level(logging.INFO, logger="lavaflow.kube")
    run(scenario())
