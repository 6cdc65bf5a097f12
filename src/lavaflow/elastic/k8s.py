"""Elastic jobs from Kubernetes YAML: Voda's MPIJob format and Volcano Jobs with minAvailable < replicas.

Voda (kubeflow.org/v1 MPIJob): the launcher's first container carries ``NUM_PROC`` (or ``NP``),
``MIN_NUM_PROC`` (``MIN_NP``), ``MAX_NUM_PROC`` (``MAX_NP``), ``EPOCHS`` and ``JOB_PRIORITY``; the
worker template selects a GPU type with ``nodeSelector: {vodascheduler/accelerator: TYPE}``
(``lavaflow.io/accelerator`` accepted too).

Volcano (batch.volcano.sh/v1alpha1 Job): the GPU pods of all tasks are the workers;
``minAvailable`` (less the job's non-GPU pods) is the minimum, the replica total the maximum.

Speed, from annotations (one of):
* ``lavaflow.io/adaptive-batch: "true"`` (+ optional ``lavaflow.io/max-batch-size``) with a Pollux
  application lets the scheduler choose the job's batch size (``PolluxJobSpeed(adaptive=True)``).
* ``lavaflow.io/application`` (a Pollux application) and ``lavaflow.io/batch-size`` — the measured
  model; the job trains for the application's epochs;
* ``lavaflow.io/speedup`` (``"1:1,2:1.8,4:3.1"``, measured speed-up per worker count, e.g. from
  Voda-style per-epoch metrics) and ``lavaflow.io/epoch-time`` (seconds per epoch on one worker);
  the job runs ``EPOCHS`` (MPIJob) or ``lavaflow.io/epochs`` epochs.  Unmeasured worker counts are
  interpolated (:class:`~lavaflow.elastic.speed.TabulatedJobSpeed`), never filled with placeholders.
Submission time: ``sim.lavaflow.io/submit-at`` (duration, default 0).
Nodes: ``Node`` objects (``status.capacity['nvidia.com/gpu']``, accelerator label) or lavaflow
``NodeGroup`` objects (``spec.count``, ``spec.capacity``, ``spec.labels``). As in the cluster
simulator, ``sim.lavaflow.io/fail-at`` takes a node (every node of a group) out of the cluster at
that time, its workers lost, and ``sim.lavaflow.io/recover-at`` brings it back (a node with only
``recover-at`` is there from the start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..sim.annotations import FAIL_AT, RECOVER_AT, parse_duration
from .job import ElasticJobSpec
from .placement import Node
from .sim import NodeEvent
from .speed import POLLUX_APPS, PolluxJobSpeed, pollux_app
from .workload import WorkloadError

ACCEL_LABELS = ("lavaflow.io/accelerator", "vodascheduler/accelerator")
GPU = "nvidia.com/gpu"


def _docs(path: Path) -> list[tuple[int, dict]]:
    text = path.read_text()
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise WorkloadError(str(path), mark.line + 1 if mark else None, None, f"invalid YAML: {exc}") from None
    # line of each document start (for messages)
    starts = [1]
    for i, ln in enumerate(text.splitlines(), 1):
        if ln.strip() == "---" and i > 1:
            starts.append(i + 1)
    out = []
    k = 0
    for d in docs:
        if d is None:
            k += 1
            continue
        out.append((starts[min(k, len(starts) - 1)], d))
        k += 1
    return out


def _env(container: dict) -> dict[str, str]:
    return {e.get("name"): str(e.get("value", "")) for e in container.get("env") or [] if isinstance(e, dict)}


def _int(path: str, line: int, field: str, raw: Any, minimum: int = 0) -> int:
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise WorkloadError(path, line, field, f"expected an integer, got {raw!r}") from None
    if v < minimum:
        raise WorkloadError(path, line, field, f"must be >= {minimum}, got {v}")
    return v


def _speed(path: str, line: int, ann: dict, epochs: int | None):
    app = ann.get("lavaflow.io/application")
    if app:
        if app not in POLLUX_APPS:
            raise WorkloadError(path, line, "lavaflow.io/application", f"unknown application {app!r} (known: {', '.join(POLLUX_APPS)})")
        model = pollux_app(app)
        bsz = _int(path, line, "lavaflow.io/batch-size", ann.get("lavaflow.io/batch-size", model.init_batch_size), 1)
        raw = str(ann.get("lavaflow.io/adaptive-batch", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise WorkloadError(path, line, "lavaflow.io/adaptive-batch", f"expected \"true\" or \"false\", got {raw!r}")
        mb = ann.get("lavaflow.io/max-batch-size")
        mbv = _int(path, line, "lavaflow.io/max-batch-size", mb, bsz) if mb is not None else None
        sp = PolluxJobSpeed(app, bsz, adaptive=raw == "true", max_batch_size=mbv)
        work = sp.total_work()
        if epochs:
            work *= epochs / model.max_epochs
        return sp, work, app, bsz
    raw = ann.get("lavaflow.io/speedup")
    if raw:
        pts: dict[int, float] = {}
        for part in str(raw).split(","):
            try:
                k, v = part.split(":")
                pts[int(k)] = float(v)
            except ValueError:
                raise WorkloadError(path, line, "lavaflow.io/speedup", f"expected 'workers:speedup,...', got {part!r}") from None
        et = ann.get("lavaflow.io/epoch-time")
        if et is None:
            raise WorkloadError(path, line, "lavaflow.io/epoch-time", "required with lavaflow.io/speedup")
        from ..sim.annotations import parse_duration

        try:
            epoch_time = parse_duration(str(et))
        except ValueError as exc:
            raise WorkloadError(path, line, "lavaflow.io/epoch-time", str(exc)) from None
        if not epochs:
            raise WorkloadError(path, line, "EPOCHS", "number of epochs required")
        base = pts.get(1)
        scale = 1.0 / epoch_time / (base if base else 1.0)
        from .fit import fit_speed

        sp = fit_speed({k: v * scale for k, v in pts.items()})
        return sp, float(epochs), "custom", None
    raise WorkloadError(
        path, line, "metadata.annotations",
        "no speed model: set lavaflow.io/application (+ lavaflow.io/batch-size) or lavaflow.io/speedup + lavaflow.io/epoch-time",
    )


def _submit(path: str, line: int, ann: dict) -> float:
    from ..sim.annotations import SUBMIT_AT, parse_duration

    raw = ann.get(SUBMIT_AT)
    if raw is None:
        return 0.0
    try:
        return parse_duration(str(raw))
    except ValueError as exc:
        raise WorkloadError(path, line, SUBMIT_AT, str(exc)) from None


def _accel(sel: dict | None) -> str | None:
    sel = sel or {}
    for k in ACCEL_LABELS:
        if sel.get(k):
            return str(sel[k]).lower()
    return None


def mpijob_spec(path: str, line: int, doc: dict) -> ElasticJobSpec:
    meta = doc.get("metadata") or {}
    name = meta.get("name") or f"mpijob-{line}"
    ann = meta.get("annotations") or {}
    specs = (doc.get("spec") or {}).get("mpiReplicaSpecs") or {}
    launcher = specs.get("Launcher") or {}
    containers = ((launcher.get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        raise WorkloadError(path, line, "spec.mpiReplicaSpecs.Launcher", "launcher has no container")
    env = _env(containers[0])

    def get(*names):
        for n in names:
            if env.get(n) not in (None, ""):
                return env[n]
        return None

    lo = get("MIN_NUM_PROC", "MIN_NP")
    hi = get("MAX_NUM_PROC", "MAX_NP")
    if lo is None or hi is None:
        raise WorkloadError(path, line, "MIN_NUM_PROC/MAX_NUM_PROC", "launcher env must set MIN_NUM_PROC and MAX_NUM_PROC (or MIN_NP/MAX_NP)")
    lo_i = _int(path, line, "MIN_NUM_PROC", lo, 1)
    hi_i = _int(path, line, "MAX_NUM_PROC", hi, 1)
    if hi_i < lo_i:
        raise WorkloadError(path, line, "MAX_NUM_PROC", f"{hi_i} is below MIN_NUM_PROC {lo_i}")
    np_raw = get("NUM_PROC", "NP")
    req = _int(path, line, "NUM_PROC", np_raw, 0) if np_raw is not None else 0
    req = req or lo_i
    epochs = get("EPOCHS")
    ep = _int(path, line, "EPOCHS", epochs, 1) if epochs is not None else None
    prio = _int(path, line, "JOB_PRIORITY", get("JOB_PRIORITY") or 0, 0)
    worker = specs.get("Worker") or {}
    gtype = _accel(((worker.get("template") or {}).get("spec") or {}).get("nodeSelector"))
    speed, work, app, bsz = _speed(path, line, ann, ep)
    return ElasticJobSpec(
        name=name, submit_time=_submit(path, line, ann), speed=speed, work=work, requested=req,
        min_workers=lo_i, max_workers=hi_i, priority=prio, gpu_type=gtype, application=app,
        batch_size=bsz, source=f"{path}:{line}",
    )


def volcano_job_spec(path: str, line: int, doc: dict) -> ElasticJobSpec | None:
    meta = doc.get("metadata") or {}
    name = meta.get("name") or f"job-{line}"
    ann = meta.get("annotations") or {}
    spec = doc.get("spec") or {}
    gpu_pods = other = 0
    gtype = None
    for task in spec.get("tasks") or []:
        reps = _int(path, line, "spec.tasks.replicas", task.get("replicas", 1), 0)
        pod = (task.get("template") or {}).get("spec") or {}
        gpus = 0
        for c in pod.get("containers") or []:
            res = c.get("resources") or {}
            g = (res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU) or 0
            gpus += _int(path, line, f"resources.{GPU}", g, 0)
        if gpus > 0:
            gpu_pods += reps
            gtype = gtype or _accel(pod.get("nodeSelector"))
        else:
            other += reps
    if gpu_pods == 0:
        return None  # not a GPU training job
    min_avail = _int(path, line, "spec.minAvailable", spec.get("minAvailable", gpu_pods + other), 0)
    lo = max(1, min_avail - other)
    hi = gpu_pods
    if lo > hi:
        raise WorkloadError(path, line, "spec.minAvailable", f"{min_avail} exceeds the job's {gpu_pods + other} pods")
    ep = ann.get("lavaflow.io/epochs")
    ep_i = _int(path, line, "lavaflow.io/epochs", ep, 1) if ep is not None else None
    speed, work, app, bsz = _speed(path, line, ann, ep_i)
    return ElasticJobSpec(
        name=name, submit_time=_submit(path, line, ann), speed=speed, work=work, requested=hi,
        min_workers=lo, max_workers=hi, gpu_type=gtype, application=app, batch_size=bsz,
        source=f"{path}:{line}",
    )


def _node_events(path: str, line: int, meta: dict[str, Any], nodes: list[Node]) -> list[NodeEvent]:
    ann = meta.get("annotations") or {}
    times: dict[str, float] = {}
    for key in (FAIL_AT, RECOVER_AT):
        if key in ann:
            try:
                times[key] = parse_duration(str(ann[key]))
            except ValueError as exc:
                raise WorkloadError(path, line, f"metadata.annotations[{key}]", str(exc)) from None
    fail, recover = times.get(FAIL_AT), times.get(RECOVER_AT)
    if fail is None:
        return []
    if recover is not None and recover <= fail:
        raise WorkloadError(path, line, f"metadata.annotations[{RECOVER_AT}]", f"must be later than {FAIL_AT}")
    out = [NodeEvent(fail, n, False) for n in nodes]
    if recover is not None:
        out += [NodeEvent(recover, n, True) for n in nodes]
    return out


def read_k8s(path: Path | str) -> tuple[list[ElasticJobSpec], list[Node]]:
    jobs, nodes, _ = read_k8s_all(path)
    return jobs, nodes


def read_k8s_cluster(path: Path | str) -> tuple[list[Node], list[NodeEvent]]:
    """The nodes of a YAML file and their fail-at / recover-at events."""
    _, nodes, events = read_k8s_all(path)
    return nodes, events


def read_k8s_all(path: Path | str) -> tuple[list[ElasticJobSpec], list[Node], list[NodeEvent]]:
    p = Path(path)
    jobs: list[ElasticJobSpec] = []
    nodes: list[Node] = []
    events: list[NodeEvent] = []
    for line, doc in _docs(p):
        if not isinstance(doc, dict):
            raise WorkloadError(str(p), line, None, "expected a mapping (a Kubernetes object)")
        kind = doc.get("kind")
        api = str(doc.get("apiVersion", ""))
        meta = doc.get("metadata") or {}
        if kind == "MPIJob" and api.startswith("kubeflow.org/"):
            jobs.append(mpijob_spec(str(p), line, doc))
        elif kind == "Job" and api.startswith("batch.volcano.sh/"):
            j = volcano_job_spec(str(p), line, doc)
            if j is not None:
                jobs.append(j)
        elif kind == "Node":
            cap = ((doc.get("status") or {}).get("capacity") or {}).get(GPU, 0)
            g = _int(str(p), line, f"status.capacity.{GPU}", cap, 0)
            if g:
                made = [Node(meta.get("name") or f"node-{line}", g, _accel(meta.get("labels")) or "default")]
                nodes += made
                events += _node_events(str(p), line, meta, made)
        elif kind == "NodeGroup":
            spec = doc.get("spec") or {}
            g = _int(str(p), line, f"spec.capacity.{GPU}", (spec.get("capacity") or {}).get(GPU, 0), 0)
            count = _int(str(p), line, "spec.count", spec.get("count", 1), 0)
            t = _accel(spec.get("labels")) or _accel(meta.get("labels")) or "default"
            if g:
                made = [Node(f"{meta.get('name', 'group')}-{i}", g, t) for i in range(count)]
                nodes += made
                events += _node_events(str(p), line, meta, made)
    return jobs, nodes, events


def read_k8s_jobs(path: Path | str, max_gpus: int | None = None) -> list[ElasticJobSpec]:
    return read_k8s(path)[0]
