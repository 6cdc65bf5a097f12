"""resourcequota: a namespace's ResourceQuotas cap what its jobs are admitted with.

A PodGroup is admitted (enqueue) only if, for every core/v1 ResourceQuota in its
namespace, the quota's usage plus the PodGroup's ``minResources`` stays within
``spec.hard`` for each resource the quota names (``cpu`` / ``requests.cpu``,
``memory`` / ``requests.memory``, ``pods``, ``requests.<extended resource>``);
jobs admitted earlier in the same cycle count too. Otherwise the job stays Pending
with a reason naming the quota, as Volcano's plugin does.

Usage is the quota's ``status.used`` (kept by Kubernetes' quota controller on a
cluster) or, where larger, what lavaflow sees: for each admitted PodGroup of the
namespace the larger of its ``minResources`` and its live pods' requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..framework.registry import Plugin, register_plugin
from ..framework.session import ABSTAIN, REJECT
from ..model import TaskStatus
from ..resources import EPS

if TYPE_CHECKING:  # pragma: no cover
    from ...api.core import ResourceQuota
    from ..framework.session import Session
    from ..model import JobInfo

LIVE = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


def quota_resource(name: str) -> str | None:
    """The scheduler resource a quota key limits (requests.cpu → cpu), or None (limits.*, count/*)."""
    if name.startswith("requests."):
        return name[len("requests.") :]
    if name.startswith(("limits.", "count/")) or "." in name and "/" not in name:
        return None
    return name


@register_plugin
class ResourceQuotaPlugin(Plugin):
    name = "resourcequota"

    def on_session_open(self, ssn: Session) -> None:
        quotas_by_ns: dict[str, list[ResourceQuota]] = {}
        for rq in ssn.cache.objects.get("ResourceQuota", {}).values():
            quotas_by_ns.setdefault(rq.namespace, []).append(rq)
        if not quotas_by_ns:
            return
        index = ssn.index
        width = len(index)
        # Per namespace with a quota: what its admitted jobs hold or reserve, as the session opens.
        used = {ns: np.zeros(width) for ns in quotas_by_ns}
        for job in ssn.jobs.values():
            if job.namespace not in used or job.is_pending():
                continue
            live = np.zeros(width)
            for t in job.tasks.values():
                if t.status not in LIVE:
                    live[: len(t.resreq)] += t.resreq
            mins = job.min_resources[:width] if job.min_resources is not None else np.zeros(width)
            used[job.namespace] += np.maximum(live, mins)

        def enqueueable(job: JobInfo) -> int:
            quotas = quotas_by_ns.get(job.namespace)
            if not quotas or job.min_resources is None:
                return ABSTAIN
            req = job.min_resources
            have = used[job.namespace]
            for rq in sorted(quotas, key=lambda q: q.name):
                over = []
                for key, hard in sorted(rq.spec.hard.items()):
                    res = quota_resource(key)
                    col = index.pos.get(res) if res else None
                    if col is None or req[col] <= 0:
                        continue
                    status_used = float(rq.status.used.get(key, 0))
                    now = max(status_used, float(have[col]))
                    if now + float(req[col]) > float(hard) + EPS:
                        over.append((key, float(req[col]), now, float(hard), res))
                if over:
                    parts = "; ".join(
                        f"{key}: requested {_fmt(r, res)}, used {_fmt(u, res)}, limited {_fmt(h, res)}"
                        for key, r, u, h, res in over
                    )
                    job.job_fit_errors = f"resource quota {rq.namespace}/{rq.name} insufficient: {parts}"
                    return REJECT
            return ABSTAIN  # within quota: the other admission plugins decide

        def enqueued(job: JobInfo) -> None:
            if job.namespace in quotas_by_ns and job.min_resources is not None:
                used[job.namespace] = used[job.namespace] + job.min_resources[:width]

        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)


def _fmt(value: float, resource: str | None) -> str:
    if resource == "memory" and value >= 2**20:
        return f"{value / 2**30:g}Gi"
    return f"{value:g}"
