"""conformance: never evict kube-system pods or pods of the system-critical priority classes."""

from __future__ import annotations

from ..framework.registry import Plugin, register_plugin
from ..framework.session import PERMIT


@register_plugin
class ConformancePlugin(Plugin):
    name = "conformance"

    def on_session_open(self, ssn) -> None:
        def victims(actor, candidates):
            return [t for t in candidates if not t.critical], PERMIT

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
