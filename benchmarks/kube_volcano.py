"""lavaflow beside Volcano's own vc-scheduler / vc-controller-manager on a real API server (issue 40).

Volcano's binaries are not part of this repository: pass their paths (built from Volcano's
sources, see docs/kubernetes.md). Without a kubeconfig or without the binaries a run says so and
exits with status 2. Nodes are fake Node objects (benchmarks/kube_throughput.py); no kubelet runs,
so bound pods stay Pending with a nodeName. Phases run one after the other on the same server,
never two schedulers at once.

Two experiments:

* ``shape``: ``--pods`` bare pods (``--cpu``/``--memory``, ``schedulerName: volcano``, a PodGroup of
  minMember 1 each, all created before the scheduler starts) at each ``--nodes`` count, bound by
  each of ``--runs``: ``volcano`` (vc-scheduler), ``lavaflow-volcano`` (``lavaflow scheduler
  --node-choice volcano``) and ``lavaflow`` (lavaflow's default node choice). All are given the same
  ``--scheduler-conf`` (e.g. Volcano's shipped volcano-scheduler.conf). Reported per run: distinct
  nodes used, most pods on a node, the histogram of pods per node, seconds to the last binding and
  the scheduler's CPU seconds.
* ``jobs``: ``--jobs`` Volcano Jobs of 10 pods (minAvailable 10, 10m / 16Mi per pod, as
  benchmarks/kube_controller_burst.py) under ``volcano`` (vc-controller-manager + vc-scheduler) and
  ``lavaflow`` (``lavaflow controller`` + ``lavaflow scheduler``), alternating ``--rounds`` times.
  Both processes are started and proven ready with one warm-up Job before the clock starts; then
  all Jobs are created at once (64 concurrent requests). Reported: seconds to create the Jobs,
  first pod created and first pod bound (from the first create), bound pods/s end to end (all pods
  / time from the first create to the last binding), wall time, the CPU seconds (user + system) of
  each process over the burst (and of the API server's, with ``--server-pids``), the load average
  before and after, the writes the API server served (its ``apiserver_request_total`` by verb and
  resource, read from /metrics before and after), and per Job the median and 90th percentile of
  each step: its PodGroup after its create, Inqueue after the PodGroup, its last pod after Inqueue,
  its last binding after its last pod. ``--neighbour pinned`` runs ``while True: pass`` pinned to
  the last core, ``free`` the same loop unpinned. New fake nodes are untainted as kube-controller-
  manager's node lifecycle controller would (the server's TaintNodesByCondition admission taints
  them not-ready).

    python benchmarks/kube_volcano.py --kubeconfig K --vc-scheduler BIN --scheduler-conf CONF \\
        shape --nodes 1000,5000 --pods 5000
    python benchmarks/kube_volcano.py --kubeconfig K --vc-scheduler BIN --vc-controller-manager BIN \\
        --scheduler-conf CONF jobs --nodes 1000,5000 --jobs 500 --neighbour none,pinned
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kube_controller_burst import Seen, job_doc, proc_stats, server_cpu  # noqa: E402
from kube_throughput import BindWatch, bounded, connect, create_grouped_pods, ensure_nodes, post  # noqa: E402

from lavaflow.kube.client import ApiError, KubeClient  # noqa: E402

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
LAVAFLOW = str(Path(sys.executable).parent / "lavaflow")


class Proc:
    """One scheduler or controller process, its log, and its CPU seconds."""

    def __init__(self, name: str, cmd: list[str], logdir: Path) -> None:
        self.name, self.cmd = name, cmd
        self.log = logdir / f"{name}-{int(time.time() * 1000)}.log"
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        self.started = time.monotonic()

    def cpu(self) -> float:
        return proc_stats(self.proc.pid)["cpu"]

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def scheduler_cmd(args, which: str, kubeconfig: str) -> list[str]:
    conf = ["--scheduler-conf", args.scheduler_conf] if args.scheduler_conf else []
    period = getattr(args, "schedule_period", "1s")
    if which == "volcano":
        return [
            args.vc_scheduler, f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            f"--kube-api-qps={args.qps}", f"--kube-api-burst={int(args.qps)}", f"--schedule-period={period}",
            "--listen-address=127.0.0.1:18090", "--healthz-address=127.0.0.1:11251", f"-v={args.vc_verbosity}", *conf,
        ]  # fmt: skip
    cmd = [
        LAVAFLOW, "scheduler", "--kubeconfig", kubeconfig, "--no-leader-elect", "--kube-api-qps", str(args.qps),
        "--kube-api-burst", str(int(args.qps)), "--schedule-period", period, "--listen-address", "127.0.0.1",
        "--listen-port", "18080", *conf,
    ]  # fmt: skip
    if which == "lavaflow-volcano":
        cmd += ["--node-choice", "volcano"]
    return cmd


def controller_cmd(args, which: str, kubeconfig: str) -> list[str]:
    if which == "volcano":
        return [
            args.vc_controller_manager, f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            f"--kube-api-qps={args.qps}", f"--kube-api-burst={int(args.qps)}",
            "--listen-address=127.0.0.1:18091", "--healthz-address=127.0.0.1:11252", "-v=1",
        ]  # fmt: skip
    return [
        LAVAFLOW, "controller", "--kubeconfig", kubeconfig, "--no-leader-elect", "--kube-api-qps", str(args.qps),
        "--kube-api-burst", str(int(args.qps)), "--listen-address", "127.0.0.1", "--listen-port", "18081",
        *args.lavaflow_controller_arg,
    ]  # fmt: skip


async def server_requests(client: KubeClient) -> dict[str, float]:
    """The API server's request counters (``apiserver_request_total``) by verb and resource,
    from its /metrics; {} when it cannot be read."""
    import aiohttp

    try:
        async with client._get("/metrics", {}, aiohttp.ClientTimeout(total=30), accept="text/plain") as resp:
            if resp.status != 200:
                return {}
            text = await resp.text()
    except Exception:  # noqa: BLE001 - a server that does not let us read its metrics
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        lab = dict(kv.split("=", 1) for kv in labels[len("apiserver_request_total{") : -1].split(",") if "=" in kv)
        verb = lab.get("verb", "").strip('"')
        if verb in ("WATCH", "LIST", "GET"):
            continue
        res = lab.get("resource", "").strip('"') + (
            "/" + lab["subresource"].strip('"') if lab.get("subresource") else ""
        )
        key = f"{verb} {res}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


def start_neighbour(kind: str) -> subprocess.Popen | None:
    if kind == "none":
        return None
    pin = "import os\nos.sched_setaffinity(0, {(os.cpu_count() or 1) - 1})\n" if kind == "pinned" else ""
    return subprocess.Popen([sys.executable, "-c", pin + "while True:\n    pass\n"])


async def new_namespace(client: KubeClient, tag: str) -> str:
    ns = f"vs-{tag}-{int(time.time() * 1000) % 10**9}"
    await post(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return ns


async def clear(client: KubeClient, ns: str, jobs: bool) -> None:
    """Delete what a phase made (no garbage collector or namespace controller runs here)."""
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    paths = ([JOBS] if jobs else []) + [PODS, PODGROUPS]
    for _ in range(10):  # a deletecollection ends at the request timeout (60 s): repeat
        for p in paths:
            with contextlib.suppress(Exception):
                await client.request("DELETE", p.format(ns=ns), body=opts if p == PODS else None, timeout=600)
        left = [await client.request("GET", p.format(ns=ns), params={"limit": 1}) for p in paths]
        if not any(x.get("items") for x in left):
            break
    with contextlib.suppress(ApiError):
        await client.request("DELETE", f"/api/v1/namespaces/{ns}")


async def wait_bound(watch: BindWatch, n: int, procs: list[Proc], timeout: float, since: float) -> bool:
    while len(watch.bound) < n:
        if time.monotonic() - since > timeout:
            return False
        for p in procs:
            p.check()
        await asyncio.sleep(0.05)
    return True


def shape_of(watch: BindWatch) -> dict[str, Any]:
    per_node: dict[str, int] = {}
    for node in watch.node_of.values():
        per_node[node] = per_node.get(node, 0) + 1
    hist: dict[int, int] = {}
    for c in per_node.values():
        hist[c] = hist.get(c, 0) + 1
    return {
        "nodes_used": len(per_node),
        "max_per_node": max(per_node.values(), default=0),
        "histogram": dict(sorted(hist.items())),
    }


async def shape_phase(client: KubeClient, args, which: str, nodes: int, kubeconfig: str, tmp: Path) -> dict:
    ns = await new_namespace(client, f"shape-{nodes}")
    names = [f"p-{i:06d}" for i in range(args.pods)]
    await create_grouped_pods(client, ns, names, "volcano", args.cpu, args.memory)
    watch = BindWatch(client, ns)
    watch.start()
    await watch.ready.wait()
    sched = Proc(which, scheduler_cmd(args, which, kubeconfig), tmp)
    try:
        done = await wait_bound(watch, args.pods, [sched], args.timeout, sched.started)
        cpu = sched.cpu()
    finally:
        sched.stop()
        await asyncio.sleep(0.5)
        await watch.stop()
    times = sorted(watch.bound.values())
    res = {
        "experiment": "shape",
        "scheduler": which,
        "nodes": nodes,
        "pods": args.pods,
        "bound": len(times),
        "timed_out": not done,
        "last_bind_s": round(times[-1] - sched.started, 2) if times else None,
        "cpu_s": round(cpu, 2),
        **shape_of(watch),
    }
    print(f"  {json.dumps(res)}", flush=True)
    await clear(client, ns, jobs=False)
    return res


async def ready_by_canary(client: KubeClient, procs: list[Proc], timeout: float) -> tuple[float, str]:
    """One 10-pod Job bound end to end: both processes have synced and act. Returns the time it
    took and its namespace (cleared once the phase's processes have stopped)."""
    ns = await new_namespace(client, "canary")
    t0 = time.monotonic()
    watch = BindWatch(client, ns)
    watch.start()
    await watch.ready.wait()
    await post(client, JOBS.format(ns=ns), job_doc(ns, "canary", "volcano"))
    ok = await wait_bound(watch, 10, procs, timeout, t0)
    await watch.stop()
    if not ok:
        raise RuntimeError(f"warm-up Job not bound within {timeout} s; see {[str(p.log) for p in procs]}")
    for p in procs:
        p.check()
    return time.monotonic() - t0, ns


class Created:
    """When each pod of a namespace is first seen (created), per Job, beside BindWatch's bindings."""

    def __init__(self, watch: BindWatch) -> None:
        self.first: float | None = None
        self.pods: dict[str, float] = {}
        self.job_of: dict[str, str] = {}
        orig = watch._see

        def see(pod: dict[str, Any], now: float) -> None:
            if self.first is None:
                self.first = now
            name = pod["metadata"]["name"]
            if name not in self.pods:
                self.pods[name] = now
                self.job_of[name] = ((pod["metadata"].get("labels") or {}).get("volcano.sh/job-name")) or ""
            orig(pod, now)

        watch._see = see  # type: ignore[method-assign]


class GroupWatch(Seen):
    """When each Job's PodGroup appears and when it first leaves Pending (the scheduler's enqueue)."""

    def __init__(self, client: KubeClient, ns: str) -> None:
        super().__init__(client, PODGROUPS.format(ns=ns))
        self.appeared: dict[str, float] = {}
        self.inqueue: dict[str, float] = {}

    def _see(self, typ: str, obj: dict[str, Any], now: float) -> None:
        super()._see(typ, obj, now)
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        job = next((r.get("name") for r in refs if r.get("kind") == "Job"), None)
        if job is None or typ == "DELETED":
            return
        self.appeared.setdefault(job, now)
        if (obj.get("status") or {}).get("phase") not in (None, "", "Pending"):
            self.inqueue.setdefault(job, now)


def stages(job_created: dict[str, float], groups: GroupWatch, created: Created, watch: BindWatch) -> dict[str, Any]:
    """Per Job, the seconds each step took (median / 90th percentile over the Jobs): its PodGroup
    after its create (controller), Inqueue after the PodGroup (scheduler), its last pod after
    Inqueue (controller), its last binding after its last pod (scheduler)."""
    last_pod: dict[str, float] = {}
    last_bind: dict[str, float] = {}
    for pod, at in created.pods.items():
        job = created.job_of[pod]
        last_pod[job] = max(last_pod.get(job, 0.0), at)
        if pod in watch.bound:
            last_bind[job] = max(last_bind.get(job, 0.0), watch.bound[pod])
    steps = {
        "job_to_podgroup": (job_created, groups.appeared),
        "podgroup_to_inqueue": (groups.appeared, groups.inqueue),
        "inqueue_to_pods": (groups.inqueue, last_pod),
        "pods_to_bound": (last_pod, last_bind),
    }
    out: dict[str, Any] = {}
    for name, (start, end) in steps.items():
        spans = sorted(end[j] - start[j] for j in start if j in end)
        if spans:
            out[name] = [round(spans[len(spans) // 2], 2), round(spans[int(len(spans) * 0.9)], 2)]
    return out


async def jobs_phase(
    client: KubeClient, args, which: str, nodes: int, neighbour: str, kubeconfig: str, tmp: Path
) -> dict:
    ctl = Proc(f"{which}-controller", controller_cmd(args, which, kubeconfig), tmp)
    sched = Proc(f"{which}-scheduler", scheduler_cmd(args, which, kubeconfig), tmp)
    ns = canary = None
    noise = None
    try:
        warm, canary = await ready_by_canary(client, [ctl, sched], args.timeout)
        ns = await new_namespace(client, f"jobs-{nodes}")
        watch = BindWatch(client, ns)
        created = Created(watch)
        watch.start()
        await watch.ready.wait()
        groups = GroupWatch(client, ns)
        await groups.__aenter__()
        noise = start_neighbour(neighbour)
        await asyncio.sleep(0.5 if noise else 0)
        cpu0 = {p.name: p.cpu() for p in (ctl, sched)}
        server0 = server_cpu(args)
        writes0 = await server_requests(client)
        load0 = os.getloadavg()[0]
        docs = [job_doc(ns, f"j-{i:05d}", "volcano") for i in range(args.jobs)]
        job_created: dict[str, float] = {}

        async def create(doc: dict[str, Any]) -> None:
            await post(client, JOBS.format(ns=ns), doc)
            job_created[doc["metadata"]["name"]] = time.monotonic()

        t0 = time.monotonic()
        await bounded(64, (create(d) for d in docs))
        t_created = time.monotonic() - t0
        n = args.jobs * 10
        done = await wait_bound(watch, n, [ctl, sched], args.timeout, t0)
        t_end = time.monotonic()
        cpu = {p.name: round(p.cpu() - cpu0[p.name], 2) for p in (ctl, sched)}
        server = round(server_cpu(args) - server0, 2)
        writes1 = await server_requests(client)
        load1 = os.getloadavg()[0]
        await watch.stop()
        await groups.__aexit__(None, None, None)
    finally:
        if noise is not None:
            noise.kill()
            noise.wait()
        sched.stop()
        ctl.stop()
    times = sorted(watch.bound.values())
    res: dict[str, Any] = {
        "experiment": "jobs",
        "system": which,
        "nodes": nodes,
        "jobs": args.jobs,
        "pods": n,
        "bound": len(times),
        "timed_out": not done,
        "neighbour": neighbour,
        "warmup_s": round(warm, 2),
        "jobs_created_s": round(t_created, 2),
        "first_pod_s": round(created.first - t0, 2) if created.first else None,
        "first_bind_s": round(times[0] - t0, 2) if times else None,
        "last_bind_s": round(times[-1] - t0, 2) if times else None,
        "pods_per_s": round(len(times) / max(times[-1] - t0, 1e-3), 1) if times else 0,
        "wall_s": round(t_end - t0, 2),
        "cpu_controller_s": cpu[ctl.name],
        "cpu_scheduler_s": cpu[sched.name],
        "cpu_server_s": server if args.server_pids else None,
        "load_1m_before_after": [round(load0, 2), round(load1, 2)],
        "stages_median_p90_s": stages(job_created, groups, created, watch),
        "server_writes": {
            k: int(v - writes0.get(k, 0.0)) for k, v in sorted(writes1.items()) if v > writes0.get(k, 0.0)
        },
    }
    print(f"  {json.dumps(res)}", flush=True)
    for done_ns in (ns, canary):
        await clear(client, done_ns, jobs=True)
    return res


def missing_binaries(args) -> list[str]:
    need = []
    if args.experiment == "jobs" and "volcano" in args.order:
        need += [("--vc-scheduler", args.vc_scheduler), ("--vc-controller-manager", args.vc_controller_manager)]
    if args.experiment == "shape" and "volcano" in args.runs:
        need += [("--vc-scheduler", args.vc_scheduler)]
    return [f"{flag} {path or '(not given)'}" for flag, path in need if not path or not os.access(path, os.X_OK)]


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--vc-scheduler", help="Volcano's vc-scheduler binary")
    ap.add_argument("--vc-controller-manager", help="Volcano's vc-controller-manager binary")
    ap.add_argument("--vc-verbosity", type=int, default=1, help="vc-scheduler's -v (its log is kept with --json)")
    ap.add_argument("--scheduler-conf", help="volcano-scheduler.conf given to both schedulers")
    ap.add_argument("--qps", type=float, default=2000.0, help="client QPS and burst of every process")
    ap.add_argument(
        "--lavaflow-controller-arg",
        action="append",
        default=[],
        help="one more argument for lavaflow controller (repeat: --lavaflow-controller-arg=--concurrent-syncs=128)",
    )
    ap.add_argument("--node-cpu", default="32")
    ap.add_argument("--node-memory", default="128Gi")
    ap.add_argument("--node-pods", default="110")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--server-pids", help="comma-separated pids of kube-apiserver and etcd: their CPU is reported too")
    ap.add_argument("--json", help="append the results (one JSON object a line) to this file")
    ap.add_argument("--keep-nodes", action="store_true")
    sub = ap.add_subparsers(dest="experiment", required=True)
    sp = sub.add_parser("shape", help="where bare pods land")
    sp.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    sp.add_argument("--pods", type=int, default=5000)
    sp.add_argument("--cpu", default="100m")
    sp.add_argument("--memory", default="128Mi")
    sp.add_argument("--runs", default="volcano,lavaflow-volcano,lavaflow")
    jp = sub.add_parser("jobs", help="Volcano Jobs end to end")
    jp.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    jp.add_argument("--jobs", type=int, default=500)
    jp.add_argument("--order", default="volcano,lavaflow")
    jp.add_argument("--rounds", type=int, default=1)
    jp.add_argument("--neighbour", default="none", help="comma-separated: none, pinned, free")
    args = ap.parse_args()
    if not args.kubeconfig or not Path(args.kubeconfig).exists():
        print("skipped: no kubeconfig (--kubeconfig or $KUBECONFIG)", file=sys.stderr)
        return 2
    missing = missing_binaries(args)
    if missing:
        print(f"skipped: Volcano binary missing or not executable: {', '.join(missing)}", file=sys.stderr)
        return 2
    kubeconfig = str(Path(args.kubeconfig).resolve())
    client, _ = await connect(kubeconfig)
    results: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="lavaflow-vs-") as d:
            tmp = Path(args.json).parent if args.json else Path(d)
            for nodes in [int(x) for x in args.nodes.split(",")]:
                await ensure_nodes(client, nodes, args.node_cpu, args.node_memory, args.node_pods)
                if args.experiment == "shape":
                    for which in args.runs.split(","):
                        results.append(await shape_phase(client, args, which, nodes, kubeconfig, tmp))
                        save(args, results[-1])
                else:
                    for neighbour in args.neighbour.split(","):
                        for _ in range(args.rounds):
                            for which in args.order.split(","):
                                r = await jobs_phase(client, args, which, nodes, neighbour, kubeconfig, tmp)
                                results.append(r)
                                save(args, r)
            if not args.keep_nodes:
                await ensure_nodes(client, 0, args.node_cpu, args.node_memory, args.node_pods)
    finally:
        await client.close()
    table(args, results)
    return 0 if all(r["bound"] == r["pods"] for r in results) else 1


def save(args, r: dict[str, Any]) -> None:
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(r) + "\n")


def table(args, results: list[dict[str, Any]]) -> None:
    if args.experiment == "shape":
        print("\n| nodes | scheduler | bound | distinct nodes | most pods on a node | last binding (s) | CPU (s) |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for r in results:
            print(
                f"| {r['nodes']} | {r['scheduler']} | {r['bound']} | {r['nodes_used']} | {r['max_per_node']} "
                f"| {r['last_bind_s']} | {r['cpu_s']} |"
            )
        return
    print(
        "\n| nodes | neighbour | system | bound | pods/s | first pod (s) | first binding (s) | last binding (s) "
        "| CPU controller (s) | CPU scheduler (s) | CPU server (s) | load before / after |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        load = " / ".join(str(x) for x in r["load_1m_before_after"])
        print(
            f"| {r['nodes']} | {r['neighbour']} | {r['system']} | {r['bound']} | {r['pods_per_s']} | {r['first_pod_s']} "
            f"| {r['first_bind_s']} | {r['last_bind_s']} | {r['cpu_controller_s']} | {r['cpu_scheduler_s']} "
            f"| {r['cpu_server_s']} | {load} |"
        )
    print("\nper Job, median / 90th percentile seconds of each step:")
    for r in results:
        steps = ", ".join(f"{k} {v[0]} / {v[1]}" for k, v in r["stages_median_p90_s"].items())
        print(f"  {r['nodes']} nodes, {r['neighbour']}, {r['system']}: {steps}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
