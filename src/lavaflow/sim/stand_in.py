"""What the simulator's controllers of the foreign gang APIs share.

For each group of scheduler-plugins' PodGroup (:mod:`.x_k8s_podgroup`) or of the Workload API
(:mod:`.workload_api`), a controller keeps in the store an internal PodGroup that stands in for
it (annotated with its API, ``lavaflow.io/gang-api``). :class:`StandInGangs` is their common
base, with the gang-source answers they give alike (see gang_source): each is built over the
simulation's store, is its own controller, and owns the stand-ins of its API.
:func:`upsert_stand_in` creates a stand-in or brings its spec up to date.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from ..api.volcano import PodGroup
from ..controllers.base import Clock, Controller

if TYPE_CHECKING:  # pragma: no cover
    from ..controllers.build import Controllers
    from ..store.base import Store
    from .gang_source import EventSink


class StandInGangs(Controller):
    def __init__(self, store: Store, clock: Clock, on_event: EventSink | None = None) -> None:
        super().__init__(store, clock)
        self.on_event = on_event

    @classmethod
    def build(cls, store: Store, clock: Clock, on_event: EventSink, shared: Controllers) -> Self:
        return cls(store, clock, on_event)

    @property
    def controller(self) -> Controller:
        return self

    def is_stand_in(self, pg: PodGroup) -> bool:
        """Whether ``pg`` stands in for a group of this API."""
        raise NotImplementedError

    def owns(self, key: str) -> bool:
        internal = self.store.get("PodGroup", key)
        return internal is not None and self.is_stand_in(internal)


def upsert_stand_in(store: Any, internal: PodGroup | None, want: PodGroup) -> PodGroup:
    """The internal PodGroup standing in for another API's gang: created as ``want``, or its
    spec brought to ``want``'s."""
    if internal is None:
        created: PodGroup = store.create(want)
        return created
    if internal.spec != want.spec:
        internal.spec = want.spec
        store.update(internal)
    return internal
