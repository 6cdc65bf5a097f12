"""The toy training script (examples/agent/train_toy.py, no framework) as real processes:
SIGTERM mid-training, started again at another size, it continues from its checkpoint and ends
exactly where a run that was never interrupted ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lavaflow.elastic import learned

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "examples" / "agent" / "train_toy.py"
ARGS = ["--epochs", "4", "--step-seconds", "0.01", "--log-every", "4"]


def env(tmp: Path, world: int) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("LAVAFLOW_", "KUBE", "WORLD_SIZE", "RANK"))}
    out.update(
        PYTHONPATH=str(ROOT / "src"),
        WORLD_SIZE=str(world),
        LAVAFLOW_CHECKPOINT_DIR=str(tmp / "ckpt"),
        LAVAFLOW_REPORT_FILE=str(tmp / "report.json"),
        LAVAFLOW_REPORT_PERIOD="0.2",
        LAVAFLOW_GPU_TYPE="V100",
    )
    return out


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def start(tmp: Path, world: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(TOY), *ARGS, *extra],
        env=env(tmp, world),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_then_resume_at_another_size_continues_the_same_training(tmp_path):
    whole = subprocess.run(
        [sys.executable, str(TOY), *ARGS], env=env(tmp_path / "whole", 1), capture_output=True, text=True, timeout=120
    )
    assert whole.returncode == 0, whole.stderr
    reference = events(whole.stdout)[-1]
    assert reference["event"] == "done" and reference["step"] == 4 * 2048 // 64

    # A line at every step (logging does not change the training): the last line printed is the
    # last step finished before SIGTERM stopped the run, however far the trainer ran ahead of this
    # reader on a loaded machine.
    p = start(tmp_path, 4, "--log-every", "1")
    seen: list[dict] = []
    deadline = time.monotonic() + 60
    assert p.stdout is not None
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if line.startswith("{"):
            seen.append(json.loads(line))
            if seen[-1]["step"] >= 40:
                break
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err  # stopped cleanly at the next step
    seen += events(out)
    assert seen[-1]["event"] == "log" and seen[-1]["replicas"] == 4
    stopped = max(e["step"] for e in seen)
    first_report = json.loads((tmp_path / "report.json").read_text())
    assert 0 < float(first_report["lavaflow.io/progress"]) < 1

    q = subprocess.run(
        [sys.executable, str(TOY), *ARGS], env=env(tmp_path, 2), capture_output=True, text=True, timeout=120
    )
    assert q.returncode == 0, q.stderr
    resumed = events(q.stdout)
    assert resumed[0]["event"] == "start" and resumed[0]["resumed"] and resumed[0]["replicas"] == 2
    assert stopped <= resumed[0]["step"] <= stopped + 1  # at most the step under way
    assert resumed[0]["loss"] < seen[0]["loss"] / 10
    losses = [e["loss"] for e in resumed if e["event"] == "log"]
    assert losses[-1] < resumed[0]["loss"]
    done = resumed[-1]
    assert done["event"] == "done" and done["step"] == reference["step"]
    # the same model as the run that was never interrupted (the order of samples and the global
    # batches do not depend on the size; only the sums' rounding may)
    assert abs(done["loss"] - reference["loss"]) <= 1e-9 * max(reference["loss"], 1)

    report = json.loads((tmp_path / "report.json").read_text())
    r = learned.parse_report(report["lavaflow.io/metrics"])
    assert float(report["lavaflow.io/progress"]) == 1.0
    # a rate (epochs per second) for each size it ran at, the first size's kept across the restart
    sizes = {row[2]: row[3] for row in r.rates}
    assert set(sizes) == {4, 2} and {row[0] for row in r.rates} == {"v100"}
    assert all(0 < v < 1 / (0.01 * 0.25 * 32) for v in sizes.values())  # slower than the toy's sleeps
    assert float(report["lavaflow.io/gpu-seconds"]) > float(first_report["lavaflow.io/gpu-seconds"])
