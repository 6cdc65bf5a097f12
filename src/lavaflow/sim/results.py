"""The simulation result: the JSON contract, summary figures and stall reasons."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from ..api.core import PodPhase
from ..api.quantity import quantity_to_float
from ..api.volcano import JOB_FINAL_PHASES, JobPhase, PodGroupPhase
from ..elastic.learned import METRICS as REPORT_METRICS
from ..elastic.spec import DEFAULT_GPU_TYPE_LABELS, PROGRESS as REPORT_PROGRESS
from ..scheduler.model import NOT_ADMITTED, TaskStatus
from ..scheduler.plugins.gang import job_fit_error

if TYPE_CHECKING:  # pragma: no cover
    from ..api.volcano import PodGroup
    from ..store.base import Store
    from .engine import Simulation


class ResultPhase(StrEnum):
    """The phases a result gives beyond its objects' own: a pod, or a job, the user deleted before it
    finished (``Deleted``); a PodGroup-kind job some of whose pods were lost with their node or
    evicted (``Lost``)."""

    DELETED = "Deleted"
    LOST = "Lost"


FINISHED_POD = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)
# Plain strs (.value), read for every job and pod record (see scheduler.model.NOT_ADMITTED) and
# written into the result, a document.
_JOB_PENDING, _JOB_RUNNING, _JOB_COMPLETED, _JOB_FAILED = (
    JobPhase.PENDING.value,
    JobPhase.RUNNING.value,
    JobPhase.COMPLETED.value,
    JobPhase.FAILED.value,
)
_DELETED, _LOST = ResultPhase.DELETED.value, ResultPhase.LOST.value
_POD_FAILED = PodPhase.FAILED.value
_PG_WAITING = (PodGroupPhase.PENDING.value, PodGroupPhase.INQUEUE.value)
_JOB_UNSUCCESSFUL = (JobPhase.FAILED.value, JobPhase.TERMINATED.value, JobPhase.ABORTED.value)


def _pct(values: list[float], q: float) -> float | None:
    """``float(np.percentile(values, q))`` (its default, linear interpolation), None without values.

    Worked out here, operation for operation as numpy's ``_quantile`` and ``_lerp`` do, so that
    the value is the same to the bit: np.percentile imports numpy.ma (through np.unique) on its
    first call, 25 M instructions, 0.4 % of a 200-node simulation's whole process."""
    if not values:
        return None
    ordered = sorted(values)
    if any(v != v for v in ordered):
        return math.nan  # (numpy: a NaN anywhere makes the percentile NaN)
    n = len(ordered)
    virtual = (n - 1) * (q / 100)
    if virtual >= n - 1:
        return float(ordered[-1])
    lo = math.floor(virtual)
    gamma = virtual - lo
    below, above = ordered[lo], ordered[lo + 1]
    diff = above - below
    return float(above - diff * (1 - gamma)) if gamma >= 0.5 else float(below + diff * gamma)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _reason(sim: Simulation, pg: PodGroup | None, job_phase: str) -> str:
    """Why a job has not finished, in words a user can act on."""
    info = sim.cache.jobs.get(pg.key) if pg is not None else None
    if (
        pg is not None
        and pg.status.phase in NOT_ADMITTED
        and sim.store.get("Queue", pg.spec.queue or "default") is None
    ):
        queues = ", ".join(repr(q.name) for q in sorted(sim.store.list("Queue"), key=lambda q: q.name))
        return f"Queue {pg.spec.queue!r} does not exist; existing queues are: {queues}."
    if pg is not None:
        for c in pg.status.conditions:
            if c.type == "Unschedulable" and c.status == "True" and c.message:
                if info is None or info.counts[TaskStatus.PENDING] or pg.status.phase in _PG_WAITING:
                    return c.message
    if info is not None:
        pending = info.counts[TaskStatus.PENDING]
        total = len(info.tasks)
        if pending and info.fit_errors:
            return f"{pending}/{total} pods unschedulable: {job_fit_error(info)}"
        if info.job_fit_errors:
            return info.job_fit_errors
        if pg is not None and pg.status.phase in NOT_ADMITTED:
            return "PodGroup waiting to be admitted (Pending)"
        running = info.counts[TaskStatus.RUNNING]
        if running and not pending:
            if (
                sim.until is not None
                and sim.now >= sim.until
                and (sim.stall_time is None or sim.stall_time >= sim.until)
            ):
                return f"still running at --until ({running} pods running)"
            return f"{running} pods running with no end (duration inf or waiting for spawned pods)"
    if job_phase == _JOB_PENDING:
        return "waiting for its PodGroup to be admitted"
    return f"job is {job_phase}"


