"""Voda's job format (kubeflow.org/v1 MPIJob, Horovod elastic) as an elastic Volcano Job.

Voda reads a job's size from its launcher's environment: ``NUM_PROC`` (or ``NP``) workers
requested, ``MIN_NUM_PROC`` / ``MAX_NUM_PROC`` (``MIN_NP`` / ``MAX_NP``) the elastic range,
``EPOCHS`` and ``JOB_PRIORITY`` (0 = highest); ``spec.slotsPerWorker`` the slots each worker has in
Horovod's host discovery (``lavaflow.io/slots-per-worker``, default: its GPUs).  The same job as a Volcano Job has a ``launcher``
task (one pod) and a ``worker`` task with ``MAX_NUM_PROC`` pods; ``minAvailable`` is the launcher
plus ``MIN_NUM_PROC`` workers, so the elastic scheduler may run it on any count in the range.
The ``mpi``, ``ssh`` and ``svc`` job plugins give the pods the host list and keys that the MPI
operator would, and the ``mpi`` plugin keeps ``/etc/mpi/discover_hosts.sh`` (the script
``horovodrun --host-discovery-script`` runs) listing the workers that run now.  The MPIJob's metadata (name, namespace, labels, annotations) is kept; the size
knobs become ``lavaflow.io/requested-workers``, ``lavaflow.io/job-priority`` and
``lavaflow.io/epochs``.
"""

from __future__ import annotations

import copy
from typing import Any

from .volcano import JobAction, JobEvent

API_VERSIONS = ("kubeflow.org/v1", "kubeflow.org/v2beta1")
KIND = "MPIJob"


