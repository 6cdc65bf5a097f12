"""A job's pod counts, by the phase its status reports and by task, kept up to date from pod
events (never re-derived from all the pods): what the status counts and the phases read."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from ...api.core import Pod, PodPhase
from ...api.volcano import TASK_INDEX_KEY, TASK_SPEC_KEY
from .util import to_int

if TYPE_CHECKING:  # pragma: no cover
    from ...api.volcano import JobStatus

K = TypeVar("K")

TERMINATING = "Terminating"  # a pod whose deletion is pending, as the Job status counts it
# The counted phases as plain strs, the keys of Tally.counts (looked up per pod event: see util.ALIVE).
PHASES = tuple(
    p.value for p in (PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.UNKNOWN)
) + (TERMINATING,)
_PHASE_ORDER = {p: i for i, p in enumerate(PHASES)}


class Tally:
    """A job's pod counts, kept up to date from pod events (never re-derived from all pods).

    ``counts``/``tasks`` count pods by the phase the job status reports (Terminating when a
    deletion is pending); ``raw`` counts each task's pods by ``status.phase``; ``indices``
    counts each task's pods by their task-index label.
    """

    __slots__ = ("seen", "counts", "tasks", "raw", "indices", "task_status", "dirty", "written")

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, str, str, int | None]] = {}  # pod name -> (task, counted, raw, index)
        self.counts: dict[str, int] = dict.fromkeys(PHASES, 0)
        self.tasks: dict[str, dict[str, int]] = {}
        self.raw: dict[str, dict[str, int]] = {}
        self.indices: dict[str, dict[int, int]] = {}
        self.task_status: dict[str, dict[str, dict[str, int]]] = {}
        self.dirty = False  # task_status to rebuild
        self.written: JobStatus | None = None  # the status object the counts were last written into

    def put(self, pod: Pod) -> None:
        meta = pod.metadata
        labels = meta.labels
        raw = pod.status.phase
        counted = TERMINATING if meta.deletion_timestamp is not None else raw
        task = labels.get(TASK_SPEC_KEY, "")
        index = to_int(labels.get(TASK_INDEX_KEY))
        entry = (task, counted, raw, index)
        seen = self.seen
        prev = seen.get(meta.name)
        if prev == entry:
            return
        seen[meta.name] = entry
        if prev is None:
            self._add(entry, 1)
            return
        if prev[0] != task or prev[3] != index:
            self._add(prev, -1)
            self._add(entry, 1)
            return
        # The same task and index (a pod's phase changed): what _add(prev, -1) then _add(entry, 1)
        # do, in the same order, without the index count that would go down and up again.
        before, before_raw = prev[1], prev[2]
        counts, by_phase, by_raw = self.counts, self.tasks[task], self.raw[task]
        counts[before] = counts.get(before, 0) - 1
        _bump(by_phase, before, -1)
        _bump(by_raw, before_raw, -1)
        counts[counted] = counts.get(counted, 0) + 1
        _bump(by_phase, counted, 1)
        _bump(by_raw, raw, 1)
        self.dirty = True

    def drop(self, name: str) -> None:
        prev = self.seen.pop(name, None)
        if prev is not None:
            self._add(prev, -1)

    def _add(self, entry: tuple[str, str, str, int | None], n: int) -> None:
        task, counted, raw, index = entry
        self.counts[counted] = self.counts.get(counted, 0) + n
        _bump(self.tasks.setdefault(task, {}), counted, n)
        _bump(self.raw.setdefault(task, {}), raw, n)
        if index is not None:
            _bump(self.indices.setdefault(task, {}), index, n)
        self.dirty = True

    def task_pods(self, task: str) -> int:
        return sum(self.raw.get(task, {}).values())

    def task_phase(self, task: str, *phases: str) -> int:
        raw = self.raw.get(task)
        return sum(raw.get(p, 0) for p in phases) if raw else 0

    def phase(self, *phases: str) -> int:
        """Pods (of every task) whose ``status.phase`` is one of ``phases``."""
        return sum(raw.get(p, 0) for raw in self.raw.values() for p in phases)

    def status(self) -> dict[str, dict[str, dict[str, int]]]:
        """Job status ``taskStatusCount``: a new dict when a count changed, else the same one."""
        if self.dirty:
            self.task_status = {
                t: {"phase": {p: c[p] for p in sorted(c, key=lambda p: _PHASE_ORDER.get(p, len(PHASES)))}}
                for t, c in sorted(self.tasks.items())
                if c
            }
            self.dirty = False
        return self.task_status


def _bump(counts: dict[K, int], key: K, n: int) -> None:
    v = counts.get(key, 0) + n
    if v:
        counts[key] = v
    else:
        counts.pop(key, None)
