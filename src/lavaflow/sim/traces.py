"""Workload traces (Pollux, Philly, Gavel CSV) as elastic Volcano Jobs.

Each trace row becomes the Volcano Job a user would have submitted for it: one ``worker`` task
with one GPU per pod, ``replicas`` = the job's maximum workers and ``minAvailable`` its minimum,
``lavaflow.io/requested-workers`` what it asked for (what a rigid policy gives), its speed model
and work as ``lavaflow.io/*`` annotations, and ``sim.lavaflow.io/submit-at`` its arrival.  The
jobs then go through the same loader, admission, controllers and scheduler as any YAML.  A
trace brings no cluster: unless the other input files declare Nodes or NodeGroups, the
simulator uses the Pollux testbed, 16 nodes of 4 GPUs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..api.loader import Loaded, Problems, Source, build_object
from ..elastic import spec as es

DEFAULT_NODES = 16
DEFAULT_GPUS_PER_NODE = 4
_BAD = re.compile(r"[^a-z0-9-]+")


def is_trace(path: str | Path) -> bool:
    return Path(path).suffix.lower() == ".csv"


def dns_name(name: str) -> str:
    out = _BAD.sub("-", name.strip().lower()).strip("-")
    return (out or "job")[:63].rstrip("-")


def default_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": "gpu"},
        "spec": {
            "count": DEFAULT_NODES,
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(DEFAULT_GPUS_PER_NODE)},
        },
    }


def job_document(spec, namespace: str = "default") -> dict[str, Any]:
    """The Volcano Job for one trace job (an :class:`~lavaflow.elastic.job.ElasticJobSpec`)."""
    from ..elastic.speed import GavelJobSpeed, PolluxJobSpeed

    ann: dict[str, str] = {"sim.lavaflow.io/submit-at": f"{spec.submit_time!r}s"}
    sp = spec.speed
    if spec.extra.get("annotations"):  # the speed model as annotations (e.g. a measured speed-up)
        ann.update(spec.extra["annotations"])
    elif isinstance(sp, PolluxJobSpeed):
        ann[es.APPLICATION] = sp.app
        ann[es.PROFILE_GROUP] = sp.app  # the trace names each job's model: jobs of one model share
        ann[es.BATCH_SIZE] = str(sp.batch_size)
        if getattr(sp, "adaptive", False):
            ann[es.ADAPTIVE] = "true"
            if getattr(sp, "max_batch_size", None):
                ann[es.MAX_BATCH] = str(sp.max_batch_size)
        ann[es.WORK] = repr(float(spec.work))
    elif isinstance(sp, GavelJobSpeed):
        ann[es.GAVEL_MODEL] = sp.model
        ann[es.PROFILE_GROUP] = sp.model
        ann[es.WORK] = repr(float(spec.work))
    else:  # pragma: no cover - trace readers only make the two above
        raise ValueError(f"trace job {spec.name}: speed model {type(sp).__name__} cannot be expressed as annotations")
    ann[es.REQUESTED] = str(spec.requested)
    if spec.priority:
        ann[es.JOB_PRIORITY] = str(spec.priority)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "trainer",
                "image": "lavaflow/trace-job",
                "resources": {
                    "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"},
                    "limits": {"nvidia.com/gpu": "1"},
                },
            }
        ],
    }
    if spec.gpu_type:
        pod_spec["nodeSelector"] = {"lavaflow.io/accelerator": spec.gpu_type}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": dns_name(spec.name),
            "namespace": namespace,
            "annotations": ann,
            "labels": {"lavaflow.io/trace-job": dns_name(spec.name)},
        },
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": spec.min_workers,
            "tasks": [{"name": "worker", "replicas": spec.max_workers, "template": {"spec": pod_spec}}],
        },
    }


def cluster_gpus(loaded: list[Loaded]) -> int:
    total = 0.0
    for it in loaded:
        kind = type(it.obj).__name__
        if kind == "Node":
            total += sum(float(v) for k, v in it.obj.allocatable.items() if es.is_gpu(k))
        elif kind == "NodeGroup":
            total += it.obj.spec.count * sum(float(v) for k, v in it.obj.spec.capacity.items() if es.is_gpu(k))
    return int(total)


def load_traces(
    paths: list[str | Path], loaded: list[Loaded], problems: Problems, adaptive: bool = False
) -> list[Loaded]:
    """Trace files as loaded Volcano Jobs (plus the default cluster when ``loaded`` has no nodes)."""
    from ..elastic.trace_readers import WorkloadError, detect_format, read_workload

    out: list[Loaded] = []
    has_nodes = any(type(it.obj).__name__ in ("Node", "NodeGroup") for it in loaded)
    if not has_nodes:
        src = Source("<default cluster: 16 nodes x 4 GPUs>", 1)
        obj = build_object(src, default_cluster(), problems)
        if obj is not None:
            out.append(Loaded(obj, src))
    gpus = cluster_gpus(loaded + out) or None
    names: set[str] = set()
    for p in paths:
        try:
            if adaptive and detect_format(Path(p)) != "pollux":
                problems.add(
                    str(p),
                    "",
                    "",
                    "--adaptive-batch needs a Pollux trace (its applications' gradient statistics decide the batch); "
                    f"this is a {detect_format(Path(p))} trace",
                )
                continue
            specs = read_workload(Path(p), max_gpus=gpus, adaptive=adaptive)
        except WorkloadError as exc:
            problems.lines.append(str(exc))  # names file, line and column
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.add(str(p), "", "", f"cannot read file ({getattr(exc, 'strerror', None) or exc})")
            continue
        if not specs:
            problems.add(str(p), "", "", "no jobs in this trace")
        for i, spec in enumerate(specs, start=1):
            doc = job_document(spec)
            name = doc["metadata"]["name"]
            if name in names:
                doc["metadata"]["name"] = name = dns_name(f"{name}-{i}")
            names.add(name)
            line = (
                int(spec.source.rsplit(":", 1)[-1]) if spec.source and spec.source.rsplit(":", 1)[-1].isdigit() else i
            )
            src = Source(str(p), line, unit="line")
            obj = build_object(src, doc, problems)
            if obj is not None:
                out.append(Loaded(obj, src))
    return out
