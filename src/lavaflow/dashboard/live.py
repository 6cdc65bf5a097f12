"""The dashboard's state kept from a cluster: the Kubernetes backend's informers (list once, then
watch), each watch event turned into the records it changes. Nothing lists again to refresh a
page: the pages read the state, and their server-sent events follow its version.

Kinds read: Nodes, Pods, Queues, Volcano Jobs and PodGroups, core Events, and where the server
serves them scheduler-plugins' PodGroups and the Workload API's Workloads and PodGroups. A job's
phase history starts with what its status says when the dashboard first sees it (created
Pending, then its phase since its last transition) and goes on with each change it watches; an
elastic job's resizes are the ``Started`` / ``Resized`` / ``Halted`` Events the scheduler
records on its PodGroup, so those the API server still holds (one hour by default) and those
that come while the dashboard runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

from ..api.core import PodPhase
from ..api.kinds import kind_info
from ..api.quantity import QuantityError, quantity_to_float
from ..api.volcano import JobPhase, PodGroupPhase
from ..api.x_k8s_podgroup import CoschedulingPhase
from ..elastic.learned import METRICS, throughput_text
from ..elastic.spec import PROGRESS, WORKERS
from ..kube import codec
from ..kube.client import ApiError, KubeClient
from ..kube.lightpod import _INVALID, CONTAINER_KEEP, spec_requests
from ..kube.store import KubeStore
from ..store.base import DELETED
from .model import POD_TERMINATING, Elastic, Event, Job, Node, Pod, Queue, Resize, State

log = logging.getLogger("lavaflow.dashboard")

CORE_KINDS = ("Node", "Queue", "PodGroup", "Job", "Pod")
# Served only where their CRD is installed or their feature gate is on: watched when served.
OPTIONAL_KINDS = ("CoschedulingPodGroup", "Workload", "WorkloadV1alpha2", "SchedulingPodGroup")
GPU_TYPE_LABELS = ("lavaflow.io/accelerator", "vodascheduler/accelerator", "nvidia.com/gpu.product")
VOLCANO_JOB_LABEL = "volcano.sh/job-name"
GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
XPG_LABEL = "scheduling.x-k8s.io/pod-group"
ELASTIC_REASONS = ("Started", "Resized", "Halted", "Migrated")
_WORKERS_RE = re.compile(r"(?:→|->)\s*(\d+) workers|started with (\d+) worker")


def _t(value: Any) -> float | None:
    t = codec.parse_time(value)
    return t if isinstance(t, float) else None


def amounts(raw: Any) -> dict[str, float]:
    """A ResourceList as floats (a value that is not a quantity is left out)."""
    out: dict[str, float] = {}
    for k, v in (raw or {}).items() if isinstance(raw, dict) else ():
        try:
            out[str(k)] = float(quantity_to_float(v))
        except (QuantityError, ValueError, TypeError, ArithmeticError):
            continue
    return out


def _meta(raw: dict[str, Any]) -> dict[str, Any]:
    m = raw.get("metadata")
    return m if isinstance(m, dict) else {}


def _key(raw: dict[str, Any]) -> str:
    m = _meta(raw)
    return f"{m.get('namespace') or 'default'}/{m.get('name', '')}"


def volcano_owner(meta: dict[str, Any]) -> str | None:
    """The name of the Volcano Job that owns an object, if one does."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh"):
            return str(ref.get("name"))
    return None


def pod_record(raw: dict[str, Any]) -> Pod:
    meta, spec, status = _meta(raw), raw.get("spec") or {}, raw.get("status") or {}
    ns = meta.get("namespace") or "default"
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    job = labels.get(VOLCANO_JOB_LABEL)
    if job is None:
        job = next((ann[a] for a in GROUP_ANNOTATIONS if ann.get(a)), None) or labels.get(XPG_LABEL)
    if job is None:
        ref = spec.get("workloadRef") or {}
        group = spec.get("schedulingGroup") or {}
        job = ref.get("name") or group.get("podGroupName")
    requests, _ = spec_requests(spec, CONTAINER_KEEP)
    phase = status.get("phase") or PodPhase.PENDING
    if meta.get("deletionTimestamp") and phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
        phase = POD_TERMINATING
    return Pod(
        namespace=ns,
        name=meta.get("name", ""),
        job=f"{ns}/{job}" if job else None,
        task=ann.get("volcano.sh/task-spec"),
        node=spec.get("nodeName") or None,
        phase=phase,
        requests={} if requests is _INVALID else dict(requests),
        created=_t(meta.get("creationTimestamp")),
        started=_t(status.get("startTime")),
        reason=status.get("reason"),
    )


