"""A controller keeps a set of dirty keys and reconciles them when asked."""

from __future__ import annotations

from collections.abc import Callable


class Controller:
    def __init__(self, store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self.dirty: set[str] = set()

    def mark(self, key: str) -> None:
        self.dirty.add(key)

    def run(self) -> int:
        """Reconcile every dirty key (in sorted order, for determinism); returns how many."""
        done = 0
        while self.dirty:
            for key in sorted(self.dirty):
                self.dirty.discard(key)
                self.sync(key)
                done += 1
        return done

    def sync(self, key: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def owner_of(obj) -> tuple[str, str] | None:
    """(kind, name) of the controlling owner reference, if any."""
    for ref in obj.metadata.owner_references:
        if ref.controller:
            return ref.kind, ref.name
    refs = obj.metadata.owner_references
    return (refs[0].kind, refs[0].name) if refs else None
