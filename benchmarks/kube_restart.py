"""A scheduler restart on a large cluster (the shape of Volcano issue #5819), on a real API server.

Makes ``--nodes`` fake nodes, ``--bound`` pods already bound to them (as running load; created
with ``spec.nodeName``, no kubelet needed), of which ``--grouped`` belong to lavaflow PodGroups
(one pod each, ``schedulerName: lavaflow``) and the rest to kube-scheduler (node usage only), and
then ``--pending`` new pods (each with its own PodGroup) for lavaflow to bind. Then it starts
``lavaflow scheduler`` ``--restarts`` times, one after the other, and reports for each start:

* seconds from process start to the first and to the last binding of the pending pods (a
  restart deletes the pending pods' bindings first by recreating them);
* the process's peak RSS and CPU seconds (user + system, from /proc) up to the last binding;
* the PodGroup status backlog (``lavaflow_writes_waiting{lane="status"}``) over the following
  ``--drain-window`` seconds and the rate it drained at (the first start writes a status on every
  PodGroup that has none).

The machine may be busy: the load averages are printed with the figures. The namespace is kept
between runs with ``--keep`` (populating takes minutes); ``--cleanup`` only deletes.

    python benchmarks/kube_restart.py --kubeconfig admin.kubeconfig --nodes 5000 --bound 140000 \\
        --grouped 87000 --pending 100 [--restarts 2] [--keep] [--kube-scheduler PATH]

With ``--floor`` each start is preceded by a client that only streams nodes, pods and PodGroups as
the scheduler's informers do and decodes each object: the time the API server alone needs to hand
over that state on this machine, below which no scheduler that reads it can bind.

With ``--kube-scheduler`` the same number of kube-scheduler starts follow, each over ``--pending``
new pods of its own on the same cluster (first/last binding, peak RSS, CPU seconds).

The PodGroups are created without a status, so the first start also writes ~``--grouped`` statuses
(what a first installation over running gangs does). With ``--settle`` one untimed start writes
them all first (reporting the drain rate), so that every timed start is a restart over the state a
running scheduler leaves: PodGroups with their status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kube_throughput import (  # noqa: E402
    BindWatch,
    bounded,
    ensure_nodes,
    kube_scheduler_cmd,
    pod_doc,
    post,
    stop_process,
)

from lavaflow.kube.client import ApiError, KubeClient, load_config  # noqa: E402

NS = "restart-bench"
PENDING_NS = "restart-bench-new"
PORT = 18181


def _proc_stats(pid: int) -> tuple[float, float]:
    """(RSS in MiB, CPU seconds) of a process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return rss, cpu
    except (OSError, AttributeError, IndexError):
        return 0.0, 0.0


def _status_backlog() -> int | None:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(r'lavaflow_writes_waiting\{lane="status"\} ([0-9.e+]+)', text)
    return int(float(m.group(1))) if m else None


async def count(client: KubeClient, path: str) -> int:
    n, cont = 0, None
    while True:
        params: dict[str, Any] = {"limit": 5000}
        if cont:
            params["continue"] = cont
        lst = await client.request("GET", path, params=params)
        n += len(lst.get("items", []))
        cont = (lst.get("metadata") or {}).get("continue")
        if not cont:
            return n


