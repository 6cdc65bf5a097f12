"""The speed of a job of one of Gavel's model configurations, from Gavel's throughputs.

The throughputs (``gavel/``) are the isolated steps/s of 26 model configurations at scale factors
1, 2, 4, 8 on K80, P100 and V100 GPUs, consolidated on one node or spread over nodes
(:class:`GavelTable`).  They give the speed of Gavel-built workloads (:class:`GavelJobSpeed`, work
counted in steps) and the GPU-type factors of the Pollux applications
(:func:`~lavaflow.elastic.speed.pollux.type_factor`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from ..data_paths import gavel_throughputs
from .common import canonical_placement


class GavelTable:
    """Isolated throughputs (steps/s) by GPU type, model and scale factor."""

    def __init__(self, path: Path | None = None) -> None:
        p = Path(path) if path is not None else gavel_throughputs()
        raw = json.loads(p.read_text())
        self.table: dict[str, dict[str, dict[int, float]]] = {}
        for gtype, entries in raw.items():
            for key, val in entries.items():
                model, sf = _parse_gavel_key(key)
                v = val.get("null") if isinstance(val, dict) else None
                if v is None or not v or v <= 0:
                    continue  # missing measurement (Gavel stores 0.0 for some)
                self.table.setdefault(gtype, {}).setdefault(model, {})[sf] = float(v)
        self.types = sorted(t for t in self.table if not t.endswith("_unconsolidated"))
        self.models = sorted(self.table.get("v100", {}))

    def isolated(self, model: str, gpu_type: str) -> float:
        return self.table[gpu_type][model][1]

    def throughput(self, model: str, gpu_type: str, workers: int, consolidated: bool = True) -> float:
        """Steps/s of ``model`` on ``workers`` GPUs of ``gpu_type``.

        Measured points (scale factors 1, 2, 4, 8) are made non-decreasing (more workers never
        run slower: the extra ones could idle) and interpolated linearly; beyond the largest
        measured scale the throughput stays flat.
        """
        if workers <= 0:
            return 0.0
        pts = self._points(model, gpu_type, consolidated)
        xs, ys = pts
        return float(np.interp(workers, xs, ys))

    @cache  # noqa: B019 (one GavelTable per process, kept for its lifetime)
    def _points(self, model: str, gpu_type: str, consolidated: bool) -> tuple[np.ndarray, np.ndarray]:
        base = self.table[gpu_type][model]
        pts = dict(base)
        if not consolidated:
            unc = self.table.get(f"{gpu_type}_unconsolidated", {}).get(model, {})
            pts = {1: base[1], **{k: v for k, v in unc.items() if k > 1}}
            for k, v in base.items():  # fall back to consolidated figures where unmeasured
                pts.setdefault(k, v)
        xs = np.array(sorted(pts), dtype=float)
        ys = np.maximum.accumulate(np.array([pts[int(x)] for x in xs]))
        if xs[0] != 0:
            xs = np.concatenate([[0.0], xs])
            ys = np.concatenate([[0.0], ys])
        return xs, ys

    def __hash__(self) -> int:  # for lru_cache on methods
        return id(self)


def _parse_gavel_key(key: str) -> tuple[str, int]:
    # "('ResNet-50 (batch size 64)', 2)"
    inner = key.strip()[1:-1]
    model_part, sf_part = inner.rsplit(",", 1)
    return model_part.strip().strip("'\""), int(sf_part.strip())


@cache
def gavel_table() -> GavelTable:
    return GavelTable()


@dataclass
class GavelJobSpeed:
    """A job of a Gavel model configuration; work is counted in steps."""

    model: str

    def max_useful_workers(self) -> int:
        return 8

    def rate(self, placement: Iterable[int], gpu_type: str | None = None) -> float:
        pl = canonical_placement(placement)
        if not pl:
            return 0.0
        t = (gpu_type or "").lower()
        if t in ("", "default"):  # an untyped node: the type a Gavel trace's run times are given on
            t = "v100"
        return gavel_table().throughput(self.model, t, sum(pl), consolidated=len(pl) == 1)
