"""Elastic jobs that really train through a resize (issue 32): the scheduler (ElasticFIFO on learned
speed models) starts a job on its minimum, grows it as its training agent's reports come in, shrinks
it for a second job and grows it back when that one ends; the training processes follow each resize
from their checkpoint, and what they report reaches the scheduler.

The pods run as local processes (``ProcessKubelet``: two nodes of two fake GPUs each):

* **CI, on the API double** (no torch): a Horovod-style job (``mpi`` plugin) whose launcher plays
  ``horovodrun --host-discovery-script /etc/mpi/discover_hosts.sh``
  (``examples/agent/discovery_launcher.py``): it runs the script from the mounted ConfigMap, records
  every host list, probes the listed workers (each listens on its pod address) and runs the
  framework-free toy trainer (``examples/agent/train_toy.py``) at the listed size, resetting it to
  its checkpoint when the list changes;
* **on a real kube-apiserver** (``LAVAFLOW_TEST_KUBECONFIG``): the same job, and an elastic PyTorch
  DDP job started with torchrun (``pytorch`` plugin: c10d rendezvous, ``--nnodes=2:4``; gloo, a small
  MLP) whose workers run ``examples/agent/train_ddp.py``; the interpreter with torch is
  ``LAVAFLOW_TEST_TORCH_PYTHON`` (default: this one), skipped without it. There the scheduler and the
  controllers run as the ``lavaflow scheduler`` and ``lavaflow controller`` processes.

Why ElasticFIFO: its sizes follow from the job order, the minimums and whether one more worker
speeds a job up (docs/elastic.md), so the run is the same on a loaded machine: with learned models a
new job starts on its minimum (2: nothing measured, twice the most measured is the bound); measured
on 2 it may have 4 and, faster there, gets them; a second job (2 GPUs, rigid) is admitted on what
the first job's minimum leaves, which shrinks it to 2; when that job ends the first grows back to 4
(measured faster on 4 than on 2). The trainers make more workers faster by construction (the toy
sleeps less per step; the DDP script sleeps each worker's share of a simulated accelerator time,
``--compute-seconds``): a 2-core machine's CPU does not get faster with more processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")
if not Path("/proc/self/stat").exists():
    pytest.skip("runs processes the Linux way (process groups, /proc)", allow_module_level=True)

from test_kube_elastic import CONF, running_workers  # noqa: E402

from kube_harness import Cluster, wait_for  # noqa: E402
from lavaflow.agent import report as rp  # noqa: E402
from lavaflow.cli.tables import format_train_jobs  # noqa: E402
from lavaflow.elastic import learned  # noqa: E402
from lavaflow.kube.ops import create_manifest, list_objects  # noqa: E402
from lavaflow.scheduler.framework.conf import load_scheduler_conf  # noqa: E402
from lavaflow.testing.process_kubelet import ProcessKubelet  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "examples" / "agent" / "train_toy.py"
LAUNCHER = ROOT / "examples" / "agent" / "discovery_launcher.py"
DDP = ROOT / "examples" / "agent" / "train_ddp.py"
KUBECONFIG = os.environ.get("LAVAFLOW_TEST_KUBECONFIG")
TORCH_PYTHON = os.environ.get("LAVAFLOW_TEST_TORCH_PYTHON") or sys.executable
GPU_TYPE = "v100"
ACCELERATOR = "lavaflow.io/accelerator"
PROBE_PORT = 2222
VERBOSE = ["-v"] if os.environ.get("LAVAFLOW_TEST_VERBOSE") else []


def conf(resize_cost: str = "5s") -> str:
    """ElasticFIFO on learned speed models (no oracle), rescheduling at once."""
    out = (
        CONF.replace("elastic.policy: Lavaflow", "elastic.policy: ElasticFIFO")
        .replace(", elastic.oracle: true", "")
        .replace("elastic.resizeCost: 30s", f"elastic.resizeCost: {resize_cost}")
    )
    assert "ElasticFIFO" in out and "oracle" not in out and resize_cost in out
    return out


def process_kubelet(prefix: str, python: str | None = None, root: str | Path | None = None):
    """A function of a client making the process kubelet: two nodes of two fake GPUs."""

    def make(client) -> ProcessKubelet:
        return ProcessKubelet(
            client,
            2,
            node_prefix=prefix,
            cpu="8",
            memory="16Gi",
            gpus=2,
            labels={ACCELERATOR: GPU_TYPE},
            heartbeat=2.0,
            backoff=(1.0, 5.0),
            python=python,
            root=root,
        )

    return make


def _downward(name: str, path: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


AGENT_ENV = [
    {"name": "LAVAFLOW_GPU_TYPE", "value": GPU_TYPE},
    {"name": "LAVAFLOW_REPORT_PERIOD", "value": "1"},
    {"name": "PYTHONUNBUFFERED", "value": "1"},
    _downward("LAVAFLOW_JOB_NAME", "metadata.labels['volcano.sh/job-name']"),
    _downward("POD_NAME", "metadata.name"),
    _downward("POD_NAMESPACE", "metadata.namespace"),
    _downward("NODE_NAME", "spec.nodeName"),
]

# A worker of the Horovod-style job: what horovodrun reaches over ssh, here a port on its address.
# It keeps the default SIGTERM action (dies of the signal, as sshd or sleep would).
WORKER_SCRIPT = (
    "import os, socket\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind((os.environ['POD_IP'], {PROBE_PORT}))\n"
    "s.listen(16)\n"
    "while True:\n"
    "    s.accept()[0].close()\n"
)


def _speed(epochs: int, speedup: str = "1:1,2:2,4:4") -> dict[str, str]:
    # a declared prior (replaced by what the job measures); the work is in epochs, so the agent
    # reports epochs per second (its --epochs is the Job's)
    return {"lavaflow.io/speedup": speedup, "lavaflow.io/epoch-time": "60s", "lavaflow.io/epochs": str(epochs)}


def task(name: str, replicas: int, container: dict, gpus: int = 0, **pod_spec) -> dict:
    """A Volcano Job task of one container (named as the task unless it says; ``gpus`` fake GPUs
    each, 100m CPU)."""
    resources: dict = {"requests": {"cpu": "100m"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec = {
        "restartPolicy": "OnFailure",
        **pod_spec,
        "containers": [{"name": name, **container, "resources": resources}],
    }
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def vcjob(name: str, ns: str, scheduler: str, annotations: dict[str, str], min_available: int, **spec) -> dict:
    """A Volcano Job of ``scheduler`` (``spec``: its plugins and tasks)."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"schedulerName": scheduler, "minAvailable": min_available, **spec},
    }


