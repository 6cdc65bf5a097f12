"""Pods bound per second on a real API server: lavaflow's scheduler beside kube-scheduler.

Talks to any API server through a kubeconfig (no kubelet needed: the nodes are fake Node
objects). For each node count it makes sure that many fake nodes exist, then runs one phase per
scheduler on the same server, one after the other, with the same pod shapes:

* ``kube``: N pods with ``schedulerName: default-scheduler``, bound by kube-scheduler (started by
  this script from ``--kube-scheduler`` with client QPS/burst ``--qps``, no leader election);
* ``lavaflow``: N pods with ``schedulerName: lavaflow``, each with its own PodGroup (minMember 1,
  annotation ``scheduling.k8s.io/group-name``), bound by ``lavaflow scheduler`` (same QPS/burst,
  no leader election).

In each phase the N pods are created first (the scheduler is not running), then the scheduler
process is started and a watch on the phase's namespace records when each pod gets its
``spec.nodeName``. Reported: pods/s from the first to the last binding (steady throughput), pods/s
from the scheduler's start (includes its start-up and cache sync), and the time to the first
binding. Bound pods are deleted (grace period 0) after each phase.

    python benchmarks/kube_throughput.py --kubeconfig admin.kubeconfig --kube-scheduler /path/kube-scheduler \\
        --nodes 1000,5000 --pods 5000 [--json out.json] [--neighbour]

``--neighbour`` runs a CPU-bound busy loop pinned to the machine's last core during each phase
(the issue-16 "busy machine" case); each row also gives the 1-minute load average before and
after its phase.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lavaflow.kube.client import ApiError, KubeClient, load_config
from lavaflow.testing import fake_node, lift_not_ready_taint

NODE_LABEL = "lavaflow.io/bench"


async def bounded(n: int, coros) -> list[Any]:
    sem = asyncio.Semaphore(n)

    async def one(c):
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


async def post(client: KubeClient, path: str, body: dict[str, Any]) -> None:
    for attempt in range(5):
        try:
            await client.request("POST", path, body=body)
            return
        except ApiError as exc:
            if exc.already_exists:
                return
            if exc.status in (429, 500, 503, 504) and attempt < 4:
                await asyncio.sleep(0.2 * (attempt + 1))
                continue
            raise


async def ensure_nodes(client: KubeClient, count: int, cpu: str, memory: str, pods: str) -> None:
    have = await client.request("GET", "/api/v1/nodes", params={"labelSelector": NODE_LABEL})
    names = {n["metadata"]["name"] for n in have.get("items", [])}
    want = {f"bench-node-{i:05d}" for i in range(count)}
    extra = sorted(names - want)
    missing = sorted(want - names)
    t0 = time.monotonic()

    def node(name: str) -> dict[str, Any]:
        n = fake_node(name, cpu=cpu, memory=memory, pods=pods, labels={NODE_LABEL: "1"})
        return n

    await bounded(32, (post(client, "/api/v1/nodes", node(n)) for n in missing))
    await bounded(32, (client.request("DELETE", f"/api/v1/nodes/{n}") for n in extra))
    # kube-apiserver's TaintNodesByCondition admission taints every new node not-ready:NoSchedule,
    # and only kube-controller-manager's node lifecycle controller (not run here) lifts it once
    # the node reports Ready, as the fake nodes do: lift it as it would.
    tainted = [
        n
        for n in (await client.request("GET", "/api/v1/nodes", params={"labelSelector": NODE_LABEL})).get("items", [])
        if n["metadata"]["name"] in want and (n.get("spec") or {}).get("taints")
    ]
    await bounded(32, (lift_not_ready_taint(client, n) for n in tainted))
    print(
        f"  nodes: {count} ({len(missing)} created, {len(extra)} deleted, {len(tainted)} untainted in "
        f"{time.monotonic() - t0:.1f}s)",
        flush=True,
    )


def pod_doc(name: str, scheduler: str, cpu: str, memory: str, group: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "bench"}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


async def create_grouped_pods(
    client: KubeClient, ns: str, names: list[str], scheduler: str, cpu: str, memory: str
) -> None:
    """A PodGroup of minMember 1 named ``pg-NAME`` for each pod, then the pods, in ``ns``."""
    pgs = (
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"pg-{x}", "namespace": ns},
            "spec": {"minMember": 1, "queue": "default", "minResources": {"cpu": cpu, "memory": memory}},
        }
        for x in names
    )
    await bounded(
        32, (post(client, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups", pg) for pg in pgs)
    )
    docs = [pod_doc(x, scheduler, cpu, memory, f"pg-{x}") for x in names]
    await bounded(32, (post(client, f"/api/v1/namespaces/{ns}/pods", d) for d in docs))


class BindWatch:
    """Records when each pod of a namespace is first seen with a nodeName."""

    def __init__(self, client: KubeClient, ns: str) -> None:
        self.client = client
        self.ns = ns
        self.bound: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.rebinds = 0
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()

    def _see(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        if name in self.node_of and self.node_of[name] != node:
            self.rebinds += 1
        if name not in self.bound:
            self.bound[name] = now
            self.node_of[name] = node

    async def run(self) -> None:
        rv = None
        while True:
            try:
                if rv is None:
                    lst = await self.client.request("GET", f"/api/v1/namespaces/{self.ns}/pods")
                    now = time.monotonic()
                    for p in lst.get("items", []):
                        self._see(p, now)
                    rv = lst["metadata"]["resourceVersion"]
                    self.ready.set()
                async for ev in self.client.stream(
                    f"/api/v1/namespaces/{self.ns}/pods",
                    {"watch": True, "resourceVersion": rv, "allowWatchBookmarks": True, "timeoutSeconds": 300},
                    300,
                ):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        rv = None
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self._see(obj, time.monotonic())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped stream: relist
                print(f"  watch: {exc}; relisting", file=sys.stderr)
                rv = None
                await asyncio.sleep(0.2)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 20 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kube_scheduler_cmd(args, kubeconfig: str, tmp: Path) -> list[str]:
    conf = tmp / "kube-scheduler.yaml"
    conf.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection:\n  kubeconfig: {kubeconfig}\n  qps: {args.qps}\n  burst: {int(args.qps)}\n"
        "leaderElection:\n  leaderElect: false\n"
    )
    return [args.kube_scheduler, f"--config={conf}", "--bind-address=127.0.0.1", "--secure-port=10259", "--v=1"]


def raw_cmd(args, kubeconfig: str) -> list[str]:
    """The raw binder (benchmarks/raw_binder.py): binds the phase's pods round robin, deciding nothing."""
    script = str(Path(__file__).resolve().parent / "raw_binder.py")
    return [
        sys.executable,
        script,
        "--kubeconfig",
        kubeconfig,
        "--scheduler-name",
        "raw-binder",
        "--qps",
        str(args.qps),
    ]


def lavaflow_cmd(args, kubeconfig: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "lavaflow"), "scheduler", "--kubeconfig", kubeconfig, "--no-leader-elect",
        "--kube-api-qps", str(args.qps), "--kube-api-burst", str(int(args.qps)), "--schedule-period", args.period,
        "--listen-address", "127.0.0.1", "--listen-port", "18080", "--scheduler-name", "lavaflow",
    ]  # fmt: skip


async def phase(client: KubeClient, args, which: str, nodes: int, kubeconfig: str, tmp: Path) -> dict[str, Any]:
    ns = f"bench-{which}-{nodes}-{int(time.time())}"
    await post(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    n = args.pods
    names = [f"p-{i:06d}" for i in range(n)]
    t0 = time.monotonic()
    if which == "lavaflow":
        await create_grouped_pods(client, ns, names, "lavaflow", args.cpu, args.memory)
    else:
        scheduler = "raw-binder" if which == "raw" else "default-scheduler"
        docs = [pod_doc(x, scheduler, args.cpu, args.memory, None) for x in names]
        await bounded(32, (post(client, f"/api/v1/namespaces/{ns}/pods", d) for d in docs))
    print(f"  {which}: {n} pods created in {time.monotonic() - t0:.1f}s", flush=True)

    watch = BindWatch(client, ns)
    watch.start()
    await watch.ready.wait()
    cmd = {"kube": lambda: kube_scheduler_cmd(args, kubeconfig, tmp), "raw": lambda: raw_cmd(args, kubeconfig)}.get(
        which, lambda: lavaflow_cmd(args, kubeconfig)
    )()
    log = open(tmp / f"{which}-{nodes}.log", "w")
    neighbour = start_neighbour() if args.neighbour else None
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    timed_out = False
    load_before = os.getloadavg()
    try:
        while len(watch.bound) < n:
            if time.monotonic() - started > args.timeout:
                timed_out = True
                break
            if proc.poll() is not None and not (which == "raw" and proc.returncode == 0):
                raise RuntimeError(f"{which} scheduler exited with {proc.returncode}; see {log.name}")
            await asyncio.sleep(0.05)
    finally:
        stop_process(proc)
        log.close()
        load_after = os.getloadavg()
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
        await asyncio.sleep(0.5)
        await watch.stop()
    times = sorted(watch.bound.values())
    bound = len(times)
    res: dict[str, Any] = {
        "scheduler": which,
        "nodes": nodes,
        "pods": n,
        "bound": bound,
        "timed_out": timed_out,
        "rebinds": watch.rebinds,
        "neighbour": bool(args.neighbour),
        "load_1m_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
    }
    if bound:
        first, last = times[0], times[-1]
        res["first_bind_s"] = round(first - started, 2)
        res["last_bind_s"] = round(last - started, 2)
        res["pods_per_s_steady"] = round(bound / max(last - first, 1e-3), 1)
        res["pods_per_s_from_start"] = round(bound / max(last - started, 1e-3), 1)
        # best 1-second window
        best, j = 0, 0
        for i, t in enumerate(times):
            while times[j] < t - 1.0:
                j += 1
            best = max(best, i - j + 1)
        res["peak_1s"] = best
    per_node: dict[str, int] = {}
    for node in watch.node_of.values():
        per_node[node] = per_node.get(node, 0) + 1
    res["nodes_used"] = len(per_node)
    print(f"  {which}: {json.dumps(res)}", flush=True)
    # clean up: bound pods have no kubelet, so delete them at once
    for _ in range(20):  # the API server ends a deletecollection after its request timeout (60 s): repeat
        try:
            await client.request(
                "DELETE",
                f"/api/v1/namespaces/{ns}/pods",
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                timeout=900,
            )
        except (TimeoutError, ApiError):
            pass
        if not (await client.request("GET", f"/api/v1/namespaces/{ns}/pods", params={"limit": 1})).get("items"):
            break
    if which == "lavaflow":
        await client.request("DELETE", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups")
    try:
        await client.request("DELETE", f"/api/v1/namespaces/{ns}")
    except ApiError:
        pass
    return res


def start_neighbour() -> subprocess.Popen:
    """A CPU-bound process (a busy loop) on the machine's last core, for the whole phase: the
    schedulers, the API server and etcd then share what is left, as on a busy node."""
    code = "import os\nn = os.cpu_count() or 1\ntry:\n    os.sched_setaffinity(0, {n - 1})\nexcept (AttributeError, OSError):\n    pass\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


async def connect(kubeconfig: str) -> tuple[KubeClient, dict[str, Any]]:
    """An unthrottled client (64 connections) and the server's /version, printed with the cores."""
    cfg = load_config(kubeconfig)
    cfg.qps, cfg.burst, cfg.max_connections = 0, 0, 64
    client = KubeClient(cfg)
    version = await client.request("GET", "/version")
    print(f"server {version.get('gitVersion')}, {os.cpu_count()} cores", flush=True)
    return client, version


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required=not os.environ.get("KUBECONFIG"))
    ap.add_argument("--kube-scheduler", help="kube-scheduler binary (omit to run only lavaflow)")
    ap.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument(
        "--order", default="kube,lavaflow", help="phases in order: kube, lavaflow, raw (benchmarks/raw_binder.py)"
    )
    ap.add_argument("--cpu", default="100m")
    ap.add_argument("--memory", default="128Mi")
    ap.add_argument("--node-cpu", default="32")
    ap.add_argument("--node-memory", default="128Gi")
    ap.add_argument("--node-pods", default="110")
    ap.add_argument("--qps", type=float, default=2000.0, help="client QPS and burst of both schedulers")
    ap.add_argument("--period", default="1s", help="lavaflow's --schedule-period")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--keep-nodes", action="store_true")
    ap.add_argument(
        "--neighbour", action="store_true", help="run a CPU-bound busy loop on the last core during each phase"
    )
    args = ap.parse_args()
    kubeconfig = str(Path(args.kubeconfig).resolve())
    client, version = await connect(kubeconfig)
    results = []
    order = [x for x in args.order.split(",") if x and (x != "kube" or args.kube_scheduler)]
    if any(x not in ("kube", "lavaflow", "raw") for x in order):
        sys.exit(f"--order: phases are kube, lavaflow and raw, not {args.order}")
    try:
        with tempfile.TemporaryDirectory(prefix="lavaflow-bench-") as d:
            tmp = Path(d)
            for nodes in [int(x) for x in args.nodes.split(",")]:
                print(f"{nodes} nodes, {args.pods} pods", flush=True)
                await ensure_nodes(client, nodes, args.node_cpu, args.node_memory, args.node_pods)
                for which in order:
                    results.append(await phase(client, args, which, nodes, kubeconfig, tmp))
                    logs = Path(d) / f"{which}-{nodes}.log"
                    if args.json:
                        Path(args.json).with_suffix(f".{which}-{nodes}.log").write_text(logs.read_text())
            if not args.keep_nodes:
                await ensure_nodes(client, 0, args.node_cpu, args.node_memory, args.node_pods)
    finally:
        await client.close()
    print(
        "\n| nodes | pods | scheduler | pods/s (first→last bind) | pods/s (from start) | first bind | peak 1 s "
        "| neighbour | load 1 min before / after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['nodes']} | {r['pods']} | {r['scheduler']} | {r.get('pods_per_s_steady', 0)} | {r.get('pods_per_s_from_start', 0)} "
            f"| {r.get('first_bind_s', '-')} s | {r.get('peak_1s', 0)} | {'yes' if r['neighbour'] else 'no'} "
            f"| {r['load_1m_before_after'][0]} / {r['load_1m_before_after'][1]} |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"server": version, "cores": os.cpu_count(), "results": results}, indent=2)
        )
    return 0 if all(r["bound"] == r["pods"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
