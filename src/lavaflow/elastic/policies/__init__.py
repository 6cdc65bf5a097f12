"""Allocation policies: one module each, all pure functions ``(jobs, capacity, now) -> result``."""

from __future__ import annotations

from .afsl import afsl
from .base import AllocationError, Assignment, JobView, Policy, check_allocation, split_pools
from .elastic_fifo import elastic_fifo
from .elastic_srjf import elastic_srjf
from .elastic_tiresias import elastic_tiresias
from .ffdl import ffdl
from .fifo import fifo
from .lavaflow import lavaflow
from .srjf import srjf
from .tiresias import tiresias

# name -> (function, elastic, needs job info, uses Tiresias queues, one-line description)
_REGISTRY = {
    "FIFO": (fifo, False, False, False, "first come first served, requested workers"),
    "ElasticFIFO": (elastic_fifo, True, True, False, "FIFO at minimum, then round-robin +1 to maximum; resize only when it pays"),
    "SRJF": (srjf, False, True, False, "shortest remaining job first, requested workers"),
    "ElasticSRJF": (elastic_srjf, True, True, False, "SRJF order; running jobs keep their size or shrink instead of halting, waiting jobs start on spare GPUs, spare GPUs go +1 to the shortest jobs while it pays"),
    "Tiresias": (tiresias, False, False, True, "2D-LAS priority queues on attained GPU service"),
    "ElasticTiresias": (elastic_tiresias, True, True, True, "Tiresias then greedy marginal speedup"),
    "FfDLOptimizer": (ffdl, True, True, False, "DP maximising total speedup over the FIFO prefix"),
    "AFS-L": (afsl, True, True, False, "apathetic future share: pairwise relative-gain tournament"),
    "Lavaflow": (lavaflow, True, True, False, "ours: marginal goodput/remaining work, resize-cost and GPU-type aware"),
}
ALIASES = {
    "ffdl": "FfDLOptimizer",
    "afs": "AFS-L",
    "afsl": "AFS-L",
    "lavaflow": "Lavaflow",
    "ours": "Lavaflow",
    "marginalgoodput": "Lavaflow",
    "e-tiresias": "ElasticTiresias",
}
POLICY_NAMES = list(_REGISTRY)
_RESIZE_AWARE = {"Lavaflow", "ElasticFIFO", "ElasticSRJF"}


def resolve_name(name: str) -> str:
    key = name.strip()
    if key in _REGISTRY:
        return key
    low = key.lower()
    for n in _REGISTRY:
        if n.lower() == low:
            return n
    if low in ALIASES:
        return ALIASES[low]
    raise KeyError(name)


def make_policy(name: str, **params) -> Policy:
    """Build a policy by (case-insensitive) name; ``params`` go to resize-aware policies only
    (``resize_cost``, ``horizon``, ...)."""
    n = resolve_name(name)
    fn, elastic, info, queues, desc = _REGISTRY[n]
    kw = {k: v for k, v in params.items() if n in _RESIZE_AWARE and v is not None}
    return Policy(n, elastic, info, fn, queues, desc, kw)


__all__ = [
    "AllocationError",
    "Assignment",
    "JobView",
    "POLICY_NAMES",
    "Policy",
    "check_allocation",
    "make_policy",
    "resolve_name",
    "split_pools",
]