def launcher_job(name: str, ns: str, scheduler: str, epochs: int = 1000, step: float = 0.2) -> dict:
    """A Horovod-style elastic job (a launcher and 2..4 GPU workers, the ``mpi`` plugin) whose
    launcher plays horovodrun with the toy trainer."""
    command = [
        "python", str(LAUNCHER), "--discovery", "/etc/mpi/discover_hosts.sh", "--interval", "0.25",
        "--settle", "1", "--min-np", "2", "--probe-port", str(PROBE_PORT), "--",
        "python", str(TOY), "--epochs", str(epochs), "--step-seconds", str(step), "--log-every", "8", "--lr", "0.002",
    ]  # fmt: skip
    launcher = {
        "image": "horovod/horovod:0.28.1",
        "command": command,
        "env": [{"name": "LAVAFLOW_CHECKPOINT_DIR", "value": "/checkpoint"}, *AGENT_ENV],
        "volumeMounts": [{"name": "checkpoint", "mountPath": "/checkpoint"}],
    }
    worker = {
        "image": "horovod/horovod:0.28.1",
        "command": ["python", "-c", WORKER_SCRIPT],
        "env": [_downward("POD_IP", "status.podIP")],
    }
    tasks = [
        task(
            "launcher", 1, launcher, terminationGracePeriodSeconds=20, volumes=[{"name": "checkpoint", "emptyDir": {}}]
        ),
        task("worker", 4, worker, gpus=1, terminationGracePeriodSeconds=5),
    ]
    return vcjob(
        name, ns, scheduler, _speed(epochs), 3, plugins={"mpi": ["--master=launcher", "--worker=worker"]}, tasks=tasks
    )


