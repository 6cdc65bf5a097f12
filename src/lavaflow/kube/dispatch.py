"""Applies a scheduler's decisions to the API server: a fixed pool of workers over three lanes.

One task per request does not scale: a cycle that binds 5,000 pods and then wants 5,000 status
writes and 10,000 events would leave tens of thousands of tasks waiting on a semaphore, and the
event loop spends its time waking them instead of talking to the server. Here a fixed number of
worker coroutines take work from three lanes, in this order:

1. **decisions** (bindings, evictions), first in, first out: pods starting is what matters most;
2. **status** writes (PodGroup and Queue status, pod conditions), coalesced by object: a newer
   status for the same object replaces the one still waiting, so an object is written at most
   once per burst whatever the number of cycles. Status waits while decisions are queued, unless
   its oldest entry has waited ``max_status_delay`` seconds, so it is never starved, or it is
   *urgent* (a PodGroup leaving Pending: the job controller creates its pods only then, so later
   bindings wait on it); at most ``status_workers`` status writes run at once;
3. **events**, best effort, last: at most ``event_backlog`` wait (the oldest are dropped beyond
   that, as client-go's event broadcaster drops them) and at most ``event_workers`` run at once.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Hashable

from .tasks import cancel_and_wait

log = logging.getLogger("lavaflow.kube")

Work = Callable[[], Awaitable[object]]


class Dispatcher:
    def __init__(
        self,
        workers: int = 64,
        status_workers: int = 16,
        event_workers: int = 4,
        event_backlog: int = 10_000,
        max_status_delay: float = 5.0,
    ) -> None:
        self.workers = max(1, workers)
        self.status_workers = max(1, min(status_workers, self.workers))
        self.event_workers = max(1, min(event_workers, self.workers))
        self.max_status_delay = max_status_delay
        self._decisions: collections.deque[Work] = collections.deque()
        self._status: dict[Hashable, tuple[Work, float]] = {}  # insertion order = age order
        self._urgent: dict[Hashable, None] = {}  # status keys that go ahead of decisions, in order
        self._events: collections.deque[Work] = collections.deque(maxlen=max(1, event_backlog))
        self._running_status: set[Hashable] = set()
        self._running_events = 0
        self._busy = 0
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self.events_dropped = 0
        self.done = 0
        self.failed = 0

    # ------------------------------------------------------------------ submitting
    def decision(self, work: Work) -> None:
        self._decisions.append(work)
        self._kick()

    def status(self, key: Hashable, work: Work, urgent: bool = False) -> None:
        """Write ``key``'s status with ``work`` (which should read the newest wanted status when it
        runs). A key already waiting keeps its place in line and gets the newer work. An urgent
        one goes ahead of the decisions (still one write at a time per key)."""
        old = self._status.get(key)
        self._status[key] = (work, old[1] if old is not None else time.monotonic())
        if urgent:
            self._urgent[key] = None
        self._kick()

    def event(self, work: Work) -> None:
        if len(self._events) == self._events.maxlen:
            self.events_dropped += 1
        self._events.append(work)
        self._kick()

    def waiting(self) -> dict[str, int]:
        """Writes not yet started, per lane."""
        return {"decision": len(self._decisions), "status": len(self._status), "event": len(self._events)}

    @property
    def pending(self) -> int:
        return len(self._decisions) + len(self._status) + len(self._events)

    def _kick(self) -> None:
        self._idle.clear()
        self._wake.set()
        if not self._tasks:
            self.start()

    # ------------------------------------------------------------------ workers
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        while len(self._tasks) < self.workers:
            self._tasks.append(loop.create_task(self._worker(), name=f"dispatch-{len(self._tasks)}"))

    def _next(self) -> tuple[str, Hashable, Work] | None:
        status_ok = len(self._running_status) < self.status_workers
        if status_ok and self._urgent:
            key = next((k for k in self._urgent if k not in self._running_status), None)
            if key is not None:
                return "status", key, self._take_status(key)
        if status_ok and self._status and self._decisions:
            key = next((k for k in self._status if k not in self._running_status), None)
            if key is not None and time.monotonic() - self._status[key][1] >= self.max_status_delay:
                return "status", key, self._take_status(key)
        if self._decisions:
            return "decision", None, self._decisions.popleft()
        if status_ok and self._status:
            # A key whose previous write still runs waits for it (writes to one object stay ordered).
            key = next((k for k in self._status if k not in self._running_status), None)
            if key is not None:
                return "status", key, self._take_status(key)
        if self._events and self._running_events < self.event_workers:
            return "event", None, self._events.popleft()
        return None

    def _take_status(self, key: Hashable) -> Work:
        self._urgent.pop(key, None)
        return self._status.pop(key)[0]

    async def _worker(self) -> None:
        while True:
            item = self._next()
            if item is None:
                if self._busy == 0 and not self.pending:
                    self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            lane, key, work = item
            self._busy += 1
            if lane == "status":
                self._running_status.add(key)
            elif lane == "event":
                self._running_events += 1
            try:
                await work()
                self.done += 1
            except asyncio.CancelledError:
                raise
            except Exception:  # the work logs what it knows; a worker must not die of it
                self.failed += 1
                log.exception("%s write failed", lane)
            finally:
                self._busy -= 1
                if lane == "status":
                    self._running_status.discard(key)
                elif lane == "event":
                    self._running_events -= 1
                # a finished write may unblock a waiting key or a lane limit: let the others look
                self._wake.set()

    # ------------------------------------------------------------------ stopping
    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until every lane is empty and no work runs (True) or ``timeout`` passed (False)."""
        if not self._tasks and self.pending:
            self.start()
        if self._busy == 0 and not self.pending:
            return True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def drop_optional(self) -> dict[str, int]:
        """Forget the status writes and events not yet started (a fast stop); decisions stay."""
        dropped = {"status": len(self._status), "event": len(self._events)}
        self._status.clear()
        self._urgent.clear()
        self._events.clear()
        if self._busy == 0 and not self.pending:
            self._idle.set()
        return dropped

    async def stop(self) -> None:
        """Cancel the workers; what was still queued is dropped."""
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        self._decisions.clear()
        self._status.clear()
        self._urgent.clear()
        self._events.clear()
        self._idle.set()


class RateLimiter:
    """A token bucket: on average at most ``rate`` per second, in bursts of at most ``burst``.

    ``reserve()`` takes the next token and returns how long to wait for it (0 when one is
    available now); waiting callers queue up in reservation order. The scheduler passes its
    evictions through one, so a cluster never sees an eviction storm, whatever the actions decide.
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = max(rate, 1e-9)
        self.burst = max(1, burst)
        self.clock = clock
        self._tokens = float(self.burst)
        self._last = clock()

    def reserve(self) -> float:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate
