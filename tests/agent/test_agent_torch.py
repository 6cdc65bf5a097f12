"""The agent's PyTorch helpers (skipped without torch; torch is not a test dependency).

The sampler and the checkpointed model state in one process; then real DDP training on the CPU
(gloo) under torchrun: stopped by SIGTERM on 2 workers and resumed on 1, and an elastic group of
torchrun agents (c10d rendezvous) shrinking 2 → 1 and growing back to 2 while it trains."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lavaflow.agent import (  # noqa: E402
    Agent,
    MemorySink,
    Topology,
    torch as agent_torch,  # noqa: E402
)
from lavaflow.elastic import learned  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DDP = ROOT / "examples" / "agent" / "train_ddp.py"


def local_agent(tmp_path, rank=0, replicas=1, **kw) -> Agent:
    return Agent(
        batch_size=kw.pop("batch_size", 10),
        topology=Topology(rank=rank, replicas=replicas),
        checkpoint_dir=tmp_path,
        sink=MemorySink(),
        handle_signals=False,
        environ={},
        **kw,
    )


def test_the_sampler_continues_an_epoch_at_another_size(tmp_path):
    """The global batches are the same at every size; stopped after three of them on 4 replicas,
    2 replicas get the rest of the epoch, split between them."""
    n, b = 103, 10
    whole = [sum(agent_torch.ElasticBatchSampler(n, local_agent(tmp_path), seed=3), [])]
    four = [local_agent(tmp_path, rank=r, replicas=4, epochs=2) for r in range(4)]
    shards = [list(agent_torch.ElasticBatchSampler(n, a, seed=3)) for a in four]
    assert [len(s) for s in shards] == [11] * 4
    first3 = [sorted(sum((shards[r][i] for r in range(4)), [])) for i in range(3)]
    assert first3 == [sorted(whole[0][i * b : (i + 1) * b]) for i in range(3)]
    two = [local_agent(tmp_path, rank=r, replicas=2, epochs=2) for r in range(2)]
    for a in two:
        a.epoch_offset = 3 * b
    rest = [list(agent_torch.ElasticBatchSampler(n, a, seed=3)) for a in two]
    seen = sum(first3, []) + sum((sum(r, []) for r in rest), [])
    assert sorted(seen) == list(range(n))  # every sample once in the epoch
    assert [len(x) for x in rest[0]] == [5] * 7 + [2] and [len(x) for x in rest[1]] == [5] * 7 + [1]
    # another epoch, another order
    two[0].epoch = 1
    two[0].epoch_offset = 0
    assert sum(agent_torch.ElasticBatchSampler(n, two[0], seed=3), []) != sum(rest[0], [])


def test_model_and_optimizer_state_round_trip(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    a = local_agent(tmp_path, total_steps=100)
    agent_torch.track(a, net, opt)
    for _ in range(3):
        opt.zero_grad()
        net(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        a.step_done()
    a.save()
    weights = net.weight.detach().clone()
    momentum = opt.state[net.weight]["momentum_buffer"].clone()

    net2 = torch.nn.Linear(4, 2)
    opt2 = torch.optim.SGD(net2.parameters(), lr=0.1, momentum=0.9)
    b = local_agent(tmp_path, total_steps=100)
    agent_torch.track(b, net2, opt2)
    assert b.restore() and b.step == 3
    assert torch.equal(net2.weight, weights)
    assert torch.equal(opt2.state[net2.weight]["momentum_buffer"], momentum)


def test_gradient_statistics_of_one_replica_reach_the_report(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Linear(20, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    a = local_agent(tmp_path, total_steps=100, batch_size=16, speed_format="profile")
    agent_torch.GradientStats(a, net)
    x, y = torch.randn(512, 20), torch.randn(512, 1)
    for _ in range(30):
        idx = torch.randint(0, 512, (16,))
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x[idx]), y[idx]).backward()
        opt.step()
        a.step_done()
    r = learned.parse_report(a.annotations()["lavaflow.io/metrics"])
    assert r.grad_sqr is not None and r.grad_var is not None and r.grad_var > 0


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAVAFLOW_", "KUBE"))}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        LAVAFLOW_CHECKPOINT_DIR=str(tmp_path / "ckpt"),
        LAVAFLOW_REPORT_FILE=str(tmp_path / "report.json"),
        LAVAFLOW_REPORT_PERIOD="1",
        # torch's shared rendezvous store does not follow a new member joining a later round
        # (the rank-0 agent keeps the first round's address): every round builds its own
        TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
        OMP_NUM_THREADS="1",
        **extra,
    )
    return env


def _events(*logs: Path) -> list[dict]:
    out = []
    for log in logs:
        if log.exists():
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith('{"event"'):
                    out.append(json.loads(line))
    return sorted(out, key=lambda e: e["time"])  # rank 0 may be in any agent's log


def _wait(what: str, cond, timeout: float, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        for p in procs:
            assert p.poll() is None or p.returncode == 0, f"{what}: a process exited with {p.returncode}"
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _torchrun(args: list[str], log: Path, env: dict[str, str], train: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", *args, str(DDP), *train]
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=ROOT)


TRAIN = ["--epochs", "6", "--samples", "2048", "--log-every", "16", "--step-seconds", "0.03", "--grad-stats"]
ELASTIC_TRAIN = ["--epochs", "10", "--samples", "2048", "--log-every", "16", "--step-seconds", "0.1"]


@pytest.mark.slow
def test_ddp_on_two_workers_stops_on_sigterm_and_resumes_on_one(tmp_path):
    env = _env(tmp_path)
    log1 = tmp_path / "run1.log"
    p = _torchrun(["--standalone", "--nproc-per-node=2"], log1, env, TRAIN)
    _wait("step 64 on two workers", lambda: any(e.get("step", 0) >= 64 for e in _events(log1)), 180, [p])
    p.send_signal(signal.SIGTERM)
    p.wait(120)
    before = _events(log1)
    stopped_at = max(e["step"] for e in before)
    ckpt = sorted((tmp_path / "ckpt").iterdir())
    assert ckpt, "no checkpoint written on SIGTERM"
    saved = json.loads((ckpt[-1] / "agent.json").read_text())
    assert saved["step"] >= stopped_at
    assert saved["grad"][3] > 0  # gradient statistics measured on two workers (the DDP hook)

    log2 = tmp_path / "run2.log"
    q = _torchrun(["--standalone", "--nproc-per-node=1"], log2, env, TRAIN)
    assert q.wait(300) == 0, log2.read_text()[-3000:]
    after = _events(log2)
    start = after[0]
    assert start["event"] == "start" and start["resumed"] and start["replicas"] == 1
    assert start["step"] == saved["step"]  # not restarted
    assert start["loss"] <= before[0]["loss"] / 4
    assert after[-1]["event"] == "done" and after[-1]["step"] == 6 * 2048 // 64
    assert after[-1]["loss"] < start["loss"]
    report = json.loads((tmp_path / "report.json").read_text())
    r = learned.parse_report(report["lavaflow.io/metrics"])
    assert {row[2] for row in r.rates} == {1, 2} and r.grad_sqr is not None
    assert float(report["lavaflow.io/progress"]) == 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_elastic_ddp_job_shrinks_and_grows_back_without_restarting_training(tmp_path):
    """Three torchrun agents (pods) of one c10d rendezvous: two train; one is removed (SIGTERM,
    as a scale-in does), the survivor goes on alone from the checkpoint; a third joins (as a
    scale-out does) and the two go on from the next checkpoint.  Steps never go back."""
    env = _env(tmp_path)
    port = _free_port()

    def agent_proc(i: int, host: bool) -> subprocess.Popen:
        args = [
            "--nnodes=1:2",
            "--nproc-per-node=1",
            "--max-restarts=20",
            "--monitor-interval=1",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}",
            "--rdzv-id=elastic-test",
            f"--rdzv-conf=last_call_timeout=2,is_host={'true' if host else 'false'}",
        ]
        return _torchrun(args, tmp_path / f"n{i}.log", env, ELASTIC_TRAIN)

    logs = [tmp_path / f"n{i}.log" for i in range(3)]
    n0 = agent_proc(0, True)
    time.sleep(2)
    n1 = agent_proc(1, False)
    n2 = None
    try:
        _wait("step 48 on 2", lambda: any(e.get("step", 0) >= 48 and e["replicas"] == 2 for e in _events(*logs)), 240)
        n1.send_signal(signal.SIGTERM)
        n1.wait(120)
        one = _wait(
            "training resumed on 1",
            lambda: [e for e in _events(*logs) if e["event"] == "start" and e["replicas"] == 1],
            240,
            [n0],
        )[0]
        n2 = agent_proc(2, False)  # (it takes a while to start: the one left trains meanwhile)
        two = _wait(
            "training resumed on 2 again",
            lambda: [e for e in _events(*logs) if e["event"] == "start" and e["replicas"] == 2 and e["resumed"]],
            240,
            [n0],
        )[0]
        assert n0.wait(300) == 0 and n2.wait(60) == 0
    finally:
        for p in (n0, n1, n2):
            if p is not None and p.poll() is None:
                p.kill()
    events = _events(*logs)
    starts = [e for e in events if e["event"] == "start"]
    assert [s["replicas"] for s in starts] == [2, 1, 2], starts
    assert starts[0]["step"] == 0 and 0 < one["step"] < two["step"]
    assert max(e["step"] for e in events if e["event"] == "log" and e["replicas"] == 2) >= 48
    assert one["step"] >= 48 - 1  # at most the step under way is lost
    assert one["loss"] < starts[0]["loss"] and two["loss"] < one["loss"]
    done = events[-1]
    assert done["event"] == "done" and done["step"] == 10 * 2048 // 64 and done["loss"] < two["loss"]
    r = learned.parse_report(json.loads((tmp_path / "report.json").read_text())["lavaflow.io/metrics"])
    assert {row[2] for row in r.rates} == {1, 2}
