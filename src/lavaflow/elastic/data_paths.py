"""Where the elastic simulator finds its data files.

Search order: ``$LAVAFLOW_DATA``, then ``../shared/data`` next to the repository root, then the
small copies shipped inside the package (``lavaflow/elastic/data``, see its ATTRIBUTION file).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "LAVAFLOW_DATA"
PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def data_roots() -> list[Path]:
    roots: list[Path] = []
    env = os.environ.get(ENV_VAR)
    if env:
        roots.append(Path(env))
    # src/lavaflow/elastic/data_paths.py -> repo root is parents[3]
    repo = Path(__file__).resolve().parents[3]
    roots.append(repo.parent / "shared" / "data")
    roots.append(PACKAGE_DATA)
    return roots


def find_data(relative: str) -> Path:
    """First existing ``root/relative``; raises FileNotFoundError naming every place tried."""
    tried = []
    for root in data_roots():
        p = root / relative
        if p.exists():
            return p
        tried.append(str(p))
    raise FileNotFoundError(f"data file {relative!r} not found (looked in: {', '.join(tried)})")


def pollux_trace_dir(app: str) -> Path:
    return find_data(f"pollux/traces/{app}")


def gavel_throughputs() -> Path:
    for rel in ("gavel/simulation_throughputs.json", "gavel/isolated_throughputs.json"):
        try:
            return find_data(rel)
        except FileNotFoundError:
            continue
    raise FileNotFoundError("Gavel throughput file not found (set LAVAFLOW_DATA)")
