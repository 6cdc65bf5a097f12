"""Admission: the defaults and checks Volcano's webhooks apply on create, update and delete.

One module per kind — :mod:`.job`, :mod:`.podgroup`, :mod:`.queue`, :mod:`.pod`,
:mod:`.jobflow` (JobFlow and JobTemplate), :mod:`.command`, :mod:`.topology` (HyperNode,
Numatopology) — plus :mod:`.durations` and :mod:`.common`. Each ``default_*`` function
mutates an object in place, as a mutating webhook would; each ``validate_*`` function returns
a list of :class:`Problem` (empty when the object is acceptable). A problem's ``path`` uses the
YAML (camelCase) field names, list indexes in brackets and map keys in brackets, e.g.
``spec.tasks[1].minAvailable`` or ``spec.capability[cpu]``; ``""`` stands for the object as a
whole. The caller adds the object's kind and name.

:data:`RULES` gives, per kind, the rules as the simulator's input check and the webhook both
call them, with what they need from the cluster in a :class:`Context`.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..validation import Problem
from ..volcano import PodGroup, Queue
from .command import COMMAND_TARGETS, validate_command
from .common import (
    DEFAULT_MAX_RETRY,
    DEFAULT_QUEUE,
    JDB_MAX_UNAVAILABLE,
    JDB_MIN_AVAILABLE,
    QUEUE_STATES,
    ROOT_QUEUE,
    TOPOLOGY_POLICIES,
    quoted_names,
)
from .durations import parse_duration
from .job import default_job, validate_job, validate_job_update
from .jobflow import template_job, validate_jobflow, validate_jobtemplate
from .pod import validate_pod
from .podgroup import default_podgroup, validate_podgroup
from .queue import default_queue, validate_queue, validate_queue_delete
from .topology import validate_hypernode, validate_numatopology

__all__ = [
    "Problem",
    "Context",
    "Rules",
    "RULES",
    "parse_duration",
    "default_job",
    "validate_job",
    "validate_job_update",
    "default_podgroup",
    "validate_podgroup",
    "default_queue",
    "validate_queue",
    "validate_queue_delete",
    "validate_pod",
    "validate_jobflow",
    "validate_jobtemplate",
    "template_job",
    "validate_command",
    "validate_hypernode",
    "validate_numatopology",
    "COMMAND_TARGETS",
    "DEFAULT_QUEUE",
    "ROOT_QUEUE",
    "DEFAULT_MAX_RETRY",
    "JDB_MIN_AVAILABLE",
    "JDB_MAX_UNAVAILABLE",
    "TOPOLOGY_POLICIES",
    "QUEUE_STATES",
    "quoted_names",
]


@dataclass(frozen=True)
class Context:
    """What the rules may read besides the object: the cluster (or the simulation input) as it is."""

    queues: Mapping[str, Queue] | None = None  # None: queue checks are skipped
    podgroups: Callable[[], Iterable[PodGroup]] = tuple
    namespace_queue: Callable[[str], str | None] | None = None  # a Namespace's queue annotation
    scheduler_name: str = "volcano"  # the Job default
    scheduler_names: tuple[str, ...] | None = None  # pods of other schedulers are not checked; None: all
    existing: Container[tuple[str, str]] | None = None  # (kind, key) of Jobs and Queues, for Commands
    templates: Container[str] | None = None  # JobTemplate keys, for JobFlows
    where: str = "in the input"  # how a missing Command target is worded


@dataclass(frozen=True)
class Rules:
    """One kind's admission: ``mutate`` on create (None: no mutating webhook), ``validate`` on
    create (and on update unless ``validate_update`` is given: it is handed the old object, or
    None when that cannot be read), ``validate_delete`` by name."""

    validate: Callable[[Any, Context], list[Problem]]
    mutate: Callable[[Any, Context], None] | None = None
    validate_update: Callable[[Any, Any, Context], list[Problem]] | None = None
    validate_delete: Callable[[str, Context], list[Problem]] | None = None


def _mutate_podgroup(pg: PodGroup, ctx: Context) -> None:
    default_podgroup(pg, ctx.namespace_queue(pg.namespace) if ctx.namespace_queue else None)


RULES: dict[str, Rules] = {
    "Job": Rules(
        mutate=lambda job, ctx: default_job(job, ctx.scheduler_name),
        validate=lambda job, ctx: validate_job(job, ctx.queues),
        validate_update=lambda old, new, ctx: validate_job_update(old, new) if old is not None else [],
    ),
    "PodGroup": Rules(
        mutate=_mutate_podgroup,
        validate=lambda pg, ctx: validate_podgroup(pg, ctx.queues),
        # on update the queue may have closed since: only the PodGroup itself is checked
        validate_update=lambda old, new, ctx: validate_podgroup(new, None),
    ),
    "Queue": Rules(
        mutate=lambda q, ctx: default_queue(q),
        validate=lambda q, ctx: validate_queue(q, ctx.queues),
        validate_delete=lambda name, ctx: validate_queue_delete(name, ctx.queues or {}, ctx.podgroups()),
    ),
    "Pod": Rules(validate=lambda pod, ctx: validate_pod(pod, ctx.scheduler_names)),
    "JobFlow": Rules(validate=lambda jf, ctx: validate_jobflow(jf, ctx.templates)),
    "JobTemplate": Rules(validate=lambda t, ctx: validate_jobtemplate(t, ctx.queues, ctx.scheduler_name)),
    "Command": Rules(validate=lambda cmd, ctx: validate_command(cmd, ctx.existing, ctx.where)),
    "HyperNode": Rules(validate=lambda hn, ctx: validate_hypernode(hn)),
    "Numatopology": Rules(validate=lambda nt, ctx: validate_numatopology(nt)),
}