async def populate(client: KubeClient, args) -> None:
    await ensure_nodes(client, args.nodes, args.node_cpu, args.node_memory, args.node_pods)
    await post(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    have_pg = await count(client, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups")
    have_pods = await count(client, f"/api/v1/namespaces/{NS}/pods")
    t0 = time.monotonic()
    pgs = (
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"pg-{i:06d}", "namespace": NS},
            "spec": {"minMember": 1, "queue": "default", "minResources": {"cpu": args.cpu, "memory": args.memory}},
        }
        for i in range(have_pg, args.grouped)
    )
    await bounded(
        48, (post(client, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups", pg) for pg in pgs)
    )
    print(
        f"  podgroups: {args.grouped} ({max(0, args.grouped - have_pg)} created in {time.monotonic() - t0:.0f}s)",
        flush=True,
    )

    def bound_pod(i: int) -> dict[str, Any]:
        grouped = i < args.grouped
        d = pod_doc(
            f"p-{i:06d}",
            "lavaflow" if grouped else "default-scheduler",
            args.cpu,
            args.memory,
            f"pg-{i:06d}" if grouped else None,
        )
        d["spec"]["nodeName"] = f"bench-node-{i % args.nodes:05d}"
        return d

    t0 = time.monotonic()
    await bounded(
        48, (post(client, f"/api/v1/namespaces/{NS}/pods", bound_pod(i)) for i in range(have_pods, args.bound))
    )
    print(
        f"  bound pods: {args.bound} ({max(0, args.bound - have_pods)} created in {time.monotonic() - t0:.0f}s)",
        flush=True,
    )


async def empty_namespace(client: KubeClient, ns: str) -> None:
    """Delete the pods and PodGroups an earlier run left in ``ns`` and wait until they are gone."""
    try:
        await client.request(
            "DELETE",
            f"/api/v1/namespaces/{ns}/pods",
            body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
        )
        await client.request("DELETE", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups")
    except ApiError:
        pass
    while await count(client, f"/api/v1/namespaces/{ns}/pods"):
        await asyncio.sleep(0.5)


async def new_pending(client: KubeClient, args) -> None:
    """(Re)create the pending pods and their PodGroups in their own namespace."""
    await empty_namespace(client, PENDING_NS)
    await post(
        client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PENDING_NS}}
    )
    for i in range(args.pending):
        await post(client, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{PENDING_NS}/podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": f"new-{i}", "namespace": PENDING_NS},
            "spec": {"minMember": 1, "queue": "default", "minResources": {"cpu": args.cpu, "memory": args.memory}},
        })  # fmt: skip
    await bounded(
        32,
        (
            post(
                client,
                f"/api/v1/namespaces/{PENDING_NS}/pods",
                pod_doc(f"new-{i}", "lavaflow", args.cpu, args.memory, f"new-{i}"),
            )
            for i in range(args.pending)
        ),
    )


async def one_start(client: KubeClient, args, kubeconfig: str, tmp: Path, run: int) -> dict[str, Any]:
    await new_pending(client, args)
    watch = BindWatch(client, PENDING_NS)
    watch.start()
    await watch.ready.wait()
    cmd = [
        str(Path(sys.executable).parent / "lavaflow"), "scheduler", "--kubeconfig", kubeconfig, "--no-leader-elect",
        "--kube-api-qps", str(args.qps), "--kube-api-burst", str(int(args.qps)), "--listen-address", "127.0.0.1",
        "--listen-port", str(PORT), "--scheduler-name", "lavaflow", "--no-events",
    ]  # fmt: skip
    log = open(tmp / f"restart-{run}.log", "w")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    peak_rss = 0.0
    res: dict[str, Any] = {"run": run}
    try:
        while len(watch.bound) < args.pending and time.monotonic() - started < args.timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"lavaflow exited with {proc.returncode}; see {log.name}")
            rss, cpu = _proc_stats(proc.pid)
            peak_rss = max(peak_rss, rss)
            await asyncio.sleep(0.1)
        times = sorted(watch.bound.values())
        rss, cpu = _proc_stats(proc.pid)
        res.update(
            bound=len(times),
            first_bind_s=round(times[0] - started, 1) if times else None,
            last_bind_s=round(times[-1] - started, 1) if times else None,
            cpu_s_to_last_bind=round(cpu, 1),
        )
        # the status backlog after the bindings
        samples = []
        t_end = time.monotonic() + args.drain_window
        while time.monotonic() < t_end:
            b = _status_backlog()
            if b is not None:
                samples.append((time.monotonic(), b))
            rss, cpu = _proc_stats(proc.pid)
            peak_rss = max(peak_rss, rss)
            await asyncio.sleep(1.0)
        if samples:
            res["status_backlog_start"] = samples[0][1]
            res["status_backlog_end"] = samples[-1][1]
            span = samples[-1][0] - samples[0][0]
            res["status_drained_per_s"] = round((samples[0][1] - samples[-1][1]) / span, 1) if span > 0 else None
            empty = next((t for t, b in samples if b == 0), None)
            res["status_backlog_empty_after_s"] = round(empty - started, 1) if empty is not None else None
        res["peak_rss_mib"] = round(peak_rss)
        res["cpu_s_total"] = round(_proc_stats(proc.pid)[1], 1)
    finally:
        t0 = time.monotonic()
        stop_process(proc)
        res["stop_s"] = round(time.monotonic() - t0, 2)
        log.close()
        await watch.stop()
    res["load"] = [round(x, 2) for x in os.getloadavg()]
    return res


STREAMED = ("/api/v1/nodes", "/api/v1/pods", "/apis/scheduling.volcano.sh/v1beta1/podgroups")


