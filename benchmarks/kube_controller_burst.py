"""`lavaflow controller` on a real API server: a burst of Volcano Jobs, and its memory over rounds.

Talks to any API server through a kubeconfig (no kubelet or scheduler needed: the pods stay
Pending; this measures the controller alone). The CRDs are applied from deploy/crds.

* Burst, for each count N of ``--jobs``: ``lavaflow controller`` is started as a subprocess
  (``--kube-api-qps/--kube-api-burst`` from ``--qps``, no leader election) and, once it is ready,
  N Volcano Jobs (batch.volcano.sh/v1alpha1, one task of 10 replicas, minAvailable 10, cpu 10m,
  schedulerName volcano, defaulted as the admission webhook would) are created at once in a fresh
  namespace. Two watches (PodGroups, pods of that namespace) record when each object first
  appears. Printed: seconds from the first create to all N PodGroups and to the first and all 10N
  pods, pods/s (from the first Job create, and from the first pod to the last: the creation rate),
  the wall time beside the controller's CPU seconds (user+system over the burst), the API server's
  CPU (``--server-pids``: kube-apiserver's and etcd's pids), the load average before and after, and
  the controller's peak (VmHWM) and final (VmRSS) resident memory. The jobs, then their pods and
  PodGroups, are deleted afterwards. ``--ceiling`` first creates as many bare pods from this
  script as fast as it can (64 in flight, no rate limit, no watch): the server's own pace on this
  machine, beside the client's and the server's CPU. ``--keep-crds`` uses the CRDs the server has
  (e.g. Volcano's own, whose PodGroup has no status subresource) instead of applying lavaflow's.
* Long run (``--rounds R`` of ``--round-jobs M``, one controller process for all rounds): each
  round creates M jobs, waits for their pods, marks every pod Succeeded (status subresource; the
  jobs complete), deletes the jobs, pods and PodGroups, waits until the controller's watches have
  caught up, and prints the controller's RSS. A controller that keeps per-job state after its
  objects are gone grows round after round.
* Maps (``--map-rounds``, in process): the same rounds against a ``KubeControllers`` running in
  this process, printing the size of every dict/set held by each controller and the store's
  indexes after each round (they should return to the empty-cluster size).

    python benchmarks/kube_controller_burst.py --kubeconfig admin.kubeconfig --jobs 100,1000 --rounds 5
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

import yaml

from lavaflow.kube.client import ApiError, KubeClient, load_config

ROOT = Path(__file__).resolve().parents[1]
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
PODS = "/api/v1/namespaces/{ns}/pods"
REPLICAS = 10
TICK = os.sysconf("SC_CLK_TCK")


async def bounded(n: int, coros) -> list[Any]:
    sem = asyncio.Semaphore(n)

    async def one(c):
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


async def call(client: KubeClient, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    for attempt in range(6):
        try:
            return await client.request(method, path, body=body, **kw)
        except ApiError as exc:
            if exc.already_exists or (method == "DELETE" and exc.not_found):
                return None
            if exc.status in (409, 429, 500, 503, 504) and attempt < 5:
                await asyncio.sleep(0.2 * (attempt + 1))
                continue
            raise


def admitted(doc: dict[str, Any]) -> dict[str, Any]:
    """The job as the admission webhook would default it."""
    import base64

    from lavaflow.kube.webhook import apply_json_patch, review

    resp = review(
        {"uid": "b", "operation": "CREATE", "object": doc, "namespace": doc["metadata"]["namespace"]}, "Job", True
    )
    if not resp.get("allowed", True):
        raise SystemExit(f"job rejected by admission: {resp}")
    if resp.get("patch"):
        doc = apply_json_patch(doc, json.loads(base64.b64decode(resp["patch"])))
    return doc


def pod_spec() -> dict[str, Any]:
    """The spec of every pod here: a Job task's template, and the ceiling's bare pods."""
    return {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }
        ],
    }


def job_doc(ns: str, name: str, scheduler: str) -> dict[str, Any]:
    return admitted(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": scheduler,
                "queue": "default",
                "minAvailable": REPLICAS,
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": REPLICAS,
                        "template": {"spec": pod_spec()},
                    }
                ],
            },
        }
    )


class Seen:
    """Watches one collection path; records when each name first appears and which names exist now."""

    def __init__(self, client: KubeClient, path: str, on_new=None) -> None:
        self.client, self.path, self.on_new = client, path, on_new
        self.first: dict[str, float] = {}
        self.live: set[str] = set()
        self.ready = asyncio.Event()
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None

    def _see(self, typ: str, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        if typ == "DELETED":
            self.live.discard(name)
        else:
            self.live.add(name)
            if name not in self.first:
                self.first[name] = now
                if self.on_new is not None:
                    self.on_new(obj)
        self.changed.set()

    async def run(self) -> None:
        rv = None
        while True:
            try:
                if rv is None:
                    lst = await self.client.request("GET", self.path)
                    now = time.monotonic()
                    self.live.clear()
                    for o in lst.get("items", []):
                        self._see("ADDED", o, now)
                    rv = lst["metadata"]["resourceVersion"]
                    self.ready.set()
                params = {"watch": True, "resourceVersion": rv, "allowWatchBookmarks": True, "timeoutSeconds": 300}
                async for ev in self.client.stream(self.path, params, 300):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        rv = None
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._see(ev["type"], obj, time.monotonic())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a dropped stream: relist
                print(f"  watch {self.path}: {exc!r}; relisting", file=sys.stderr)
                rv = None
                await asyncio.sleep(0.2)

    async def until(self, pred, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out waiting for {what}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))

    async def __aenter__(self) -> Seen:
        self.task = asyncio.get_running_loop().create_task(self.run())
        await self.ready.wait()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


def proc_stats(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    out["cpu"] = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return out


class Controller:
    """`lavaflow controller` as a subprocess."""

    def __init__(self, args, kubeconfig: str, log: Path) -> None:
        self.cmd = [
            str(Path(sys.executable).parent / "lavaflow"), "controller", "--kubeconfig", kubeconfig,
            "--no-leader-elect", "--kube-api-qps", str(args.qps), "--kube-api-burst", str(int(args.qps)),
            "--listen-address", "127.0.0.1", "--listen-port", str(args.port),
        ]  # fmt: skip
        self.port = args.port
        self.log = log

    async def __aenter__(self) -> Controller:
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        import aiohttp

        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as s:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"controller exited with {self.proc.returncode}; see {self.log}")
                try:
                    async with s.get(f"http://127.0.0.1:{self.port}/readyz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                if time.monotonic() > deadline:
                    await self.__aexit__()  # (not left running behind the error)
                    raise RuntimeError(f"controller not ready after 60 s; see {self.log}")
                await asyncio.sleep(0.1)
        return self

    def stats(self) -> dict[str, float]:
        return proc_stats(self.proc.pid)

    async def __aexit__(self, *exc: Any) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()


async def install_crds(client: KubeClient) -> None:
    from lavaflow.kube.ops import apply_manifest

    for p in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        await apply_manifest(client, yaml.safe_load(p.read_text()))
    await asyncio.sleep(2)  # Established


async def namespace(client: KubeClient, tag: str) -> str:
    ns = f"burst-{tag}-{int(time.time() * 1000) % 10**9}"
    await call(
        client, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    return ns


class Enqueuer:
    """Stands in for the scheduler's enqueue action: moves each new Pending PodGroup to Inqueue
    (status subresource), after which the job controller creates the job's pods."""

    def __init__(self, client: KubeClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.sem = asyncio.Semaphore(32)
        self.tasks: set[asyncio.Task] = set()

    def __call__(self, pg: dict[str, Any]) -> None:
        if (pg.get("status") or {}).get("phase") not in (None, "", "Pending"):
            return
        t = asyncio.get_running_loop().create_task(self._one(pg["metadata"]["name"]))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def _one(self, name: str) -> None:
        path = PODGROUPS.format(ns=self.ns) + f"/{name}"
        body = {"status": {"phase": "Inqueue"}}
        async with self.sem:
            try:
                await call(self.client, "PATCH", path + "/status", body, content_type="application/merge-patch+json")
            except ApiError as exc:
                if not exc.not_found:
                    raise
                # Volcano's own PodGroup CRD has no status subresource: the status is on the object
                await call(self.client, "PATCH", path, body, content_type="application/merge-patch+json")


async def create_jobs(client: KubeClient, ns: str, n: int, scheduler: str) -> None:
    docs = [job_doc(ns, f"j-{i:05d}", scheduler) for i in range(n)]
    await bounded(64, (call(client, "POST", JOBS.format(ns=ns), d) for d in docs))


async def complete_pods(client: KubeClient, ns: str, names: list[str]) -> None:
    body = {"status": {"phase": "Succeeded"}}

    async def one(name: str) -> None:
        await call(
            client, "PATCH", PODS.format(ns=ns) + f"/{name}/status", body, content_type="application/merge-patch+json"
        )

    await bounded(64, (one(x) for x in names))


async def clear(client: KubeClient, ns: str, pods: Seen, pgs: Seen | None = None) -> None:
    """Jobs, then pods (grace 0) and PodGroups: no garbage collector runs on a bare control plane."""
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for _ in range(10):  # a deletecollection ends at the request timeout (60 s): repeat
        with contextlib.suppress(Exception):
            await client.request("DELETE", JOBS.format(ns=ns), timeout=600)
        with contextlib.suppress(Exception):
            await client.request("DELETE", PODS.format(ns=ns), body=opts, timeout=600)
        with contextlib.suppress(Exception):
            await client.request("DELETE", PODGROUPS.format(ns=ns), timeout=600)
        left = [await client.request("GET", p.format(ns=ns), params={"limit": 1}) for p in (JOBS, PODS)]
        if not any(x.get("items") for x in left):
            break
    await pods.until(lambda: not pods.live, 300, "all pods gone")
    if pgs is not None:
        await pgs.until(lambda: not pgs.live, 300, "all PodGroups gone")
    with contextlib.suppress(ApiError):
        await client.request("DELETE", f"/api/v1/namespaces/{ns}")


def server_cpu(args) -> float:
    """CPU seconds (user + system) used so far by the API server's processes (--server-pids)."""
    return sum(proc_stats(int(p))["cpu"] for p in args.server_pids.split(",") if p) if args.server_pids else 0.0


def own_cpu() -> float:
    return proc_stats(os.getpid())["cpu"]


async def ceiling(client: KubeClient, args, n: int) -> dict[str, Any]:
    """The server's own pace: ``n`` bare pods created by this script as fast as it can (64 requests
    in flight, no rate limit, through the client's lean write path, no watch open), beside the CPU
    of this client and of the server."""
    ns = await namespace(client, f"ceiling-{n}")
    load0, server0, cpu0 = os.getloadavg()[0], server_cpu(args), own_cpu()
    t0 = time.monotonic()

    def pod(i: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p-{i:06d}", "namespace": ns, "labels": {"bench": "ceiling"}},
            "spec": {"schedulerName": "none", **pod_spec()},
        }

    await bounded(64, (call(client, "POST", PODS.format(ns=ns), pod(i)) for i in range(n)))
    wall = time.monotonic() - t0
    res = {
        "pods": n,
        "wall_s": round(wall, 2),
        "pods_per_s": round(n / wall, 1),
        "client_cpu_s": round(own_cpu() - cpu0, 2),
        "server_cpu_s": round(server_cpu(args) - server0, 2) if args.server_pids else None,
        "load_1m_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }
    print(f"  ceiling {json.dumps(res)}", flush=True)
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for _ in range(10):
        with contextlib.suppress(Exception):
            await client.request("DELETE", PODS.format(ns=ns), body=opts, timeout=600)
        if not (await client.request("GET", PODS.format(ns=ns), params={"limit": 1})).get("items"):
            break
    with contextlib.suppress(ApiError):
        await client.request("DELETE", f"/api/v1/namespaces/{ns}")
    return res


async def burst(client: KubeClient, args, n: int, kubeconfig: str, tmp: Path) -> dict[str, Any]:
    ns = await namespace(client, str(n))
    async with Controller(args, kubeconfig, tmp / f"controller-{n}.log") as ctl:
        await asyncio.sleep(1.0)
        before = ctl.stats()
        server0, load0 = server_cpu(args), os.getloadavg()[0]
        async with (
            Seen(client, PODGROUPS.format(ns=ns), Enqueuer(client, ns)) as pgs,
            Seen(client, PODS.format(ns=ns)) as pods,
        ):
            t0 = time.monotonic()
            await create_jobs(client, ns, n, args.scheduler)
            created = time.monotonic() - t0
            await pgs.until(lambda: len(pgs.first) >= n, args.timeout, f"{n} PodGroups")
            await pods.until(lambda: len(pods.first) >= REPLICAS * n, args.timeout, f"{REPLICAS * n} pods")
            t_pg = max(pgs.first.values()) - t0
            t_first = min(pods.first.values()) - t0
            t_pods = max(pods.first.values()) - t0
            await asyncio.sleep(2.0)  # let the controller settle (status writes after the last pod)
            after = ctl.stats()
            wall = time.monotonic() - t0
            res = {
                "jobs": n,
                "pods": len(pods.first),
                "podgroups": len(pgs.first),
                "create_s": round(created, 2),
                "all_podgroups_s": round(t_pg, 2),
                "first_pod_s": round(t_first, 2),
                "all_pods_s": round(t_pods, 2),
                "pods_per_s": round(len(pods.first) / max(t_pods, 1e-3), 1),
                "creation_pods_per_s": round(len(pods.first) / max(t_pods - t_first, 1e-3), 1),
                "wall_s": round(wall, 2),
                "controller_cpu_s": round(after["cpu"] - before["cpu"], 1),
                "server_cpu_s": round(server_cpu(args) - server0, 1) if args.server_pids else None,
                "load_1m_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)],
                "rss_start_mib": round(before["VmRSS"], 1),
                "peak_rss_mib": round(after["VmHWM"], 1),
                "final_rss_mib": round(after["VmRSS"], 1),
            }
            print(f"  burst {json.dumps(res)}", flush=True)
            await clear(client, ns, pods, pgs)
    return res


async def one_round(client: KubeClient, args, m: int, tag: str) -> tuple[float, float]:
    ns = await namespace(client, tag)
    async with (
        Seen(client, PODGROUPS.format(ns=ns), Enqueuer(client, ns)) as pgs,
        Seen(client, PODS.format(ns=ns)) as pods,
    ):
        t0 = time.monotonic()
        await create_jobs(client, ns, m, args.scheduler)
        await pods.until(lambda: len(pods.first) >= REPLICAS * m, args.timeout, f"{REPLICAS * m} pods")
        t_pods = time.monotonic() - t0
        await complete_pods(client, ns, sorted(pods.live))
        await asyncio.sleep(2.0)  # the controller sees the pods finish and completes the jobs
        await clear(client, ns, pods, pgs)
    return t_pods, time.monotonic() - t0


async def long_run(client: KubeClient, args, kubeconfig: str, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    async with Controller(args, kubeconfig, tmp / "controller-rounds.log") as ctl:
        await asyncio.sleep(1.0)
        s = ctl.stats()
        rows.append(
            {"round": 0, "rss_mib": round(s["VmRSS"], 1), "peak_rss_mib": round(s["VmHWM"], 1), "cpu_s": s["cpu"]}
        )
        print(f"  round 0 (idle) {json.dumps(rows[-1])}", flush=True)
        for r in range(1, args.rounds + 1):
            t_pods, t_all = await one_round(client, args, args.round_jobs, f"r{r}")
            await asyncio.sleep(3.0)  # the controller's watches deliver the deletions
            s = ctl.stats()
            rows.append(
                {
                    "round": r,
                    "all_pods_s": round(t_pods, 2),
                    "round_s": round(t_all, 1),
                    "rss_mib": round(s["VmRSS"], 1),
                    "peak_rss_mib": round(s["VmHWM"], 1),
                    "cpu_s": round(s["cpu"], 1),
                }
            )
            print(f"  round {r} {json.dumps(rows[-1])}", flush=True)
    return rows


def sizes(kc) -> dict[str, int]:
    """Size of every dict/set/list attribute of each controller and of the store's indexes."""
    out: dict[str, int] = {}
    for c in kc.controllers:
        for k, v in vars(c).items():
            if isinstance(v, (dict, set, list)) and k not in ("dirty",):
                out[f"{type(c).__name__}.{k}"] = len(v)
    for k, v in vars(kc.store).items():
        if isinstance(v, dict) and v and all(isinstance(x, (dict, set)) for x in v.values()):
            out[f"store.{k}"] = sum(len(x) for x in v.values())  # per-kind maps: their entries
        elif isinstance(v, (dict, set)):
            out[f"store.{k}"] = len(v)
    out["failures"] = len(kc.failures)
    out["retry_at"] = len(kc.retry_at)
    return out


async def map_rounds(client: KubeClient, args, kubeconfig: str) -> dict[str, list[int]]:
    from lavaflow.kube.controller_process import KubeControllers

    cfg = load_config(kubeconfig)
    cfg.qps, cfg.burst = args.qps, int(args.qps)
    kc = KubeControllers(KubeClient(cfg), resync=0.2)
    stop = asyncio.Event()
    task = asyncio.get_running_loop().create_task(kc.run(stop))
    while not kc.ready:
        await asyncio.sleep(0.1)
    await asyncio.sleep(2.0)
    table: dict[str, list[int]] = {}

    def record() -> None:
        for k, v in sizes(kc).items():
            table.setdefault(k, []).append(v)

    async def settled(timeout: float = 180.0) -> float:
        """Wait until the controllers' own informers have seen the round's objects go (their store
        holds no pod, PodGroup or Job) and no controller has work queued: only then do the maps say
        what is kept after the objects are gone, not what is still on its way."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            left = sum(kc.store.count(kind) for kind in ("Pod", "PodGroup", "Job"))
            if not left and not any(getattr(c, "dirty", None) for c in kc.controllers):
                return time.monotonic() - t0
            await asyncio.sleep(0.2)
        print(f"  (controllers not settled after {timeout:.0f} s)", flush=True)
        return timeout

    record()
    try:
        for r in range(1, args.map_rounds + 1):
            await one_round(client, args, args.round_jobs, f"m{r}")
            waited = await settled()
            await asyncio.sleep(1.0)
            print(
                f"  map round {r}: the controllers' informers saw the round's objects go {waited:.1f} s later",
                flush=True,
            )
            record()
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 20)
        await kc.shutdown()
        await kc.client.close()
    grown = {k: v for k, v in table.items() if v[-1] > v[0]}
    print(
        f"  maps after each round (start first), non-empty ones: {json.dumps({k: v for k, v in table.items() if any(v)})}"
    )
    print(f"  grown from the empty-cluster size: {json.dumps(grown) if grown else 'none'}", flush=True)
    return table


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required=not os.environ.get("KUBECONFIG"))
    ap.add_argument("--jobs", default="100,1000", help="comma-separated job counts for the burst")
    ap.add_argument("--rounds", type=int, default=5, help="long-run rounds (0: none)")
    ap.add_argument("--round-jobs", type=int, default=200)
    ap.add_argument("--map-rounds", type=int, default=2, help="in-process rounds that print map sizes (0: none)")
    ap.add_argument("--qps", type=float, default=500.0, help="the controller's --kube-api-qps and -burst")
    ap.add_argument("--scheduler", default="volcano", help="the jobs' schedulerName")
    ap.add_argument("--port", type=int, default=18081)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--logdir", help="keep the controller's logs here (default: a temporary directory)")
    ap.add_argument("--server-pids", help="comma-separated pids of kube-apiserver and etcd: their CPU is reported too")
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="first create the same number of bare pods from this script as fast as it can (the server's pace)",
    )
    ap.add_argument(
        "--keep-crds",
        action="store_true",
        help="use the CRDs the server has (e.g. Volcano's own) instead of applying lavaflow's",
    )
    args = ap.parse_args()
    kubeconfig = str(Path(args.kubeconfig).resolve())
    cfg = load_config(kubeconfig)
    cfg.qps, cfg.burst, cfg.max_connections = 0, 0, 64
    client = KubeClient(cfg)
    version = await client.request("GET", "/version")
    print(f"server {version.get('gitVersion')}, {os.cpu_count()} cores, load {os.getloadavg()}", flush=True)
    out: dict[str, Any] = {"server": version.get("gitVersion"), "qps": args.qps}
    try:
        if not args.keep_crds:
            await install_crds(client)
        with tempfile.TemporaryDirectory(prefix="lavaflow-burst-") as d:
            tmp = Path(args.logdir or d)
            if args.ceiling:
                out["ceiling"] = [await ceiling(client, args, REPLICAS * int(n)) for n in args.jobs.split(",") if n]
            out["burst"] = [await burst(client, args, int(n), kubeconfig, tmp) for n in args.jobs.split(",") if n]
            if args.rounds:
                out["rounds"] = await long_run(client, args, kubeconfig, tmp)
            if args.map_rounds:
                out["maps"] = await map_rounds(client, args, kubeconfig)
    finally:
        await client.close()
    print(f"\nload {os.getloadavg()}")
    for r in out.get("ceiling", []):
        print(
            f"ceiling: {r['pods']} bare pods from this script in {r['wall_s']} s = {r['pods_per_s']} pods/s, "
            f"client CPU {r['client_cpu_s']} s, server CPU {r['server_cpu_s']} s, load {r['load_1m_before_after']}"
        )
    print(
        "| jobs | pods | all PodGroups | first pod | all pods | pods/s (from the first Job) | pods/s (first to last pod) "
        "| wall | controller CPU | server CPU | load before / after | peak RSS | final RSS |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in out.get("burst", []):
        load = " / ".join(str(x) for x in r["load_1m_before_after"])
        print(
            f"| {r['jobs']} | {r['pods']} | {r['all_podgroups_s']} s | {r['first_pod_s']} s | {r['all_pods_s']} s "
            f"| {r['pods_per_s']} | {r['creation_pods_per_s']} | {r['wall_s']} s | {r['controller_cpu_s']} s "
            f"| {r['server_cpu_s']} s | {load} | {r['peak_rss_mib']} MiB | {r['final_rss_mib']} MiB |"
        )
    if out.get("rounds"):
        print(f"\nlong run, {args.round_jobs} jobs per round: RSS MiB per round (0 = idle):")
        print("  " + ", ".join(f"{r['round']}: {r['rss_mib']}" for r in out["rounds"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
