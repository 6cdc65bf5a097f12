"""One forward run: a snapshot restored into the simulator, run on from the time of the forecast.

The snapshot's objects are copied into a fresh simulated cluster as a restarted scheduler and
controllers find a cluster: every object already there, then one ``ADDED`` event each (nodes,
queues and the objects plugins read first, Volcano Jobs last). Running pods end at the times the
forecast drew for them; pods bound during the run last what their job's plan says. Nothing of the
original run's truth is read: no future arrivals, no durations but annotated ones, no true
training speed (elastic jobs train on the speed models the scheduler learned from their reports),
and the ``sim.lavaflow.io/*`` annotations that script the future (deletion, exit codes, spawned
pods, node faults) are dropped from the copies.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from ..api import sim_annotations as ann
from ..api.core import PodPhase
from ..api.volcano import JOB_FINAL_PHASES, JobPhase
from ..scheduler.elastic.state import elastic_option
from ..scheduler.framework.conf import SchedulerConfiguration
from ..sim.engine import Simulation
from ..sim.inputs import SimInput
from ..sim.training import TrainingModel, TrainState
from .runtimes import Plan, group_of, pod_duration

# The simulator's scripts of the future: a real scheduler sees none of them.
FUTURE_ANNOTATIONS = (
    ann.SUBMIT_AT,
    ann.DELETE_AT,
    ann.EXIT_CODE,
    ann.SPAWNED_BY,
    ann.SPAWN_DELAY,
    ann.FAIL_AT,
    ann.RECOVER_AT,
)
# The order objects are announced in: what others refer to first, Volcano Jobs (whose controller
# would otherwise create what the snapshot already holds) last.
FIRST = ("Namespace", "Node", "PriorityClass", "Queue", "HyperNode", "Numatopology", "ResourceQuota")
LAST = ("PodGroup", "Pod", "ReplicaSet", "StatefulSet", "Deployment", "BatchJob", "JobTemplate", "Job", "JobFlow")


class _LearnedTraining(TrainingModel):
    """Runs the elastic jobs measured so far by what the scheduler learned of them, not by the
    simulator's truth: from the work done by the time of the forecast, at the rate their learned
    speed model gives on the workers they have (so a resize or a halt in the forward run moves
    their end, with the restart pause the configuration's ``elastic.resizeCost`` says). Writes no
    measurement (the policies keep what was reported). Other jobs it leaves alone: their pods end
    when the forecast drew."""

    plans: Mapping[str, Plan] = {}
    factors: Mapping[str, float] = {}  # PodGroup key -> how much faster than learned, this run

    def _on_podgroup(self, event: str, pg: Any, old: Any) -> None:
        plan = self.plans.get(pg.key)
        got = plan.progressed if plan is not None else None
        if event == "DELETED" or pg.key in self.jobs or got is None or got.spec is None:
            return
        now = self.sim.now
        st = TrainState(
            key=pg.key,
            job=plan.key if plan is not None else pg.key,
            speed=got.spec,
            pause=max(got.resume - now, 0.0),  # (in a restart pause at the time of the forecast)
            submit=now,
            done=got.done,
            t_last=now,
            first_start=plan.started if plan is not None else None,
        )
        self.jobs[pg.key] = self._running[pg.key] = st

    def _true_rate(self, st: TrainState, shape: tuple[int, ...]) -> float:
        return super()._true_rate(st, shape) * self.factors.get(st.key, 1.0)

    def _changed(self, st: TrainState) -> None:
        super()._changed(st)
        st.pause = self.restart_pause  # (the first change places the job where it already ran)

    def _report_later(self, st: TrainState, at: float) -> None:
        return None

    def _learn(self, st: TrainState, now: float) -> None:
        return None


def _seconds_or(raw: Any, default: float) -> float:
    if raw is None:
        return default
    try:
        return ann.parse_duration(raw)
    except ValueError:
        return default


def _strip(obj: Any) -> None:
    """Drop the future-scripting annotations from an object and the pod templates it holds."""
    metas = [obj.metadata]
    spec = getattr(obj, "spec", None)
    for task in getattr(spec, "tasks", None) or ():
        metas.append(task.template.metadata)
    tmpl = getattr(spec, "template", None)
    if tmpl is not None and hasattr(tmpl, "metadata"):
        metas.append(tmpl.metadata)
    for meta in metas:
        a = meta.annotations
        if any(k in a for k in FUTURE_ANNOTATIONS):
            meta.annotations = {k: v for k, v in a.items() if k not in FUTURE_ANNOTATIONS}


class ForwardRun(Simulation):
    """The simulated cluster restored from a snapshot at ``now``."""

    training_model = _LearnedTraining

    def __init__(
        self,
        objects: Mapping[str, list[Any]],
        conf: SchedulerConfiguration,
        now: float,
        plans: Mapping[str, Plan],
        draws: Mapping[str, float],
        horizon: float,
        seed: int = 0,
    ) -> None:
        super().__init__(SimInput(), conf=conf, seed=seed, until=now + horizon)
        opt = elastic_option(conf)
        cost = (opt.arguments if opt is not None else {}).get("elastic.resizeCost")
        self.training.restart_pause = _seconds_or(cost, self.training.restart_pause)
        training = self.training
        assert isinstance(training, _LearnedTraining)  # (training_model above)
        training.plans, training.factors = plans, draws
        self.now = now
        # The snapshot is what the cluster's scheduler made of ``now``: its next cycle is a period on.
        self.first_tick = now + self.period
        self.plans = plans  # by PodGroup key
        self.draws = draws  # PodGroup key -> drawn run time (history) or speed factor (progress)
        self.t0 = now
        self.job_starts: dict[str, float] = {}  # PodGroup key -> first pod bound in this run
        self._restore(objects)

    # ------------------------------------------------------------------ restore
    def _restore(self, objects: Mapping[str, list[Any]]) -> None:
        store, now = self.store, self.now
        kinds = [k for k in FIRST if k in objects]
        kinds += sorted(k for k in objects if k not in FIRST and k not in LAST)
        kinds += [k for k in LAST if k in objects]
        copies: list[tuple[str, Any]] = []
        for kind in kinds:
            bucket = store._objects.setdefault(kind, {})
            for obj in sorted(objects[kind], key=lambda o: o.key):
                c = copy.deepcopy(obj)
                _strip(c)
                if kind == "Pod" and c.spec.node_name and c.status.phase == PodPhase.PENDING:
                    c.status.phase, c.status.start_time = PodPhase.RUNNING, now  # bound: its kubelet starts it
                bucket[c.key] = c
                store.version += 1
                copies.append((kind, c))
        for kind, c in copies:  # as informers deliver a full list: everything is there already
            store._notify(kind, "ADDED", c, None)
            if kind == "Pod":
                self._restore_pod(c)
        self._settle()

    def _restore_pod(self, pod: Any) -> None:
        rec = self.pod_records.get(pod.metadata.uid)
        if rec is None:
            return
        if isinstance(pod.metadata.creation_timestamp, (int, float)):
            rec["createTime"] = float(pod.metadata.creation_timestamp)
        if pod.status.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            rec["finishTime"] = self.now  # (before the forecast: when exactly does not matter)
            return
        if not pod.spec.node_name or pod.status.phase not in (PodPhase.PENDING, PodPhase.RUNNING):
            return
        start = pod.status.start_time
        rec["startTime"] = float(start) if isinstance(start, (int, float)) else self.now
        if self.training.owns(pod):
            return  # it ends with its job's work
        end = self._end_of_running(pod, rec["startTime"])
        if math.isfinite(end):
            self._push(max(end, self.now), "finish", (pod.key, pod.metadata.uid))

    # ------------------------------------------------------------------ run times
    def _end_of_running(self, pod: Any, started: float) -> float:
        """When a pod running at the time of the forecast ends."""
        own = pod_duration(pod)
        if own is not None:
            return started + own
        group = group_of(pod)
        plan = self.plans.get(group) if group is not None else None
        if plan is None or group is None or group not in self.draws:
            return math.inf
        if plan.source == "progress":
            return self._progress_end(plan, group)
        return (plan.started if plan.started is not None else started) + self.draws[group]

    def _progress_end(self, plan: Plan, group: str) -> float:
        """A job not measured yet: its estimated end, the time left scaled by this run's factor."""
        end = plan.end if plan.end is not None else math.inf
        return self.t0 + (end - self.t0) / self.draws[group]

    def _duration_of(self, pod: Any) -> float:
        """A pod bound in the forward run: its annotation, else its job's plan, else no end."""
        group = group_of(pod)
        if group is not None and group not in self.job_starts:
            self.job_starts[group] = self.now
        own = pod_duration(pod)
        if own is not None:
            return own
        plan = self.plans.get(group) if group is not None else None
        if plan is None or group is None or group not in self.draws:
            return math.inf
        if plan.source == "progress":
            return max(self._progress_end(plan, group) - self.now, 0.0)
        began = plan.started if plan.started is not None else self.job_starts[group]
        return max(began + self.draws[group] - self.now, 0.0)

    # ------------------------------------------------------------------ what happened
    def outcome(self, plans: Mapping[str, Plan]) -> dict[str, tuple[float | None, float | None]]:
        """(start, finish) of each planned job in this run; None where it did not happen."""
        by_group: dict[str, list[dict[str, Any]]] = {}
        for rec in self.pod_records.values():
            g = rec.get("group")
            if g:
                by_group.setdefault(f"{rec['namespace']}/{g}", []).append(rec)
        out: dict[str, tuple[float | None, float | None]] = {}
        for group, plan in plans.items():
            hist = self.job_history.get(plan.key) if self.store.get("Job", plan.key) is not None else None
            recs = by_group.get(group, [])
            if hist is not None:
                start = (
                    plan.started
                    if plan.running
                    else next((h["time"] for h in hist if h["phase"] == JobPhase.RUNNING), None)
                )
                finish = hist[-1]["time"] if hist and hist[-1]["phase"] in JOB_FINAL_PHASES else None
            else:
                starts = [r["startTime"] for r in recs if r["startTime"] is not None]
                start = plan.started if plan.running else (min(starts) if starts else None)
                done = bool(recs) and all(r["finishTime"] is not None for r in recs)
                finish = max(r["finishTime"] for r in recs) if done else None
            out[group] = (start, finish)
        return out
