"""The job controller's state: what it keeps per live Job, pod and PodGroup.

:class:`JobBase` is the bottom of the classes that make up :class:`~.controller.JobController`,
one module a subject, each class built on the one below it (policies, status, pods, PodGroup,
actions, handlers, then the controller): a method uses only what lies beneath its class."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...api.core import Pod
from ...api.volcano import Job
from ..base import Controller
from .tally import Tally
from .util import Request

if TYPE_CHECKING:  # pragma: no cover
    from ...store.base import Store
    from ..base import Clock


class JobBase(Controller):
    def __init__(self, store: Store, clock: Clock, priority_of: Callable[[str | None], int] | None = None) -> None:
        super().__init__(store, clock)
        self.priority_of = priority_of or (lambda name: 0)
        # Called as on_phase(job, previous phase, new phase, time) on every phase change ("" before the
        # first): the simulator keeps each job's history for its report; the controller keeps none,
        # as it also runs on a cluster for ever.
        self.on_phase: Callable[[Job, str, str, float], None] | None = None
        # Everything below is per live object and dropped when the object goes.
        self.pods_by_job: dict[str, dict[str, Pod]] = {}
        self.tallies: dict[str, Tally] = {}  # job key -> pod counts, from pod events
        self.requests: dict[str, list[Request]] = {}
        self.pod_phase: dict[str, str] = {}  # pod uid -> last phase seen
        self.killing: set[str] = set()  # uids of pods this controller deleted
        self.task_restarts: dict[str, dict[str, int]] = {}  # job key -> task -> restarts
        self.pg_phase: dict[str, str] = {}
        self.podgroups_of: dict[str, dict[str, None]] = {}  # job key -> keys of the PodGroups it owns
        self.specs: dict[
            str, tuple[Any, dict[str, Any]]
        ] = {}  # last accepted spec per job (to tell updates from status writes)
        self._templates: dict[
            str, dict[str, tuple[tuple[Any, ...], Pod, list[str]]]
        ] = {}  # job key -> task -> pod template
        self._name_sets: dict[str, dict[str, frozenset[str]]] = {}  # job key -> task -> its pods' names
        self.name_conflicts: set[tuple[str, str]] = set()  # (job key, pod name) another object holds
        self.forbidden: dict[str, dict[str, str]] = {}  # namespace -> job key -> why a pod create was refused
        # (Job resourceVersion, lavaflow.io/* annotations, the ``specs`` entry and all annotations
        # they were worked out from) last copied to the PodGroup
        self._elastic_seen: dict[str, tuple[str, dict[str, str], Any, dict[str, str]]] = {}
        self._timer_tokens: dict[int, tuple[str, str]] = {}  # live delayed actions: token -> (job, scope)
        self._transitions = 0  # phase changes made so far (a sync tells whether it made any)
        # Jobs whose status the controller is writing with the phase unmoved (their write's own
        # event needs no reconcile); the write may be applied after sync returns (update_later).
        self._own_writes: set[str] = set()
        self._next_token = 0
