"""The simulated cluster: virtual time, discrete events, the same scheduler and controllers.

Events (object submissions and deletions, pod completions, pod spawns) happen
at simulated times; the scheduler runs every ``period`` seconds while anything
has changed since its last cycle, like Volcano's 1 s schedule period. The run
ends when nothing is left to happen, at ``until``, or when nothing can change
any more (a stall).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from ..api import sim_annotations as ann
from ..api.core import Node, Pod, PodPhase
from ..api.meta import clone, set_fields
from ..api.volcano import JOB_FINAL_PHASES, JOB_NAME_KEY, PodGroupCondition
from ..controllers import build_controllers
from ..controllers.job import generated_objects
from ..controllers.queue import builtin_queues
from ..elastic.spec import RESIZE_REASON
from ..scheduler.cache import DEFAULT_MAX_PODS, PLUGIN_KINDS, SchedulerCache
from ..scheduler.elastic.state import ElasticSetup, conf_elastic_setup
from ..scheduler.framework.conf import SchedulerConfiguration, load_scheduler_conf
from ..scheduler.framework.node_choice import NodeChoice
from ..scheduler.model import EvictionCause
from ..scheduler.scheduler import KUBE_DEFAULT_CONF, Scheduler
from ..store import MemoryStore
from ..store.base import Forbidden, Handler
from . import gang_source
from .inputs import Item, SimInput
from .native_controllers import REPLACING, WorkloadController
from .quota import QuotaAdmission
from .results import ResultPhase
from .sampling import TimelineSampler
from .training import TrainingModel

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import PodSpec
    from ..api.validation import Problem
    from ..api.volcano import Job
    from ..scheduler.cache import Decisions
    from ..scheduler.framework.session import Session

SCHEDULERS = ("lavaflow", "kube-default")
# In the simulator one scheduler runs the whole cluster: pods of every schedulerName are its.
SIM_SCHEDULER_NAMES = ("lavaflow", "volcano", "default-scheduler", "kube-scheduler")
MAX_IDLE_CYCLES = 10_000
_CONDITIONS_KEPT = 4096  # PodGroup conditions remembered validated (Simulation._condition)
_ENVS_KEPT = 4096  # pod environments remembered by containers list (Simulation._env_of)
# Pod phases as plain strings (.value: the pod records and the pods' status the simulator writes are
# documents), globals as they are read for every pod event (a member off its class costs more).
_PENDING, _RUNNING, _DELETED = PodPhase.PENDING.value, PodPhase.RUNNING.value, ResultPhase.DELETED.value
_ALIVE = (_PENDING, _RUNNING)


class Simulation:
    # What runs training jobs by their work (a subclass may run them otherwise: the forecast's
    # forward runs own none, their pods end at the times the forecast estimated).
    training_model: Callable[..., TrainingModel] = TrainingModel

    def __init__(
        self,
        sim_input: SimInput,
        scheduler: str = "lavaflow",
        conf: SchedulerConfiguration | None = None,
        seed: int = 0,
        until: float | None = None,
        default_duration: float = 60.0,
        period: float = 1.0,
        restart_pause: float = 30.0,
        conf_origin: str | None = None,
        report_period: float = 30.0,
        report_noise: float = 0.0,
        node_choice: NodeChoice | None = None,
    ) -> None:
        if scheduler not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {scheduler!r} (choose {', '.join(SCHEDULERS)})")
        self.scheduler_name = scheduler
        self.input = sim_input
        self.until = until
        self.default_duration = default_duration
        self.period = period
        self.now = 0.0
        self.first_tick = 0.0  # no scheduling cycle before (a forecast's run starts a period on)
        self.store = MemoryStore(clock=lambda: self.now, seed=seed)
        self.cache = SchedulerCache(scheduler_names=SIM_SCHEDULER_NAMES, kubelet_max_pods=DEFAULT_MAX_PODS)
        self._register_resources()
        for kind, fn in (
            ("Pod", self.cache.on_pod),
            ("Node", self.cache.on_node),
            ("PodGroup", self.cache.on_podgroup),
            ("Queue", self.cache.on_queue),
            ("PriorityClass", self.cache.on_priority_class),
        ):
            self.store.watch(kind, cast(Handler, lambda ev, obj, old, fn=fn: fn(obj, ev == "DELETED")))
        for kind in PLUGIN_KINDS:
            self.store.watch(
                kind, cast(Handler, lambda ev, obj, old, kind=kind: self.cache.on_object(kind, obj, ev == "DELETED"))
            )
        clock = lambda: self.now  # noqa: E731
        built = build_controllers(
            self.store, clock, SIM_SCHEDULER_NAMES, priority_of=lambda name: self.cache.priority_of(name)
        )
        self.queue_ctrl, self.pg_ctrl, self.job_ctrl = built.queue, built.podgroup, built.job
        self.jobflow_ctrl, self.gc = built.jobflow, built.gc
        # Per-job records for the report live here, not in the controller (which also runs on a cluster).
        self.job_history: dict[str, list[dict[str, Any]]] = {}  # job key -> [{"phase", "time"}]
        self.job_generated: dict[str, dict[str, list[str]]] = {}  # job key -> objects its plugins made
        self.job_ctrl.on_phase = self._record_phase
        # What the simulator stands in for besides: kube-controller-manager's workload controllers.
        self.workload_ctrl = WorkloadController(self.store, clock)
        # ... and the API server's ResourceQuota admission (only where the input has quotas)
        if any(type(it.obj).__name__ == "ResourceQuota" for it in sim_input.items):
            QuotaAdmission(self.store, on_release=self._quota_released)
        # The gang APIs (see gang_source): scheduler-plugins PodGroups and the Kubernetes Workload
        # API, each group kept as an internal PodGroup by a controller of its own (on a cluster
        # the scheduler process does this), and Volcano's own PodGroups.
        self.gang_sources = [api.build(self.store, clock, self._record_event, built) for api in gang_source.GANG_APIS]
        # jobflow first, then the gang sources' controllers (the stand-ins feed the PodGroups),
        # then the other shared ones
        shared = [c for c in built.all() if c is not built.podgroup]
        gang_ctrls = [source.controller for source in self.gang_sources]
        self.controllers = [self.workload_ctrl, shared[0], *gang_ctrls, *shared[1:]]
        for ctrl in self.controllers:
            ctrl.on_timer_added = lambda t, ctrl=ctrl: self._push(t, "timer", ctrl)
        # What the input asks for that this run ignores (a stderr line each, and "warnings").
        self.warnings: list[str] = list(sim_input.warnings)
        if scheduler == "kube-default":
            conf = load_scheduler_conf(KUBE_DEFAULT_CONF, allow_kube_default=True)
        else:
            where = f"{conf_origin}: " if conf_origin else ""  # --config FILE: "FILE: path"
            if conf is None:
                conf = load_scheduler_conf(sim_input.conf_text)
                where = f"{sim_input.conf_origin}." if sim_input.conf_origin else ""  # ConfigMap: "…data[key].path"
            for path, msg in conf.warnings:
                self.warnings.append(f"{where}{path}: {msg}")
        self.scheduler = Scheduler(  # a crashing plugin ends a simulation, never skipped silently
            self.cache, conf, reraise=True, node_choice=node_choice if scheduler != "kube-default" else None
        )
        self._events: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()
        self._feed: Iterator[Item] = iter(())  # the input's trace jobs still to come (see run)
        self._feed_seq = itertools.count()
        self._feed_base = 0  # the number of the input's first submission (a ranked feed's jobs: see run)
        self.held: dict[str, list[Pod]] = {}  # parent pod key -> pods it will spawn
        self.children: dict[str, set[str]] = {}  # parent pod uid -> live child keys
        self.parent_of: dict[str, str] = {}  # child key -> parent uid
        self.duration_done: set[str] = set()  # pod uids whose own duration has passed
        self.pod_records: dict[str, dict[str, Any]] = {}
        self._envs: dict[int, tuple[list[Any], dict[str, str]]] = {}  # see _env_of
        self.timeline: list[dict[str, Any]] = []
        self.stall_time: float | None = None  # when nothing could change any more (None: never)
        self._wakes: set[float] = set()
        self._rule_wakes: set[tuple[float, str]] = set()  # every (time, rule) ever pushed
        self._standing: set[tuple[float, str]] = set()  # the last session's rule wakes (see Decisions)
        self.rejected: list[dict[str, Any]] = []  # objects refused by admission at their submit time
        self.node_events: list[dict[str, Any]] = []
        self.decisions: dict[str, list[dict[str, Any]]] = {}  # PodGroup key -> what the scheduler decided, when
        self.cycles = 0
        self.last_session: Session | None = None
        self._conditions: dict[tuple[Any, ...], PodGroupCondition] = {}  # see _condition
        self.store.watch("Pod", self._record_pod)
        self.training = self.training_model(
            self,
            restart_pause,
            oracle=bool(self.elastic_oracle()),
            report_period=report_period,
            report_noise=report_noise,
            seed=seed,
        )
        self.events: list[dict[str, Any]] = []  # Events the scheduler recorded (e.g. elastic resizes)
        self.sampler = TimelineSampler(self.store, self.cache)
        self._finished_jobs: set[str] = set()  # live Volcano Jobs in a final phase (progress display)
        self.events_done = 0  # events taken off the queue (progress display: events per second)
        self._jobs_expected: int | None = None
        self.store.watch("Job", self._count_finished)
        self.deleted_podgroups: dict[str, Any] = {}
        self.deleted_jobs: dict[
            str, Any
        ] = {}  # Volcano Jobs deleted during the run (delete-at, TTL), kept for the report
        self.store.watch(
            "Job", lambda ev, job, old: self.deleted_jobs.__setitem__(job.key, job) if ev == "DELETED" else None
        )
        self.store.watch(
            "PodGroup", lambda ev, pg, old: self.deleted_podgroups.__setitem__(pg.key, pg) if ev == "DELETED" else None
        )

    # ------------------------------------------------------------------ setup
    def _register_resources(self) -> None:
        names: set[str] = set(self.input.stream.resource_names) if self.input.stream is not None else set()
        for it in self.input.items:
            obj = it.obj
            if isinstance(obj, Node):
                names.update(obj.allocatable)
            for tmpl_spec in _pod_specs(obj):
                for c in list(tmpl_spec.containers) + list(tmpl_spec.init_containers):
                    names.update(c.resources.requests)
                    names.update(c.resources.limits)
        self.cache.register_resources(sorted(names))

    def _push(self, time: float, kind: str, payload: Any) -> None:
        heapq.heappush(self._events, (time, next(self._seq), kind, payload))

    def _feed_next(self) -> None:
        """Push the next job of the input's feed (see run)."""
        it = next(self._feed, None)
        if it is not None:
            seq = self._feed_base + it.rank if it.rank >= 0 else next(self._feed_seq)
            heapq.heappush(self._events, (it.submit_at, seq, "feed", it))

    def _record_event(self, kind: str, key: str, etype: str, reason: str, message: str) -> None:
        """An Event a gang source recorded (the scheduler's come with its decisions, see _apply)."""
        self.events.append(
            {"time": self.now, "kind": kind, "object": key, "type": etype, "reason": reason, "message": message}
        )

    def _record_phase(self, job: Job, previous: str, phase: str, time: float) -> None:
        if not previous:  # the controller took the job up
            self.job_generated[job.key] = generated_objects(job)
        self.job_history.setdefault(job.key, []).append({"phase": phase, "time": time})

    # ------------------------------------------------------------------ pods
    def _record_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        meta = pod.metadata
        annotations = meta.annotations
        uid = meta.uid
        rec = self.pod_records.get(uid)
        if rec is None and event == "ADDED" and ann.DELETE_AT in annotations and meta.owner_references:
            # A pod made from a template that carries delete-at: evicted at that time (if alive then).
            # A pod created at or after that instant (e.g. the replacement a RestartJob made in reaction
            # to the eviction itself) is not evicted again.
            at = ann.parse_duration(annotations[ann.DELETE_AT], allow_inf=True)
            if math.isfinite(at) and at > self.now:
                self._push(at, "evict", (pod.key, uid))
        group = annotations.get("scheduling.k8s.io/group-name") or None
        job = annotations.get("volcano.sh/job-name") or group
        spec = pod.spec
        env = self._env_of(spec.containers)
        if rec is None:
            self.pod_records[uid] = rec = {
                "namespace": meta.namespace or "default",
                "name": meta.name,
                "job": job,
                "group": group,  # the PodGroup it belongs to (a Volcano Job's is <job>-<uid>)
                "task": annotations.get("volcano.sh/task-spec") or None,
                "node": spec.node_name,
                "phase": _PENDING,
                "createTime": self.now,
                "startTime": None,
                "finishTime": None,
                "exitCode": None,
                "env": env,
            }
        else:
            rec["job"] = job
            rec["group"] = group
            rec["node"] = spec.node_name
            rec["env"] = env
        if event == "DELETED":
            if rec["finishTime"] is None:
                rec["finishTime"] = self.now
                rec["phase"] = _DELETED
                rec["reason"] = pod.status.reason
        else:
            rec["phase"] = pod.status.phase

    def _env_of(self, containers: list[Any]) -> dict[str, str]:
        """The containers' literal environment variables. A job's pods share their template's
        containers (the job controller copies the spec shallowly, plugins replace what they change)
        and every event of a pod reads them again: worked out once per containers list, kept with
        the list it was worked out from (records share the dict, which nothing changes)."""
        hit = self._envs.get(id(containers))
        if hit is not None and hit[0] is containers:
            return hit[1]
        env: dict[str, str] = {}
        for c in containers:
            for e in c.env:
                if e.value is not None:
                    env[e.name] = e.value
        if len(self._envs) >= _ENVS_KEPT:
            self._envs.clear()
        self._envs[id(containers)] = (containers, env)
        return env

    def _duration_of(self, pod: Pod) -> float:
        raw = pod.metadata.annotations.get(ann.DURATION)
        if raw is None:
            if any(r.controller and r.kind in REPLACING for r in pod.metadata.owner_references):
                return math.inf  # a service's pod runs until it is deleted
            return self.default_duration
        return ann.parse_duration(raw, allow_inf=True)

    def _bind(self, key: str, node: str) -> None:
        pod = self.store.get("Pod", key)
        if pod is None or pod.spec.node_name:
            return
        set_fields(pod.spec, {"node_name": node})
        status = pod.status
        set_fields(
            status,
            {
                "phase": _RUNNING,
                "start_time": self.now,
                "conditions": [c for c in status.conditions if c.type != "PodScheduled"],
            },
        )
        self.store.update(pod)
        rec = self.pod_records[pod.metadata.uid]
        rec["startTime"] = self.now
        rec["node"] = node
        if not self.training.owns(pod):  # training pods end with their work
            duration = self._duration_of(pod)
            if math.isfinite(duration):
                self._push(self.now + duration, "finish", (key, pod.metadata.uid))
        for child in self.held.pop(key, []):
            delay = ann.parse_duration(child.metadata.annotations.get(ann.SPAWN_DELAY, "0"))
            self._push(self.now + delay, "spawn", (child, key, pod.metadata.uid))

    def _finish(self, key: str, uid: str) -> None:
        pod = self.store.get("Pod", key)
        if pod is None or pod.metadata.uid != uid or pod.status.phase != _RUNNING:
            return
        if self.children.get(uid):
            self.duration_done.add(uid)
            return
        code = int(pod.metadata.annotations.get(ann.EXIT_CODE, "0"))
        pod.status.phase = "Succeeded" if code == 0 else "Failed"  # (a Literal field: mypy checks them)
        pod.status.exit_code = code
        self.store.update(pod)
        rec = self.pod_records[uid]
        rec["finishTime"] = self.now
        rec["exitCode"] = code
        self._child_gone(key)

    def _finish_joins(self, payload: tuple[str, str]) -> bool:
        """Whether the next event, at the same instant as the finish of pod ``payload``, may reach
        the controllers in the same settle: it is the finish of another pod of the same Volcano
        Job, both exit 0, have no spawned children, and the job controller says no sync of the Job
        acts on one pod's end alone (no lifecycle policy, no minSuccess). The job's workers that
        started together then end in one sync, as a workqueue coalesces a Job's key, not in one
        per pod."""
        nxt = self._events[0]
        if nxt[2] != "finish":
            return False
        pods: list[Any] = [self.store.get("Pod", key) for key, _ in (payload, nxt[3])]
        a, b = pods
        if a is None or b is None or a.namespace != b.namespace:
            return False
        name = a.metadata.labels.get(JOB_NAME_KEY)
        if name is None or b.metadata.labels.get(JOB_NAME_KEY) != name:
            return False
        for p in pods:
            if p.metadata.annotations.get(ann.EXIT_CODE, "0") != "0" or self.children.get(p.metadata.uid):
                return False
        return not self.job_ctrl.acts_on_each_end(f"{a.namespace}/{name}")

    def _child_gone(self, key: str) -> None:
        parent_uid = self.parent_of.pop(key, None)
        if parent_uid is None:
            return
        live = self.children.get(parent_uid)
        if live is not None:
            live.discard(key)
            if not live and parent_uid in self.duration_done:
                self.duration_done.discard(parent_uid)
                rec = self.pod_records.get(parent_uid)
                if rec is not None:
                    self._finish(f"{rec['namespace']}/{rec['name']}", parent_uid)

    def _on_pod_deleted(self, event: str, pod: Pod, old: Pod | None) -> None:
        if event == "DELETED":
            self._child_gone(pod.key)

    # ------------------------------------------------------------------ events
    def _submit(self, it: Item) -> None:
        obj = it.obj
        if it.update:
            self._update(it)
            return
        if isinstance(obj, Pod) and ann.SPAWNED_BY in obj.metadata.annotations:
            parent_key = f"{obj.namespace}/{obj.metadata.annotations[ann.SPAWNED_BY]}"
            parent = self.store.get("Pod", parent_key)
            if parent is not None and parent.status.phase == _RUNNING:
                delay = ann.parse_duration(obj.metadata.annotations.get(ann.SPAWN_DELAY, "0"))
                self._push(self.now + delay, "spawn", (obj, parent_key, parent.metadata.uid))
            else:
                self.held.setdefault(parent_key, []).append(obj)
            return
        problems = self._admit(obj)
        if problems:
            self._reject(obj, "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems))
            return
        try:
            self.store.create(obj)
        except Forbidden as exc:  # a pod past a ResourceQuota: the API server refuses it
            self._reject(obj, str(exc))
            return
        if it.delete_at is not None:
            self._push(it.delete_at, "delete", (type(obj).__name__, obj.key))
        if isinstance(obj, Node):
            for key, kind in ((ann.FAIL_AT, "fail"), (ann.RECOVER_AT, "recover")):
                raw = obj.metadata.annotations.get(key)
                if raw is not None:
                    self._push(max(ann.parse_duration(raw), self.now), kind, obj.name)

    def _quota_released(self, namespace: str) -> None:
        self.job_ctrl.retry_forbidden(namespace)
        self.workload_ctrl.retry_forbidden(namespace)

    def _reject(self, obj: Any, reason: str) -> None:
        self.rejected.append(
            {
                "namespace": obj.namespace if obj.namespaced else None,
                "name": obj.name or f"{obj.metadata.generate_name or ''}*",
                "kind": obj.kind,
                "time": self.now,
                "reason": reason,
            }
        )

    def _update(self, it: Item) -> None:
        """A later document for an existing object: a user's update (Volcano Jobs: scaling)."""
        from ..api.volcano import Job

        obj = it.obj
        if isinstance(obj, Job):
            problems = self.job_ctrl.apply_update(obj)
        else:
            from ..api.admission import Problem

            problems = [Problem("", f"updates are supported for Volcano Jobs only, not {obj.kind}")]
        if problems:
            self.rejected.append(
                {
                    "namespace": obj.namespace if obj.namespaced else None,
                    "name": obj.name,
                    "kind": obj.kind,
                    "time": self.now,
                    "operation": "update",
                    "reason": "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems),
                }
            )

    def _node_fault(self, name: str, failed: bool) -> None:
        """A node goes NotReady (its pods are evicted, as the node lifecycle controller does) or recovers."""
        from ..api.core import NodeCondition

        node = self.store.get("Node", name)
        if node is None:
            return
        status = "False" if failed else "True"
        conds = [c for c in node.status.conditions if c.type != "Ready"]
        conds.append(
            NodeCondition(type="Ready", status=status, reason="SimulatedFailure" if failed else "SimulatedRecovery")
        )
        node.status.conditions = conds
        self.store.update(node)
        self.node_events.append({"node": name, "time": self.now, "event": "NotReady" if failed else "Ready"})
        if failed:
            for pod in sorted(self.store.list("Pod"), key=lambda p: p.key):
                if pod.spec.node_name == name and pod.status.phase in _ALIVE:
                    pod.status.reason = "NodeLost"
                    pod.status.message = f"node {name} is not ready"
                    self.store.delete("Pod", pod.key)

    def _admit(self, obj: Any) -> list[Problem]:
        """The admission webhook at creation time: Jobs and PodGroups only enter Open queues."""
        from ..api import admission
        from ..api.volcano import Job, PodGroup

        if not isinstance(obj, (Job, PodGroup)):
            return []
        queues = {q.name: q for q in self.store.list("Queue")}
        if isinstance(obj, Job):
            return [p for p in admission.validate_job(obj, queues) if p.path == "spec.queue"]
        return [p for p in admission.validate_podgroup(obj, queues) if p.path == "spec.queue"]

    def _spawn(self, child: Pod, parent_key: str, parent_uid: str) -> None:
        parent = self.store.get("Pod", parent_key)
        if parent is None or parent.metadata.uid != parent_uid or parent.status.phase != _RUNNING:
            return  # the driver is gone: its executors are never created
        try:
            self.store.create(child)
        except Forbidden as exc:  # past a ResourceQuota (a driver's executor requests fail likewise)
            self._reject(child, str(exc))
            return
        self.children.setdefault(parent_uid, set()).add(child.key)
        self.parent_of[child.key] = parent_uid

    def _apply(self, decisions: Decisions) -> None:
        self.sampler.touched(key for key, _ in decisions.binds)
        self.sampler.touched(key for key, _ in decisions.evictions)
        for key, node in decisions.binds:
            self._bind(key, node)
        for key, eviction in decisions.evictions:
            pod = self.store.get("Pod", key)
            if pod is not None:
                set_fields(
                    pod.status,
                    {
                        "reason": RESIZE_REASON if eviction.cause is EvictionCause.RESIZE else "Evicted",
                        "message": eviction.message,
                    },
                )
                self.store.delete("Pod", key)
        for key, status in decisions.podgroups:
            pg = self.store.get("PodGroup", key)
            if pg is None:
                continue
            set_fields(
                pg.status,
                {
                    "phase": status["phase"],
                    "running": status["running"],
                    "succeeded": status["succeeded"],
                    "failed": status["failed"],
                    "conditions": [self._condition(c) for c in status["conditions"]],
                },
            )
            self.store.update(pg)
        for key, kind, _message, count in decisions.resizes:
            self.training.on_resize(key, kind, count)
        for kind, key, etype, reason, message in decisions.events:
            self.events.append(
                {"time": self.now, "kind": kind, "object": key, "type": etype, "reason": reason, "message": message}
            )
        for t in sorted(set(decisions.wakeups) - self._wakes):
            self._wakes.add(t)
            self._push(t, "wake", None)
        self._standing = set(decisions.rule_wakeups)
        for tr in sorted(self._standing - self._rule_wakes):
            self._rule_wakes.add(tr)
            self._push(tr[0], "wake", tr[1])
        for name, status in decisions.queues:
            q = self.store.get("Queue", name)
            if q is not None:
                set_fields(q.status, {"allocated": {k: v for k, v in status["allocated"].items()}})
                self.store.update(q)

    def _condition(self, raw: dict[str, Any]) -> PodGroupCondition:
        """``PodGroupCondition.model_validate(raw)``: each session writes back mostly the conditions
        it wrote before, so each distinct one is validated once and copied (its fields are strings,
        numbers or None)."""
        try:
            values = tuple(raw.values())  # (keys, values and their types: 3 and 3.0 are two)
            key = (tuple(raw), values, tuple(map(type, values)))
            hit = self._conditions.get(key)
        except TypeError:  # an unhashable value
            return PodGroupCondition.model_validate(raw)
        if hit is None:
            hit = PodGroupCondition.model_validate(raw)
            if len(self._conditions) >= _CONDITIONS_KEPT:
                self._conditions.clear()
            self._conditions[key] = hit
        return clone(hit, {})

    def _remember(self, ssn: Session) -> None:
        """Keep each job's decision history (for --explain), without consecutive repeats."""
        decisions, now = self.decisions, self.now  # (~20 entries a cycle)
        for uid, action, message in ssn.log:
            hist = decisions.get(uid)
            if hist is None:
                hist = decisions[uid] = []
            elif hist and (last := hist[-1])["action"] == action and last["message"] == message:
                last["until"] = now
                continue
            hist.append({"time": now, "until": now, "action": action, "message": message})

    def _settle(self) -> None:
        for _ in range(1000):
            flushed = self.training.flush()
            if not flushed and not any(c.dirty for c in self.controllers):
                return
            for c in self.controllers:
                c.run()

    def _sample(self) -> None:
        if len(self.cache.nodes) == 0:
            return
        point = self.sampler.point(self.now, self.last_session)
        if point is None:
            return  # nothing changed since the last point
        if self.timeline and self.timeline[-1]["time"] == self.now:
            self.timeline[-1] = point
        elif not self.timeline or _differs(self.timeline[-1], point):
            self.timeline.append(point)

    # ------------------------------------------------------------------ run
    def run(self, progress: Callable[[float, int, int, int], None] | None = None) -> dict[str, Any]:
        self.store.watch("Pod", self._on_pod_deleted)
        for q in builtin_queues():
            if self.store.get("Queue", q.name) is None and not any(
                type(it.obj).__name__ == "Queue" and it.obj.name == q.name for it in self.input.items
            ):
                self.store.create(q)
        feed = self.input.stream
        if feed is not None and feed.ranked:
            # A feed of the input's own documents (sim/documents.py): the items and the feed's jobs
            # are submitted in the order prepare() would have sorted them together (their ranks),
            # before any event the run adds at their time (whose numbers start after theirs).
            self._feed_base = first = next(self._seq)
            for it in self.input.items:
                heapq.heappush(self._events, (it.submit_at, first + it.rank, "submit", it))
            self._seq = itertools.count(first + len(self.input.items) + feed.count)
        else:
            for it in self.input.items:
                self._push(it.submit_at, "submit", it)
        if feed is not None:
            if not feed.ranked:
                # Trace jobs come one at a time, each pushed when the one before it is submitted.
                # They keep the places prepare() gives them: after the items at their time, before
                # any event the run adds (whose numbers start after theirs).
                first = next(self._seq)
                self._feed_seq = itertools.count(first)
                self._seq = itertools.count(first + feed.count)
            self._feed = iter(feed)
            self._feed_next()
        last_cycle_version = -1
        next_tick = self.first_tick
        idle_cycles = 0
        until = self.until
        while True:
            while self._events and self._events[0][2] == "train" and self.training.stale(*self._events[0][3]):
                heapq.heappop(self._events)  # a progress projection a later change replaced
            t_event = self._events[0][0] if self._events else math.inf
            dirty = self.store.changes != last_cycle_version
            if dirty and next_tick < self.now:
                next_tick = math.ceil(self.now / self.period - 1e-9) * self.period
            t_tick = next_tick if dirty else math.inf
            t = min(t_event, t_tick)
            if math.isinf(t):
                self.stall_time = self.now
                if until is not None and until > self.now and self._anything_running():
                    self.now = until  # pods that run until deleted keep running up to --until
                break
            if until is not None and t > until:
                self.now = until
                break
            self.now = t
            while self._events and self._events[0][0] <= t:
                at, _, kind, payload = heapq.heappop(self._events)
                self.events_done += 1
                if kind == "submit":
                    self._submit(payload)
                elif kind == "feed":
                    self._feed_next()
                    self._submit(payload)
                elif kind == "delete":
                    self.store.delete(*payload)
                elif kind == "finish":
                    self._finish(*payload)
                elif kind == "spawn":
                    self._spawn(*payload)
                elif kind == "timer":
                    payload.fire_timers(self.now)
                elif kind in ("fail", "recover"):
                    self._node_fault(payload, kind == "fail")
                elif kind == "evict":
                    key, uid = payload
                    pod = self.store.get("Pod", key)
                    if pod is not None and pod.metadata.uid == uid and pod.status.phase in _ALIVE:
                        pod.status.reason = "Evicted"
                        self.store.delete("Pod", key)
                elif kind == "train":
                    self.training.on_event(*payload)
                elif kind == "report":
                    self.training.on_report(*payload)
                elif kind == "wake":
                    if payload is None or (at, payload) in self._standing:
                        last_cycle_version = -1  # a time-based rule asked for a cycle
                if kind == "finish" and self._events and self._events[0][0] <= t and self._finish_joins(payload):
                    continue
                self._settle()
            if t >= next_tick and self.store.changes != last_cycle_version:
                before = self.store.changes
                self.last_session = self.scheduler.run_once(self.now)
                self.cycles += 1
                self._remember(self.last_session)
                decisions = self.cache.take_decisions()
                self._apply(decisions)
                applied = self.store.changes
                self._settle()
                last_cycle_version = self.store.changes
                next_tick = t + self.period
                idle_cycles = idle_cycles + 1 if self._only_rule_wakes() else 0
                # Something changed: schedule again next period. The session's own PodGroup and
                # Queue status write-back alone is not a change (the next session would see what
                # this one decided); what the controllers do in reaction to it is.
                moved = bool(decisions.binds or decisions.evictions) and applied != before
                if moved or self.store.changes != applied:
                    last_cycle_version = -1
                if idle_cycles > MAX_IDLE_CYCLES:
                    # cycles with nothing else to happen than the cycles they ask for themselves
                    self.stall_time = self.now
                    break
            self._sample()
            if progress is not None:
                progress(self.now, *self._progress_counts())
        self._sample()
        from .results import build_result

        return build_result(self)

    def _only_rule_wakes(self) -> bool:
        """Whether nothing is left to happen but the wakes time-based rules ask for again in every
        session (the elastic action's next round): no arrival, no pod that will finish, no
        training that progresses, no one-off wake. Cycles run on such wakes alone, on and on, when
        a policy leaves every waiting job waiting on an idle cluster; after MAX_IDLE_CYCLES of them
        the run ends as a stall, its waiting jobs reported with their reasons."""
        return all(kind == "wake" and payload is not None for _, _, kind, payload in self._events)

    @property
    def elastic_setup(self) -> ElasticSetup | None:
        """The elastic configuration the scheduler runs with (resolved once), None without one."""
        return conf_elastic_setup(self.scheduler.conf)

    def elastic_policy_name(self) -> str | None:
        setup = self.elastic_setup
        return setup.policy.name if setup is not None else None

    def elastic_policy_clairvoyant(self) -> bool | None:
        setup = self.elastic_setup
        return None if setup is None else setup.clairvoyant

    def elastic_oracle(self) -> bool:
        """Whether the elastic plugin hands its policy the true speed models (``elastic.oracle``)."""
        setup = self.elastic_setup
        return setup is not None and setup.oracle

    def elastic_shared_profiles(self) -> bool:
        """Whether jobs of one profile group share their measurements (``elastic.sharedProfiles``,
        else the policy's choice; never with the oracle, where nothing is learned)."""
        setup = self.elastic_setup
        return setup is not None and setup.shared_profiles and not setup.oracle

    def _anything_running(self) -> bool:
        return any(r["startTime"] is not None and r["finishTime"] is None for r in self.pod_records.values())

    def _progress_counts(self) -> tuple[int, int, int]:
        """(Volcano Jobs finished, Volcano Jobs in all -- those of a streamed trace counted from
        the start, not as they are made -- and events handled so far)."""
        expected = self._jobs_expected
        if expected is None:
            stream = self.input.stream
            expected = self._jobs_expected = sum(type(it.obj).__name__ == "Job" for it in self.input.items) + (
                stream.count if stream is not None else 0
            )
        return len(self._finished_jobs), max(self.store.count("Job"), expected), self.events_done

    def _count_finished(self, event: str, job: Job, old: Job | None) -> None:
        if event != "DELETED" and job.status.state.phase in JOB_FINAL_PHASES:
            self._finished_jobs.add(job.key)
        else:
            self._finished_jobs.discard(job.key)


def _differs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("allocated", "runningPods", "pendingPods", "capacity", "queues", "deserved")
    return any(a.get(k) != b.get(k) for k in keys)


def _pod_specs(obj: Any) -> list[PodSpec]:
    from ..api.volcano import Job

    if isinstance(obj, Pod):
        return [obj.spec]
    if isinstance(obj, Job):
        return [t.template.spec for t in obj.spec.tasks]
    spec = getattr(obj, "spec", None)
    tmpl = getattr(spec, "template", None)
    return [tmpl.spec] if tmpl is not None else []


__all__ = ["SCHEDULERS", "Simulation"]