async def stream_only(kubeconfig: str) -> None:
    """The --stream-only child: what the API server alone takes to hand a client the state a
    restarted scheduler reads (nodes, pods and PodGroups, streamed at once as the scheduler's
    informers do). It decodes each object's JSON and keeps nothing; prints the counts."""
    cfg = load_config(kubeconfig)
    cfg.qps, cfg.burst = 0, 0
    client = KubeClient(cfg)
    params = {
        "watch": True,
        "sendInitialEvents": True,
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": True,
        "timeoutSeconds": 600,
    }

    async def one(path: str) -> int:
        n = 0
        async for ev in client.stream(path, params, 600):
            if ev.get("type") == "BOOKMARK":
                ann = ((ev.get("object") or {}).get("metadata") or {}).get("annotations") or {}
                if ann.get("k8s.io/initial-events-end") == "true":
                    return n
            elif ev.get("type") == "ERROR":
                raise RuntimeError(f"{path}: {ev.get('object')}")
            else:
                n += 1
        raise RuntimeError(f"{path}: the stream ended before its initial events")

    try:
        counts = await asyncio.gather(*(one(p) for p in STREAMED))
    finally:
        await client.close()
    print(json.dumps(dict(zip(("nodes", "pods", "podgroups"), counts))))


def stream_floor(kubeconfig: str) -> dict[str, Any]:
    """Run the --stream-only child once: seconds from its start to the end of the last initial
    stream, and its CPU seconds (the API server's share of a restart, with a client that does
    nothing but decode)."""
    started = time.monotonic()
    before = os.times()
    out = subprocess.run(
        [sys.executable, __file__, "--kubeconfig", kubeconfig, "--stream-only"],
        capture_output=True,
        text=True,
        check=True,
    )
    after = os.times()
    return {
        "stream_only_s": round(time.monotonic() - started, 1),
        "client_cpu_s": round(
            after.children_user - before.children_user + after.children_system - before.children_system, 1
        ),
        "objects": json.loads(out.stdout.strip().splitlines()[-1]),
        "load": [round(x, 2) for x in os.getloadavg()],
    }


