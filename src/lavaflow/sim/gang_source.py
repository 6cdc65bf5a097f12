"""The gang APIs in the simulator, behind one protocol.

The simulator's store plays the API server. For a group of a foreign gang API (scheduler-plugins'
PodGroup, :mod:`.x_k8s_podgroup`; the Kubernetes Workload API, :mod:`.workload_api`) a
controller keeps the internal PodGroup that stands in for it in the store, where the scheduler,
the queue controller and the results see it, and writes the group's status back in the API's
form. Volcano's PodGroups (:mod:`.volcano_podgroup`) are the store's own, kept by the shared
PodGroup controller (bare pods and native workloads) and the job controller.

:data:`GANG_APIS` lists the APIs, in the order their controllers run (Volcano's last, as in the
scheduler process); the input check asks each API about the whole input before a simulation
exists (:meth:`SimGangSource.input_check`), and a ``Simulation`` builds one source of each
(``Simulation.gang_sources``) and asks each the same questions. The questions the scheduler
process asks too are in :class:`lavaflow.api.gang_source.GangSourceBase`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..api.gang_source import GangSourceBase
from .volcano_podgroup import VolcanoPodGroups
from .workload_api import WorkloadGangs
from .x_k8s_podgroup import CoschedulingPodGroups

if TYPE_CHECKING:  # pragma: no cover
    from ..api.validation import Problem
    from ..controllers.base import Clock, Controller
    from ..controllers.build import Controllers
    from ..store.base import Store

# An Event a gang source records: (kind, key, type, reason, message); kind as on the wire.
EventSink = Callable[[str, str, str, str, str], None]


class GangInputCheck(Protocol):
    """One gang API's checks of a simulation input, made for the whole input (see
    :meth:`SimGangSource.input_check`): the simulator's input is the whole world, so a pod naming a
    group the input lacks would wait for ever."""

    def problems(self, obj: Any, queues: Mapping[str, Any]) -> list[Problem] | None:
        """The problems of an object of this API's kinds; None: not one of its kinds."""
        ...

    def pod_problems(self, pod: Any) -> list[Problem]:
        """The problems of a pod as a member of this API's groups."""
        ...

    def template_problems(self, owner: Any, template: Any) -> list[Problem]:
        """The problems of a workload's pod template (``owner.spec.template``) as a member."""
        ...


class SimGangSource(GangSourceBase, Protocol):
    @classmethod
    def build(cls, store: Store, clock: Clock, on_event: EventSink, shared: Controllers) -> SimGangSource:
        """The source of a simulation over ``store`` (``shared``: the controllers both backends run)."""
        ...

    @staticmethod
    def input_check(items: Sequence[Any]) -> GangInputCheck:
        """The API's checks of an input's items (``sim.inputs.Item``), before any simulation."""
        ...

    @property
    def controller(self) -> Controller:
        """The controller that keeps the API's PodGroups in the store (run in :data:`GANG_APIS`' order)."""
        ...

    def describe(self, entry: dict[str, Any], key: str) -> None:
        """Add to the results' entry of PodGroup ``key`` what this API says of the group."""
        ...


# Every gang API the simulator reads, in the order their controllers run.
GANG_APIS: tuple[type[SimGangSource], ...] = (CoschedulingPodGroups, WorkloadGangs, VolcanoPodGroups)
