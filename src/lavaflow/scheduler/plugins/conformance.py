"""conformance: never evict kube-system pods or pods of the system-critical priority classes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session
    from ..model import TaskInfo


@register_plugin
class ConformancePlugin(Plugin):
    name = "conformance"

    def on_session_open(self, ssn: Session) -> None:
        def victims(actor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [t for t in candidates if not t.critical], PERMIT

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
