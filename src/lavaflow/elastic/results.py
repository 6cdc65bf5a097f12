"""Results of an elastic replay: per job and for the whole run (table, JSON and report read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class JobResult:
    name: str
    application: str
    submit: float
    start: float | None
    finish: float | None
    jct: float | None
    resizes: int
    halts: int
    migrations: int
    gpu_seconds: float
    history: list[tuple[float, int, str | None]]


@dataclass
class SimResult:
    policy: str
    jobs: list[JobResult]
    capacity: dict[str, int]
    timeline: list[tuple[float, dict[str, int]]]  # (t, allocated GPUs per type) after each change
    reschedules: int
    wall_seconds: float
    end_time: float
    clairvoyant: bool = False  # the policy read jobs' remaining / total work
    oracle: bool = False  # the policy was handed the true speed models (no real scheduler has them)
    shared_profiles: bool = False  # jobs of one profile group (one model) learned from each other's reports

    def summary(self) -> dict[str, Any]:
        jcts = np.array([j.jct for j in self.jobs if j.jct is not None], dtype=float)
        done = len(jcts)
        first = min((j.submit for j in self.jobs), default=0.0)
        last = max((j.finish for j in self.jobs if j.finish is not None), default=first)
        total = sum(self.capacity.values())
        util = self.utilization()
        return {
            "policy": self.policy,
            "clairvoyant": self.clairvoyant,
            "oracle": self.oracle,
            "shared_profiles": self.shared_profiles,
            "jobs": len(self.jobs),
            "completed": done,
            "avg_jct": float(jcts.mean()) if done else None,
            "p50_jct": float(np.percentile(jcts, 50)) if done else None,
            "p99_jct": float(np.percentile(jcts, 99)) if done else None,
            "makespan": float(last - first) if done else None,
            "gpu_utilization": util,
            "resizes": sum(j.resizes for j in self.jobs),
            "halts": sum(j.halts for j in self.jobs),
            "migrations": sum(j.migrations for j in self.jobs),
            "reschedules": self.reschedules,
            "gpu_hours_per_job": (sum(j.gpu_seconds for j in self.jobs) / len(self.jobs) / 3600) if self.jobs else None,
            "gpus": total,
            "wall_seconds": self.wall_seconds,
        }

    def utilization(self) -> float | None:
        """Time-averaged fraction of GPUs allocated, from the first arrival to the last finish."""
        total = sum(self.capacity.values())
        if not self.timeline or total == 0:
            return None
        t0 = min(j.submit for j in self.jobs)
        t1 = max((j.finish for j in self.jobs if j.finish is not None), default=self.end_time)
        if t1 <= t0:
            return None
        area = 0.0
        for (ta, alloc), (tb, _) in zip(self.timeline, self.timeline[1:] + [(t1, {})]):
            a, b = max(ta, t0), min(tb, t1)
            if b > a:
                area += (b - a) * sum(alloc.values())
        return area / ((t1 - t0) * total)
