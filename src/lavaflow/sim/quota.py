"""The API server's ResourceQuota admission, which the simulator stands in for (issue 35, item 12).

On a cluster kube-apiserver refuses to create a pod that would take its namespace past a
ResourceQuota's ``spec.hard`` (403 "exceeded quota"); Volcano's resourcequota plugin only checks a
job's ``minResources`` when it is enqueued, so the pods beyond ``minAvailable`` are held to the
quota by the API server alone. Here :class:`QuotaAdmission` keeps each namespace's usage from the
pods that count (not finished, not deleted) and refuses a pod the way the API server does; the
controllers that create pods retry when usage in the namespace goes down.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ..api.core import PodPhase
from ..api.selectors import pod_requests
from ..store.base import Forbidden

_COUNTED = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)  # pods in these phases no longer count against a quota


class QuotaExceeded(Forbidden):
    """A pod the API server's quota admission refuses (HTTP 403, "exceeded quota")."""


def _limits(spec: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in spec.containers:
        for name, q in c.resources.limits.items():
            out[name] = out.get(name, 0.0) + float(q)
    return out


def charge(pod: Any, key: str) -> float:
    """What a pod counts against a quota's ``key`` (cpu, requests.memory, limits.cpu, pods,
    count/pods, requests.nvidia.com/gpu, ...)."""
    if key in ("pods", "count/pods"):
        return 1.0
    if key.startswith("limits."):
        return _limits(pod.spec).get(key[len("limits.") :], 0.0)
    name = key[len("requests.") :] if key.startswith("requests.") else key
    return float(pod_requests(pod.spec).get(name, 0.0))


def _plain(x: float) -> str:
    return format(Decimal(repr(x)).normalize(), "f")


class QuotaAdmission:
    """Usage per namespace and quota key, from the store's pods; ``check`` refuses a new pod."""

    def __init__(self, store: Any, on_release: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.counted: dict[str, tuple[str, dict[str, float]]] = {}  # pod key -> (namespace, charges)
        self.totals: dict[tuple[str, str], float] = {}  # (namespace, quota key) -> what counted pods take
        self.on_release = on_release  # called with a namespace whose usage went down
        store.watch("Pod", self._on_pod)
        store.watch("ResourceQuota", self._on_quota)
        store.admission.setdefault("Pod", []).append(self.check)

    def quotas(self, namespace: str) -> list[Any]:
        return [q for q in self.store.list("ResourceQuota") if q.namespace == namespace and q.spec.hard]

    def _keys(self, namespace: str) -> set[str]:
        return {k for q in self.quotas(namespace) for k in q.spec.hard}

    def used(self, namespace: str, key: str) -> float:
        return self.totals.get((namespace, key), 0.0)

    def _count(self, pod: Any, keys: set[str]) -> None:
        self._uncount(pod.key)
        charges = {k: charge(pod, k) for k in keys}
        self.counted[pod.key] = (pod.namespace, charges)
        for k, v in charges.items():
            self.totals[(pod.namespace, k)] = self.totals.get((pod.namespace, k), 0.0) + v

    def _uncount(self, key: str) -> bool:
        entry = self.counted.pop(key, None)
        if entry is None:
            return False
        namespace, charges = entry
        for k, v in charges.items():
            self.totals[(namespace, k)] -= v
        return True

    def check(self, pod: Any) -> None:
        """Raise QuotaExceeded when ``pod`` would take a quota of its namespace past ``spec.hard``."""
        namespace = pod.namespace
        for q in self.quotas(namespace):
            over = []
            for key, hard in sorted(q.spec.hard.items()):
                need = charge(pod, key)
                if need <= 0:
                    continue
                used = self.used(namespace, key)
                if used + need > float(hard) + 1e-9:
                    over.append((key, need, used, float(hard)))
            if over:
                raise QuotaExceeded(
                    f"exceeded quota: {q.name}, requested: "
                    + ",".join(f"{k}={_plain(n)}" for k, n, _, _ in over)
                    + ", used: "
                    + ",".join(f"{k}={_plain(u)}" for k, _, u, _ in over)
                    + ", limited: "
                    + ",".join(f"{k}={_plain(h)}" for k, _, _, h in over)
                )

    def _on_quota(self, event: str, quota: Any, old: Any) -> None:
        """A quota created or changed after pods of its namespace: they count from now on, as the
        API server's quota controller would have counted them (its status.used)."""
        namespace = quota.namespace
        keys = self._keys(namespace)
        for pod in self.store.list("Pod"):
            if pod.namespace == namespace and pod.status.phase not in _COUNTED:
                self._count(pod, keys)

    def _on_pod(self, event: str, pod: Any, old: Any) -> None:
        key = pod.key
        if event == "DELETED" or pod.status.phase in _COUNTED:
            if self._uncount(key) and self.on_release is not None:
                self.on_release(pod.namespace)
        elif key not in self.counted:
            keys = self._keys(pod.namespace)
            if keys:
                self._count(pod, keys)


__all__ = ["QuotaAdmission", "QuotaExceeded", "charge"]
