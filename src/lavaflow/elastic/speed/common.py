"""What every speed model shares: placements in canonical form, rate curves over worker counts,
and a job's progress over time when its rate changes with the work done (the training phases of an
adaptive-batch job).

A speed model is any object with ``rate(placement, gpu_type)`` in work units per second; one whose
rate depends on progress also has ``phase_bounds``, ``phase_of(done)`` and takes ``phase=``.  The
functions here work on either kind, so the simulator, the elastic plugin and the forecasts need not
know which model a job has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

_CANONICAL: dict[tuple[int, ...], tuple[int, ...]] = {}


def canonical_placement(placement: Iterable[int]) -> tuple[int, ...]:
    """Drop empty nodes; rotate to the lexicographically smallest rotation (as the traces do).
    Kept per placement (equal placements have equal canonical forms): the speed models ask for
    the same few placements thousands of times."""
    key = placement if type(placement) is tuple else tuple(placement)
    hit = _CANONICAL.get(key)
    if hit is not None:
        return hit
    p = tuple(int(x) for x in key if x)
    out = min(p[i:] + p[:i] for i in range(len(p))) if p else ()
    if len(_CANONICAL) < 65536:
        _CANONICAL[key] = out
    return out


def consolidated_placement(n: int, gpus_per_node: int) -> tuple[int, ...]:
    """``n`` workers packed onto as few nodes of ``gpus_per_node`` GPUs as possible."""
    if n <= 0:
        return ()
    full, rest = divmod(n, gpus_per_node)
    return canonical_placement((gpus_per_node,) * full + ((rest,) if rest else ()))


def rate_curve(
    speed: Any, gpu_type: str | None, max_workers: int, gpus_per_node: int, phase: int | None = None
) -> tuple[float, ...]:
    """Rates for 0..max_workers workers packed onto ``gpus_per_node``-GPU nodes (in training phase
    ``phase`` for a speed whose rate depends on progress)."""
    whole: Callable[[str | None, int, int], tuple[float, ...]] | None = getattr(speed, "packed_rates", None)
    if whole is not None:  # a speed that works out every count at once (a learned model)
        return whole(gpu_type, max_workers, gpus_per_node)
    if phase is not None and phase_bounds(speed):
        return tuple(
            0.0 if n == 0 else speed.rate(consolidated_placement(n, gpus_per_node), gpu_type, phase=phase)
            for n in range(max_workers + 1)
        )
    return tuple(
        0.0 if n == 0 else speed.rate(consolidated_placement(n, gpus_per_node), gpu_type)
        for n in range(max_workers + 1)
    )


# ---------------------------------------------------------------------------------------------
# Progress-dependent rates (adaptive batch: the batch is re-chosen in every training phase)
# ---------------------------------------------------------------------------------------------


def phase_bounds(speed: Any) -> tuple[float, ...]:
    """Work done at which the speed's rate changes (empty: the rate depends on placement only)."""
    return getattr(speed, "phase_bounds", ())


def rate_at(speed: Any, shape: Iterable[int], gpu_type: str | None, done: float) -> float:
    """The rate on ``shape`` of a job that has done ``done`` work units."""
    if not phase_bounds(speed):
        return float(speed.rate(shape, gpu_type))
    return float(speed.rate(shape, gpu_type, phase=speed.phase_of(done)))


def next_bound(speed: Any, done: float) -> float:
    """The work done at which the rate changes next (inf: never)."""
    b = phase_bounds(speed)
    if not b:
        return math.inf
    i = speed.phase_of(done)
    return b[i] if i < len(b) else math.inf


def advance(
    speed: Any, shape: Iterable[int], gpu_type: str | None, done: float, seconds: float, limit: float = math.inf
) -> float:
    """Work done after running ``seconds`` on ``shape`` from ``done`` (phase by phase), at most ``limit``."""
    if not phase_bounds(speed):
        # One rate and no bound but ``limit``: the loop below in closed form (the same operations).
        if seconds > 0 and done < limit:
            r = float(speed.rate(shape, gpu_type))
            if not r <= 0:  # (a NaN rate runs on, as in the loop)
                if (limit - done) / r >= seconds:
                    return min(done + r * seconds, limit)
                return limit
        return min(done, limit)
    rates = _phase_rates(speed, shape, gpu_type)
    if rates is not None:  # the same steps as below, with the phases' rates looked up once
        b = speed.phase_bounds
        while seconds > 0 and done < limit:
            i = speed.phase_of(done)
            r = float(rates[i])
            if r <= 0:
                break
            nb = min(b[i] if i < len(b) else math.inf, limit)
            dt = (nb - done) / r
            if dt >= seconds:
                return min(done + r * seconds, limit)
            done = nb
            seconds -= dt
        return min(done, limit)
    while seconds > 0 and done < limit:
        r = rate_at(speed, shape, gpu_type, done)
        if r <= 0:
            break
        nb = min(next_bound(speed, done), limit)
        dt = (nb - done) / r
        if dt >= seconds:
            return min(done + r * seconds, limit)
        done = nb
        seconds -= dt
    return min(done, limit)


def time_to(speed: Any, shape: Iterable[int], gpu_type: str | None, done: float, target: float) -> float:
    """Seconds of running on ``shape`` to get from ``done`` to ``target`` work units."""
    rates = _phase_rates(speed, shape, gpu_type)
    t = 0.0
    if rates is not None:
        b = speed.phase_bounds
        while done < target:
            i = speed.phase_of(done)
            r = float(rates[i])
            if r <= 0:
                return math.inf
            nb = min(b[i] if i < len(b) else math.inf, target)
            t += (nb - done) / r
            done = nb
        return t
    while done < target:
        r = rate_at(speed, shape, gpu_type, done)
        if r <= 0:
            return math.inf
        nb = min(next_bound(speed, done), target)
        t += (nb - done) / r
        done = nb
    return t


def _phase_rates(speed: Any, shape: Iterable[int], gpu_type: str | None) -> tuple[float, ...] | None:
    """Per-phase rates of a speed whose rate depends on progress (None for any other speed)."""
    if not phase_bounds(speed):
        return None
    rates = getattr(speed, "phase_rates", None)
    return rates(shape, gpu_type) if rates is not None else None
