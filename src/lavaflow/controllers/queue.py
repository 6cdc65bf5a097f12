"""Queue controller: the root and default queues, and PodGroup counts per phase in queue status."""

from __future__ import annotations

from ..api.volcano import Queue, QueueSpec
from .base import Controller

COUNTED = {"Pending": "pending", "Inqueue": "inqueue", "Running": "running", "Unknown": "unknown", "Completed": "completed"}


def builtin_queues() -> list[Queue]:
    root = Queue.model_validate({"metadata": {"name": "root"}, "spec": {"weight": 1, "reclaimable": False}})
    default = Queue.model_validate({"metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True, "parent": "root"}})
    root.status.state = "Open"
    default.status.state = "Open"
    return [root, default]


class QueueController(Controller):
    def __init__(self, store, clock) -> None:
        super().__init__(store, clock)
        store.watch("PodGroup", lambda ev, pg, old: self.mark(pg.spec.queue or "default"))
        store.watch("Queue", lambda ev, q, old: self.mark(q.name) if ev != "DELETED" else None)

    def ensure_builtin(self) -> None:
        for q in builtin_queues():
            if self.store.get("Queue", q.name) is None:
                self.store.create(q)

    def sync(self, name: str) -> None:
        queue: Queue | None = self.store.get("Queue", name)
        if queue is None:
            return
        counts = dict.fromkeys(COUNTED.values(), 0)
        for pg in self.store.list("PodGroup"):
            if (pg.spec.queue or "default") == name:
                field = COUNTED.get(pg.status.phase or "Pending")
                if field:
                    counts[field] += 1
        st = queue.status
        changed = any(getattr(st, f) != v for f, v in counts.items()) or not st.state
        if changed:
            for f, v in counts.items():
                setattr(st, f, v)
            st.state = st.state or "Open"
            if not isinstance(queue.spec, QueueSpec):  # pragma: no cover - defensive
                return
            self.store.update(queue)