def node_record(raw: dict[str, Any]) -> Node:
    meta, spec, status = _meta(raw), raw.get("spec") or {}, raw.get("status") or {}
    labels = meta.get("labels") or {}
    alloc = amounts(status.get("allocatable") or status.get("capacity"))
    alloc.pop("pods", None)
    ready = next((c.get("status") == "True" for c in status.get("conditions") or () if c.get("type") == "Ready"), True)
    return Node(
        name=meta.get("name", ""),
        allocatable=alloc,
        gpu_type=next((str(labels[k]) for k in GPU_TYPE_LABELS if labels.get(k)), None),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
    )


def queue_record(raw: dict[str, Any]) -> Queue:
    meta, spec, status = _meta(raw), raw.get("spec") or {}, raw.get("status") or {}
    name = meta.get("name", "")
    return Queue(
        name=name,
        parent=spec.get("parent") or ("" if name == "root" else "root"),
        weight=float(spec.get("weight") or 1),
        state=status.get("state") or "Open",
        capability=amounts(spec.get("capability")),
        guarantee=amounts((spec.get("guarantee") or {}).get("resource")),
        allocated={k: v for k, v in amounts(status.get("allocated")).items() if k != "pods"},
    )


def why_waiting(pg: dict[str, Any] | None, queues: dict[str, Queue] | None, queue: str) -> str | None:
    """Why a gang waits, in the words of its PodGroup's conditions (as `--explain` prints them);
    ``queues``: every queue, or None while they are not all known yet."""
    if queues and queue not in queues:
        existing = ", ".join(repr(q) for q in sorted(queues))
        return f"Queue {queue!r} does not exist; existing queues are: {existing}."
    if pg is None:
        return "waiting for its PodGroup to be created"
    status = pg.get("status") or {}
    for c in status.get("conditions") or ():
        if c.get("type") == "Unschedulable" and c.get("status") == "True" and c.get("message"):
            return str(c["message"])
    if (status.get("phase") or PodGroupPhase.PENDING) == PodGroupPhase.PENDING:
        return "PodGroup waiting to be admitted (Pending)"
    return None


class WatchingStore(KubeStore):
    """The informer store, with core Events (which it holds no model of) handed to ``on_event``."""

    def __init__(self, client: KubeClient, on_event: Any) -> None:
        super().__init__(client, keep_raw=True)
        self.on_event = on_event

    def _apply(self, res: Any, event: str, raw: Any) -> Any:  # (the store's own signature)
        if res.kind == "Event":
            self.on_event(event, raw)
            return
        super()._apply(res, event, raw)


