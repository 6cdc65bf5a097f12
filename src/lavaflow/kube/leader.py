"""Leader election on a coordination.k8s.io/v1 Lease (client-go's LeaseLock semantics).

A candidate takes the lease when it is free or when its holder has not renewed
it for ``lease_duration`` seconds *as observed locally* (no clock comparison
across machines); the leader renews every ``retry_period`` and steps down if it
could not renew within ``renew_deadline``. On a graceful stop the lease is
released so a successor does not have to wait.

How soon a standby takes over a dead leader: it counts ``lease_duration`` from the moment it
*saw* the leader's last renewal, so what matters is how late it sees it. A standby reads the
Lease from its process's start (:meth:`LeaderElector.start_observing`, while its caches still
fill; reading only after them was seconds late at 1,000 nodes) and, until it leads, every
``STANDBY_POLL`` seconds at most (not only every ``retry_period``, 2 s by default, which could see
a renewal up to 2 s after it was made). A killed leader is then replaced within ``lease_duration``
+ ``STANDBY_POLL`` + one round trip of its death.

Fencing: a leader may write (bind, evict) only while :meth:`LeaderElector.holding` is true, i.e.
less than ``renew_deadline`` has passed, on this process's monotonic clock, since the *start* of
its last successful renewal. A standby counts ``lease_duration`` (longer than ``renew_deadline``)
from when it saw that renewal, which is after it started, so the two never write at the same
time, even when the leader was frozen (SIGSTOP, a long GC or swap) and wakes up with queued
writes: its clock kept running while it was stopped, and the check refuses them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .client import ApiError, KubeClient
from .codec import micro_time
from .tasks import cancel_and_wait

if TYPE_CHECKING:
    from prometheus_client import Gauge

log = logging.getLogger("lavaflow.kube")
# Longest time between two readings of the Lease by a standby (see the module's doc).
STANDBY_POLL = 0.5


class LostLeadership(Exception):
    pass


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float | None = None,
        retry_period: float = 2.0,
    ) -> None:
        if renew_deadline is None:  # client-go's defaults are 15 s / 10 s / 2 s
            renew_deadline = lease_duration * 2 / 3
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        if renew_deadline >= lease_duration:
            raise ValueError(
                f"renew deadline ({renew_deadline}s) must be shorter than the lease duration ({lease_duration}s)"
            )
        self.is_leader = False
        self.renewed_at = float("-inf")  # monotonic start of the last successful acquire/renew
        self._observed: tuple[str | None, str | None, float] = (None, None, 0.0)  # holder, renewTime, local time seen
        self.transitions = 0
        # called with (kind, key, verb, error) for a write of the Lease the server refused (not a
        # 409: another candidate won); the processes report it as any refused write
        self.on_refused: Callable[[str, str, str, ApiError], None] | None = None
        self._observer: asyncio.Task[None] | None = None

    def _refused(self, verb: str, exc: ApiError) -> None:
        if self.on_refused is not None:
            self.on_refused("Lease", f"{self.namespace}/{self.name}", verb, exc)

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def _spec(self, lease: dict[str, Any] | None) -> dict[str, Any]:
        now = micro_time(time.time())
        old = (lease or {}).get("spec") or {}
        transitions = int(old.get("leaseTransitions") or 0)
        if old.get("holderIdentity") != self.identity:
            transitions += 1 if lease is not None else 0
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(round(self.lease_duration))),
            "acquireTime": old.get("acquireTime") if old.get("holderIdentity") == self.identity else now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def holding(self) -> bool:
        """True while this process can prove it still holds the lease (see the module's doc)."""
        return self.is_leader and time.monotonic() - self.renewed_at < self.renew_deadline

    def fence_left(self) -> float:
        """Seconds this leader may still write without a renewal (<= 0: none)."""
        if not self.is_leader:
            return 0.0
        return self.renew_deadline - (time.monotonic() - self.renewed_at)

    def _saw(self, lease: dict[str, Any]) -> None:
        """Note the holder and renewTime read, and when they were first seen on this clock."""
        spec = lease.get("spec") or {}
        holder, renew = spec.get("holderIdentity"), spec.get("renewTime")
        if (holder, renew) != self._observed[:2]:
            self._observed = (holder, renew, time.monotonic())

    def start_observing(self) -> None:
        """Read the Lease in the background, without writing it, until :meth:`acquire` is called:
        a process starting as a standby counts a silent leader's lease from when it first could,
        not from when its caches have filled."""
        if self._observer is None:
            self._observer = asyncio.get_running_loop().create_task(self._observe(), name="lease-observer")

    async def _observe(self) -> None:
        while True:
            try:
                self._saw(await self.client.request("GET", self.path, limited=False))
            except Exception as exc:  # (no Lease yet: nothing to count from)
                log.debug("reading lease %s/%s: %s", self.namespace, self.name, exc)
            await asyncio.sleep(min(self.retry_period, STANDBY_POLL))

    async def try_acquire_or_renew(self) -> bool:
        started = time.monotonic()
        try:
            lease = await self.client.request("GET", self.path, limited=False)
        except ApiError as exc:
            if not exc.not_found:
                raise
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(None),
            }
            try:
                await self.client.request(
                    "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body=body, limited=False
                )
            except ApiError as exc2:
                if exc2.status == 409:
                    return False
                self._refused("create", exc2)
                raise
            self._observed = (self.identity, body["spec"]["renewTime"], time.monotonic())
            self.renewed_at = started
            return True
        self._saw(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and time.monotonic() < self._observed[2] + duration:
            return False
        lease["spec"] = self._spec(lease)
        try:
            await self.client.request("PUT", self.path, body=lease, limited=False)
        except ApiError as exc:
            if exc.status == 409:
                return False
            self._refused("update", exc)
            raise
        self._observed = (self.identity, lease["spec"]["renewTime"], time.monotonic())
        self.renewed_at = started
        return True

    def _wait_hint(self) -> float:
        """How long a standby should sleep: ``STANDBY_POLL`` (or the retry period when shorter), or
        less when the holder's lease is about to run out, so that it wakes exactly then."""
        poll = min(self.retry_period, STANDBY_POLL)
        holder, _renew, seen = self._observed
        if holder and holder != self.identity:
            left = seen + self.lease_duration - time.monotonic()
            if 0 < left < poll:
                return left + 0.01
        return poll

    async def acquire(self, stop: asyncio.Event | None = None) -> bool:
        """Wait until this candidate leads (False if ``stop`` was set first)."""
        await self.stop_observing()  # (what it saw is kept: the lease is counted from then)
        while stop is None or not stop.is_set():
            try:
                if await self.try_acquire_or_renew():
                    if not self.is_leader:
                        self.transitions += 1
                        log.info("%s: became leader of lease %s/%s", self.identity, self.namespace, self.name)
                    self.is_leader = True
                    return True
            except Exception as exc:  # API trouble: keep trying
                log.warning("leader election: %s", exc)
            wait = self._wait_hint()
            try:
                if stop is not None:
                    await asyncio.wait_for(stop.wait(), wait)
                else:
                    await asyncio.sleep(wait)
            except TimeoutError:
                pass
        return False

    async def stop_observing(self) -> None:
        task, self._observer = self._observer, None
        await cancel_and_wait([task])

    async def renew_loop(self) -> None:
        """Renew until renewal fails for ``renew_deadline`` (or another holder is seen); then raise
        LostLeadership. A renewal request itself is given at most the time left to the deadline."""
        while True:
            await asyncio.sleep(max(0.0, min(self.retry_period, self.fence_left())))
            if not self.holding():  # e.g. the process was frozen past the deadline
                self.is_leader = False
                raise LostLeadership(
                    f"{self.identity}: lease {self.namespace}/{self.name} not renewed within {self.renew_deadline}s"
                )
            try:
                ok = await asyncio.wait_for(self.try_acquire_or_renew(), max(0.05, self.fence_left()))
            except Exception as exc:
                log.warning("lease renewal: %s", exc or type(exc).__name__)
                ok = False
            if ok:
                continue
            holder = self._observed[0]
            if not self.holding() or holder not in (None, self.identity):
                self.is_leader = False
                now = f" (now held by {holder})" if holder not in (None, self.identity) else ""
                raise LostLeadership(f"{self.identity} lost lease {self.namespace}/{self.name}{now}")

    async def release(self) -> None:
        await self.stop_observing()
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await self.client.request("GET", self.path, limited=False)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = None
            lease["spec"]["leaseDurationSeconds"] = 1
            lease["spec"]["renewTime"] = micro_time(time.time())
            await self.client.request("PUT", self.path, body=lease, limited=False)
        except ApiError as exc:
            if exc.status != 409:
                self._refused("update", exc)
            log.warning("releasing lease: %s", exc)
        except Exception as exc:
            log.warning("releasing lease: %s", exc)


async def lead(
    elector: LeaderElector,
    work: Callable[[], Coroutine[Any, Any, None]],
    stop: asyncio.Event,
    leader_gauge: Gauge | None = None,
) -> None:
    """Run ``work()`` while holding the lease: acquire, renew beside it, and stop the work when
    leadership is lost (LostLeadership is raised) or the work ends (its exception is raised)."""
    if not await elector.acquire(stop):
        return
    if leader_gauge is not None:
        leader_gauge.set(1)
    job = asyncio.create_task(work())
    renew = asyncio.create_task(elector.renew_loop())
    try:
        done, _ = await asyncio.wait({job, renew}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        job.cancel()
        renew.cancel()
        raise
    await cancel_and_wait(t for t in (job, renew) if t not in done)
    if leader_gauge is not None:
        leader_gauge.set(0)
    if renew in done and isinstance(renew.exception(), LostLeadership):
        raise renew.exception()  # type: ignore[misc]
    for t in done:
        if t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
