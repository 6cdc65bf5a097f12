"""Volcano's own PodGroups (``scheduling.volcano.sh/v1beta1``) as a gang source of ``lavaflow scheduler``.

The core schedules Volcano's PodGroup itself, so this source maps nothing: the CRD is required
(its informer is started with the others), pods name their group by annotation, and the cache
takes the objects as they come (``KubeScheduler.on_podgroup``). What it answers is the status the
core decided for a PodGroup no other source took: it is the cache's at once and goes to the
writer's queue of PodGroup status writes (``SchedulerWriter.pg_wanted``, ``write_podgroup``).
It is the last source in ``KubeScheduler.gang_sources``: a scheduler-plugins PodGroup of the same
name yields to the Volcano one, and a Workload API gang's name (with ``:``) is no Volcano name.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ..api.volcano import PodGroupPhase
from .scheduler_writes import with_status

if TYPE_CHECKING:
    from .scheduler_process import KubeScheduler

API = "scheduling.volcano.sh"
_PENDING = PodGroupPhase.PENDING.value  # (a plain str, read for every group decided)


class VolcanoPodGroups:
    api = API
    enabled = True  # a required CRD: always watched
    maps_pods = False  # its pods name their PodGroup (scheduling.k8s.io/group-name) themselves

    def __init__(self, sched: KubeScheduler) -> None:
        self.sched = sched

    async def discover(self) -> bool:
        """Nothing to ask: the scheduler does not run without the CRD."""
        return True

    def owns(self, key: str) -> bool:
        return self.sched.store.get("PodGroup", key) is not None

    def on_pod(self, event: str, pod: Any) -> Any:
        return pod

    def decided(self, key: str, status: dict[str, Any]) -> bool:
        """Any PodGroup the other sources did not take: its status is written (always True)."""
        sched = self.sched
        writer = sched.writer
        writer.pg_wanted[key] = status
        pg = sched.store.get("PodGroup", key)
        if pg is not None:
            sched.cache.on_podgroup(with_status(pg, status))
        # A group leaving Pending (enqueued) is what the job controller waits for to create
        # its pods: it goes ahead of the bindings, not up to max_status_delay behind them.
        leaves = pg is not None and (pg.status.phase or _PENDING) == _PENDING != status.get("phase")
        sched.dispatch.status(("PodGroup", key), functools.partial(writer.write_podgroup, key), urgent=leaves)
        return True

    def adopt(self, pg: Any, status: dict[str, Any]) -> bool:
        """A PodGroup the other sources did not take, taken over as ``status`` (always True)."""
        sched = self.sched
        writer = sched.writer
        writer.pg_wanted[pg.key] = status
        sched.cache.on_podgroup(with_status(pg, status))
        sched.dispatch.status(("PodGroup", pg.key), functools.partial(writer.write_podgroup, pg.key))
        return True

    def after_cycle(self) -> None:
        """Nothing: the session's status and the writer's events say all."""

    def pod_message(self, job_uid: str, message: str) -> str:
        return message
