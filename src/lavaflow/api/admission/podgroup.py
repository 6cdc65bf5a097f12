"""Volcano's PodGroup rules: the queue default (namespace annotation) and the create checks."""

from __future__ import annotations

from collections.abc import Mapping

from .. import validation as api
from ..validation import Problem
from ..volcano import PodGroup, Queue
from .common import DEFAULT_QUEUE, queue_is_open, quoted_names


def default_podgroup(pg: PodGroup, namespace_queue: str | None = None) -> None:
    """Default the queue: the namespace's queue annotation when given, else ``default``.

    As in Volcano, a PodGroup left on the ``default`` queue is moved to the
    namespace's queue (``scheduling.volcano.sh/queue-name`` on the Namespace).
    """
    if namespace_queue and pg.spec.queue in ("", DEFAULT_QUEUE):
        pg.spec.queue = namespace_queue
    elif not pg.spec.queue:
        pg.spec.queue = DEFAULT_QUEUE


def validate_podgroup(pg: PodGroup, queues: Mapping[str, Queue] | None = None) -> list[Problem]:
    out: list[Problem] = []
    api.check_meta(pg, out)
    api.check_int32(pg.spec.min_member, "spec.minMember", out, "minMember")
    if pg.spec.min_resources:
        api.check_resources(pg.spec.min_resources, "spec.minResources", out, "minResources")
    if pg.spec.min_member < 0:
        out.append(Problem("spec.minMember", f"minMember is {pg.spec.min_member}; it must not be negative."))
    for task, n in pg.spec.min_task_member.items():
        if n < 0:
            out.append(
                Problem(f"spec.minTaskMember[{task}]", f"minTaskMember for {task!r} is {n}; it must not be negative.")
            )
    if queues is not None:
        name = pg.spec.queue or DEFAULT_QUEUE
        q = queues.get(name)
        if q is None:
            out.append(
                Problem(
                    "spec.queue", f"Queue {name!r} does not exist; existing queues are: {quoted_names(sorted(queues))}."
                )
            )
        elif not queue_is_open(q):
            out.append(
                Problem(
                    "spec.queue",
                    f"Queue {name!r} is {q.status.state}; PodGroups can only be submitted to an Open queue.",
                )
            )
    return out