def _blocked(sim: Simulation, pg: PodGroup | None) -> bool:
    """Whether an unfinished job waits for something (a deadlock once nothing can change), rather
    than just running: all its pods placed and running with no end, e.g. a service."""
    info = sim.cache.jobs.get(pg.key) if pg is not None else None
    if info is None or pg is None or pg.status.phase in NOT_ADMITTED:
        return True
    return bool(info.counts[TaskStatus.PENDING]) or not info.counts[TaskStatus.RUNNING]


def _t(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _lost(recs: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(phase, reason) of a finished PodGroup-kind job some of whose work did not complete.

    The last pod of each name counts (a replacement that completed makes up for its
    predecessor). A pod deleted before it finished — lost with its node, evicted, or
    deleted by the user (``delete-at`` on it or on its owner) — is lost work: the job is
    ``Lost`` (node lost, evicted) or ``Deleted`` (deleted by the user), never Completed.
    """
    last: dict[str, dict[str, Any]] = {}
    for r in recs:
        prev = last.get(r["name"])
        if prev is None or r["createTime"] >= prev["createTime"]:
            last[r["name"]] = r
    gone = sorted((r for r in last.values() if r["phase"] == _DELETED), key=lambda r: (r["finishTime"] or 0, r["name"]))
    if not gone:
        return None, None
    first = gone[0]
    more = f" (and {len(gone) - 1} more pod(s))" if len(gone) > 1 else ""
    why = first.get("reason")
    if why == "NodeLost":
        return _LOST, f"pod {first['name']} was lost with node {first['node']} at t={_t(first['finishTime'])}{more}"
    if why == "Evicted":
        return _LOST, f"pod {first['name']} was evicted at t={_t(first['finishTime'])}{more}"
    started = "after it started" if first["startTime"] is not None else "before it started"
    return _DELETED, f"pod {first['name']} was deleted at t={_t(first['finishTime'])} {started}{more}"


def _all_podgroups(sim: Simulation) -> list[PodGroup]:
    live = {pg.key: pg for pg in sim.store.list("PodGroup")}
    for key, pg in sim.deleted_podgroups.items():
        live.setdefault(key, pg)
    return list(live.values())


def _batch_job_of(store: Store, pg: PodGroup) -> Any | None:
    """The batch/v1 Job a PodGroup was made for (its controller owner), if it is one."""
    owner = next((r for r in pg.metadata.owner_references if r.controller), None)
    if owner is None or owner.kind != "Job" or not owner.api_version.startswith("batch/"):
        return None
    job = store.get("BatchJob", f"{pg.namespace}/{owner.name}")
    return job if job is not None and job.metadata.uid == owner.uid else None


def build_result(sim: Simulation) -> dict[str, Any]:
    store = sim.store
    jobs_out: list[dict[str, Any]] = []
    stuck: list[dict[str, str]] = []
    owned_pgs: set[str] = set()
    blocked = False  # some unfinished job waits for something
    jobs_all = {j.key: j for j in sim.deleted_jobs.values()}
    jobs_all.update({j.key: j for j in store.list("Job")})
    for job in sorted(jobs_all.values(), key=lambda j: (j.metadata.creation_timestamp or 0, j.key)):
        hist = sim.job_history.get(job.key, [])
        start = next((h["time"] for h in hist if h["phase"] == _JOB_RUNNING), None)
        # The last final phase, if the job is still in it (an Aborted job may be resumed).
        finish = hist[-1]["time"] if hist and hist[-1]["phase"] in JOB_FINAL_PHASES else None
        pg_key = f"{job.namespace}/{job.name}-{job.metadata.uid}"
        owned_pgs.add(pg_key)
        phase = job.status.state.phase or _JOB_PENDING
        deleted = job.key in sim.deleted_jobs and store.get("Job", job.key) is None
        if deleted and phase not in JOB_FINAL_PHASES:
            phase = _DELETED  # removed by the user before it finished
            finish = job.metadata.deletion_timestamp
        if phase == _DELETED:
            extra = {"reason": f"deleted at t={_t(finish)} before it finished"}
        else:
            extra = {}
        jobs_out.append(
            {
                "namespace": job.namespace,
                "name": job.name,
                "kind": "Job",
                "queue": job.spec.queue or "default",
                "phase": phase,
                "submitTime": job.metadata.creation_timestamp,
                "startTime": start,
                "finishTime": finish,
                "phaseHistory": hist,
                "retryCount": job.status.retry_count,
                "version": job.status.version,
                "generated": sim.job_generated.get(job.key, {"services": [], "configMaps": [], "secrets": []}),
                "deleteTime": job.metadata.deletion_timestamp if deleted else None,
                **extra,
            }
        )
        if phase not in JOB_FINAL_PHASES and phase != _DELETED:
            pg = store.get("PodGroup", pg_key)
            refused = sim.job_ctrl.forbidden.get(job.namespace, {}).get(job.key)
            reason = f"the API server refused some of its pods ({refused})" if refused else _reason(sim, pg, phase)
            stuck.append({"namespace": job.namespace, "name": job.name, "reason": reason})
            blocked |= _blocked(sim, pg)
    pods_by_group: dict[str, list[dict[str, Any]]] = {}
    for rec in sim.pod_records.values():
        # by the PodGroup a pod names (not its Job's name: a PodGroup may share a Job's name)
        pods_by_group.setdefault(f"{rec['namespace']}/{rec.get('group') or rec['job']}", []).append(rec)
    reported = set(owned_pgs)
    for pg in sorted(_all_podgroups(sim), key=lambda p: (p.metadata.creation_timestamp or 0, p.key)):
        reported.add(pg.key)
        if pg.key in owned_pgs or any(
            r.kind == "Job" and "volcano" in r.api_version for r in pg.metadata.owner_references
        ):
            continue
        recs = pods_by_group.get(pg.key, [])
        starts = [r["startTime"] for r in recs if r["startTime"] is not None]
        done = bool(recs) and all(r["phase"] in FINISHED_POD or r["finishTime"] is not None for r in recs)
        failed = any(r["phase"] == _POD_FAILED for r in recs)
        batch = _batch_job_of(store, pg)
        if batch is not None:
            # A batch/v1 Job ends by its controller's condition, not by its pods: a failed pod it
            # replaced does not fail it, and it is not done while it still has completions to run.
            cond = next((c for c in batch.status.conditions if c.status == "True"), None)
            done = cond is not None and all(r["finishTime"] is not None or r["phase"] in FINISHED_POD for r in recs)
            failed = cond is not None and cond.type == "Failed"
        lost_phase, lost_reason = _lost(recs) if done and not failed and batch is None else (None, None)
        if done:
            phase = _JOB_FAILED if failed else lost_phase or _JOB_COMPLETED
        elif starts:
            phase = _JOB_RUNNING
        else:
            phase = _JOB_PENDING
        finish = max((r["finishTime"] for r in recs if r["finishTime"] is not None), default=None) if done else None
        submit = pg.metadata.creation_timestamp
        hist = [{"phase": _JOB_PENDING, "time": submit}]
        if starts:
            hist.append({"phase": _JOB_RUNNING, "time": min(starts)})
        if done:
            hist.append({"phase": phase, "time": finish})
        jobs_out.append(
            {
                "namespace": pg.namespace,
                "name": pg.name,
                "kind": "PodGroup",
                "queue": pg.spec.queue or "default",
                "phase": phase,
                "submitTime": submit,
                "startTime": min(starts) if starts else None,
                "finishTime": finish,
                # The same keys as a Volcano Job's entry: phases derived from the pods; a
                # PodGroup is never retried as a whole (replaced pods are not retries).
                "phaseHistory": hist,
                "retryCount": 0,
            }
        )
        if lost_reason:
            jobs_out[-1]["reason"] = lost_reason
        if batch is not None and failed:
            cond = next(c for c in batch.status.conditions if c.status == "True")
            jobs_out[-1]["reason"] = f"{cond.reason}: {cond.message}"
        owner = next((r for r in pg.metadata.owner_references if r.controller), None)
        if owner is not None:  # the workload it was made for, e.g. "Deployment/web" (for --explain)
            jobs_out[-1]["owner"] = f"{'Job' if owner.kind == 'BatchJob' else owner.kind}/{owner.name}"
        if not done:
            reason = (
                _reason(sim, pg, phase)
                if recs
                else f"no pod belongs to it (minMember {pg.spec.min_member}): pods join it with the "
                f"scheduling.k8s.io/group-name annotation in namespace {pg.namespace}"
            )
            stuck.append({"namespace": pg.namespace, "name": pg.name, "reason": reason})
            blocked |= _blocked(sim, pg)
    for key, recs in sorted(pods_by_group.items()):
        # Pods naming a PodGroup that does not exist (e.g. one of another namespace: a group
        # reference never crosses namespaces) wait for it for ever: reported, not left out.
        waiting = [r for r in recs if r["finishTime"] is None and r.get("group")]
        if key in reported or not waiting:
            continue
        ns, name = key.split("/", 1)
        stuck.append(
            {
                "namespace": ns,
                "name": name,
                "reason": f"no PodGroup {name!r} in namespace {ns}: {len(waiting)} pod(s) name it "
                f"({', '.join(sorted(r['name'] for r in waiting)[:5])}) and wait for it",
            }
        )
        blocked = True
    podgroups_out: list[dict[str, Any]] = [
        {
            "namespace": pg.namespace,
            "name": pg.name,
            "queue": pg.spec.queue or "default",
            "phase": pg.status.phase,
            "minMember": pg.spec.min_member,
            "conditions": [
                {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message or ""}
                for c in pg.status.conditions
            ],
        }
        for pg in sorted(_all_podgroups(sim), key=lambda p: p.key)
    ]
    for entry in podgroups_out:  # what each gang API says of its group (its origin, its own status)
        key = f"{entry['namespace']}/{entry['name']}"
        for source in sim.gang_sources:
            source.describe(entry, key)
    pods_out = [
        {
            k: rec.get(k)
            for k in (
                "namespace",
                "name",
                "job",
                "task",
                "node",
                "phase",
                "createTime",
                "startTime",
                "finishTime",
                "exitCode",
                "reason",
                "env",
            )
        }
        for rec in sorted(sim.pod_records.values(), key=lambda r: (r["createTime"], r["namespace"], r["name"]))
    ]
    queues_out = [
        {
            "name": q.name,
            "state": q.status.state or "Open",
            "weight": q.spec.weight,
            "parent": q.spec.parent,
            "allocated": dict(q.status.allocated),
        }
        for q in sorted(store.list("Queue"), key=lambda q: q.name)
    ]
    out = {
        "scheduler": sim.scheduler_name,
        # A stall is a property of the scenario: nothing could change any more (detected at
        # stalledAt) while some job still waited — whether or not --until ran the clock on.
        "stalled": blocked and sim.stall_time is not None,
        "stalledAt": sim.stall_time if blocked else None,
        "endTime": sim.now,
        "jobs": jobs_out,
        "podGroups": podgroups_out,
        "pods": pods_out,
        "queues": queues_out,
        "stuck": stuck,
        "rejected": sim.rejected
        + [
            {
                "namespace": key.split("/", 1)[0],
                "name": key.split("/", 1)[1],
                "kind": "JobFlow",
                "time": when,
                "reason": why,
            }
            for key, (when, why) in sorted(sim.jobflow_ctrl.refused.items())
        ],
        "nodeEvents": sim.node_events,
        "decisions": {k: v for k, v in sorted(sim.decisions.items())},
        "summary": summarize(jobs_out, sim.timeline, sim.now, stuck),
        "timeline": sim.timeline,
        "cycles": sim.cycles,
        "warnings": sim.warnings,
    }
    if sim.events:
        out["events"] = sim.events  # Events the scheduler recorded (elastic starts, resizes, halts)
    return out


#: Node labels that name a node's GPU type (lavaflow's and Voda's, then NVIDIA's GPU feature discovery).
GPU_TYPE_LABELS = (*DEFAULT_GPU_TYPE_LABELS, "nvidia.com/gpu.product")


def cluster_of(sim: Simulation) -> dict[str, Any]:
    """What `lavaflow dashboard --from` needs beside the rest of the result: the nodes (allocatable,
    GPU type), the queues' capability and guarantee, each pod record's requests (in the order of
    ``pods``) and the last progress report of each elastic job's PodGroup."""
    from ..api.selectors import pod_requests

    store = sim.store
    nodes = [
        {
            "name": n.name,
            "allocatable": {k: float(quantity_to_float(v)) for k, v in sorted(n.allocatable.items()) if k != "pods"},
            "gpuType": next((n.metadata.labels[k] for k in GPU_TYPE_LABELS if n.metadata.labels.get(k)), None),
            "unschedulable": bool(n.spec.unschedulable),
        }
        for n in sorted(store.list("Node"), key=lambda n: n.name)
    ]
    queues = [
        {
            "name": q.name,
            "capability": {k: float(quantity_to_float(v)) for k, v in sorted(q.spec.capability.items())},
            "guarantee": {k: float(quantity_to_float(v)) for k, v in sorted((q.spec.guarantee.resource or {}).items())},
        }
        for q in sorted(store.list("Queue"), key=lambda q: q.name)
    ]
    # Pods of one task share their template: its requests are worked out once (a pod no longer in
    # the store, e.g. recreated under its name, takes those of its task's pods).
    by_task: dict[tuple[str, str | None, str | None], dict[str, float]] = {}
    live = {p.metadata.uid: p for p in store.list("Pod")}
    requests: list[dict[str, float]] = []
    for uid, rec in sorted(
        sim.pod_records.items(), key=lambda ur: (ur[1]["createTime"], ur[1]["namespace"], ur[1]["name"])
    ):
        task = (rec["namespace"], rec.get("job"), rec.get("task") or rec["name"])
        got = by_task.get(task)
        if got is None:
            pod = live.get(uid) or store.get("Pod", f"{rec['namespace']}/{rec['name']}")
            got = pod_requests(pod.spec) if pod is not None else {}
            if pod is not None:
                by_task[task] = got
        requests.append(got)
    reports = {}
    for pg in sorted(_all_podgroups(sim), key=lambda p: p.key):
        ann = pg.metadata.annotations
        if REPORT_METRICS in ann or REPORT_PROGRESS in ann:
            reports[pg.key] = {k: ann[k] for k in (REPORT_METRICS, REPORT_PROGRESS) if k in ann}
    return {"nodes": nodes, "queues": queues, "podRequests": requests, "reports": reports}


def summarize(
    jobs: list[dict[str, Any]], timeline: list[dict[str, Any]], end: float, stuck: list[dict[str, str]]
) -> dict[str, Any]:
    finished = [j for j in jobs if j["finishTime"] is not None and j["phase"] in JOB_FINAL_PHASES]
    jct = [j["finishTime"] - j["submitTime"] for j in finished]
    waits = [j["startTime"] - j["submitTime"] for j in jobs if j["startTime"] is not None]
    makespan = max((j["finishTime"] for j in finished), default=None)
    if makespan is not None and jobs:
        makespan -= min(j["submitTime"] for j in jobs)
    return {
        "jobs": len(jobs),
        "completed": sum(1 for j in jobs if j["phase"] == _JOB_COMPLETED),
        "failed": sum(1 for j in jobs if j["phase"] in _JOB_UNSUCCESSFUL),
        "stuck": len(stuck),
        "makespan": makespan,
        "jctMean": _mean(jct),
        "jctP50": _pct(jct, 50),
        "jctP95": _pct(jct, 95),
        "waitMean": _mean(waits),
        "waitP50": _pct(waits, 50),
        "waitP95": _pct(waits, 95),
        "cpuAllocationMean": _time_mean(timeline, end, "cpu"),
        "gpuAllocationMean": _time_mean(timeline, end, "nvidia.com/gpu"),
    }


def _time_mean(timeline: list[dict[str, Any]], end: float, resource: str) -> float | None:
    """Time-weighted mean of allocated/capacity over [first sample, end]."""
    if not timeline or end <= timeline[0]["time"]:
        return None
    cap = timeline[-1]["capacity"].get(resource, 0.0)
    if not cap:
        return None
    total = 0.0
    for a, b in zip(timeline, timeline[1:] + [{"time": end}]):
        dt = b["time"] - a["time"]
        c = a["capacity"].get(resource, 0.0)
        if dt > 0 and c > 0:
            total += dt * a["allocated"].get(resource, 0.0) / c
    mean: float = total / (end - timeline[0]["time"])
    return mean
