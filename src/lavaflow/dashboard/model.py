"""What the dashboard shows: plain records kept in one :class:`State`, whichever source fills it.

A source (a simulation's JSON, or the informers of a cluster) puts, replaces and removes records;
the state keeps the indexes the pages read (pods by job and by node, each node's requested
resources, each job's) up to date as it goes, so that a page costs what it shows and not a walk
over every pod. ``version`` moves with every change and ``changed`` says which kinds moved since
a version, for the server-sent events.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..api.core import PodPhase
from ..api.volcano import JOB_FINAL_PHASES, JobPhase, PodGroupPhase

# A simulation's result has two phases of its own: a job or pod "Deleted" by the user, a job
# "Lost" (its node lost, or evicted) (sim/results.py).
#: Phases of a job that is done (it waits for nothing, and its pods hold nothing).
FINAL_JOB_PHASES = frozenset((*JOB_FINAL_PHASES, "Deleted", "Lost"))
FINAL_POD_PHASES = frozenset((PodPhase.SUCCEEDED, PodPhase.FAILED, "Deleted"))
#: Phases of a gang that waits: to be admitted (a Job's or PodGroup's Pending, "" before its
#: status is written) or to be placed (a PodGroup's Inqueue).
WAITING_PHASES = ("", JobPhase.PENDING, PodGroupPhase.INQUEUE)
#: A pod being deleted, as kubectl shows it (not a PodPhase: the pod keeps its phase meanwhile).
POD_TERMINATING = "Terminating"
GPU_SUFFIX = "/gpu"
EVENTS_KEPT = 50  # per object: the newest ones


@dataclass
class Queue:
    name: str
    parent: str = ""
    weight: float = 1.0
    state: str = "Open"
    capability: dict[str, float] = field(default_factory=dict)
    guarantee: dict[str, float] = field(default_factory=dict)
    deserved: dict[str, float] | None = None  # None: not known from the source (worked out on the page)
    allocated: dict[str, float] = field(default_factory=dict)


@dataclass
class Job:
    """A gang: a Volcano Job, a PodGroup of another owner, or a gang of the two other APIs."""

    namespace: str
    name: str
    kind: str  # "Job" (Volcano), "PodGroup", "PodGroup (scheduling.x-k8s.io)", "Workload", ...
    queue: str = "default"
    phase: str = JobPhase.PENDING  # the phase of the object it shows (a Job's, a PodGroup's, ...)
    created: float | None = None
    why: str | None = None  # why it waits, in the PodGroup condition's / --explain's words
    podgroup: str | None = None  # "ns/name" of the PodGroup that gangs its pods
    history: list[tuple[float, str]] = field(default_factory=list)
    owner: str | None = None
    min_member: int | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)  # the --explain history (simulations)
    elastic: str | None = None  # "min-max" workers of an elastic training job

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pending(self) -> bool:
        return self.phase in WAITING_PHASES


@dataclass
class Pod:
    namespace: str
    name: str
    job: str | None = None  # key of its Job record
    task: str | None = None
    node: str | None = None
    phase: str = PodPhase.PENDING
    requests: dict[str, float] = field(default_factory=dict)
    created: float | None = None
    started: float | None = None
    finished: float | None = None
    reason: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def holds(self) -> bool:
        """Whether it holds its node's resources (bound and not ended)."""
        return bool(self.node) and self.phase not in FINAL_POD_PHASES

    @property
    def gpus(self) -> float:
        return sum(v for k, v in self.requests.items() if k.endswith(GPU_SUFFIX))


@dataclass
class Node:
    name: str
    allocatable: dict[str, float] = field(default_factory=dict)
    gpu_type: str | None = None
    unschedulable: bool = False
    ready: bool = True


@dataclass
class Event:
    time: float | None
    kind: str
    object: str  # "ns/name" (a node's name alone)
    type: str
    reason: str
    message: str
    count: int = 1


@dataclass
class Resize:
    time: float
    workers: int
    gpu_type: str | None
    reason: str


@dataclass
class Elastic:
    """An elastic training job: its worker count over time, each change with its reason."""

    job: str
    history: list[Resize] = field(default_factory=list)
    throughput: str = "-"
    progress: float | None = None


def add_into(acc: dict[str, float], amounts: dict[str, float], sign: float = 1.0) -> None:
    for k, v in amounts.items():
        acc[k] = acc.get(k, 0.0) + sign * v


