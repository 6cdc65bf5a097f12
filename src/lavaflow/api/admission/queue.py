"""Volcano's Queue rules: defaults, create/update checks (hierarchy, guarantee/deserved/capability) and delete checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal

from .. import validation as api
from ..validation import Problem
from ..volcano import PodGroup, Queue
from .common import (
    DEFAULT_QUEUE,
    MAX_WEIGHT,
    OPEN,
    QUEUE_STATES,
    ROOT_QUEUE,
    one_of,
    parent_of,
    quantity_text,
    quoted_names,
)


def default_queue(q: Queue) -> None:
    spec = q.spec
    if spec.reclaimable is None:
        spec.reclaimable = True
    if spec.weight == 0:
        spec.weight = 1
    if not spec.parent and q.name != ROOT_QUEUE:
        spec.parent = ROOT_QUEUE
    if not q.status.state:
        q.status.state = OPEN


def _check_order(
    lower: Mapping[str, Decimal],
    upper: Mapping[str, Decimal],
    lower_name: str,
    upper_name: str,
    lower_path: str,
    out: list[Problem],
) -> None:
    for res, amount in lower.items():
        if res in upper and amount > upper[res]:
            out.append(
                Problem(
                    f"{lower_path}[{res}]",
                    f"{lower_name} {res} ({quantity_text(res, amount)}) is more than {upper_name} "
                    f"({quantity_text(res, upper[res])}); it must be at most that.",
                )
            )


def _guarantee(q: Queue) -> Mapping[str, Decimal]:
    return q.spec.guarantee.resource


def _deserved(q: Queue) -> Mapping[str, Decimal]:
    return q.spec.deserved


def _sum_over(queues: Iterable[Queue], get: Callable[[Queue], Mapping[str, Decimal]]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for x in queues:
        for res, amount in get(x).items():
            total[res] = total.get(res, Decimal(0)) + amount
    return total


def validate_queue(q: Queue, queues: Mapping[str, Queue] | None) -> list[Problem]:
    """Queue create/update checks. ``queues`` holds the other queues (``q`` itself may be in it)."""
    out: list[Problem] = []
    spec = q.spec
    api.check_meta(q, out)
    api.check_resources(spec.capability, "spec.capability", out, "capability")
    api.check_resources(spec.deserved, "spec.deserved", out, "deserved")
    api.check_resources(spec.guarantee.resource, "spec.guarantee.resource", out, "guarantee")
    if not 1 <= spec.weight <= MAX_WEIGHT:
        out.append(Problem("spec.weight", f"weight is {spec.weight}; it must be between 1 and {MAX_WEIGHT}."))
    if q.status.state and q.status.state not in QUEUE_STATES:
        out.append(
            Problem(
                "status.state",
                f"Unknown queue state {q.status.state!r}; valid states are: {one_of(QUEUE_STATES)}.",
            )
        )

    guarantee = spec.guarantee.resource
    _check_order(guarantee, spec.deserved, "guarantee", "deserved", "spec.guarantee.resource", out)
    _check_order(spec.deserved, spec.capability, "deserved", "capability", "spec.deserved", out)
    # guarantee vs capability directly only where deserved does not sit between them.
    unbridged = {r: v for r, v in guarantee.items() if r not in spec.deserved}
    _check_order(unbridged, spec.capability, "guarantee", "capability", "spec.guarantee.resource", out)

    # Hierarchy.
    name = q.name
    parent_name = parent_of(q)
    if name == ROOT_QUEUE and spec.parent and spec.parent != ROOT_QUEUE:
        out.append(Problem("spec.parent", f"The root queue cannot have a parent (found {spec.parent!r})."))
        return out
    if parent_name == name and name != ROOT_QUEUE:
        out.append(Problem("spec.parent", f"Queue {name!r} cannot be its own parent; choose another queue or 'root'."))
        return out
    if queues is None:
        return out
    others = {n: x for n, x in queues.items() if n != name}
    parent = others.get(parent_name) if parent_name else None
    if not parent_name:
        pass
    elif parent is None:
        if parent_name != ROOT_QUEUE:
            out.append(
                Problem(
                    "spec.parent",
                    f"Parent queue {parent_name!r} does not exist; existing queues are: {quoted_names(sorted(queues))}.",
                )
            )
    else:
        # Walk up from the parent; reaching this queue again means a loop.
        walk, hops = parent_name, 0
        while walk and walk in others and hops <= len(others):
            nxt = parent_of(others[walk])
            if nxt == name:
                out.append(
                    Problem(
                        "spec.parent",
                        f"Making {parent_name!r} the parent of {name!r} would create a loop of queues; "
                        f"{parent_name!r} already descends from {name!r}.",
                    )
                )
                break
            walk, hops = nxt, hops + 1

        siblings = [x for n, x in others.items() if parent_of(x) == parent_name]
        family = siblings + [q]
        for label, path, get in (
            ("guarantee", "spec.guarantee.resource", _guarantee),
            ("deserved", "spec.deserved", _deserved),
        ):
            mine = get(q)
            limit = get(parent)
            totals = _sum_over(family, get)
            for res, cap in limit.items():
                if res in mine and totals.get(res, Decimal(0)) > cap:
                    out.append(
                        Problem(
                            f"{path}[{res}]",
                            f"The children of queue {parent_name!r} would together have {label} {res} "
                            f"{quantity_text(res, totals[res])}, more than the parent's {quantity_text(res, cap)}; "
                            f"lower this queue's {label} or raise the parent's.",
                        )
                    )
        for res, cap in parent.spec.capability.items():
            own = spec.capability.get(res)
            if own is not None and own > cap:
                out.append(
                    Problem(
                        f"spec.capability[{res}]",
                        f"capability {res} ({quantity_text(res, own)}) is more than the capability of parent queue "
                        f"{parent_name!r} ({quantity_text(res, cap)}); it must be at most that.",
                    )
                )

    # As a parent: the existing children must still fit.
    children = [x for n, x in others.items() if parent_of(x) == name]
    if children:
        child_names = quoted_names(sorted(x.name for x in children))
        for label, path, get in (
            ("guarantee", "spec.guarantee.resource", _guarantee),
            ("deserved", "spec.deserved", _deserved),
        ):
            totals = _sum_over(children, get)
            for res, cap in get(q).items():
                if res in totals and totals[res] > cap:
                    out.append(
                        Problem(
                            f"{path}[{res}]",
                            f"{label} {res} ({quantity_text(res, cap)}) is less than the {quantity_text(res, totals[res])} "
                            f"that child queues {child_names} together have; raise it or lower theirs.",
                        )
                    )
        for res, cap in spec.capability.items():
            over = sorted(x.name for x in children if res in x.spec.capability and x.spec.capability[res] > cap)
            if over:
                out.append(
                    Problem(
                        f"spec.capability[{res}]",
                        f"capability {res} ({quantity_text(res, cap)}) is below the capability of child queues "
                        f"{quoted_names(over)}; raise it or lower theirs.",
                    )
                )
    return out


def validate_queue_delete(name: str, queues: Mapping[str, Queue], podgroups: Iterable[PodGroup]) -> list[Problem]:
    """Whether queue ``name`` may be deleted, given all queues and all PodGroups."""
    if name in (DEFAULT_QUEUE, ROOT_QUEUE):
        return [Problem("", f"The {name!r} queue is built in and cannot be deleted.")]
    if name not in queues:
        return [Problem("", f"Queue {name!r} does not exist, so it cannot be deleted.")]
    out: list[Problem] = []
    children = sorted(n for n, x in queues.items() if n != name and parent_of(x) == name)
    if children:
        out.append(
            Problem("", f"Queue {name!r} still has child queues ({quoted_names(children)}); delete or move them first.")
        )
    users = sorted(pg.key for pg in podgroups if (pg.spec.queue or DEFAULT_QUEUE) == name)
    if users:
        out.append(
            Problem(
                "",
                f"Queue {name!r} still holds {len(users)} PodGroup(s) ({quoted_names(users, 5)}); "
                "delete their jobs or wait for them to finish first.",
            )
        )
    return out
