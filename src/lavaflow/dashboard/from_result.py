"""The dashboard's state from `lavaflow simulate --output json`: as the run ended, or at a time T.

At T a job is in the last phase of its history reached by T, a pod is pending, running on its
node or ended as its times say, a queue holds what the timeline's last point up to T says it held
and deserved, and a job that waits says why in the words of the last decision taken about it by
then (at the end: the reason `--explain` gives, ``stuck``). Nodes, the queues' capability and
guarantee, pods' requests and elastic jobs' reports come from the result's ``cluster`` key
(written from this version on); a result without it still shows jobs, pods and queues.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..api.core import PodPhase
from ..api.volcano import JobPhase
from .model import Elastic, Event, Job, Node, Pod, Queue, Resize, State

REQUIRED = ("scheduler", "endTime", "jobs", "podGroups", "pods", "queues", "stuck")


class ResultError(ValueError):
    """A file that is not a simulation's JSON result: ``problems`` name the file and the field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def read_result(path: Path, scheduler: str | None = None) -> dict[str, Any]:
    """The result in ``path`` (with ``--compare``'s ``results``: the one of ``scheduler``, by
    default the last)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultError([f"{path}: cannot read file ({exc.strerror or exc})"]) from None
    except UnicodeDecodeError as exc:
        raise ResultError([f"{path}: not UTF-8 text (byte {exc.start})"]) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultError([f"{path}: not JSON ({exc}); write it with `lavaflow simulate --output json`"]) from None
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        runs = [r for r in data["results"] if isinstance(r, dict)]
        names = [str(r.get("scheduler")) for r in runs]
        if scheduler is not None:
            if scheduler not in names:
                raise ResultError([f"{path}: results: no run of scheduler {scheduler!r} (runs: {', '.join(names)})"])
            data = runs[names.index(scheduler)]
        elif runs:
            data = runs[-1]
    if not isinstance(data, dict):
        raise ResultError([f"{path}: expected a JSON object (the output of `lavaflow simulate --output json`)"])
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ResultError(
            [f"{path}: {k}: missing; not the output of `lavaflow simulate --output json`" for k in missing]
        )
    for k in ("jobs", "podGroups", "pods", "queues", "stuck"):
        if not isinstance(data[k], list):
            raise ResultError([f"{path}: {k}: expected a list, got {type(data[k]).__name__}"])
    if not isinstance(data["endTime"], int | float):
        raise ResultError([f"{path}: endTime: expected a number, got {data['endTime']!r}"])
    return data


def _reached(t: float | None, at: float) -> bool:
    return t is not None and t <= at


def _last_point(timeline: list[dict[str, Any]], at: float) -> dict[str, Any] | None:
    last = None
    for p in timeline:
        if p.get("time", math.inf) > at:
            break
        last = p
    return last


def _gangs(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """PodGroup entries by key, and each Volcano Job's PodGroup ("<job>-<uid>") under the Job's key."""
    out: dict[str, dict[str, Any]] = {}
    jobs = {(j["namespace"], j["name"]) for j in result["jobs"] if j.get("kind") == "Job"}
    for g in result["podGroups"]:
        out[f"{g['namespace']}/{g['name']}"] = g
        base = g["name"]
        for _ in range(5):  # a uid has four dashes: "<job>-<8>-<4>-<4>-<4>-<12>"
            base = base.rpartition("-")[0]
        if base and (g["namespace"], base) in jobs:
            out.setdefault(f"{g['namespace']}/{base}#job", g)
    return out


def _kind_of(g: dict[str, Any] | None, entry: dict[str, Any]) -> str:
    if entry.get("kind") == "Job":
        return "Job"
    if g is not None and "coscheduling" in g:
        return "PodGroup (scheduling.x-k8s.io)"
    if g is not None and "workload" in g:
        return f"Workload ({g['workload'].get('apiVersion', 'scheduling.k8s.io')})"
    return "PodGroup"


def state_from_result(result: dict[str, Any], source: str, at: float | None = None) -> State:
    """The state of the run in ``result`` at simulated time ``at`` (default: its end)."""
    end = float(result["endTime"])
    t = end if at is None else min(float(at), end)
    final = t >= end
    st = State(source, simulated=True)
    st.scheduler = str(result.get("scheduler", "lavaflow"))
    st.end = end
    st.at = t
    cluster = result.get("cluster") or {}
    gangs = _gangs(result)
    stuck = {(s["namespace"], s["name"]): s["reason"] for s in result["stuck"]}
    decisions = result.get("decisions") or {}
    elastic_names = {j["name"] for j in (result.get("elastic") or {}).get("jobs", [])}
    for entry in result["jobs"]:
        if not _reached(entry.get("submitTime"), t):
            continue
        key = f"{entry['namespace']}/{entry['name']}"
        g = gangs.get(key + "#job") if entry.get("kind") == "Job" else gangs.get(key)
        pg_key = f"{g['namespace']}/{g['name']}" if g is not None else None
        history = [(h["time"], h["phase"]) for h in entry.get("phaseHistory", []) if _reached(h.get("time"), t)]
        phase = history[-1][1] if history else JobPhase.PENDING
        job = Job(
            namespace=entry["namespace"],
            name=entry["name"],
            kind=_kind_of(g, entry),
            queue=entry.get("queue") or "default",
            phase=phase,
            created=entry.get("submitTime"),
            podgroup=pg_key,
            history=history,
            owner=entry.get("owner"),
            min_member=(g or {}).get("minMember"),
            conditions=list((g or {}).get("conditions", [])) if final else [],
            decisions=[d for d in decisions.get(pg_key or "", []) if _reached(d.get("time"), t)],
        )
        if job.name in elastic_names:
            job.elastic = "elastic"
        if job.pending or phase == JobPhase.RUNNING:
            job.why = _why(job, stuck.get((job.namespace, job.name)), final)
        st.put_job(job)
    _add_pods(st, result, cluster.get("podRequests"), t)
    _add_queues(st, result, cluster.get("queues") or [], t)
    for n in cluster.get("nodes") or []:
        st.put_node(
            Node(
                name=n["name"],
                allocatable=dict(n.get("allocatable") or {}),
                gpu_type=n.get("gpuType"),
                unschedulable=bool(n.get("unschedulable")),
            )
        )
    if not cluster.get("nodes"):  # an older result: the nodes its pods ran on, capacity unknown
        for name in sorted({p.node for p in st.pods.values() if p.node}):
            st.put_node(Node(name=name))
    for e in result.get("events") or []:
        if _reached(e.get("time"), t):
            st.add_event(Event(e["time"], e["kind"], e["object"], e["type"], e["reason"], e["message"]))
    _add_elastic(st, result, cluster.get("reports") or {}, t)
    return st


def _why(job: Job, stuck: str | None, final: bool) -> str | None:
    """Why the job waits: at the end, the reason ``--explain`` prints (``stuck``); before, the
    message of the last decision about it by then that did not admit or bind it."""
    if final:
        return stuck
    for d in reversed(job.decisions):
        msg = str(d.get("message", ""))
        if not msg.startswith(("admitted", "bound ")):
            return msg
    return None if job.phase == JobPhase.RUNNING else "PodGroup waiting to be admitted (Pending)"


def _add_pods(st: State, result: dict[str, Any], requests: list[Any] | None, t: float) -> None:
    pods = result["pods"]
    if not isinstance(requests, list) or len(requests) != len(pods):
        requests = [{}] * len(pods)
    for rec, req in zip(pods, requests):
        if not _reached(rec.get("createTime"), t):
            continue
        started, finished = rec.get("startTime"), rec.get("finishTime")
        if _reached(finished, t):
            phase, node = rec.get("phase") or PodPhase.SUCCEEDED, rec.get("node")
        elif _reached(started, t):
            phase, node = PodPhase.RUNNING, rec.get("node")
        else:
            phase, node = PodPhase.PENDING, None
        job = None
        if rec.get("job"):
            job = st.job_of_group(f"{rec['namespace']}/{rec['job']}")
            if job not in st.jobs:  # a Volcano Job's pod names the Job itself
                job = f"{rec['namespace']}/{rec['job']}"
        st.put_pod(
            Pod(
                namespace=rec["namespace"],
                name=rec["name"],
                job=job,
                task=rec.get("task"),
                node=node,
                phase=phase,
                requests=dict(req or {}),
                created=rec.get("createTime"),
                started=started if _reached(started, t) else None,
                finished=finished if _reached(finished, t) else None,
                reason=rec.get("reason") if _reached(finished, t) else None,
            )
        )


def _add_queues(st: State, result: dict[str, Any], specs: list[dict[str, Any]], t: float) -> None:
    spec = {q["name"]: q for q in specs}
    point = _last_point(result.get("timeline") or [], t) or {}
    held = point.get("queues") or {}
    deserved = point.get("deserved") or {}
    for q in result["queues"]:
        name = q["name"]
        st.put_queue(
            Queue(
                name=name,
                parent=q.get("parent") or ("" if name == "root" else "root"),
                weight=float(q.get("weight") or 1),
                state=q.get("state") or "Open",
                capability=dict(spec.get(name, {}).get("capability") or {}),
                guarantee=dict(spec.get(name, {}).get("guarantee") or {}),
                deserved=dict(deserved[name]) if name in deserved else None,
                allocated=dict(held.get(name) or {}),
            )
        )


def _add_elastic(st: State, result: dict[str, Any], reports: dict[str, Any], t: float) -> None:
    from ..elastic.learned import METRICS, throughput_text

    by_name = {j.name: j for j in st.jobs.values()}
    for ej in (result.get("elastic") or {}).get("jobs", []):
        job = by_name.get(ej["name"])
        if job is None:
            continue
        notes = [e for e in st.events_of(job.podgroup) if e.reason in ("Started", "Resized", "Halted", "Migrated")]
        history = []
        for when, n, gpu_type in ej.get("workers", []):
            if when > t:
                break
            why = next((e.message for e in notes if e.time == when), "")
            if not why and n == 0 and job.phase in (JobPhase.COMPLETED, JobPhase.FAILED):
                why = f"job {job.phase.lower()}"
            history.append(Resize(when, int(n), gpu_type, why))
        el = Elastic(job=job.key, history=history)
        report = reports.get(job.podgroup or "") or {}
        running = [p.node for p in st.pods_of(job.key) if p.phase == PodPhase.RUNNING and p.gpus > 0]
        if report:
            el.throughput = throughput_text(report.get(METRICS), len(running), len(set(running)))
            if st.end is not None and t >= st.end:  # (the report the run ended with: its progress is the end's)
                try:
                    el.progress = float(report.get("lavaflow.io/progress", "nan"))
                except ValueError:
                    el.progress = None
                if el.progress is not None and math.isnan(el.progress):
                    el.progress = None
        job.elastic = job.elastic or "elastic"
        st.put_elastic(el)