class State:
    """Queues, jobs, pods, nodes, events and elastic jobs, with the indexes the pages read."""

    def __init__(self, source: str, simulated: bool) -> None:
        self.source = source  # what the header says: a file name, or the API server
        self.simulated = simulated  # times are simulated seconds (else Unix times)
        self.at: float | None = None  # a simulation's time shown; None: now
        self.end: float | None = None
        self.scheduler: str = "lavaflow"
        self.queues: dict[str, Queue] = {}
        self.jobs: dict[str, Job] = {}
        self.pods: dict[str, Pod] = {}
        self.nodes: dict[str, Node] = {}
        self.elastic: dict[str, Elastic] = {}
        self.events: dict[str, deque[Event]] = {}  # by object key
        self.pods_of_job: dict[str, dict[str, None]] = {}
        self.pods_on_node: dict[str, dict[str, None]] = {}
        self.node_used: dict[str, dict[str, float]] = {}
        self.job_used: dict[str, dict[str, float]] = {}  # requests of the job's pods holding a node
        self.job_waiting: dict[str, dict[str, float]] = {}  # requests of its pods not yet bound
        self.pg_job: dict[str, str] = {}  # PodGroup key -> job key (a Volcano Job's PodGroup)
        self.version = 0
        self._changes: deque[tuple[int, str]] = deque(maxlen=4096)
        self.clock: Any = None  # live: a function giving the time now

    # ------------------------------------------------------------------ time
    def now(self) -> float:
        if self.at is not None:
            return self.at
        if self.clock is not None:
            return float(self.clock())
        return self.end or 0.0

    # ------------------------------------------------------------------ changes
    def touch(self, kind: str) -> None:
        self.version += 1
        self._changes.append((self.version, kind))

    def changed(self, since: int) -> set[str] | None:
        """The kinds changed after version ``since``; None when that is too long ago to tell."""
        if since >= self.version:
            return set()
        if not self._changes or self._changes[0][0] > since + 1:
            return None
        return {k for v, k in self._changes if v > since}

    # ------------------------------------------------------------------ records
    def put_queue(self, q: Queue) -> None:
        self.queues[q.name] = q
        self.touch("Queue")

    def drop_queue(self, name: str) -> None:
        if self.queues.pop(name, None) is not None:
            self.touch("Queue")

    def put_job(self, job: Job) -> None:
        old = self.jobs.get(job.key)
        if old is not None and old.podgroup and old.podgroup != job.podgroup:
            self.pg_job.pop(old.podgroup, None)
        self.jobs[job.key] = job
        if job.podgroup and job.podgroup != job.key:
            self.pg_job[job.podgroup] = job.key
        self.touch("Job")

    def drop_job(self, key: str) -> None:
        job = self.jobs.pop(key, None)
        if job is not None:
            self.events.pop(key, None)  # (what was said about an object that is gone is let go)
            if job.podgroup:
                self.pg_job.pop(job.podgroup, None)
                self.events.pop(job.podgroup, None)
            self.elastic.pop(key, None)
            self.touch("Job")

    def job_of_group(self, pg_key: str) -> str:
        """The key of the job a PodGroup gangs (its Volcano Job's, else its own)."""
        return self.pg_job.get(pg_key, pg_key)

    def put_node(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.touch("Node")

    def drop_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.touch("Node")

    def put_pod(self, pod: Pod) -> None:
        self._unindex(self.pods.get(pod.key))
        self.pods[pod.key] = pod
        self._index(pod)
        self.touch("Pod")

    def drop_pod(self, key: str) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._unindex(pod)
            self.events.pop(key, None)
            self.touch("Pod")

    def _index(self, pod: Pod) -> None:
        if pod.job:
            self.pods_of_job.setdefault(pod.job, {})[pod.key] = None
            if pod.holds:
                add_into(self.job_used.setdefault(pod.job, {}), pod.requests)
            elif not pod.node and pod.phase not in FINAL_POD_PHASES:
                add_into(self.job_waiting.setdefault(pod.job, {}), pod.requests)
        if pod.node:
            self.pods_on_node.setdefault(pod.node, {})[pod.key] = None
            if pod.holds:
                add_into(self.node_used.setdefault(pod.node, {}), pod.requests)

    def _unindex(self, pod: Pod | None) -> None:
        if pod is None:
            return
        if pod.job:
            mine = self.pods_of_job.get(pod.job)
            if mine is not None:
                mine.pop(pod.key, None)
            if pod.holds:
                add_into(self.job_used.setdefault(pod.job, {}), pod.requests, -1.0)
            elif not pod.node and pod.phase not in FINAL_POD_PHASES:
                add_into(self.job_waiting.setdefault(pod.job, {}), pod.requests, -1.0)
        if pod.node:
            here = self.pods_on_node.get(pod.node)
            if here is not None:
                here.pop(pod.key, None)
            if pod.holds:
                add_into(self.node_used.setdefault(pod.node, {}), pod.requests, -1.0)

    def add_event(self, ev: Event) -> None:
        kept = self.events.get(ev.object)
        if kept is None:
            kept = self.events[ev.object] = deque(maxlen=EVENTS_KEPT)
        kept.append(ev)
        self.touch("Event")

    def events_of(self, *keys: str | None) -> list[Event]:
        out = [e for k in keys if k for e in self.events.get(k, ())]
        return sorted(out, key=lambda e: e.time if e.time is not None else -math.inf)

    def put_elastic(self, el: Elastic) -> None:
        self.elastic[el.job] = el
        self.touch("Elastic")

    # ------------------------------------------------------------------ views
    def pods_of(self, job_key: str) -> list[Pod]:
        return [self.pods[k] for k in self.pods_of_job.get(job_key, ()) if k in self.pods]

    def pods_on(self, node: str) -> list[Pod]:
        return [self.pods[k] for k in self.pods_on_node.get(node, ()) if k in self.pods]

    def children(self) -> dict[str, list[str]]:
        """Queue name -> its child queues' names (a queue without a parent is root's child)."""
        out: dict[str, list[str]] = {}
        for q in sorted(self.queues.values(), key=lambda q: q.name):
            if q.name == "root":
                continue
            out.setdefault(q.parent or "root", []).append(q.name)
        return out

    def jobs_by_queue(self) -> dict[str, list[Job]]:
        out: dict[str, list[Job]] = {}
        for j in self.jobs.values():
            out.setdefault(j.queue, []).append(j)
        return out

    def deserved(self) -> dict[str, dict[str, float]]:
        """Each queue's deserved resources: as a simulation's timeline gave them, else worked out
        as the proportion plugin does (water-filling the cluster's allocatable by weight, each
        queue capped by its capability and its request: what its unfinished jobs hold and ask
        for). Root deserves nothing of its own."""
        if self.simulated:
            return {n: dict(q.deserved) for n, q in self.queues.items() if q.deserved is not None}
        return proportion_deserved(self)


def proportion_deserved(state: State) -> dict[str, dict[str, float]]:
    import numpy as np

    from ..scheduler.plugins.proportion import QueueAttr, water_fill

    names: dict[str, None] = {}
    total: dict[str, float] = {}
    for n in state.nodes.values():
        if not n.unschedulable:
            add_into(total, n.allocatable)
    for q in state.queues.values():
        names.update(dict.fromkeys(q.capability))
        names.update(dict.fromkeys(q.guarantee))
    names.update(dict.fromkeys(total))
    names.pop("pods", None)
    cols = sorted(names)

    def vec(d: dict[str, float], missing: float = 0.0) -> np.ndarray:
        return np.array([float(d.get(c, missing)) for c in cols], dtype=np.float64)

    request: dict[str, dict[str, float]] = {}
    allocated: dict[str, dict[str, float]] = {}
    for key, job in state.jobs.items():
        if job.phase in FINAL_JOB_PHASES:
            continue
        add_into(request.setdefault(job.queue, {}), state.job_used.get(key, {}))
        add_into(request.setdefault(job.queue, {}), state.job_waiting.get(key, {}))
        add_into(allocated.setdefault(job.queue, {}), state.job_used.get(key, {}))
    queues = [q for q in sorted(state.queues.values(), key=lambda q: q.name) if q.name != "root"]
    tot = vec(total)
    guarantee_sum = np.zeros(len(cols))
    for q in queues:
        guarantee_sum += vec(q.guarantee)
    attrs = []
    for q in queues:
        cap = np.array([float(q.capability.get(c, math.inf)) for c in cols], dtype=np.float64)
        a = QueueAttr(
            name=q.name,
            weight=float(q.weight or 1),
            allocated=vec(allocated.get(q.name, {})),
            request=vec(request.get(q.name, {})),
            inqueue=np.zeros(len(cols)),
            elastic=np.zeros(len(cols)),
            guarantee=vec(q.guarantee),
            capability=cap,
        )
        a.real_capability = np.minimum(cap, tot - guarantee_sum + a.guarantee)
        attrs.append(a)
    water_fill(attrs, tot)
    return {a.name: {c: float(v) for c, v in zip(cols, a.deserved.tolist()) if v} for a in attrs}
