"""Queue controller: root/default queues, queue states, PodGroup counts in queue status.

States follow Volcano's queue controller: ``CloseQueue`` turns an Open queue
Closed when it holds no PodGroups, else Closing; a Closing queue becomes Closed
once its last PodGroup is gone; ``OpenQueue`` reopens it — unless its parent is
closed, which keeps it Closed. Closing a parent closes its children. Commands
(bus.volcano.sh/v1alpha1) targeting a Queue are consumed exactly once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..api.volcano import PodGroupPhase, Queue
from .base import COMMAND_KEY, Controller

if TYPE_CHECKING:  # pragma: no cover
    from ..api.volcano import Command, PodGroup
    from ..store.base import Store
    from .base import Clock


COUNTED = {phase.value: phase.value.lower() for phase in PodGroupPhase}  # PodGroup phase -> Queue status field
QUEUE_ACTIONS = ("OpenQueue", "CloseQueue")


def builtin_queues() -> list[Queue]:
    root = Queue.model_validate({"metadata": {"name": "root"}, "spec": {"weight": 1, "reclaimable": False}})
    default = Queue.model_validate(
        {"metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True, "parent": "root"}}
    )
    root.status.state = "Open"
    default.status.state = "Open"
    return [root, default]


class QueueController(Controller):
    def __init__(self, store: Store, clock: Clock) -> None:
        super().__init__(store, clock)
        # Desired state per queue as last commanded ("Open" or "Closed").
        self.desired: dict[str, str] = {}
        # PodGroups per queue, by status field, kept from PodGroup events (never by listing them all).
        self.pg_seen: dict[str, tuple[str, str | None]] = {}  # PodGroup key -> (queue, counted field)
        self.pg_counts: dict[str, dict[str | None, int]] = {}  # queue -> field (None: not counted) -> n
        store.watch("PodGroup", self._on_podgroup)
        store.watch("Queue", self._on_queue)
        store.watch("Command", self._on_command)

    def _on_queue(self, event: str, queue: Queue, old: Queue | None) -> None:
        if event == "DELETED":
            return
        self.mark(queue.name)
        for child in self._children(queue.name):
            self.mark(child.name)

    def _on_podgroup(self, event: str, pg: PodGroup, old: PodGroup | None) -> None:
        queue = pg.spec.queue or "default"
        key = pg.key
        if event != "DELETED" and self.pg_seen.get(key) == (
            queue,
            COUNTED.get(pg.status.phase or PodGroupPhase.PENDING),
        ):
            # Neither its queue nor its counted phase moved (most PodGroup writes: status counts,
            # progress reports): the queue's counts are those its last sync saw.
            return
        prev = self.pg_seen.pop(key, None)
        if prev is not None:
            counts = self.pg_counts[prev[0]]
            counts[prev[1]] -= 1
            if not counts[prev[1]]:
                del counts[prev[1]]
                if not counts:
                    del self.pg_counts[prev[0]]
        if event != "DELETED":
            seen = self.pg_seen[key] = (queue, COUNTED.get(pg.status.phase or PodGroupPhase.PENDING))
            counts = self.pg_counts.setdefault(queue, {})
            counts[seen[1]] = counts.get(seen[1], 0) + 1
        self.mark(queue)

    def _on_command(self, event: str, cmd: Command, old: Command | None) -> None:
        if event != "DELETED" and cmd.action in QUEUE_ACTIONS:
            self.mark(COMMAND_KEY + cmd.key)

    def ensure_builtin(self) -> None:
        for q in builtin_queues():
            if self.store.get("Queue", q.name) is None:
                self.store.create(q)

    def _children(self, name: str) -> list[Queue]:
        return [
            q
            for q in self.store.list("Queue")
            if (q.spec.parent or ("" if q.name == "root" else "root")) == name and q.name != name
        ]

    def _parent_closed(self, queue: Queue) -> bool:
        seen = {queue.name}
        parent = queue.spec.parent or ("" if queue.name == "root" else "root")
        while parent and parent not in seen:
            seen.add(parent)
            p = self.store.get("Queue", parent)
            if p is None:
                return False
            if self.desired.get(p.name, "Open") == "Closed" or p.status.state in ("Closed", "Closing"):
                return True
            parent = p.spec.parent or ("" if p.name == "root" else "root")
        return False

    def sync(self, key: str) -> None:
        if key.startswith(COMMAND_KEY):
            self._consume(key[len(COMMAND_KEY) :])
            return
        queue: Queue | None = self.store.get("Queue", key)
        if queue is None:
            return
        counts = dict.fromkeys(COUNTED.values(), 0)
        groups = 0
        for field, n in self.pg_counts.get(key, {}).items():
            groups += n
            if field:
                counts[field] += n
        st = queue.status
        state = self._state(queue, groups)
        changed = any(getattr(st, f) != v for f, v in counts.items()) or st.state != state
        if changed:
            for f, v in counts.items():
                setattr(st, f, v)
            st.state = state
            self.store.update_later(queue)  # (on a cluster, sent while the next keys sync)

    def _state(self, queue: Queue, groups: int) -> str:
        want = self.desired.get(queue.name)
        if want is None:
            want = "Closed" if queue.status.state in ("Closed", "Closing") else "Open"
            self.desired[queue.name] = want
        if want == "Open" and not self._parent_closed(queue):
            return "Open"
        return "Closing" if groups else "Closed"

    def _consume(self, key: str) -> None:
        taken = self.take_command(key)
        if taken is None:
            return
        cmd, target = taken
        if not target or self.store.get("Queue", target) is None:
            return
        self.desired[target] = "Open" if cmd.action == "OpenQueue" else "Closed"
        self.mark(target)
        for child in self._children(target):
            self.mark(child.name)