async def cleanup(client: KubeClient, args) -> None:
    kube_namespaces = [f"{PENDING_NS}-kube-{run}" for run in range(args.restarts)]
    for ns in (NS, PENDING_NS, *kube_namespaces):
        for path in (f"/api/v1/namespaces/{ns}/pods", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"):
            # the API server ends a deletecollection after its request timeout (60 s): repeat
            for _ in range(20):
                try:
                    if not await count(client, path):
                        break
                    await client.request(
                        "DELETE",
                        path,
                        body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                        timeout=900,
                    )
                except (TimeoutError, ApiError):
                    pass
        try:
            await client.request("DELETE", f"/api/v1/namespaces/{ns}")
        except ApiError:
            pass
    if not args.keep_nodes:
        await ensure_nodes(client, 0, args.node_cpu, args.node_memory, args.node_pods)


async def settle(args, kubeconfig: str, tmp: Path) -> dict[str, Any]:
    """One lavaflow start that writes the status of every PodGroup created without one, run until
    its status backlog is empty: what a scheduler that ran before a restart leaves on the server.
    Reports how many were queued and how fast they drained."""
    cmd = [
        str(Path(sys.executable).parent / "lavaflow"), "scheduler", "--kubeconfig", kubeconfig, "--no-leader-elect",
        "--kube-api-qps", str(args.qps), "--kube-api-burst", str(int(args.qps)), "--listen-address", "127.0.0.1",
        "--listen-port", str(PORT), "--scheduler-name", "lavaflow", "--no-events",
    ]  # fmt: skip
    log = open(tmp / "settle.log", "w")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    peak = first = zero_since = None
    samples: list[tuple[float, int]] = []
    try:
        while time.monotonic() - started < args.timeout * 3:
            await asyncio.sleep(1.0)
            b = _status_backlog()
            if b is None:
                continue
            now = time.monotonic()
            samples.append((now, b))
            if b > 0 and first is None:
                first = now
            peak = b if peak is None else max(peak, b)
            if b == 0:
                zero_since = zero_since or now
                if first is not None or now - zero_since > 30:
                    break
            else:
                zero_since = None
    finally:
        stop_process(proc)
        log.close()
    end = samples[-1][0] if samples else time.monotonic()
    busy = [(t, b) for t, b in samples if b > 0]
    rate = None
    if len(busy) >= 2 and busy[-1][0] > busy[0][0]:
        rate = round((busy[0][1] - busy[-1][1]) / (busy[-1][0] - busy[0][0]), 1)
    return {
        "settle": True,
        "status_backlog_peak": peak,
        "drained": bool(samples) and samples[-1][1] == 0,
        "seconds": round(end - started, 1),
        "status_drained_per_s": rate,
        "load": [round(x, 2) for x in os.getloadavg()],
    }


async def kube_start(client: KubeClient, args, kubeconfig: str, tmp: Path, run: int) -> dict[str, Any]:
    """kube-scheduler started over the same populated cluster, binding ``--pending`` new pods of
    its own (``schedulerName: default-scheduler``, in a namespace of their own): seconds from its
    process start to the first and last binding, its peak RSS and CPU seconds."""
    ns = f"{PENDING_NS}-kube-{run}"
    await empty_namespace(client, ns)  # pods an earlier --keep run left bound there
    await post(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    names = [f"k-{i:05d}" for i in range(args.pending)]
    await bounded(
        32,
        (
            post(client, f"/api/v1/namespaces/{ns}/pods", pod_doc(x, "default-scheduler", args.cpu, args.memory, None))
            for x in names
        ),
    )
    watch = BindWatch(client, ns)
    watch.start()
    await watch.ready.wait()
    log = open(tmp / f"kube-scheduler-{run}.log", "w")
    started = time.monotonic()
    proc = subprocess.Popen(kube_scheduler_cmd(args, kubeconfig, tmp), stdout=log, stderr=subprocess.STDOUT)
    peak, cpu = 0.0, 0.0
    try:
        while len(watch.bound) < args.pending and time.monotonic() - started < args.timeout:
            rss, c = _proc_stats(proc.pid)
            peak, cpu = max(peak, rss), max(cpu, c)
            await asyncio.sleep(0.1)
    finally:
        stop_process(proc)
        log.close()
        await watch.stop()
    times = sorted(watch.bound.values())
    return {
        "scheduler": "kube-scheduler",
        "run": run,
        "bound": len(times),
        "first_bind_s": round(times[0] - started, 2) if times else None,
        "last_bind_s": round(times[-1] - started, 2) if times else None,
        "cpu_s_to_last_bind": round(cpu, 1),
        "peak_rss_mib": round(peak),
        "load": [round(x, 2) for x in os.getloadavg()],
    }


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required=not os.environ.get("KUBECONFIG"))
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--bound", type=int, default=140_000)
    ap.add_argument("--grouped", type=int, default=87_000)
    ap.add_argument("--pending", type=int, default=100)
    ap.add_argument("--restarts", type=int, default=2)
    ap.add_argument("--cpu", default="10m")
    ap.add_argument("--memory", default="16Mi")
    ap.add_argument("--node-cpu", default="32")
    ap.add_argument("--node-memory", default="128Gi")
    ap.add_argument("--node-pods", default="110")
    ap.add_argument("--qps", type=float, default=2000.0)
    ap.add_argument(
        "--kube-scheduler", help="kube-scheduler binary: also time its starts over the same cluster, after lavaflow's"
    )
    ap.add_argument("--drain-window", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--keep", action="store_true", help="keep the populated namespace (and nodes) for the next run")
    ap.add_argument("--keep-nodes", action="store_true")
    ap.add_argument("--cleanup", action="store_true", help="only delete what an earlier --keep run left")
    ap.add_argument(
        "--settle",
        action="store_true",
        help="first run lavaflow until every PodGroup has a status (a restart, not a first start, is then timed)",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="before each start, time a client that only streams and decodes nodes, pods and PodGroups",
    )
    ap.add_argument("--stream-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.stream_only:
        await stream_only(args.kubeconfig)
        return 0
    args.grouped = min(args.grouped, args.bound)
    cfg = load_config(args.kubeconfig)
    cfg.qps, cfg.burst = 0, 0
    client = KubeClient(cfg)
    try:
        if args.cleanup:
            await cleanup(client, args)
            return 0
        print(
            f"restart: {args.nodes} nodes, {args.bound} bound pods ({args.grouped} in PodGroups), {args.pending} new; load {os.getloadavg()}",
            flush=True,
        )
        await populate(client, args)
        results = []
        with tempfile.TemporaryDirectory() as tmp:
            if args.settle:
                r = await settle(args, args.kubeconfig, Path(tmp))
                print(f"  settle: {json.dumps(r)}", flush=True)
                results.append(r)
            for run in range(args.restarts):
                if args.floor:
                    f = stream_floor(args.kubeconfig)
                    print(f"  stream only {run}: {json.dumps(f)}", flush=True)
                    results.append({"stream_only": run, **f})
                r = await one_start(client, args, args.kubeconfig, Path(tmp), run)
                print(f"  start {run}: {json.dumps(r)}", flush=True)
                results.append(r)
            # kube-scheduler over the same cluster, after lavaflow's starts (their pods stay bound)
            for run in range(args.restarts if args.kube_scheduler else 0):
                r = await kube_start(client, args, args.kubeconfig, Path(tmp), run)
                print(f"  kube-scheduler start {run}: {json.dumps(r)}", flush=True)
                results.append(r)
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
        if not args.keep:
            await cleanup(client, args)
    finally:
        await client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
