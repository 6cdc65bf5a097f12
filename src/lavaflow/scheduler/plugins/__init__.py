"""Scheduler plugins, one module each, registered by name."""

from ..framework.registry import PLUGINS
from . import binpack, capacity, conformance, drf, elastic, gang, nodeorder, overcommit, predicates, priority, proportion, sla  # noqa: F401

__all__ = ["PLUGINS"]