def rigid_job(name: str, ns: str, scheduler: str, until: Path) -> dict:
    """The second job: two GPU workers (an elastic job of one size) that end once the file
    ``until`` exists: the test ends it once it has seen the first job train on what was left."""
    wait = f"import os, time\nwhile not os.path.exists({str(until)!r}): time.sleep(0.2)"
    worker = {"image": "busybox", "command": ["python", "-c", wait]}
    return vcjob(
        name, ns, scheduler, _speed(1, "1:1,2:2"), 2, tasks=[task("worker", 2, worker, gpus=1, restartPolicy="Never")]
    )


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith('{"event"'):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


def worker_index(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


class Watch:
    """What a scenario reads of the cluster: pods, the job's PodGroup and report, its ConfigMap."""

    def __init__(self, api, ns: str) -> None:
        self.api, self.ns = api, ns

    async def workers(self, job: str) -> list[str]:
        pods = await list_objects(self.api, "Pod", self.ns)
        names = [n for n in running_workers(pods, job) if n.startswith(f"{job}-worker-")]
        return sorted(names, key=worker_index)

    async def podgroup(self, job: str) -> dict | None:
        for g in await list_objects(self.api, "PodGroup", self.ns):
            refs = g["metadata"].get("ownerReferences") or []
            if any(r.get("kind") == "Job" and r.get("name") == job for r in refs):
                return g
        return None

    async def report(self, job: str) -> learned.Report | None:
        g = await self.podgroup(job)
        raw = ((g or {}).get("metadata", {}).get("annotations") or {}).get(rp.METRICS)
        return learned.parse_report(raw) if raw else None

    def first_report(self, job: str):
        """A predicate: the job's first report on its PodGroup, checking meanwhile that the job runs
        no more than its minimum (2) until then: with nothing measured, twice the most measured
        (0) allows no more (the scheduler grows it only once the report has reached it)."""

        async def check():
            workers = await self.workers(job)
            r = await self.report(job)
            if r is None or not r.rates:
                assert len(workers) <= 2, f"more than the minimum before any report: {workers}"
                return None
            return r

        return check

    async def job_phase(self, job: str) -> str:
        for j in await list_objects(self.api, "Job", self.ns):
            if j["metadata"]["name"] == job:
                return ((j.get("status") or {}).get("state") or {}).get("phase", "")
        return ""

    async def script(self, job: str) -> str | None:
        for m in await list_objects(self.api, "ConfigMap", self.ns):
            if m["metadata"]["name"] == f"{job}-config":
                return (m.get("data") or {}).get("discover_hosts.sh")
        return None

    async def train_get_jobs(self) -> dict[str, dict[str, str]]:
        jobs = await list_objects(self.api, "Job", self.ns)
        pods = await list_objects(self.api, "Pod", self.ns)
        pgs = await list_objects(self.api, "PodGroup", self.ns)
        events = await list_objects(self.api, "Event", self.ns)
        return parse_table(format_train_jobs(jobs, pods, podgroups=pgs, events=events))


def parse_table(text: str) -> dict[str, dict[str, str]]:
    """`train get jobs` output as {job: {column: cell}} (cells split on the header's columns)."""
    lines = text.splitlines()
    header = lines[0]
    cols = [c for c in header.split(" ") if c]
    starts = [header.index(c) for c in cols]
    out = {}
    for line in lines[1:]:
        cells = {}
        for i, c in enumerate(cols):
            end = starts[i + 1] if i + 1 < len(cols) else None
            cells[c] = line[starts[i] : end].strip()
        out[cells["NAME"]] = cells
    return out


def script_for(job: str, workers: list[str]) -> str:
    return "#!/bin/sh\n" + "".join(f"echo {w}.{job}:1\n" for w in workers)


def phases_of(sizes: list[int]) -> list[int]:
    """Consecutive equal sizes collapsed."""
    out: list[int] = []
    for s in sizes:
        if not out or out[-1] != s:
            out.append(s)
    return out


def trained(events: list[dict], n: int, count: int = 1) -> bool:
    """The trainer started on ``n`` replicas ``count`` times and, after the last of those starts,
    logged a step on ``n`` past it."""
    seen = 0
    for i, e in enumerate(events):
        if e["event"] == "start" and e["replicas"] == n:
            seen += 1
            if seen == count:
                return any(
                    x["event"] == "log" and x["replicas"] == n and x["step"] > e["step"] for x in events[i + 1 :]
                )
    return False


def timeline(events: list[dict]) -> str:
    """A readable summary of a launcher's or trainer's events (shown with pytest -s): each event
    but the trainer's logs, at its time from the first; a start after a resize also shows how long
    training stood still (since the last logged step, at most one log interval more)."""
    t0 = next((e["time"] for e in events if "time" in e), 0.0)
    out, last_log = [], None
    for e in events:
        if e["event"] == "log":
            last_log = e
            continue
        at = f"{e['time'] - t0:7.1f}s " if "time" in e else " " * 9
        rest = {k: v for k, v in e.items() if k not in ("event", "time")}
        if e["event"] == "start" and last_log is not None and "time" in e and "time" in last_log:
            rest["idle"] = round(e["time"] - last_log["time"], 1)
            rest["last_logged_step"] = last_log["step"]
        out.append(f"{at}{e['event']:7} {json.dumps(rest)}")
    return "\n".join(out)


def check_continuity(events: list[dict], sizes: list[int]) -> list[dict]:
    """The trainer's starts went through ``sizes``; none restarted training (steps and epochs go
    on from where the previous run stopped); the loss kept falling. Returns the starts."""
    starts = [e for e in events if e["event"] == "start"]
    assert phases_of([s["replicas"] for s in starts]) == sizes, starts
    assert starts[0]["step"] == 0 and not starts[0]["resumed"]
    last_step, last_epoch = 0, 0
    for e in events:
        if e["event"] == "start" and e is not starts[0]:
            assert e["resumed"], e
            # resumed at the step the previous run stopped at (its checkpoint), not before
            assert e["step"] >= last_step and e["epoch"] >= last_epoch, (e, last_step, last_epoch)
        last_step, last_epoch = max(last_step, e["step"]), max(last_epoch, e["epoch"])
    losses = [s["loss"] for s in starts]
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    logs = [e for e in events if e["event"] == "log"]
    assert logs and logs[-1]["loss"] < starts[-1]["loss"], (logs[-1:], starts[-1])
    return starts


async def launcher_scenario(
    api, kubelet: ProcessKubelet, ns: str, scheduler: str, gate: Path, admit=lambda d: d, slow: float = 1.0
):
    """The Horovod-style job through 2 → 4 → 2 → 4 workers (see the module docstring)."""
    w = Watch(api, ns)
    job, other = "hvd", "other"
    await create_manifest(api, admit(launcher_job(job, ns, scheduler)))

    def launcher_events() -> list[dict]:
        try:
            return json_lines(kubelet.logs(ns, f"{job}-launcher-0"))
        except KeyError:
            return []

    def trained_at(n: int, count: int = 1):
        async def check():
            return trained(launcher_events(), n, count)

        return check

    r = await wait_for(w.first_report(job), 60 * slow, "the agent's first report on the PodGroup")
    assert {row[2] for row in r.rates} == {2} and r.rates[0][0] == GPU_TYPE
    await wait_for(trained_at(2), 60 * slow, "the toy training at 2 (the job on its minimum)")

    async def at(n: int, what: str, count: int = 1) -> None:
        async def check():
            ws = await w.workers(job)
            return len(ws) == n and await w.script(job) == script_for(job, ws) and await trained_at(n, count)()

        await wait_for(check, 90 * slow, what)

    await at(4, "grown to 4 as measured on 2: 4 running, 4 listed, training at 4")
    await create_manifest(api, admit(rigid_job(other, ns, scheduler, until=gate)))
    await at(2, "shrunk to 2 for the second job: 2 running, 2 listed, training at 2", count=2)
    gate.touch()  # the second job ends

    async def other_done():
        return await w.job_phase(other) == "Completed"

    await wait_for(other_done, 90 * slow, "the second job Completed")
    await at(4, "back on 4 once the second job ended: 4 running, 4 listed, training at 4", count=2)

    events = launcher_events()
    check_continuity([e for e in events if e["event"] in ("start", "log", "done")], [2, 4, 2, 4])
    # Horovod's part: every host list it read, and the sizes it ran at
    lists = [e["hosts"] for e in events if e["event"] == "hosts"]
    every = [f"{job}-worker-{i}.{job}" for i in range(4)]
    assert all(x == every[: len(x)] for x in lists), lists  # the running workers, lowest index first
    # (an empty list may show before the workers run, one of 3 while they come or go one at a time)
    assert phases_of([len(x) for x in lists if len(x) in (2, 4)]) == [2, 4, 2, 4], lists
    assert all(all(e["reachable"]) for e in events if e["event"] == "hosts" and len(e["hosts"]) == 4)
    launches = [e["np"] for e in events if e["event"] == "launch"]
    assert phases_of(launches) == [2, 4, 2, 4], launches

    # the reports reached the scheduler: both sizes measured, faster on 4, and the decisions
    async def both_sizes():
        r = await w.report(job)
        return r is not None and {row[2] for row in r.rates} == {2, 4} and r

    r = await wait_for(both_sizes, 30 * slow, "a report with both sizes on the PodGroup")
    rates = {row[2]: row[3] for row in r.rates}
    assert rates[4] > rates[2], rates

    async def table():
        t = await w.train_get_jobs()
        row = t.get(job, {})
        resizes = int(row["RESIZES"]) if row.get("RESIZES", "").isdigit() else 0
        return row.get("WORKERS") == "4 (2-4)" and resizes >= 3 and row.get("THROUGHPUT", "-") != "-" and t

    t = await wait_for(table, 30 * slow, "train get jobs: 4 (2-4) workers, 3 resizes, a throughput")
    print(timeline(events), "\n", t[job])
    return t, events


def test_a_horovod_style_job_trains_through_shrink_and_grow_on_the_api_double(tmp_path):
    """CI: the launcher scenario against the API double, scheduler and controllers in process."""

    async def scenario():
        async with Cluster(period=0.2, kubelet=process_kubelet("pk", root=tmp_path / "kubelet")) as c:
            c.start_controllers()
            c.start_scheduler(conf=load_scheduler_conf(conf()))
            await c.until_ready()
            try:
                await launcher_scenario(c.api, c.kubelet, "default", "volcano", tmp_path / "other-ends")
            finally:
                with contextlib.suppress(Exception):
                    await c.api.request("DELETE", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/hvd")

    asyncio.run(asyncio.wait_for(scenario(), 150))


# ---------------------------------------------------------------------------------------- real server
real_server = pytest.mark.skipif(
    not KUBECONFIG,
    reason="no real API server configured: set LAVAFLOW_TEST_KUBECONFIG to a kubeconfig of a disposable cluster",
)


def _torch_importable(python: str) -> bool:
    try:
        out = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _component(what: str, kubeconfig: str, name: str, log: Path, *extra: str) -> subprocess.Popen:
    """``lavaflow scheduler`` or ``lavaflow controller`` as its own process."""
    cmd = [
        sys.executable, "-m", "lavaflow.cli", what, "--kubeconfig", kubeconfig, "--scheduler-name", name,
        "--no-leader-elect", "--listen-address", "127.0.0.1", *extra, *VERBOSE,
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _kill_marked(marker: str) -> None:
    """SIGKILL the processes whose environment holds ``marker`` (this test's own: a training process
    that torchrun started in a session of its own outlives a torchrun killed by SIGKILL)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if marker.encode() in (d / "environ").read_bytes():
                os.kill(int(d.name), signal.SIGKILL)
        except OSError:
            pass


class RealCluster:
    """On the server of LAVAFLOW_TEST_KUBECONFIG: lavaflow's CRDs, a namespace, the process kubelet
    (in this process) and the ``lavaflow scheduler`` and ``lavaflow controller`` processes; all
    removed afterwards."""

    def __init__(self, tmp: Path, python: str | None = None, resize_cost: str = "30s") -> None:
        self.tmp, self.python, self.resize_cost = tmp, python, resize_cost
        self.suffix = uuid.uuid4().hex[:6]
        self.ns = f"lavaflow-train-{self.suffix}"
        self.scheduler = f"lf-{self.suffix}"
        self.marker = f"LAVAFLOW_TEST_RUN={self.suffix}"
        self.procs: list[subprocess.Popen] = []

    async def __aenter__(self) -> RealCluster:
        from test_kube_real import _install_crds

        from lavaflow.kube.client import KubeClient, load_config

        cfg = load_config(KUBECONFIG)
        cfg.qps, cfg.burst = 0, 0
        self.api = KubeClient(cfg)
        await _install_crds(self.api)
        await create_manifest(self.api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})
        os.environ["LAVAFLOW_TEST_RUN"] = self.suffix  # in every pod's environment (the kubelet's)
        make = process_kubelet(f"pk-{self.suffix}", python=self.python, root=self.tmp / "kubelet")
        self.kubelet = make(KubeClient(cfg))
        await self.kubelet.start()
        conf_path = self.tmp / "scheduler.conf"
        conf_path.write_text(conf(self.resize_cost))
        self.metrics_port = _free_port()
        assert KUBECONFIG is not None
        self.procs.append(
            _component(
                "scheduler",
                KUBECONFIG,
                self.scheduler,
                self.tmp / "scheduler.log",
                "--scheduler-conf",
                str(conf_path),
                "--listen-port",
                str(self.metrics_port),
                "--schedule-period",
                "500ms",
            )  # fmt: skip
        )
        self.procs.append(
            _component(
                "controller",
                KUBECONFIG,
                self.scheduler,
                self.tmp / "controller.log",
                "--listen-port",
                str(_free_port()),
            )
        )
        return self

    def metrics(self) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            return r.read().decode()

    async def dump(self) -> None:
        """What the cluster looked like (shown when a scenario failed)."""
        with contextlib.suppress(Exception):
            for j in await list_objects(self.api, "Job", self.ns):
                print("Job", j["metadata"]["name"], json.dumps(j.get("status")))
            for g in await list_objects(self.api, "PodGroup", self.ns):
                print("PodGroup", g["metadata"]["name"], json.dumps(g.get("status")))
            for p in await list_objects(self.api, "Pod", self.ns):
                st = p.get("status") or {}
                print("Pod", p["metadata"]["name"], p["spec"].get("nodeName"), st.get("phase"), st.get("reason"))
            for e in await list_objects(self.api, "Event", self.ns):
                print("Event", e["involvedObject"]["name"], e.get("reason"), e.get("message"))
        for log in ("scheduler", "controller"):
            with contextlib.suppress(OSError):
                print(f"--- {log}.log (end)\n" + (self.tmp / f"{log}.log").read_text()[-3000:])

    async def __aexit__(self, *exc) -> None:
        from lavaflow.api.kinds import kind_info
        from lavaflow.kube.client import ApiError

        if exc[0] is not None:
            await self.dump()
        with contextlib.suppress(ApiError):
            await self.api.request("DELETE", kind_info("Job").path(self.ns))
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        await self.kubelet.stop(delete_nodes=True)
        await self.kubelet.client.close()
        _kill_marked(self.marker)
        os.environ.pop("LAVAFLOW_TEST_RUN", None)
        for kind in ("Job", "PodGroup", "Pod"):
            with contextlib.suppress(ApiError):
                await self.api.request(
                    "DELETE",
                    kind_info(kind).path(self.ns),
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                )
        with contextlib.suppress(ApiError):
            await self.api.request("DELETE", f"/api/v1/namespaces/{self.ns}")
        await self.api.close()


@real_server
def test_a_horovod_style_job_trains_through_shrink_and_grow_on_a_real_api_server(tmp_path):
    """The CI scenario on a real kube-apiserver, lavaflow's scheduler and controllers as processes."""
    from test_kube_real import _admitted

    async def scenario():
        async with RealCluster(tmp_path, resize_cost="5s") as c:
            t0 = time.monotonic()
            await launcher_scenario(c.api, c.kubelet, c.ns, c.scheduler, tmp_path / "other-ends", _admitted, slow=3.0)
            print(f"launcher scenario: {time.monotonic() - t0:.0f} s")
            assert 'lavaflow_elastic_resizes_total{kind="resized"} 3.0' in c.metrics()

    asyncio.run(asyncio.wait_for(scenario(), 900))


def ddp_job(name: str, ns: str, scheduler: str, checkpoints: Path, port: int, epochs: int = 1000) -> dict:
    """An elastic PyTorch DDP job as a user writes it (examples/agent/elastic-ddp-job.yaml): 2..4
    workers under torchrun, the rendezvous from the ``pytorch`` plugin (``PET_*``), a checkpoint
    directory every worker shares (here a hostPath), the agent reporting to the Job."""
    command = [
        "torchrun",
        # the plugin's is_host, and a shorter wait for late joiners than torchrun's 30 s
        "--rdzv-conf=$(PET_RDZV_CONF),last_call_timeout=10",
        "--monitor-interval=0.5",
        str(DDP), "--epochs", str(epochs), "--samples", "2048", "--batch-size", "64", "--log-every", "8",
        "--compute-seconds", "1.0", "--lr", "0.01",
    ]  # fmt: skip
    train = {
        "name": "train",
        "image": "registry.example.com/ml/ddp-agent:latest",
        "command": command,
        "env": [
            {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"},
            {"name": "LAVAFLOW_CHECKPOINT_DIR", "value": "/checkpoint"},
            {"name": "OMP_NUM_THREADS", "value": "1"},
            *AGENT_ENV,
        ],
        "volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoint"}],
    }
    volume = {"name": "checkpoints", "hostPath": {"path": str(checkpoints), "type": "DirectoryOrCreate"}}
    worker = task("worker", 4, train, gpus=1, terminationGracePeriodSeconds=90, volumes=[volume])
    plugins = {"pytorch": [f"--port={port}"], "svc": []}
    return vcjob(name, ns, scheduler, _speed(epochs), 2, plugins=plugins, tasks=[worker])


def all_logs(kubelet: ProcessKubelet, ns: str, prefix: str) -> list[dict]:
    """The JSON lines of every run of every pod named ``prefix``* (replaced pods and restarted
    containers included), by time: rank 0 may be in any worker's log."""
    out = []
    for r in list(kubelet.runs.values()):
        if r.ns == ns and r.name.startswith(prefix):
            for log in sorted((r.dir / "logs").rglob("*.log")):
                with contextlib.suppress(OSError):
                    out += json_lines(log.read_text(errors="replace"))
    return sorted(out, key=lambda e: e.get("time", 0.0))


@real_server
def test_an_elastic_torchrun_ddp_job_trains_through_shrink_and_grow_on_a_real_api_server(tmp_path):
    """The proof of issue 32 with PyTorch: DDP (gloo) under torchrun, resized 2 → 4 → 2 → 4 by the
    scheduler; training goes on from its checkpoint; its reports reach the scheduler."""
    if not _torch_importable(TORCH_PYTHON):
        pytest.skip(f"no torch in {TORCH_PYTHON}: set LAVAFLOW_TEST_TORCH_PYTHON to an interpreter that has it")
    from test_kube_real import _admitted

    marks: dict[str, float] = {}

    async def scenario():
        async with RealCluster(tmp_path, python=TORCH_PYTHON) as c:
            t0 = time.monotonic()
            w = Watch(c.api, c.ns)
            job, other = "ddp", "other"
            doc = ddp_job(job, c.ns, c.scheduler, tmp_path / "checkpoints", _free_port())
            await create_manifest(c.api, _admitted(doc))

            def events() -> list[dict]:
                return [
                    e for e in all_logs(c.kubelet, c.ns, f"{job}-worker-") if e["event"] in ("start", "log", "done")
                ]

            def trained_at(n: int, count: int = 1):
                async def check():
                    return trained(events(), n, count)

                return check

            async def at(n: int, what: str, count: int = 1, timeout: float = 600) -> None:
                async def check():
                    return len(await w.workers(job)) == n and await trained_at(n, count)()

                await wait_for(check, timeout, what)
                marks[what] = time.monotonic() - t0
                print(f"{marks[what]:6.0f} s  {what}", flush=True)

            r = await wait_for(w.first_report(job), 600, "the agent's first report on the PodGroup")
            assert {row[2] for row in r.rates} == {2} and r.rates[0][0] == GPU_TYPE
            marks["first report (measured on 2)"] = time.monotonic() - t0
            await wait_for(trained_at(2), 60, "DDP training on 2 workers (the minimum: nothing measured)")
            await at(4, "grown to 4 once measured on 2; training on 4")
            gate = tmp_path / "other-ends"
            await create_manifest(c.api, _admitted(rigid_job(other, c.ns, c.scheduler, until=gate)))
            await at(2, "shrunk to 2 for the second job; training on 2", count=2)
            gate.touch()  # the second job ends

            async def other_done():
                return await w.job_phase(other) == "Completed"

            await wait_for(other_done, 300, "the second job Completed")
            await at(4, "back on 4 after the second job; training on 4", count=2)

            evs = events()
            print(timeline(evs))
            starts = check_continuity([e for e in evs if e["replicas"] != 3], [2, 4, 2, 4])
            assert sum(e["replicas"] == 3 for e in evs if e["event"] == "start") <= 2  # a late joiner at most

            async def both_sizes():
                r = await w.report(job)
                return r is not None and {row[2] for row in r.rates} >= {2, 4} and r

            r = await wait_for(both_sizes, 120, "a report with both sizes on the PodGroup")
            rates = {row[2]: row[3] for row in r.rates}
            assert rates[4] > rates[2], rates
            # the scheduler's view: its resizes, and `lavaflow train get jobs` as a user runs it
            assert KUBECONFIG is not None
            out = subprocess.run(
                [sys.executable, "-m", "lavaflow.cli", "train", "get", "jobs", "-n", c.ns, "--kubeconfig", KUBECONFIG],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            print(out.stdout)
            row = parse_table(out.stdout)[job]
            assert row["WORKERS"] == "4 (2-4)" and int(row["RESIZES"]) >= 3 and row["THROUGHPUT"] != "-", row
            metrics = c.metrics()
            resized = next(
                float(ln.split()[-1])
                for ln in metrics.splitlines()
                if ln.startswith('lavaflow_elastic_resizes_total{kind="resized"}')
            )
            assert resized >= 3, metrics
            print(f"rates (epochs/s) by workers: {rates}; starts at steps {[s['step'] for s in starts]}")

    asyncio.run(asyncio.wait_for(scenario(), 2400))
    print(json.dumps(marks, indent=1))
