"""The simulated cluster's progress model for training jobs (what the cluster does, not the scheduler).

A training job is a PodGroup whose annotations carry a speed model (:mod:`lavaflow.elastic.spec`):
usually an elastic Volcano Job.  Its pods do not run for a fixed duration.  Instead the job has
an amount of *work*; while it runs it progresses at the rate the speed model gives for the
placement of its running GPU workers (workers per node) and their GPU type.  Every change of that
placement — a start, a resize, a migration, a lost node — pauses the job for ``restart_pause``
seconds (checkpoint and restart; ``sim.lavaflow.io/restart-pause`` on the job overrides it).
When the work is done every running pod of the job succeeds, and the job controller completes
the job.

Like a metrics collector, the model reports each job's progress on its PodGroup whenever the
rate changes (``lavaflow.io/progress``, ``-time``, ``gpu-seconds``).  Truth and observation are
kept apart: the speed model here is the truth and drives progress, but the scheduler sees only
what the job's training agent reports (``lavaflow.io/metrics``, :mod:`lavaflow.elastic.learned`):
one reporting period (``report_period`` seconds of training, 30 by default) after each start,
resize or batch change, the step time measured on the job's current placement and batch
(optionally with seeded log-normal noise, ``report_noise``), and, for adaptive-batch jobs, the
gradient statistics at the point training has reached (again at each training phase).  An
adaptive-batch job's agent chooses its batch from its own learned model, as AdaptDL's does.
Reports carry only news: a real agent reporting every period would repeat the same measurement
in between.  With the oracle (``elastic.oracle``) nothing is reported, jobs choose their batch
under the true model and the scheduler reads the true model — the ablation of earlier figures.
Results for reports: per job submit / first start / finish, the worker count over time,
GPU-seconds; GPUs allocated per type over time.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..api import sim_annotations as ann
from ..api.core import PodPhase
from ..api.meta import set_fields
from ..api.selectors import pod_requests
from ..api.volcano import GROUP_NAME_ANNOTATION
from ..elastic import spec as es
from ..elastic.learned import METRICS, LearnedSpeed, Measurement, Report
from ..elastic.speed import PolluxJobSpeed, next_bound, rate_at

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import Pod
    from ..api.volcano import PodGroup
    from ..elastic.results import SimResult
    from .engine import Simulation

RESTART_PAUSE = "sim.lavaflow.io/restart-pause"
EPS = 1e-9
_GPUS_KEPT = 4096  # GPU counts remembered by template (TrainingModel._gpus_of)
_RUNNING = PodPhase.RUNNING.value  # (a plain str, read per pod event: see scheduler.model.NOT_ADMITTED)


@dataclass
class TrainState:
    key: str  # PodGroup key
    job: str  # namespace/job name
    speed: es.SpeedSpec
    pause: float
    submit: float
    done: float = 0.0
    t_last: float = 0.0
    rate: float = 0.0
    paused_until: float = 0.0
    gpu_seconds: float = 0.0
    placement: dict[str, int] = field(default_factory=dict)
    gpu_type: str | None = None
    pods: dict[str, tuple[str, float, str]] = field(default_factory=dict)  # running pod key -> (node, gpus, uid)
    token: int = 0
    first_start: float | None = None
    finish: float | None = None
    history: list[tuple[float, int, str | None]] = field(default_factory=list)
    resizes: int = 0
    halts: int = 0
    migrations: int = 0
    application: str = ""
    # What the job's training agent knows and reports (learned models, no oracle):
    batch: int | None = None  # the global batch it trains at now (adaptive batch)
    profile: dict[tuple[str, int, int, int, int], tuple[float, float]] = field(default_factory=dict)
    rates_seen: dict[tuple[str, int, int], float] = field(default_factory=dict)  # jobs without a batch model
    grad: tuple[float, float] | None = None  # gradient (square, variance) where training is now
    agent: LearnedSpeed | None = None  # its own model, from its last report
    report_token: int = 0
    rng: Any = None
    report_json: tuple[Report, str] | None = None  # the agent's last report and its JSON (see _report)
    # ``profile`` as Measurements, in its order: a measurement never changes once taken, so every
    # report carries the same objects (hashed once, compared by identity where fits are kept)
    measured: tuple[Measurement, ...] = ()


class TrainingModel:
    def __init__(
        self,
        sim: Simulation,
        restart_pause: float = 30.0,
        oracle: bool = False,
        report_period: float = 30.0,
        report_noise: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.sim = sim
        self.restart_pause = restart_pause
        self.oracle = oracle
        self.report_period = report_period
        self.report_noise = report_noise
        self.seed = seed
        self.jobs: dict[str, TrainState] = {}
        self._running: dict[str, TrainState] = {}  # the jobs not finished, in the order of ``jobs``
        self.finished: list[TrainState] = []
        self.timeline: list[tuple[float, dict[str, int]]] = []
        self._tokens = 0
        # Jobs whose running pods changed since the last flush (several pods of a job usually
        # start or go at the same instant: their rate and progress report are worked out once).
        self._dirty: dict[str, TrainState] = {}
        self._gpus: dict[int, tuple[Any, Any, Any, float]] = {}  # see _gpus_of
        sim.store.watch("PodGroup", self._on_podgroup)
        sim.store.watch("Pod", self._on_pod)

    # ------------------------------------------------------------------ ownership
    def owns(self, pod: Pod) -> bool:
        pg = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
        return pg is not None and f"{pod.namespace}/{pg}" in self.jobs

    def _on_podgroup(self, event: str, pg: PodGroup, old: PodGroup | None) -> None:
        if event == "DELETED" or pg.key in self.jobs:
            return
        a = pg.metadata.annotations
        if not es.has_speed_model(a):
            return
        try:
            sp = es.speed_spec(a)
        except es.SpecError:
            return  # admission reports it; the scheduler treats it as a plain job
        job = next((f"{pg.namespace}/{r.name}" for r in pg.metadata.owner_references if r.kind == "Job"), pg.key)
        vcjob = self.sim.store.get("Job", job)
        src = vcjob.metadata.annotations if vcjob is not None else a
        pause = self.restart_pause
        if RESTART_PAUSE in src:
            pause = ann.parse_duration(src[RESTART_PAUSE])
        submit = self.sim.now
        if vcjob is not None and isinstance(vcjob.metadata.creation_timestamp, (int, float)):
            submit = float(vcjob.metadata.creation_timestamp)
        self.jobs[pg.key] = self._running[pg.key] = TrainState(
            key=pg.key, job=job, speed=sp, pause=pause, submit=submit, t_last=self.sim.now, application=sp.application
        )

    def _gpus_of(self, pod: Pod) -> float:
        """The GPUs a pod requests. A job's pods share their template's containers (the job
        controller copies the spec shallowly): worked out once per containers object, kept with
        the objects it was worked out from."""
        spec = pod.spec
        containers, init, overhead = spec.containers, spec.init_containers, spec.overhead
        hit = self._gpus.get(id(containers))
        if hit is not None and hit[0] is containers and hit[1] is init and hit[2] is overhead:
            return hit[3]
        gpus = sum(v for k, v in pod_requests(spec).items() if es.is_gpu(k))
        if len(self._gpus) >= _GPUS_KEPT:
            self._gpus.clear()
        self._gpus[id(containers)] = (containers, init, overhead, gpus)
        return gpus

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        meta = pod.metadata
        pgname = meta.annotations.get(GROUP_NAME_ANNOTATION)
        if pgname is None:
            return
        namespace = meta.namespace or "default"  # pod.namespace
        st = self.jobs.get(f"{namespace}/{pgname}")
        if st is None or st.finish is not None:
            return
        key = f"{namespace}/{meta.name}"  # pod.key
        running = event != "DELETED" and pod.status.phase == _RUNNING and bool(pod.spec.node_name)
        had = key in st.pods
        if running and not had:
            # (running: it has a node)
            st.pods[key] = (cast(str, pod.spec.node_name), self._gpus_of(pod), pod.metadata.uid)
        elif not running and had:
            del st.pods[key]
        else:
            return
        self._dirty[st.key] = st

    def flush(self) -> bool:
        """Apply the pod changes of this instant to their jobs; True if there were any."""
        if not self._dirty:
            return False
        while self._dirty:
            batch = list(self._dirty.values())
            self._dirty.clear()
            for st in batch:
                if st.finish is None:
                    self._changed(st)
        return True

    # ------------------------------------------------------------------ progress
    def _accrue(self, st: TrainState, now: float) -> None:
        if now > st.t_last:
            n = sum(st.placement.values())
            st.gpu_seconds += n * (now - st.t_last)
            start = max(st.t_last, st.paused_until)
            if st.rate > 0 and now > start:
                # the rate is constant until the next phase boundary, where an event is due
                st.done += st.rate * (now - start)
            st.t_last = now

    def _project(self, st: TrainState, now: float) -> None:
        """Queue the job's next event: completion, or the end of its training phase (an adaptive
        job re-chooses its batch there, so its rate changes)."""
        self._tokens += 1
        st.token = self._tokens
        if st.rate > 0:
            target = min(st.speed.work, next_bound(st.speed.speed, st.done))
            left = max(target - st.done, 0.0)
            self.sim._push(max(now, st.paused_until) + left / st.rate, "train", (st.key, st.token))

    def _changed(self, st: TrainState) -> None:
        now = self.sim.now
        self._accrue(st, now)
        placement: dict[str, int] = {}
        gtype = None
        for node, gpus, _uid in st.pods.values():
            if gpus > 0:
                placement[node] = placement.get(node, 0) + 1
                if gtype is None:
                    gtype = self._node_type(node)
        if placement == st.placement:
            return
        n0, n1 = sum(st.placement.values()), sum(placement.values())
        if n1 and st.first_start is None:
            st.first_start = now
        st.placement = placement
        st.gpu_type = gtype if n1 else None
        if n1 != n0 or not st.history or st.history[-1][2] != st.gpu_type:
            if st.history and st.history[-1][0] == now:
                st.history[-1] = (now, n1, st.gpu_type)
            else:
                st.history.append((now, n1, st.gpu_type))
        if n1:
            shape = tuple(sorted(placement.values(), reverse=True))
            if self._learns_batch(st):
                st.batch = self._agent_batch(st, shape)
            st.rate = self._true_rate(st, shape)
            st.paused_until = now + st.pause
            self._report_later(st, st.paused_until + self.report_period)
        else:
            st.rate = 0.0
        self._record_alloc(now)
        self._report(st, now)
        self._project(st, now)

    # ------------------------------------------------------------------ what the job reports
    def _learns_batch(self, st: TrainState) -> bool:
        """An adaptive-batch job whose agent chooses its batch from what it learned."""
        sp = st.speed.speed
        return not self.oracle and isinstance(sp, PolluxJobSpeed) and sp.adaptive

    def _agent_batch(self, st: TrainState, shape: tuple[int, ...]) -> int:
        """The batch the job's agent picks on ``shape``: the best goodput under its own model;
        before its first measurement, the smallest batch its replicas allow (Pollux's start)."""
        sp = st.speed.speed
        if st.agent is None or not st.agent.observed:
            m = sp.model
            return int(min(max(m.init_batch_size, m.min_local_bsz * sum(shape)), sp.batch_limit))
        return st.agent.best_batch(shape, st.gpu_type)[1]

    def _true_rate(self, st: TrainState, shape: tuple[int, ...]) -> float:
        sp = st.speed.speed
        if st.batch is not None and self._learns_batch(st):
            rate: float = sp.rate_with_batch(shape, st.gpu_type, sp.phase_of(st.done), st.batch)
            return rate
        return rate_at(sp, shape, st.gpu_type, st.done)

    def _report_later(self, st: TrainState, at: float) -> None:
        if self.oracle:
            return
        self._tokens += 1
        st.report_token = self._tokens
        self.sim._push(at, "report", (st.key, st.report_token))

    def _noisy(self, st: TrainState, v: float) -> float:
        if self.report_noise <= 0:
            return v
        if st.rng is None:
            st.rng = np.random.default_rng([self.seed, zlib.crc32(st.key.encode())])
        return float(v * np.exp(self.report_noise * st.rng.standard_normal()))

    def _measure(self, st: TrainState) -> None:
        """What the agent measures on the job's current placement and batch."""
        shape = tuple(sorted(st.placement.values(), reverse=True))
        gtype = st.gpu_type or "default"
        sp = st.speed.speed
        if isinstance(sp, PolluxJobSpeed):
            m = sp.model_for(st.gpu_type)  # (the T4 tables but for a speed measured per type)
            batch = st.batch if st.batch is not None else sp.batch_size
            atomic, accum = m.batch_config(sum(shape), batch)
            key = (gtype, len(shape), sum(shape), atomic, accum)
            if key not in st.profile:
                step, sync = m.step_time(shape, atomic)
                f = sp._factor(st.gpu_type)
                step = self._noisy(st, step / f)
                st.profile[key] = (step, min(self._noisy(st, sync / f), step))
            if sp.adaptive:
                epoch = min(int(np.searchsorted(m.epoch_progress, st.done, side="right")), m.max_epochs - 1)
                sqr, var = m._grad_stats(batch)
                st.grad = (float(sqr[epoch]), float(var[epoch]))
        else:
            rkey = (gtype, len(shape), sum(shape))
            if rkey not in st.rates_seen:
                st.rates_seen[rkey] = self._noisy(st, rate_at(sp, shape, st.gpu_type, st.done))

    def _agent_report(self, st: TrainState) -> Report:
        sp = st.speed.speed
        profile = st.measured
        if len(profile) != len(st.profile):  # (new measurements come last: dicts keep their order)
            profile = st.measured = profile + tuple(
                Measurement(*k, *v) for k, v in itertools.islice(st.profile.items(), len(profile), None)
            )
        rates = tuple((*k, v) for k, v in st.rates_seen.items())
        if not isinstance(sp, PolluxJobSpeed):
            return Report(rates=rates)
        m = sp.model
        return Report(
            profile=profile,
            batch_size=int(st.batch if st.batch is not None else sp.batch_size),
            grad_sqr=st.grad[0] if st.grad is not None else None,
            grad_var=st.grad[1] if st.grad is not None else None,
            init_batch_size=int(m.init_batch_size),
            max_batch_size=int(sp.batch_limit) if sp.adaptive else None,
            local_bsz_bounds=(int(m.min_local_bsz), int(m.max_local_bsz)),
        )

    def _learn(self, st: TrainState, now: float) -> None:
        """Measure, update the agent's own model, re-choose the batch (an adaptive job), report."""
        most = st.agent.max_observed if st.agent is not None else 0
        self._measure(st)
        sp = st.speed.speed
        report = self._agent_report(st)
        st.agent = LearnedSpeed(
            report,
            batch_size=getattr(sp, "batch_size", None),
            adaptive=bool(getattr(sp, "adaptive", False)),
            max_batch_size=report.max_batch_size,
        )
        if self._learns_batch(st):
            shape = tuple(sorted(st.placement.values(), reverse=True))
            batch = self._agent_batch(st, shape)
            if batch != st.batch:
                # a new batch (no restart, as Pollux changes it): measured one period later
                st.batch = batch
                st.rate = self._true_rate(st, shape)
                self._project(st, now)
                self._report_later(st, max(now, st.paused_until) + self.report_period)
        # Read at the scheduler's next cycle: a cycle of its own only when the job was measured on
        # more workers than before (news: the policy may now give it more). Other reports would
        # cost the replay a cycle each for nothing a policy acts on at once.
        self._report(st, now, quiet=st.agent.max_observed <= most)

    def on_report(self, key: str, token: int) -> None:
        """A reporting period has passed on a configuration the job had not measured yet."""
        self.flush()
        st = self.jobs.get(key)
        if st is None or st.finish is not None or st.report_token != token or not st.placement:
            return
        self._accrue(st, self.sim.now)
        self._learn(st, self.sim.now)

    def _report(self, st: TrainState, now: float, quiet: bool = False) -> None:
        pg = self.sim.store.get("PodGroup", st.key)
        if pg is None:
            return
        n = sum(st.placement.values())
        at = max(now, st.paused_until) if n else now
        a = dict(pg.metadata.annotations)
        a[es.PROGRESS] = repr(float(min(st.done / st.speed.work, 1.0) if st.speed.work > 0 else 1.0))
        a[es.PROGRESS_TIME] = repr(float(at))
        a[es.GPU_SECONDS] = repr(float(st.gpu_seconds + n * (at - now)))
        if st.agent is not None:
            rep = st.agent.report
            if rep is None:
                a[METRICS] = "{}"
            else:
                # A progress report between two measurements repeats the agent's last report: its
                # JSON is the one written then (the same string, which readers compare first).
                kept = st.report_json
                if kept is None or kept[0] is not rep:
                    kept = st.report_json = (rep, rep.to_json())
                a[METRICS] = kept[1]
        set_fields(pg.metadata, {"annotations": a})
        self.sim.store.update(pg, quiet=quiet)

    def stale(self, key: str, token: int) -> bool:
        st = self.jobs.get(key)
        return st is None or st.token != token or st.finish is not None

    def on_event(self, key: str, token: int) -> None:
        self.flush()
        st = self.jobs.get(key)
        if st is None or st.token != token or st.finish is not None:
            return
        now = self.sim.now
        self._accrue(st, now)
        if st.done + EPS * max(st.speed.work, 1.0) < st.speed.work:
            nb = next_bound(st.speed.speed, st.done - EPS * max(st.speed.work, 1.0))
            if nb < st.speed.work and st.done + EPS * max(st.speed.work, 1.0) >= nb:
                # a new training phase: the job's rate changes (no pause, no report: the scheduler
                # extrapolates progress phase by phase with the same speed model)
                st.done = max(st.done, nb)
                shape = tuple(sorted(st.placement.values(), reverse=True))
                st.rate = self._true_rate(st, shape) if st.placement else 0.0
                self._project(st, now)
                if st.placement and self._learns_batch(st):
                    self._learn(st, now)  # new gradient statistics: the agent re-tunes its batch
            return
        st.done = st.speed.work
        st.finish = now
        del self._running[st.key]
        st.history.append((now, 0, None))
        self.finished.append(st)
        pods = list(st.pods.items())
        st.pods.clear()
        st.placement = {}
        self._record_alloc(now)
        for pod_key, (_node, _g, uid) in sorted(pods):
            self.sim._finish(pod_key, uid)

    def on_resize(self, key: str, kind: str, count: int) -> None:
        """A resize the scheduler decided (counted as the old replayer counted them)."""
        st = self.jobs.get(key)
        if st is None:
            return
        if kind == "Resized":
            st.resizes += 1
        elif kind == "Halted":
            st.halts += 1
        elif kind == "Migrated":
            st.migrations += count

    # ------------------------------------------------------------------ results
    def _node_type(self, node: str) -> str:
        n = self.sim.store.get("Node", node)
        if n is None:
            return "default"
        labels = n.metadata.labels
        v = next((labels[k] for k in es.DEFAULT_GPU_TYPE_LABELS if labels.get(k)), None)
        return str(v).lower() if v else "default"

    def _record_alloc(self, now: float) -> None:
        alloc: dict[str, int] = {}
        for st in self._running.values():
            if st.placement:
                t = st.gpu_type or "default"
                alloc[t] = alloc.get(t, 0) + sum(st.placement.values())
        if self.timeline and self.timeline[-1][0] == now:
            self.timeline[-1] = (now, alloc)
        else:
            self.timeline.append((now, alloc))

    def capacity(self) -> dict[str, int]:
        cap: dict[str, int] = {}
        for node in self.sim.store.list("Node"):
            g = sum(float(v) for k, v in node.allocatable.items() if es.is_gpu(k))
            if g > 0:
                t = self._node_type(node.name)
                cap[t] = cap.get(t, 0) + int(g)
        return cap

    def result(self, policy: str, wall: float) -> SimResult:
        """The replay as the comparison table and report expect it."""
        from ..elastic.results import JobResult, SimResult

        jobs = []
        for st in sorted(self.jobs.values(), key=lambda s: (s.submit, s.job)):
            jobs.append(
                JobResult(
                    name=st.job.split("/", 1)[-1] if st.job.startswith("default/") else st.job,
                    application=st.application,
                    submit=st.submit,
                    start=st.first_start,
                    finish=st.finish,
                    jct=(st.finish - st.submit) if st.finish is not None else None,
                    resizes=st.resizes,
                    halts=st.halts,
                    migrations=st.migrations,
                    gpu_seconds=st.gpu_seconds,
                    history=list(st.history),
                )
            )
        t0 = min((j.submit for j in jobs), default=0.0)
        timeline: list[tuple[float, dict[str, int]]] = [(t0, {})] + [p for p in self.timeline if p[0] >= t0]
        return SimResult(
            policy=policy,
            jobs=jobs,
            capacity=self.capacity(),
            timeline=timeline,
            reschedules=getattr(self.sim.scheduler.cache.plugin_memo.get("elastic"), "reschedules", 0),
            wall_seconds=wall,
            end_time=self.sim.now,
            clairvoyant=bool(self.sim.elastic_policy_clairvoyant()),
            oracle=self.oracle,
            shared_profiles=self.sim.elastic_shared_profiles(),
        )
