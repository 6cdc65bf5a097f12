"""The training agent's report: what it measures, read back by the scheduler's own parsers, sent
at most once a period, from rank 0 only, without ever holding up training."""

from __future__ import annotations

import json
import threading
import time

import pytest

from lavaflow.agent import Agent, GradientNoise, MemorySink, Topology, report as rp
from lavaflow.elastic import learned, spec as es
from lavaflow.scheduler.elastic.plugin import _time_parser


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def agent(clock: Clock, sink=None, **kw) -> Agent:
    defaults = dict(
        batch_size=64,
        total_steps=1000,
        sink=sink if sink is not None else MemorySink(),
        topology=Topology(replicas=4, nodes=2, local_replicas=2, gpu_type="v100"),
        checkpoint_dir=None,
        handle_signals=False,
        environ={},
        clock=clock,
        wall_clock=lambda: 1_800_000_000.0 + clock.t,
        report_period=30.0,
    )
    defaults.update(kw)
    return Agent(**defaults)


def run(a: Agent, clock: Clock, steps: int, dt: float, sync: float = 0.0) -> None:
    for _ in range(steps):
        clock.t += dt
        a.add_sync_time(sync)
        a.step_done()


def wait_sent(sink: MemorySink, n: int) -> None:
    deadline = time.monotonic() + 5
    while len(sink.sent) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(sink.sent) >= n, sink.sent


def test_the_names_are_the_schedulers():
    assert rp.METRICS == learned.METRICS
    assert (rp.PROGRESS, rp.PROGRESS_TIME, rp.GPU_SECONDS) == (es.PROGRESS, es.PROGRESS_TIME, es.GPU_SECONDS)
    assert rp.MAX_ROWS == learned._MAX_PROFILE


def test_a_profile_report_reads_back_through_the_schedulers_parser():
    clock = Clock()
    a = agent(clock, speed_format="profile", init_batch_size=32, max_batch_size=1024, local_bsz_bounds=(8, 64))
    run(a, clock, 20, 0.25, sync=0.05)
    a.set_batch_size(128)  # adaptive batch: a second configuration
    run(a, clock, 20, 0.4, sync=0.05)
    a.grad.update(local_sqr=3.0, total_sqr=1.5, count=4, scale=2.0)
    ann = a.annotations()
    r = learned.parse_report(ann[rp.METRICS])
    assert [(m.gpu_type, m.nodes, m.replicas, m.local_bsz, m.accum_steps) for m in r.profile] == [
        ("v100", 2, 4, 16, 0),
        ("v100", 2, 4, 32, 0),
    ]
    assert [m.step_time for m in r.profile] == pytest.approx([0.25, 0.4])
    assert [m.sync_time for m in r.profile] == pytest.approx([0.05, 0.05])
    assert r.batch_size == 128 and r.init_batch_size == 32 and r.max_batch_size == 1024
    assert r.local_bsz_bounds == (8, 64)
    assert r.grad_sqr == pytest.approx((4 * 1.5 - 3.0) / 3) and r.grad_var == pytest.approx(1.5 * 2 / 3)
    assert not r.rates
    # the scheduler fits its throughput model on it
    speed = learned.LearnedSpeed(r, batch_size=128)
    assert speed.observed and speed.max_allowed == 8
    assert speed.rate((2, 2), "v100") == pytest.approx(1 / 0.4, rel=0.05)
    # the progress annotations, as the scheduler's plugin parses them on a cluster
    prog = es.progress(ann, parse_time=_time_parser)
    assert prog.fraction == pytest.approx(40 / 1000, abs=1e-6)
    assert prog.time == pytest.approx(1_800_000_000.0 + clock.t, abs=1e-3)
    assert prog.gpu_seconds == pytest.approx(4 * (20 * 0.25 + 20 * 0.4), abs=0.1)


def test_a_rates_report_counts_epochs_when_training_is_given_in_epochs():
    """A job declaring a speed-up table works in epochs: its rates are epochs per second."""
    clock = Clock()
    a = agent(clock, total_steps=None, epochs=10, samples_per_epoch=6400)  # 100 steps an epoch
    run(a, clock, 50, 0.5)
    r = learned.parse_report(a.annotations()[rp.METRICS])
    assert r.rates == (("v100", 2, 4, pytest.approx(0.01 / 0.5)),)
    assert not r.profile and r.batch_size == 64
    # the scheduler's learned model for such a job: its declared table is the prior, this the measurement
    ann = {
        es.SPEEDUP: "1:1,2:1.8,4:3.2",
        es.EPOCH_TIME: "200s",
        es.EPOCHS: "10",
        **a.annotations(),
    }
    sp = learned.learned_spec(ann)
    assert sp.work == 10
    assert sp.speed.rate((2, 2), "v100") == pytest.approx(0.02)
    assert es.progress(ann, parse_time=_time_parser).fraction == pytest.approx(0.05)  # half of one of ten epochs


