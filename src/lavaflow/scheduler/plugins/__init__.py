"""Scheduler plugins, one module each, registered by name."""

from ..framework.registry import PLUGINS
from . import deviceshare, network_topology, nodegroup, numa_aware, resource_strategy_fit, rescheduling, resourcequota, task_topology  # noqa: F401
from . import binpack, capacity, conformance, drf, elastic, gang, nodeorder, overcommit, predicates, priority, proportion, sla  # noqa: F401

__all__ = ["PLUGINS"]
