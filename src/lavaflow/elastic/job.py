"""Elastic job description shared by the readers, the policies and the simulator."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ElasticJobSpec:
    """One training job of a trace.

    ``work`` is in the units of ``speed.rate`` (e.g. optimiser steps) so the job ends when
    ``∫ rate dt == work``.  ``requested`` is what a rigid scheduler gives (Voda's NUM_PROC);
    ``min_workers``/``max_workers`` bound what an elastic scheduler may give.
    """

    name: str
    submit_time: float
    speed: Any
    work: float
    requested: int
    min_workers: int
    max_workers: int
    priority: int = 0
    gpu_type: str | None = None  # pinned GPU type (Voda's vodascheduler/accelerator); None = any
    application: str = ""
    batch_size: int | None = None
    source: str = ""  # "file:line" for messages
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.min_workers < 1:
            raise ValueError(f"{self.name}: min workers must be >= 1")
        if self.max_workers < self.min_workers:
            raise ValueError(f"{self.name}: max workers ({self.max_workers}) < min ({self.min_workers})")
        self.requested = min(max(self.requested, self.min_workers), self.max_workers)

    @property
    def elastic(self) -> bool:
        return self.max_workers > self.min_workers


def default_elastic_range(requested: int, useful_max: int, cap: int | None = None) -> tuple[int, int]:
    """Voda's example convention: MIN = ceil(NP/2), MAX = 2·NP (bounded by what the batch allows)."""
    lo = max(1, math.ceil(requested / 2))
    hi = max(requested, min(2 * requested, useful_max))
    if cap is not None:
        hi = min(hi, cap)
        lo = min(lo, hi)
    return lo, hi