def test_steps_without_epochs_are_the_work_unit():
    clock = Clock()
    a = agent(clock)
    run(a, clock, 10, 0.2)
    r = learned.parse_report(a.annotations()[rp.METRICS])
    assert r.rates[0][3] == pytest.approx(5.0)


def test_warm_up_and_paused_time_are_not_measured():
    clock = Clock()
    a = agent(clock, warmup_steps=3)
    clock.t += 100  # start-up before the first step
    a.step_done()  # the first step is never timed (start-up, restore)
    run(a, clock, 2, 1.0)  # warm-up: slow
    run(a, clock, 5, 0.1)
    with a.pause():
        clock.t += 50  # evaluation
    run(a, clock, 5, 0.1)
    a.epoch_done()
    clock.t += 20  # between epochs
    run(a, clock, 5, 0.1)
    acc = a.measurements.rates[("v100", 2, 4)]
    assert acc.count == 5 + 4 + 4 and acc.time == pytest.approx(1.3)  # the step after a pause is not timed


def test_a_report_is_sent_at_most_once_a_period_and_the_first_once_measured():
    clock = Clock()
    sink = MemorySink()
    a = agent(clock, sink=sink, total_steps=10_000, report_period=30.0, first_report_steps=5, warmup_steps=3)
    run(a, clock, 7, 0.1)  # the first three steps are warm-up: four measured
    assert a.reporter.flush(5) and sink.sent == []
    run(a, clock, 1, 0.1)  # the fifth measured step: the first report goes out at once
    wait_sent(sink, 1)
    run(a, clock, 200, 0.1)  # 20 s: within the period, nothing more
    assert a.reporter.flush(5) and len(sink.sent) == 1
    run(a, clock, 110, 0.1)  # 31 s after the first
    wait_sent(sink, 2)
    run(a, clock, 3000, 0.1)  # 300 s: ten more at most
    a.reporter.flush(5)
    assert len(sink.sent) <= 2 + 10
    a.close()
    assert float(sink.last[rp.PROGRESS]) == pytest.approx(a.step / 10_000)


def test_only_rank_0_reports():
    clock = Clock()
    sink = MemorySink()
    a = agent(clock, sink=sink, topology=Topology(rank=1, replicas=2), first_report_steps=1)
    run(a, clock, 50, 0.1)
    a.close()
    assert a.reporter is None and sink.sent == []


def test_a_slow_or_failing_api_never_holds_up_training():
    release = threading.Event()
    calls = []

    class Stuck:
        def send(self, annotations):
            calls.append(annotations)
            release.wait(10)

    class Broken:
        def send(self, annotations):
            raise OSError("connection refused")

    clock = Clock()
    a = agent(clock, sink=Stuck(), report_period=1.0, first_report_steps=1)
    t0 = time.monotonic()
    run(a, clock, 500, 0.1)  # 50 reporting periods while the first send hangs
    assert time.monotonic() - t0 < 2.0
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert len(calls) == 1  # one send under way; newer reports replace the waiting one
    release.set()
    a.close()  # the waiting report, or the last one in its place
    assert len(calls) in (2, 3) and float(calls[-1][rp.PROGRESS]) == pytest.approx(0.5)

    b = agent(clock, sink=Broken(), report_period=1.0, first_report_steps=1)
    run(b, clock, 100, 0.1)
    b.reporter.flush(5)
    assert b.step == 100 and b.reporter.failed >= 1
    b.close()


def test_at_most_256_rows_the_newest_kept():
    m = rp.Measurements()
    for i in range(300):
        m.add(("t4", 1, 1, i + 1, 0), 0.1, 0.0, 1.0)
    rows = json.loads(rp.metrics_json(m, rp.PROFILE, rp.BatchInfo()))["profile"]
    assert len(rows) == 256 and rows[-1][3] == 300 and rows[0][3] == 45
    assert len(learned.parse_report(rp.metrics_json(m, rp.PROFILE, rp.BatchInfo())).profile) == 256


def test_gradient_noise_estimates_recover_known_statistics():
    """Replicas' gradients drawn around a known mean: the estimates find its squared norm and the
    noise at the initial batch (scaled by how much larger the batch they averaged is)."""
    import random

    rng = random.Random(1)
    dim, replicas, local, b0 = 50, 4, 16, 32
    mu = [0.3] * dim  # |mu|^2 = 4.5
    sigma2 = 2.0  # per-sample variance of each coordinate: tr(S) = 100
    g = GradientNoise(smoothing=0.99)
    for _ in range(2000):
        grads = [[m + rng.gauss(0, (sigma2 / local) ** 0.5) for m in mu] for _ in range(replicas)]
        avg = [sum(c) / replicas for c in zip(*grads)]
        local_sqr = sum(sum(x * x for x in gr) for gr in grads) / replicas
        g.update(local_sqr, sum(x * x for x in avg), replicas, replicas * local / b0)
    sqr, var = g.value
    assert sqr == pytest.approx(4.5, rel=0.15)
    assert var == pytest.approx(dim * sigma2 / b0, rel=0.15)
