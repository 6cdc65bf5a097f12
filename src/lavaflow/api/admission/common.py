"""What every admission rule shares: constants, and the small helpers that word problems."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from ..quantity import format_quantity
from ..volcano import Queue

DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_PREFIX = "default"
OPEN = "Open"
QUEUE_STATES = ("Open", "Closed")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
DEPENDS_ON_ITERATIONS = ("any", "all")
MAX_WEIGHT = 65535
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"


def quoted_names(items: Iterable[str], limit: int = 10) -> str:
    items = list(items)
    if not items:
        return "(none)"
    shown = ", ".join(repr(x) for x in items[:limit])
    if len(items) > limit:
        shown += f" and {len(items) - limit} more"
    return shown


def one_of(values: Iterable[str]) -> str:
    return ", ".join(values)


def quantity_text(resource: str, amount: Decimal) -> str:
    return format_quantity(resource, float(amount))


def parent_of(q: Queue) -> str:
    """The queue's parent name, treating an unset parent as ``root`` (except for root itself)."""
    if q.spec.parent:
        return q.spec.parent
    return "" if q.name == ROOT_QUEUE else ROOT_QUEUE


def queue_is_open(q: Queue) -> bool:
    return q.status.state in ("", OPEN)
