"""A job's status: the phase and its changes (``_set_phase``, which releases a finished job's
PodGroup and delayed actions), the pod counts written into the status from the job's tally,
and a snapshot to tell whether a sync changed the status."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from ...api.core import Pod, PodPhase
from ...api.volcano import JOB_FINAL_PHASES, Job, JobStatus
from .policies import PolicyMixin
from .tally import TERMINATING
from .util import podgroup_name


class StatusMixin(PolicyMixin):
    def _set_phase(self, job: Job, phase: str, reason: str = "", message: str = "") -> None:
        if job.status.state.phase == phase:
            return
        phase = str(phase)  # (a JobPhase: the object and whatever reads it get the plain string)
        now = self.clock()
        previous = job.status.state.phase
        job.status.state.phase = phase
        self._transitions += 1
        job.status.state.reason = str(reason) if reason else None
        job.status.state.message = message or None
        job.status.state.last_transition_time = now
        if self.on_phase is not None:
            self.on_phase(job, previous, phase, now)
        if phase in JOB_FINAL_PHASES:
            # A finished job releases its PodGroup, so its admission reserves nothing any more.
            self.store.delete("PodGroup", f"{job.namespace}/{podgroup_name(job)}")
            self._cancel(job.key)

    def _counts(self, job: Job, pods: dict[str, Pod]) -> dict[str, int]:
        """The job's pod counts (kept from pod events) written into its status where they differ."""
        tally = self.tallies[job.key]
        counts = tally.counts
        st = job.status
        if tally.written is st and not tally.dirty and st.task_status_count is tally.task_status:
            return counts
        for field, phase in _COUNT_FIELDS:
            if getattr(st, field) != counts[phase]:
                setattr(st, field, counts[phase])
        tsc = tally.status()
        if st.task_status_count is not tsc and st.task_status_count != tsc:
            st.task_status_count = tsc
        tally.written = st
        return counts


_COUNT_FIELDS = (
    ("pending", PodPhase.PENDING.value),
    ("running", PodPhase.RUNNING.value),
    ("succeeded", PodPhase.SUCCEEDED.value),
    ("failed", PodPhase.FAILED.value),
    ("unknown", PodPhase.UNKNOWN.value),
    ("terminating", TERMINATING),
)


def _status_layout() -> tuple[Callable[[dict[str, Any]], Any], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """JobStatus's fields by what their values are (judged from a blank status): scalars (one
    itemgetter), models, dicts and lists."""
    kinds: dict[str, list[str]] = {"scalar": [], "model": [], "dict": [], "list": []}
    for name, v in JobStatus().__dict__.items():
        t = type(v)
        kind = "dict" if t is dict else "list" if t is list else "model" if hasattr(t, "model_fields") else "scalar"
        kinds[kind].append(name)
    scalars = kinds["scalar"]
    return itemgetter(*scalars, scalars[0]), tuple(kinds["model"]), tuple(kinds["dict"]), tuple(kinds["list"])


_STATUS_SCALARS, _STATUS_MODELS, _STATUS_DICTS, _STATUS_LISTS = _status_layout()


def snapshot(status: JobStatus) -> tuple[Any, ...]:
    """A job status's values, cheap to compare (containers copied one level, models by their fields)."""
    fields = status.__dict__
    return (
        _STATUS_SCALARS(fields),
        *[tuple(fields[n].__dict__.values()) for n in _STATUS_MODELS],
        *[dict(fields[n]) for n in _STATUS_DICTS],
        *[list(fields[n]) for n in _STATUS_LISTS],
    )