class LiveState:
    """A :class:`State` fed by a :class:`WatchingStore`."""

    def __init__(self, client: KubeClient, source: str, clock: Any = time.time) -> None:
        self.client = client
        self.state = State(source, simulated=False)
        self.state.clock = clock
        self.clock = clock
        self.store = WatchingStore(client, self._on_event)
        self.store.add_listener(self._on_change)
        self.vjobs: dict[str, dict[str, Any]] = {}  # Volcano Jobs (raw), by key
        self.pgs: dict[str, dict[str, Any]] = {}  # Volcano PodGroups (raw), by key
        self.pg_of_job: dict[str, str] = {}
        self.history: dict[str, list[tuple[float, str]]] = {}
        self.workloads: dict[str, dict[str, Any]] = {}  # Workloads (raw), whose phase follows their pods
        self.changed = asyncio.Event()  # set at every change; the server-sent events wait on it

    async def start(self, timeout: float = 60.0) -> None:
        kinds = list(CORE_KINDS)
        for kind in OPTIONAL_KINDS:
            try:
                await self.client.request("GET", kind_info(kind).path(), params={"limit": 1})
                kinds.append(kind)
            except ApiError as exc:
                log.info("%s: not served (%s): not watched", kind, exc.status)
        for kind in [*kinds, "Event"]:
            self.store.inform(kind)
        await self.store.start()
        if not await self.store.wait_synced(timeout):
            log.warning("not every kind was listed within %gs; the pages fill in as the lists end", timeout)

    async def stop(self) -> None:
        await self.store.stop()

    def objects(self) -> list[Any]:
        """Every object the informers hold (what a forecast starts from)."""
        return [o for objs in self.store.objects.values() for o in objs.values()]

    # ------------------------------------------------------------------ store events
    def _on_change(self, kind: str, event: str, obj: Any) -> None:
        key = obj.key if hasattr(obj, "key") else None
        if key is None:
            return
        raw = None if event == DELETED else self.store.raw.get(kind, {}).get(key)
        if event != DELETED and raw is None:
            return
        handler = getattr(self, "_on_" + kind, None)
        if handler is not None:
            handler(key, raw)
            self.changed.set()

    def _on_Node(self, key: str, raw: dict[str, Any] | None) -> None:
        st = self.state
        st.drop_node(key) if raw is None else st.put_node(node_record(raw))

    def _on_Queue(self, key: str, raw: dict[str, Any] | None) -> None:
        st = self.state
        known = key in st.queues
        st.drop_queue(key) if raw is None else st.put_queue(queue_record(raw))
        if known != (raw is not None):  # a queue came or went: the jobs naming it wait for another reason
            for job_key, job in list(st.jobs.items()):
                if job.queue == key and job.pending:
                    self._again(job_key)

    def _again(self, key: str) -> None:
        """Make a job's record again from what is kept of it."""
        if key in self.vjobs:
            self._job(key)
        elif key in self.pgs:
            self._on_PodGroup(key, self.pgs[key])
        elif key in self.workloads:
            self._on_Workload(key, self.workloads[key])
        else:
            res = self.state.jobs[key].kind
            kind = "CoschedulingPodGroup" if "x-k8s" in res else "SchedulingPodGroup" if "v1alpha2" in res else None
            raw = self.store.raw.get(kind, {}).get(key) if kind else None
            if kind is not None and raw is not None:
                getattr(self, "_on_" + kind)(key, raw)

    def _queues(self) -> dict[str, Queue] | None:
        """Every queue, once the Queue informer has listed them all (else None)."""
        inf = self.store.informers.get("Queue")
        return self.state.queues if inf is None or inf.synced.is_set() else None

    def _on_Pod(self, key: str, raw: dict[str, Any] | None) -> None:
        st = self.state
        if raw is None:
            pod = st.pods.get(key)
            st.drop_pod(key)
        else:
            pod = pod_record(raw)
            st.put_pod(pod)
        if pod is not None and pod.job in st.elastic:
            self._elastic(pod.job)
        if pod is not None and pod.job in self.workloads:  # (its phase is its pods')
            self._on_Workload(pod.job, self.workloads[pod.job])

    def _on_Job(self, key: str, raw: dict[str, Any] | None) -> None:
        if raw is None:
            self.vjobs.pop(key, None)
            self.history.pop(key, None)
            self.state.drop_job(key)
            return
        self.vjobs[key] = raw
        self._job(key)

    def _on_PodGroup(self, key: str, raw: dict[str, Any] | None) -> None:
        old = self.pgs.pop(key, None)
        owner = volcano_owner(_meta(raw if raw is not None else old or {}))
        job_key = f"{key.split('/', 1)[0]}/{owner}" if owner else key
        if raw is None:
            self.pg_of_job.pop(job_key, None)
            if owner is None:
                self._drop_gang(key)
            elif job_key in self.vjobs:
                self._job(job_key)
            return
        self.pgs[key] = raw
        self.pg_of_job[job_key] = key
        if owner is None:
            self._gang(key, raw, "PodGroup", (raw.get("status") or {}).get("phase") or PodGroupPhase.PENDING)
        else:
            self._job(job_key)

    def _drop_gang(self, key: str) -> None:
        self.history.pop(key, None)
        self.state.drop_job(key)

    def _on_CoschedulingPodGroup(self, key: str, raw: dict[str, Any] | None) -> None:
        if raw is None:
            self._drop_gang(key)
            return
        phase = (raw.get("status") or {}).get("phase") or CoschedulingPhase.PENDING
        self._gang(key, raw, "PodGroup (scheduling.x-k8s.io)", phase)

    def _on_SchedulingPodGroup(self, key: str, raw: dict[str, Any] | None) -> None:
        if raw is None:
            self._drop_gang(key)
            return
        conds = (raw.get("status") or {}).get("conditions") or []
        scheduled = any(c.get("type") == "PodGroupScheduled" and c.get("status") == "True" for c in conds)
        self._gang(
            key, raw, "PodGroup (scheduling.k8s.io/v1alpha2)", JobPhase.RUNNING if scheduled else JobPhase.PENDING
        )

    def _on_Workload(self, key: str, raw: dict[str, Any] | None) -> None:
        if raw is None:
            self.workloads.pop(key, None)
            self._drop_gang(key)
            return
        self.workloads[key] = raw
        self._gang(key, raw, "Workload (scheduling.k8s.io/v1alpha1)", self._pod_phase(key))

    _on_WorkloadV1alpha2 = _on_Workload

    def _pod_phase(self, key: str) -> str:
        """A gang's phase from its pods (for the APIs that keep none), in a Job's words: Running
        once one runs."""
        pods = self.state.pods_of(key)
        if pods and all(p.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED) for p in pods):
            return JobPhase.FAILED if any(p.phase == PodPhase.FAILED for p in pods) else JobPhase.COMPLETED
        return JobPhase.RUNNING if any(p.phase == PodPhase.RUNNING for p in pods) else JobPhase.PENDING

    # ------------------------------------------------------------------ records
    def _phase_history(
        self, key: str, created: float | None, phase: str, since: float | None
    ) -> list[tuple[float, str]]:
        hist = self.history.get(key)
        if hist is None:
            hist = self.history[key] = [(created or self.clock(), JobPhase.PENDING)]
            if phase not in ("", JobPhase.PENDING):
                hist.append((since or self.clock(), phase))
        elif hist[-1][1] != phase:
            hist.append((since if since is not None and since >= hist[-1][0] else self.clock(), phase))
        return list(hist)

    def _job(self, key: str) -> None:
        raw = self.vjobs.get(key)
        if raw is None:
            return
        meta, spec, status = _meta(raw), raw.get("spec") or {}, raw.get("status") or {}
        state = status.get("state") or {}
        phase = state.get("phase") or JobPhase.PENDING
        created = _t(meta.get("creationTimestamp"))
        pg_key = self.pg_of_job.get(key)
        pg = self.pgs.get(pg_key) if pg_key else None
        queue = spec.get("queue") or "default"
        job = Job(
            namespace=meta.get("namespace") or "default",
            name=meta.get("name", ""),
            kind="Job",
            queue=queue,
            phase=phase,
            created=created,
            podgroup=pg_key,
            history=self._phase_history(key, created, phase, _t(state.get("lastTransitionTime"))),
            min_member=spec.get("minAvailable"),
            conditions=list(((pg or {}).get("status") or {}).get("conditions") or []),
        )
        if job.pending:
            job.why = why_waiting(pg, self._queues(), queue)
        if pg is not None and WORKERS in (_meta(pg).get("annotations") or {}):
            job.elastic = str(_meta(pg)["annotations"][WORKERS])
        elif key in self.state.jobs:  # (its PodGroup gone with the job's end: the range it had)
            job.elastic = self.state.jobs[key].elastic
        self.state.put_job(job)
        if job.elastic:
            self._elastic(key)

    def _gang(self, key: str, raw: dict[str, Any], kind: str, phase: str) -> None:
        meta, spec, status = _meta(raw), raw.get("spec") or {}, raw.get("status") or {}
        created = _t(meta.get("creationTimestamp"))
        owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        queue = (
            spec.get("queue") or (meta.get("annotations") or {}).get("scheduling.volcano.sh/queue-name") or "default"
        )
        job = Job(
            namespace=meta.get("namespace") or "default",
            name=meta.get("name", ""),
            kind=kind,
            queue=queue,
            phase=phase,
            created=created,
            podgroup=key,
            history=self._phase_history(key, created, phase, None),
            owner=f"{owner.get('kind')}/{owner.get('name')}" if owner else None,
            min_member=spec.get("minMember"),
            conditions=list(status.get("conditions") or []),
        )
        if job.pending:
            job.why = why_waiting(raw if kind == "PodGroup" else None, self._queues(), queue)
            if kind != "PodGroup":
                warn = [e for e in self.state.events_of(key) if e.type == "Warning"]
                job.why = warn[-1].message if warn else "waiting to be scheduled as a gang"
        self.state.put_job(job)

    def _elastic(self, job_key: str) -> None:
        """An elastic job's record: its resizes (kept from the Events), running workers, report."""
        st = self.state
        job = st.jobs.get(job_key)
        if job is None:
            return
        el = st.elastic.get(job_key) or Elastic(job=job_key)
        pg = self.pgs.get(job.podgroup or "") or {}
        running = [p.node for p in st.pods_of(job_key) if p.phase == PodPhase.RUNNING and p.gpus]
        ann = _meta(pg).get("annotations") or {}
        raw = ann.get(METRICS) or (_meta(self.vjobs.get(job_key) or {}).get("annotations") or {}).get(METRICS)
        el.throughput = throughput_text(raw, len(running), len(set(running)))
        try:
            el.progress = float((_meta(pg).get("annotations") or {}).get(PROGRESS, "nan"))
        except ValueError:
            el.progress = None
        if el.progress is not None and el.progress != el.progress:
            el.progress = None
        st.put_elastic(el)

    def _on_event(self, event: str, raw: dict[str, Any]) -> None:
        if event == DELETED:
            return  # (an Event expires; what it said stays on the page)
        obj = raw.get("involvedObject") or {}
        ns = obj.get("namespace") or ""
        target = f"{ns}/{obj.get('name', '')}" if ns else str(obj.get("name", ""))
        when = _t(raw.get("lastTimestamp")) or _t(raw.get("eventTime")) or _t(raw.get("firstTimestamp"))
        ev = Event(
            time=when,
            kind=str(obj.get("kind", "")),
            object=target,
            type=str(raw.get("type", "")),
            reason=str(raw.get("reason", "")),
            message=str(raw.get("message", "")),
            count=int(raw.get("count") or 1),
        )
        st = self.state
        seen = st.events.get(target)
        if seen and any(e.time == ev.time and e.reason == ev.reason and e.message == ev.message for e in seen):
            return  # the same Event again (a relist)
        st.add_event(ev)
        if ev.kind == "PodGroup" and ev.reason in ELASTIC_REASONS:
            self._resize(st.job_of_group(target), ev)
        self.changed.set()

    def _resize(self, job_key: str, ev: Event) -> None:
        st = self.state
        el = st.elastic.get(job_key) or Elastic(job=job_key)
        m = _WORKERS_RE.search(ev.message)
        if m is not None:
            workers = int(m.group(1) or m.group(2))
        elif ev.reason == "Halted":
            workers = 0
        else:
            workers = el.history[-1].workers if el.history else 0
        gpu = re.search(r" on (\S+?):", ev.message)  # (a resize within one type does not name it)
        gpu_type = gpu.group(1) if gpu else el.history[-1].gpu_type if el.history and workers else None
        el.history.append(Resize(ev.time or self.clock(), workers, gpu_type, ev.message))
        el.history.sort(key=lambda r: r.time)
        st.put_elastic(el)
