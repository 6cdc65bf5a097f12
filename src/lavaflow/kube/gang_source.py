"""The gang APIs the Kubernetes scheduler reads, behind one protocol.

Volcano's PodGroups (``scheduling.volcano.sh``, :mod:`.volcano_podgroup`), scheduler-plugins'
PodGroup (``scheduling.x-k8s.io``, :mod:`.x_k8s_podgroup`) and the Kubernetes Workload API
(KEP-4671, :mod:`.workload_api`). The two foreign ones turn their groups into internal PodGroups
that only the scheduler's cache holds, and write the group's status back in their own form. The
scheduler process keeps all three in one list (``KubeScheduler.gang_sources``, Volcano's last: it
takes every PodGroup the others do not) and asks each the same questions. The questions the
simulator asks too are in :class:`lavaflow.api.gang_source.GangSourceBase`.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..api.gang_source import GangSourceBase
from .client import ApiError

log = logging.getLogger("lavaflow.kube")


class GangSource(GangSourceBase, Protocol):
    @property
    def enabled(self) -> bool:
        """Whether the API server serves this gang API (found by :meth:`discover`)."""
        ...

    @property
    def maps_pods(self) -> bool:
        """Whether the API's pods are mapped onto their internal group by :meth:`on_pod` (False
        where pods name their PodGroup themselves: the scheduler asks such a source nothing per pod)."""
        ...

    async def discover(self) -> Any:
        """Ask the API server whether it serves the API, before the informers start."""
        ...

    def on_pod(self, event: str, pod: Any) -> Any:
        """The pod as the cache should see it (a member gets its internal group's annotation)."""
        ...

    def decided(self, key: str, status: dict[str, Any]) -> bool:
        """Take a session's PodGroup status for ``key`` if it is this API's group (written back in
        its own form); False: not this API's, the next source is asked."""
        ...

    def adopt(self, pg: Any, status: dict[str, Any]) -> bool:
        """Take over the cache's PodGroup ``pg`` with ``status`` if it is this API's group: a gang
        a previous leader started to bind (``KubeScheduler.adopt_partial_gangs``); False: not
        this API's."""
        ...

    def after_cycle(self) -> None:
        """After each cycle: refresh what the groups report (timeouts, conditions, Events)."""
        ...

    def pod_message(self, job_uid: str, message: str) -> str:
        """The PodScheduled=False message for a pending member of group ``job_uid``."""
        ...


# The write side's bookkeeping, shared by the scheduler's writer (scheduler_writes) and the gang
# sources' status writes.
def unsent(kind: str, key: str, exc: BaseException) -> None:
    """A status write that did not go through: a refusal was reported by the store (a 404 is an
    object gone); anything else (no answer) is a warning. The next cycle decides again."""
    if not isinstance(exc, ApiError):
        log.warning("%s %s status: %s: %s", kind, key, type(exc).__name__, exc)


def forget_written(wanted: dict[str, Any], key: str, value: Any) -> bool:
    """A write of ``value`` ended: forget it, unless a newer value is waiting (True if forgotten)."""
    if wanted.get(key) == value:
        del wanted[key]
        return True
    return False
