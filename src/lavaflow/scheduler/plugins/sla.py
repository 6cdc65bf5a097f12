"""sla: a job that has waited longer than its SLA waiting time is forced in.

The waiting time comes from the PodGroup annotation ``volcano.sh/sla-waiting-time``
or the plugin argument ``sla-waiting-time``. Jobs with an SLA are ordered by
deadline (creation + waiting time) ahead of jobs without one; once the deadline
has passed, the plugin permits the job's admission and pipelining, which (being
a Permit in its tier) overrides the capacity votes of later tiers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...api.admission import parse_duration
from ...api.volcano import SLA_WAITING_TIME_KEY
from ..framework import arguments as A
from ..framework.registry import Plugin, register_plugin
from ..framework.session import ABSTAIN, PERMIT

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import JobInfo


@register_plugin
class SLAPlugin(Plugin):
    name = "sla"
    ARGUMENTS = {"sla-waiting-time": A.DURATION}

    def on_session_open(self, ssn: Session) -> None:
        default = self._parse(self.arguments.get("sla-waiting-time"))

        def waiting_time(job: JobInfo) -> float | None:
            if job.pg is not None:
                raw = job.pg.metadata.annotations.get(SLA_WAITING_TIME_KEY)
                if raw is not None:
                    parsed = self._parse(raw)
                    if parsed is not None:
                        return parsed
            return default

        def job_order(l: JobInfo, r: JobInfo) -> int:
            lw, rw = waiting_time(l), waiting_time(r)
            if lw is None:
                return 0 if rw is None else 1
            if rw is None:
                return -1
            ld, rd = l.creation + lw, r.creation + rw
            if ld == rd:
                return 0
            return -1 if ld < rd else 1

        def permit(job: JobInfo) -> int:
            w = waiting_time(job)
            if w is None:
                return ABSTAIN
            if ssn.now - job.creation < w:
                ssn.wake_at(job.creation + w)
                return ABSTAIN
            ssn.record(
                job, "sla", f"waited {ssn.now - job.creation:.0f}s, over its SLA waiting time {w:.0f}s: forced in"
            )
            return PERMIT

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_enqueueable_fn(self.name, permit)
        ssn.add_job_pipelined_fn(self.name, permit)

    @staticmethod
    def _parse(raw: object) -> float | None:
        if raw is None or raw == "":
            return None
        try:
            value = parse_duration(str(raw).strip())
        except ValueError:
            return None
        return value if value >= 0 else None
