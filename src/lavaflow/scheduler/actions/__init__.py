"""Scheduler actions, one module each, registered by name."""

from ..framework.registry import ACTIONS
from . import allocate, backfill, enqueue, kube_default, preempt, reclaim, shuffle  # noqa: F401

__all__ = ["ACTIONS"]