class MPIJobError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def is_mpijob(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == KIND and str(doc.get("apiVersion", "")) in API_VERSIONS


def _env(container: dict[str, Any]) -> dict[str, str]:
    out = {}
    for e in container.get("env") or []:
        if isinstance(e, dict) and e.get("name") and e.get("value") is not None:
            out[str(e["name"])] = str(e["value"])
    return out


def _int(path: str, raw: str, minimum: int) -> int:
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise MPIJobError(path, f"expected an integer, got {raw!r}") from None
    if v < minimum:
        raise MPIJobError(path, f"must be >= {minimum}, got {v}")
    return v


def to_volcano_job(doc: dict[str, Any]) -> dict[str, Any]:
    """The Volcano Job for an MPIJob document (raises MPIJobError naming the field)."""
    meta = copy.deepcopy(doc.get("metadata") or {})
    spec = doc.get("spec") or {}
    replicas = spec.get("mpiReplicaSpecs")
    if not isinstance(replicas, dict):
        raise MPIJobError("spec.mpiReplicaSpecs", "is required (Launcher and Worker)")
    launcher, worker = replicas.get("Launcher"), replicas.get("Worker")
    if not isinstance(launcher, dict) or not isinstance(worker, dict):
        raise MPIJobError("spec.mpiReplicaSpecs", "needs both Launcher and Worker")
    ltmpl = copy.deepcopy(launcher.get("template") or {})
    wtmpl = copy.deepcopy(worker.get("template") or {})
    containers = (ltmpl.get("spec") or {}).get("containers") or []
    if not containers or not isinstance(containers[0], dict):
        raise MPIJobError("spec.mpiReplicaSpecs.Launcher.template.spec.containers", "the launcher has no container")
    env = _env(containers[0])

    def get(*names: str) -> tuple[str, str] | None:
        for n in names:
            if env.get(n, "").strip():
                return n, env[n]
        return None

    where = "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].env"
    lo_kv, hi_kv = get("MIN_NUM_PROC", "MIN_NP"), get("MAX_NUM_PROC", "MAX_NP")
    np_kv = get("NUM_PROC", "NP")
    w_reps = worker.get("replicas")
    if lo_kv is None and hi_kv is None and np_kv is None and w_reps is None:
        raise MPIJobError(where, "set NUM_PROC, MIN_NUM_PROC and MAX_NUM_PROC (or NP, MIN_NP, MAX_NP) on the launcher")
    if w_reps is not None and not isinstance(w_reps, int):
        raise MPIJobError("spec.mpiReplicaSpecs.Worker.replicas", f"expected an integer, got {w_reps!r}")
    if lo_kv is None and hi_kv is None and np_kv is None:
        # No Voda knob: a plain MPIJob (e.g. the training operator's examples). Run it as the gang
        # the MPI operator makes -- the launcher and every worker, with the resources they ask for.
        return _plain_gang(doc, meta, spec, ltmpl, wtmpl, int(w_reps or 0))
    req = _int(f"{where}[{np_kv[0]}]", np_kv[1], 0) if np_kv else 0
    lo = _int(f"{where}[{lo_kv[0]}]", lo_kv[1], 1) if lo_kv else None
    hi = _int(f"{where}[{hi_kv[0]}]", hi_kv[1], 1) if hi_kv else None
    req = req or lo or w_reps or 1
    lo = lo or req
    hi = hi or max(req, lo)
    if hi < lo:
        raise MPIJobError(f"{where}[{hi_kv[0] if hi_kv else 'MAX_NUM_PROC'}]", f"{hi} is below the minimum {lo}")
    ann = dict(meta.get("annotations") or {})
    ann.setdefault("lavaflow.io/requested-workers", str(min(max(req, lo), hi)))
    prio = get("JOB_PRIORITY")
    if prio is not None:
        ann.setdefault("lavaflow.io/job-priority", str(_int(f"{where}[JOB_PRIORITY]", prio[1], 0)))
    ep = get("EPOCHS")
    if ep is not None:
        ann.setdefault("lavaflow.io/epochs", str(_int(f"{where}[EPOCHS]", ep[1], 1)))
    slots = spec.get("slotsPerWorker")
    if slots is not None:
        # Processes per worker in Horovod's host discovery (the mpi job plugin)
        ann.setdefault("lavaflow.io/slots-per-worker", str(_int("spec.slotsPerWorker", slots, 1)))
    ann["lavaflow.io/converted-from"] = f"{doc.get('apiVersion')}/{KIND}"
    meta["annotations"] = ann
    # Workers without an explicit GPU request get one (Voda: one GPU per worker).
    for c in wtmpl.setdefault("spec", {}).get("containers") or []:
        res = c.setdefault("resources", {}) if isinstance(c, dict) else None
        if res is not None and not any(
            "gpu" in str(k) for part in ("limits", "requests") for k in (res.get(part) or {})
        ):
            res.setdefault("limits", {})["nvidia.com/gpu"] = 1
    return _volcano_job(meta, spec, ltmpl, wtmpl, lo, hi)


def _plain_gang(
    doc: dict[str, Any],
    meta: dict[str, Any],
    spec: dict[str, Any],
    ltmpl: dict[str, Any],
    wtmpl: dict[str, Any],
    workers: int,
) -> dict[str, Any]:
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        "lavaflow.io/converted-from": f"{doc.get('apiVersion')}/{KIND}",
    }
    return _volcano_job(meta, spec, ltmpl, wtmpl, workers, workers)


def _volcano_job(
    meta: dict[str, Any], spec: dict[str, Any], ltmpl: dict[str, Any], wtmpl: dict[str, Any], lo: int, hi: int
) -> dict[str, Any]:
    run_policy = spec.get("runPolicy") or {}
    job_spec: dict[str, Any] = {
        "schedulerName": (wtmpl.get("spec") or {}).get("schedulerName") or "volcano",
        "minAvailable": 1 + lo,
        "plugins": {"mpi": ["--master=launcher", "--worker=worker"], "ssh": [], "svc": []},
        "tasks": [
            {
                "name": "launcher",
                "replicas": 1,
                "template": ltmpl,
                "policies": [{"event": JobEvent.TASK_COMPLETED.value, "action": JobAction.COMPLETE_JOB.value}],
            },
            {"name": "worker", "replicas": hi, "template": wtmpl},
        ],
    }
    queue = (meta.get("labels") or {}).get("volcano.sh/queue-name") or (run_policy.get("schedulingPolicy") or {}).get(
        "queue"
    )
    if queue:
        job_spec["queue"] = queue
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": job_spec}
