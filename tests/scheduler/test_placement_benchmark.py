"""benchmarks/placement.py runs (a small cluster): it broke unnoticed once when pod validation began
asking extended resources for their limits, and issue 37's speed check reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_placement_benchmark_runs_and_prints_its_figures():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "placement.py"), "--nodes", "20", "--pods", "200"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "placements/s" in out.stdout
    assert "nvidia.com/gpu" in out.stdout  # GPU pods were among those placed
