"""The gang APIs the Kubernetes scheduler reads beside Volcano's PodGroups, behind one protocol.

scheduler-plugins' PodGroup (``scheduling.x-k8s.io``, :mod:`.x_k8s_podgroup`) and the Kubernetes
Workload API (KEP-4671, :mod:`.workload_api`) each turn their groups into internal PodGroups that
only the scheduler's cache holds, and write the group's status back in their own form. The
scheduler process keeps them in one list (``KubeScheduler.gang_sources``) and asks each the same
questions.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from .client import ApiError

log = logging.getLogger("lavaflow.kube")


class GangSource(Protocol):
    @property
    def enabled(self) -> bool:
        """Whether the API server serves this gang API (found by :meth:`discover`)."""
        ...

    async def discover(self) -> Any:
        """Ask the API server whether it serves the API, before the informers start."""
        ...

    def owns(self, key: str) -> bool:
        """Whether the internal PodGroup ``key`` stands for one of this API's groups."""
        ...

    def on_pod(self, event: str, pod: Any) -> Any:
        """The pod as the cache should see it (a member gets its internal group's annotation)."""
        ...

    def decided(self, key: str, status: dict[str, Any]) -> bool:
        """Take a session's PodGroup status for ``key`` if it is this API's group (written back in
        its own form); False: not this API's, the Volcano PodGroup writer takes it."""
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
