"""Volcano's own PodGroups (``scheduling.volcano.sh/v1beta1``) as a gang source of the simulator.

The core schedules Volcano's PodGroup itself and the store holds it as it is: nothing stands in
for it. Its controller is the shared PodGroup controller (a PodGroup for each bare pod or native
workload without one; a Volcano Job's is made by the job controller), its input is checked by
Volcano's admission as every Volcano kind is (sim/inputs.py), and the results' entry of a PodGroup
is its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..api.gang_source import GANG_API_ANNOTATION

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from ..api.validation import Problem
    from ..controllers.base import Clock
    from ..controllers.build import Controllers
    from ..controllers.podgroup import PodGroupController
    from ..store.base import Store
    from .gang_source import EventSink

API = "scheduling.volcano.sh"


class VolcanoPodGroups:
    api = API

    def __init__(self, store: Store, controller: PodGroupController) -> None:
        self.store = store
        self.controller = controller

    @classmethod
    def build(cls, store: Store, clock: Clock, on_event: EventSink, shared: Controllers) -> VolcanoPodGroups:
        return cls(store, shared.podgroup)

    @staticmethod
    def input_check(items: Sequence[Any]) -> AdmissionChecks:
        return AdmissionChecks()

    def owns(self, key: str) -> bool:
        pg = self.store.get("PodGroup", key)
        return pg is not None and GANG_API_ANNOTATION not in pg.metadata.annotations

    def describe(self, entry: dict[str, Any], key: str) -> None:
        """Nothing besides the PodGroup's own entry."""


class AdmissionChecks:
    """Volcano's PodGroups are checked by its admission, as every Volcano kind: nothing of their own."""

    def problems(self, obj: Any, queues: Mapping[str, Any]) -> list[Problem] | None:
        return None

    def pod_problems(self, pod: Any) -> list[Problem]:
        return []

    def template_problems(self, owner: Any, template: Any) -> list[Problem]:
        return []
