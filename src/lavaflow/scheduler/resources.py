"""Resource vectors.

The scheduler works on float vectors indexed by resource name. Columns 0..2 are
always cpu (cores), memory (bytes) and pods (count); extended resources such as
``nvidia.com/gpu`` get the next columns as they are first seen.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

EPS = 1e-9
CPU, MEMORY, PODS = 0, 1, 2
# Resources whose requests are not scheduled on (Kubernetes' own object counts etc.).
_IGNORED_PREFIXES = ("count/", "requests.", "limits.")


class ResourceIndex:
    """Maps resource names to vector columns; append-only."""

    def __init__(self, names: tuple[str, ...] = ("cpu", "memory", "pods")) -> None:
        self.names: list[str] = list(names)
        self.pos: dict[str, int] = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def add(self, name: str) -> int:
        i = self.pos.get(name)
        if i is None:
            i = len(self.names)
            self.names.append(name)
            self.pos[name] = i
        return i

    @staticmethod
    def schedulable(name: str) -> bool:
        return not name.startswith(_IGNORED_PREFIXES)

    def vector(self, amounts: Mapping[str, float], fill: float = 0.0) -> np.ndarray:
        """A vector of the given amounts; names not yet known are added."""
        for name in amounts:
            if name not in self.pos and self.schedulable(name):
                self.add(name)
        vec = np.full(len(self.names), fill, dtype=np.float64)
        for name, amount in amounts.items():
            i = self.pos.get(name)
            if i is not None:
                vec[i] = float(amount)
        return vec

    def to_dict(self, vec: np.ndarray, skip_zero: bool = True) -> dict[str, float]:
        out: dict[str, float] = {}
        for i, name in enumerate(self.names[: len(vec)]):
            v = float(vec[i])
            if skip_zero and v == 0.0:
                continue
            out[name] = v
        return out


def pad(vec: np.ndarray, n: int, fill: float = 0.0) -> np.ndarray:
    """Extend a vector to n columns (after new resources appeared)."""
    if len(vec) >= n:
        return vec
    out = np.full(n, fill, dtype=np.float64)
    out[: len(vec)] = vec
    return out


def less_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """a <= b in every dimension (with tolerance)."""
    return bool(np.all(a <= b + EPS))


def describe(index: ResourceIndex, vec: np.ndarray) -> str:
    """``cpu 2, memory 4Gi`` for messages."""
    from ..api.quantity import format_quantity

    parts = []
    for i, name in enumerate(index.names[: len(vec)]):
        if name == "pods" or vec[i] == 0 or not np.isfinite(vec[i]):
            continue
        parts.append(f"{name} {format_quantity(name, float(vec[i]))}")
    return ", ".join(parts) or "nothing"


def short_in(index: ResourceIndex, need: np.ndarray, limit: np.ndarray, dims: np.ndarray) -> str:
    """The resources (among ``dims``) where ``need`` exceeds ``limit``: ``ephemeral-storage``."""
    names = [
        index.names[i]
        for i in range(min(len(need), len(index.names)))
        if dims[i] and index.names[i] != "pods" and need[i] > limit[i] + EPS
    ]
    return ", ".join(names) or "nothing"


def amounts(index: ResourceIndex, vec: np.ndarray, names: str) -> str:
    """``cpu 1600m, ephemeral-storage 0``: the amounts of the named resources, zeros included."""
    from ..api.quantity import format_quantity

    out = []
    for name in names.split(", "):
        i = index.names.index(name) if name in index.names else -1
        if 0 <= i < len(vec):
            v = float(vec[i])
            out.append(f"{name} {format_quantity(name, v) if v > 0 else '0'}")
    return ", ".join(out) or "nothing"
