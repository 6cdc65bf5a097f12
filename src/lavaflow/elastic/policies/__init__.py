"""Allocation policies: one module each, all pure functions ``(jobs, capacity, now) -> result``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .afsl import afsl
from .base import AllocationError, Assignment, JobView, Policy, check_allocation, split_pools
from .elastic_fifo import elastic_fifo
from .elastic_srjf import elastic_srjf
from .elastic_tiresias import elastic_tiresias
from .ffdl import ffdl
from .fifo import fifo
from .gavel import ROUND as GAVEL_ROUND, gavel
from .goodput import IDLE_ROUNDS as GOODPUT_IDLE_ROUNDS, LEARNED_PARAMS as GOODPUT_LEARNED, goodput
from .lavaflow import lavaflow
from .pollux import pollux, pollux_fix
from .sia import sia
from .srjf import srjf
from .tiresias import (
    DEFAULT_THRESHOLDS,
    LITERATURE_INTERVAL,
    LITERATURE_THRESHOLD,
    tiresias,
    tiresias_literature,
)

# name -> (function, elastic, needs job info, uses Tiresias queues, one-line description,
#          clairvoyant (reads remaining/total work), extra Policy fields)
_VODA_QUEUES: dict[str, Any] = {"thresholds": DEFAULT_THRESHOLDS, "promote_knob": 8.0}
_REGISTRY: dict[str, tuple[Callable[..., dict[str, Assignment]], bool, bool, bool, str, bool, dict[str, Any]]] = {
    "FIFO": (fifo, False, False, False, "first come first served, requested workers", False, {}),
    "ElasticFIFO": (
        elastic_fifo,
        True,
        True,
        False,
        "FIFO at minimum, then round-robin +1 to maximum; resize only when it pays",
        True,
        {},
    ),
    "SRJF": (srjf, False, True, False, "shortest remaining job first, requested workers", True, {}),
    "ElasticSRJF": (
        elastic_srjf,
        True,
        True,
        False,
        "SRJF order; running jobs keep their size or shrink instead of halting, waiting jobs start on spare GPUs, spare GPUs go +1 to the shortest jobs while it pays",
        True,
        {},
    ),
    "Tiresias": (
        tiresias_literature,
        False,
        False,
        True,
        "literature Tiresias (Pollux artifact): 2 queues at 16 GPU-h attained service, no promotion, arrival order, 60 s tick",
        False,
        {
            "thresholds": (LITERATURE_THRESHOLD,),
            "promote_knob": math.inf,
            "default_interval": LITERATURE_INTERVAL,
            "placement": "keep",
            "aligned_tick": True,
        },
    ),
    "Tiresias-Voda": (
        tiresias,
        False,
        False,
        True,
        "Voda's Tiresias: 2D-LAS queues at 1 GPU-h, promotion after waiting 8x the last run",
        False,
        _VODA_QUEUES,
    ),
    "ElasticTiresias": (
        elastic_tiresias,
        True,
        True,
        True,
        "Voda's Tiresias then greedy marginal speedup",
        False,
        _VODA_QUEUES,
    ),
    "FfDLOptimizer": (ffdl, True, True, False, "DP maximising total speedup over the FIFO prefix", False, {}),
    "AFS-L": (afsl, True, True, False, "apathetic future share: pairwise relative-gain tournament", True, {}),
    "Lavaflow": (
        lavaflow,
        True,
        True,
        False,
        "ours: marginal goodput/remaining work, resize-cost and GPU-type aware",
        True,
        {},
    ),
    "Pollux": (
        pollux,
        True,
        True,
        False,
        "literature baseline (OSDI'21 artifact): p=-1 power mean of fair-share speed-ups with a restart penalty, learned models, 60 s tick",
        False,
        {"default_interval": LITERATURE_INTERVAL, "aligned_tick": True, "periodic": True, "shares_profiles": False},
    ),
    "Pollux-Fix": (
        pollux_fix,
        True,
        True,
        False,
        "Pollux heterogeneity-unaware (one pool of GPUs) with the Sia paper's fix-up: a job keeps the GPU type it holds most of, ties to the faster type; 60 s tick",
        False,
        {"default_interval": LITERATURE_INTERVAL, "aligned_tick": True, "periodic": True, "shares_profiles": False},
    ),
    "Gavel": (
        gavel,
        False,
        True,
        False,
        "literature baseline (as the Sia artifact runs it, with TunedJobs): rigid jobs at their trace size, LP time fractions per GPU type maximising total throughput, priority rounds of 360 s",
        False,
        {"default_interval": GAVEL_ROUND, "aligned_tick": True, "periodic": True},
    ),
    "Sia": (
        sia,
        True,
        True,
        False,
        "literature baseline (SOSP'23 artifact): ILP over a goodput matrix of GPU type x count configurations, p=-0.5, lambda_n=1.1, restart factor, learned models, 60 s tick",
        False,
        {
            "default_interval": LITERATURE_INTERVAL,
            "aligned_tick": True,
            "periodic": True,
            "node_aware": True,
        },
    ),
    "Goodput": (
        goodput,
        True,
        True,
        False,
        "ours, non-clairvoyant: Lavaflow's rule with remaining work estimated from attained service (LAS-like)",
        False,
        {},
    ),
}
ALIASES = {
    "ffdl": "FfDLOptimizer",
    "afs": "AFS-L",
    "afsl": "AFS-L",
    "lavaflow": "Lavaflow",
    "ours": "Lavaflow",
    "marginalgoodput": "Lavaflow",
    "e-tiresias": "ElasticTiresias",
    "tiresias-literature": "Tiresias",
    "tiresias-pollux": "Tiresias",
    "voda-tiresias": "Tiresias-Voda",
    "pollux-unaware": "Pollux-Fix",
    "polluxfix": "Pollux-Fix",
}
POLICY_NAMES = list(_REGISTRY)
_RESIZE_AWARE = {"Lavaflow", "ElasticFIFO", "ElasticSRJF", "Goodput", "Pollux", "Pollux-Fix", "Sia", "Gavel"}


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


# Parameters a policy takes on learned speed models unless configured (tuned there; the function's
# own defaults were tuned with the true models and stay for the oracle, so its figures stand).
_LEARNED_PARAMS: dict[str, dict[str, Any]] = {"Goodput": {**GOODPUT_LEARNED, "idle_rounds": GOODPUT_IDLE_ROUNDS}}
# Parameters that configure how the policy is run (Policy fields), not the policy's function.
_RUN_PARAMS = ("idle_rounds",)


def make_policy(name: str, learned: bool = False, **params: Any) -> Policy:
    """Build a policy by (case-insensitive) name; ``params`` go to resize-aware policies only
    (``resize_cost``, ``horizon``, ...).  ``learned``: the policy will read learned speed models
    (the scheduler's default), so it takes the parameters tuned for them where they differ."""
    n = resolve_name(name)
    fn, elastic, info, queues, desc, clairvoyant, extra = _REGISTRY[n]
    base = dict(_LEARNED_PARAMS.get(n, {})) if learned else {}
    takes = policy_parameters(n)
    base.update({k: policy_parameter(n, k, v) if k in takes else v for k, v in params.items()})
    run = {k: float(base.pop(k)) for k in _RUN_PARAMS if base.get(k) is not None}
    kw = {k: v for k, v in base.items() if n in _RESIZE_AWARE and v is not None}
    return Policy(n, elastic, info, fn, queues, desc, kw, clairvoyant=clairvoyant, **{**extra, **run})


def policy_parameters(name: str) -> set[str]:
    """The parameters a policy takes (``elastic.policy.<parameter>``); empty for policies that take
    none (only the resize-aware ones do)."""
    import inspect

    n = resolve_name(name)
    if n not in _RESIZE_AWARE:
        return set()
    skip = {"jobs", "capacity", "now", "_", "node_sizes"}
    return {p for p in inspect.signature(_REGISTRY[n][0]).parameters if p not in skip} | set(_RUN_PARAMS)


def policy_parameter(name: str, param: str, value: Any) -> Any:
    """``value`` for parameter ``param`` of policy ``name`` as the policy takes it, typed by the
    parameter's default: a switch from true/false (a string "false" is false), a number from a
    number or a numeric string (never NaN; ``idle_rounds`` seconds, finite and not negative), a
    string as is. Raises ValueError saying what is wrong (an unknown parameter included)."""
    import inspect

    n = resolve_name(name)
    if param not in policy_parameters(n):
        known = ", ".join(sorted(policy_parameters(n))) or "none"
        raise ValueError(f"{n} has no parameter {param!r} (its parameters: {known})")
    if value is None:
        return None
    default = inspect.signature(_REGISTRY[n][0]).parameters[param].default if param not in _RUN_PARAMS else 0.0
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"expected true or false, got {value!r}")
        return text == "true"
    if isinstance(default, str):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        number: float = value
    else:
        try:
            number = float(str(value))
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
        if isinstance(default, int) and number.is_integer():
            number = int(number)
    if math.isnan(number):
        raise ValueError("expected a number, got NaN")
    if param in _RUN_PARAMS and not (math.isfinite(number) and number >= 0):
        raise ValueError(f"expected seconds, finite and not negative (0: none), got {value!r}")
    return number


def is_clairvoyant(name: str) -> bool:
    """Whether the policy reads a job's remaining / total work."""
    return _REGISTRY[resolve_name(name)][5]


__all__ = [
    "AllocationError",
    "Assignment",
    "JobView",
    "POLICY_NAMES",
    "Policy",
    "check_allocation",
    "is_clairvoyant",
    "make_policy",
    "policy_parameters",
    "resolve_name",
    "split_pools",
]
