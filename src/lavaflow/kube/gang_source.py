"""The gang APIs the Kubernetes scheduler reads beside Volcano's PodGroups, behind one protocol.

scheduler-plugins' PodGroup (``scheduling.x-k8s.io``, :mod:`.x_k8s_podgroup`) and the Kubernetes
Workload API (KEP-4671, :mod:`.workload_api`) each turn their groups into internal PodGroups that
only the scheduler's cache holds, and write the group's status back in their own form. The
scheduler process keeps them in one list (``KubeScheduler.gang_sources``) and asks each the same
questions.
"""

from __future__ import annotations

from typing import Any, Protocol


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
