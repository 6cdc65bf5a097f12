"""A controller keeps a set of dirty keys and reconciles them when asked."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..store.base import Store

# The backend's clock: virtual seconds in the simulator, wall-clock time on a cluster.
Clock = Callable[[], float]

# The dirty key under which a bus.volcano.sh Command is consumed (see Controller.take_command).
COMMAND_KEY = "command:"


class Controller:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.dirty: set[str] = set()
        # Delayed work: (time, seq, key, payload). The backend asks next_timer() when to wake us.
        self._timers: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()
        self.on_timer_added: Callable[[float], None] | None = None

    def schedule(self, time: float, key: str, payload: Any = None) -> None:
        """Reconcile ``key`` again at ``time`` with ``payload`` handed to :meth:`timer_fired`."""
        heapq.heappush(self._timers, (time, next(self._seq), key, payload))
        if self.on_timer_added is not None:
            self.on_timer_added(time)

    def next_timer(self) -> float | None:
        return self._timers[0][0] if self._timers else None

    def fire_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, _, key, payload = heapq.heappop(self._timers)
            self.timer_fired(key, payload)
            self.mark(key)

    def timer_fired(self, key: str, payload: Any) -> None:
        """Override to act on a timer's payload before the key is reconciled."""

    def mark(self, key: str) -> None:
        self.dirty.add(key)

    def take_command(self, key: str) -> tuple[Any, str] | None:
        """The Command ``key`` and the name of its target, deleted from the store: consumed at
        most once, as Volcano does. Called from sync (a Command's watch handler marks
        ``COMMAND_KEY + key``), never from a watch handler: on a cluster handlers run on the
        event loop, where the store cannot write."""
        cmd = self.store.get("Command", key)
        if cmd is None:
            return None
        self.store.delete("Command", key)
        target = cmd.target if isinstance(cmd.target, dict) else {}
        return cmd, str(target.get("name") or "")

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
