"""Shared helpers: run a simulation from YAML text, build cluster/workload YAML."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lavaflow.api.loader import load_text
from lavaflow.scheduler.scheduler import Scheduler
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def simulate(text: str, scheduler: str = "lavaflow", seed: int = 0, **kw) -> dict:
    """Simulate a YAML input and return the JSON-compatible result.

    With ``LAVAFLOW_CAPTURE_SCENARIOS=DIR`` each input simulated under lavaflow with the scheduler
    configuration it carries is also written to DIR, named by its test: the scenario tests' inputs,
    for benchmarks/volcano_diff.py to play under Volcano itself (issue 34)."""
    capture = os.environ.get("LAVAFLOW_CAPTURE_SCENARIOS")
    if capture and scheduler == "lavaflow" and not kw.keys() - {"until"}:
        test = os.environ.get("PYTEST_CURRENT_TEST", "scenario").split(" ")[0]
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test.replace("tests/", "").replace(".py::", "-"))[:150]
        where = Path(capture)
        where.mkdir(parents=True, exist_ok=True)
        n = len(list(where.glob(f"{stem}*.yaml")))
        (where / f"{stem}{f'-{n}' if n else ''}.yaml").write_text(text)
    return Simulation(prepare(load_text(text)), scheduler=scheduler, seed=seed, **kw).run()


def simulate_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``lavaflow simulate ARGS`` in a new process, from the repository's root."""
    return lavaflow_cli("simulate", *args, timeout=timeout)


def lavaflow_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``lavaflow ARGS`` in a new process, from the repository's root."""
    return subprocess.run(
        [sys.executable, "-c", "from lavaflow.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def resources(requests: dict) -> dict:
    """A container's ``resources`` as the API server accepts them: extended resources (e.g.
    nvidia.com/gpu) cannot be overcommitted, so each needs a limit equal to its request."""
    out: dict = {"requests": requests}
    limits = {k: v for k, v in requests.items() if "/" in k and "kubernetes.io/" not in k}
    if limits:
        out["limits"] = limits
    return out


def as_json(result: dict) -> str:
    return json.dumps(result, sort_keys=True, default=str)


def node_group(
    name: str = "n",
    count: int = 1,
    cpu: str = "2",
    memory: str = "4Gi",
    labels: dict | None = None,
    taints: list[dict] | None = None,
    **extra: str,
) -> str:
    """A sim.lavaflow.io NodeGroup document."""
    cap = {"cpu": cpu, "memory": memory, "pods": "110", **extra}
    doc = {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name},
        "spec": {"count": count, "capacity": cap, "labels": labels or {}, "taints": taints or []},
    }
    return "---\n" + json.dumps(doc) + "\n"


@pytest.fixture(autouse=True)
def _scheduler_errors_fail_tests(monkeypatch):
    """A plugin or action that raises fails the test (after run_once restored the cache) instead
    of being only logged and counted, as it is in a running scheduler."""
    monkeypatch.setattr(Scheduler, "reraise", True)


@pytest.fixture
def sim():
    return simulate
