"""Checkpoints: written whole or not at all, taken at the step boundary after SIGTERM (then the
process exits), periodically, and read back at another number of replicas."""

from __future__ import annotations

import json
import os
import signal

import pytest

from lavaflow.agent import (
    AGENT_FILE,
    RESTART_EXIT_CODE,
    Agent,
    Checkpoint,
    Collective,
    MemorySink,
    Topology,
    report as rp,
)
from lavaflow.elastic import learned


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make(tmp_path, clock=None, replicas=4, rank=0, **kw) -> Agent:
    clock = clock or Clock()
    kw.setdefault("sink", MemorySink())
    kw.setdefault("handle_signals", False)
    return Agent(
        batch_size=32,
        epochs=4,
        samples_per_epoch=320,
        checkpoint_dir=tmp_path,
        topology=Topology(rank=rank, replicas=replicas, gpu_type="a100"),
        environ={},
        clock=clock,
        wall_clock=lambda: 1e9 + clock.t,
        **kw,
    )


def train(a: Agent, clock: Clock, steps: int, dt: float = 0.5, state=None) -> None:
    for _ in range(steps):
        clock.t += dt
        if state is not None:
            state["w"] += 1
        if a.epoch_offset >= 320:
            a.epoch_done()
        a.step_done(loss=1.0 / (1 + a.step))


def test_a_checkpoint_is_written_whole_or_not_at_all(tmp_path):
    ck = Checkpoint(tmp_path / "c", keep=2)

    def boom(fh):
        fh.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        ck.save(5, {"a": b"1", "b": boom})
    assert ck.latest() is None and os.listdir(tmp_path / "c") == []
    for step in (1, 2, 3):
        ck.save(step, {"a": str(step).encode()})
    assert ck.steps() == [2, 3]  # the newest two kept
    assert (ck.latest() / "a").read_bytes() == b"3"
    ck.save(3, {"a": b"other"})  # one step, one state: the first stays
    assert (ck.path(3) / "a").read_bytes() == b"3"
    stale = tmp_path / "c" / ".tmp-000000000009-1-dead"
    stale.mkdir()
    os.utime(stale, (0, 0))
    ck.save(4, {"a": b"4"})
    assert not stale.exists() and ck.steps() == [3, 4]


def test_sigterm_stops_at_the_next_step_with_a_checkpoint_and_exit_0(tmp_path):
    clock = Clock()
    sink = MemorySink()
    state = {"w": 0}
    a = make(tmp_path, clock, sink=sink, handle_signals=True, checkpoint_period=0)
    a.track("state", lambda: dict(state), state.update)
    try:
        train(a, clock, 17, state=state)
        os.kill(os.getpid(), signal.SIGTERM)  # the handler only sets a flag: training goes on
        assert a.should_stop and a.signalled and not a.stopped
        state["w"] += 1
        with pytest.raises(SystemExit) as exc:
            a.step_done()
    finally:
        a.restore_signal_handlers()
    assert exc.value.code == 0 and a.stopped
    assert Checkpoint(tmp_path).steps() == [18]
    saved = json.loads((Checkpoint(tmp_path).latest() / AGENT_FILE).read_text())
    assert saved["step"] == 18 and saved["epoch"] == 1 and saved["epochOffset"] == 32 * 8
    assert float(sink.last[rp.PROGRESS]) == pytest.approx((1 + 256 / 320) / 4)  # the last report
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_replica_told_to_stop_by_its_peers_exits_for_a_restart(tmp_path):
    """Under torchrun a surviving worker must exit non-zero for torchrun to form the smaller
    group; it leaves only after rank 0 has written the checkpoint (the barrier)."""
    calls = []

    class Peers(Collective):
        def any(self, flag):
            calls.append("any")
            return True  # another replica was signalled

        def barrier(self):
            calls.append("barrier")

    clock = Clock()
    a = make(tmp_path, clock, collective=Peers(), exit_on_stop=False)
    assert a.step_done() is True
    assert calls == ["any", "barrier"] and a.stopped and a.stop_exit_code == RESTART_EXIT_CODE
    assert Checkpoint(tmp_path).steps() == [1]
    b = make(tmp_path / "other", clock, rank=1, collective=Peers(), exit_on_stop=True)
    with pytest.raises(SystemExit) as exc:
        b.step_done()
    assert exc.value.code == RESTART_EXIT_CODE
    assert Checkpoint(tmp_path / "other").steps() == []  # only rank 0 writes


def test_checkpoints_every_period_bound_the_work_lost(tmp_path):
    clock = Clock()
    a = make(tmp_path, clock, checkpoint_period=5.0, keep_checkpoints=10)
    train(a, clock, 40, dt=0.5)  # 20 s
    assert Checkpoint(tmp_path).steps() == [10, 20, 30, 40]
    b = make(tmp_path / "r1", clock, rank=1, checkpoint_period=5.0)
    train(b, clock, 40)
    assert not (tmp_path / "r1").exists()  # rank 0 writes


def test_training_resumes_at_another_size_where_it_stopped(tmp_path):
    clock = Clock()
    state = {"w": 0}
    a = make(tmp_path, clock, replicas=4, exit_on_stop=False, checkpoint_period=0)
    a.track("state", lambda: dict(state), state.update)
    train(a, clock, 25, dt=0.25, state=state)
    a.grad.update(2.0, 1.0, 4, 1.0)
    a.request_stop()
    train(a, clock, 1, dt=0.25, state=state)  # stops after step 26
    assert a.stopped
    gpu = a.gpu_seconds

    state2 = {"w": -1}
    b = make(tmp_path, clock, replicas=2)
    b.track("state", lambda: dict(state2), state2.update)
    assert b.restore()
    assert (b.step, b.samples, b.epoch, b.epoch_offset) == (26, 26 * 32, 2, 6 * 32)
    assert state2 == {"w": 26} and b.gpu_seconds == pytest.approx(gpu)
    assert b.local_batch_size == 16 and b.progress == pytest.approx((2 + 192 / 320) / 4)
    assert b.grad.value == a.grad.value
    train(b, clock, 10, dt=0.4)
    r = learned.parse_report(b.annotations()[rp.METRICS])
    # epochs per second at each size, the earlier size's measurement kept
    assert [(x[2], x[3]) for x in r.rates] == [(4, pytest.approx(0.1 / 0.25)), (2, pytest.approx(0.1 / 0.4))]
    assert r.grad_sqr is not None


def test_a_finished_job_leaves_a_checkpoint_and_a_restart_trains_nothing(tmp_path):
    clock = Clock()
    a = make(tmp_path, clock, checkpoint_period=0)
    for _ in a.remaining_epochs():
        while a.epoch_offset < 320:
            clock.t += 0.1
            a.step_done()
    a.close()
    assert a.finished and Checkpoint(tmp_path).steps() == [40]
    b = make(tmp_path, clock)
    assert b.restore() and b.finished and list(b.remaining_epochs()) == []
