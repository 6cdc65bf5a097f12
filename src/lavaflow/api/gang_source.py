"""What both backends ask of every gang API: the common base of their gang-source protocols.

A gang API is a kind of object that groups pods into gangs: Volcano's PodGroup
(``scheduling.volcano.sh``), scheduler-plugins' PodGroup (``scheduling.x-k8s.io``,
:mod:`.x_k8s_podgroup`) and the Kubernetes Workload API (``scheduling.k8s.io``, KEP-4671,
:mod:`.workload_api`). The scheduling core knows only Volcano's PodGroup: a group of another API
is turned into an internal PodGroup that stands in for it. Each backend keeps one list of gang
sources, one per API, and asks each the same questions:

- the scheduler process (``lavaflow.kube.gang_source.GangSource``): the API server is reached
  asynchronously, an API may not be served, and the stand-ins live in the scheduler's cache only;
- the simulator (``lavaflow.sim.gang_source.SimGangSource``): its store plays the API server, so
  each API's controller keeps the stand-ins there, where every report sees them.

Both protocols extend :class:`GangSourceBase` with what only their backend asks.
"""

from __future__ import annotations

from typing import Protocol

# The annotation by which an internal PodGroup says which gang API it stands in for (its value is
# that API's apiVersion); Volcano's own PodGroups carry none.
GANG_API_ANNOTATION = "lavaflow.io/gang-api"


class GangSourceBase(Protocol):
    @property
    def api(self) -> str:
        """The gang API the source reads, as its API group (``scheduling.volcano.sh`` ...)."""
        ...

    def owns(self, key: str) -> bool:
        """Whether the internal PodGroup ``key`` (``namespace/name``, the core's job key) stands
        for one of this API's groups."""
        ...
