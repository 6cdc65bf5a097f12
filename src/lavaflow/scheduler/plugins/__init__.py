"""Scheduler plugins, one module each, registered by name."""

from ..framework.registry import PLUGINS
from . import (  # noqa: F401
    binpack,
    capacity,
    conformance,
    deviceshare,
    drf,
    gang,
    network_topology,
    nodegroup,
    nodeorder,
    numa_aware,
    overcommit,
    predicates,
    priority,
    proportion,
    rescheduling,
    resource_strategy_fit,
    resourcequota,
    sla,
    task_topology,
)

__all__ = ["PLUGINS"]
