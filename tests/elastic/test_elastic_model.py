"""Speed model, placement, simulator and input-format tests for lavaflow.elastic."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lavaflow.elastic.data_paths import PACKAGE_DATA
from lavaflow.elastic.job import ElasticJobSpec
from lavaflow.elastic.placement import Node, best_fit, place
from lavaflow.elastic.speed import (
    PolluxApp,
    PolluxJobSpeed,
    TabulatedJobSpeed,
    canonical_placement,
    consolidated_placement,
    gavel_table,
    type_factor,
)
from lavaflow.elastic.trace_readers import WorkloadError, read_workload

TRACES = PACKAGE_DATA / "pollux" / "traces"


@pytest.fixture(scope="module")
def cifar():
    return PolluxApp("cifar10", TRACES / "cifar10")


# -- speed model ---------------------------------------------------------------------------------
def test_measured_point_is_reproduced_and_interpolated_between(cifar):
    bs, st_, _ = cifar.placements[(1,)]
    for b, s in zip(bs[:5], st_[:5]):
        assert cifar.step_time((1,), int(b))[0] == pytest.approx(s)
    mid = int((bs[2] + bs[3]) // 2)
    lo, hi = sorted((st_[2], st_[3]))
    assert lo - 1e-12 <= cifar.step_time((1,), mid)[0] <= hi + 1e-12


def test_placement_canonicalisation():
    assert canonical_placement((2, 1, 0, 3)) == (1, 3, 2)
    assert consolidated_placement(10, 4) == (2, 4, 4)


def test_throughput_grows_with_workers_where_the_data_do(cifar):
    # At a large batch, one node with 1, 2, 4 replicas: measured step times give increasing rates.
    rates = [cifar.rate((n,), 4096) for n in (1, 2, 4)]
    assert rates == sorted(rates) and rates[-1] > 2 * rates[0]


def test_unmeasured_placement_is_interpolated_finite(cifar):
    r = cifar.rate((4, 4, 4, 4, 4), 4096)  # five nodes: not in placements.csv
    assert np.isfinite(r) and r > cifar.rate((4,), 4096)


def test_work_is_larger_at_larger_batch_in_samples(cifar):
    # statistical efficiency: more samples needed at a bigger batch
    assert cifar.work(4096) * 4096 > cifar.work(128) * 128
    assert cifar.work(128) == pytest.approx(cifar.epoch_progress[-1], rel=0.05)


def test_gavel_types_and_monotone_scaling():
    g = gavel_table()
    m = "ResNet-50 (batch size 64)"
    assert g.isolated(m, "v100") > g.isolated(m, "p100") > g.isolated(m, "k80")
    vals = [g.throughput(m, "v100", n) for n in range(1, 9)]
    assert vals == sorted(vals)
    assert type_factor("imagenet", "v100") > 1 > type_factor("imagenet", "k80")
    assert type_factor("imagenet", "t4") == 1.0


def test_tabulated_speed_interpolates_and_never_uses_placeholders():
    sp = TabulatedJobSpeed({1: 1.0, 4: 3.0})
    assert sp.rate((2,)) == pytest.approx(5 / 3)
    assert sp.rate((1, 1, 1, 1)) == pytest.approx(3.0)
    assert sp.rate((4, 2)) >= 3.0


# -- placement -----------------------------------------------------------------------------------
NODES = [Node(f"n{i}", 4) for i in range(4)]


def _overlap(new, cur):
    return sum(min(c, cur.get(j, {}).get(n, 0)) for j, per in new.items() for n, c in per.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_repack_fits_and_has_the_fewest_moves_of_any_node_mapping(sizes, rnd):
    reqs = {f"j{i}": s for i, s in enumerate(sizes)}
    while sum(reqs.values()) > 16:
        reqs.pop(max(reqs))
    if not reqs:
        return
    # a random current placement of the same jobs
    cur = {}
    free = {n.name: 4 for n in NODES}
    for j, s in reqs.items():
        per = {}
        for _ in range(s):
            opts = [k for k, f in free.items() if f > 0]
            k = rnd.choice(opts)
            per[k] = per.get(k, 0) + 1
            free[k] -= 1
        cur[j] = per
    new, mig = place(NODES, cur, reqs, mode="repack")
    for j, s in reqs.items():
        assert sum(new[j].values()) == s
    used = {}
    for per in new.values():
        for k, c in per.items():
            used[k] = used.get(k, 0) + c
    assert all(c <= 4 for c in used.values())
    # any other assignment of the same virtual nodes to real nodes moves at least as many workers
    virt = best_fit([4] * 4, reqs)
    best = max(
        _overlap(
            {j: {NODES[p[v]].name: c for v in range(4) for jj, c in virt[v].items() if jj == j} for j in reqs}, cur
        )
        for p in itertools.permutations(range(4))
    )
    assert _overlap(new, cur) == best
    assert sum(mig.values()) == sum(reqs.values()) - best


def _fresh_interpreter_says_ok(code: str) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_assignment_solver_is_scipys_without_loading_scipy_optimize():
    """Placement loads scipy's linear_sum_assignment extension on its own (scipy.optimize costs
    ~0.25 s to import): in a fresh interpreter scipy.optimize stays unloaded, and the function
    gives scipy.optimize's answers (ties included) on square and rectangular problems."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from lavaflow.elastic import placement\n"
        "assert 'scipy.optimize' not in sys.modules, 'scipy.optimize was imported'\n"
        "rng = np.random.default_rng(0)\n"
        "ms = [rng.integers(0, 5, (12, 12)) for _ in range(20)] + [rng.random((6, 9)), rng.random((9, 6))]\n"
        "ours = [placement.linear_sum_assignment(m, maximize=k % 2 == 0) for k, m in enumerate(ms)]\n"
        "import scipy.optimize\n"
        "theirs = [scipy.optimize.linear_sum_assignment(m, maximize=k % 2 == 0) for k, m in enumerate(ms)]\n"
        "assert all((a == b).all() for o, t in zip(ours, theirs) for a, b in zip(o, t))\n"
        "print('ok')\n"
    )
    _fresh_interpreter_says_ok(code)


def test_the_true_step_time_interpolation_is_scipys_without_loading_scipy_interpolate():
    """The true speed model's interpolation over (nodes, replicas, local batch) gives, bit for bit,
    what scipy's LinearNDInterpolator (NearestNDInterpolator outside the triangulation) gives on
    the same Delaunay triangulation, for every Pollux application, point by point (``step_time``)
    and many points per call (``prefill_step_times``); building and using it in a fresh
    interpreter loads neither scipy.interpolate nor scipy.spatial (~0.45 s to import)."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from lavaflow.elastic.speed import PolluxApp\n"
        "from lavaflow.elastic.speed.interpolation import _barycentric_transforms\n"
        "apps = [PolluxApp(n) for n in ('bert', 'cifar10', 'deepspeech2', 'imagenet', 'ncf', 'yolov3')]\n"
        "grids = []\n"
        "for app in apps:\n"
        "    bs = np.unique(np.linspace(app.min_local_bsz, app.max_local_bsz * 1.2, 7).astype(int))\n"
        "    qs = [[n, r, float(b)] for n in range(1, 17) for r in range(n, min(4 * n, 64) + 1, 5) for b in bs]\n"
        "    q = np.array(qs) / (app._build_interpolators() or app._scale)\n"
        "    one = [app._interp(q[i : i + 1].tolist())[0] for i in range(len(q))]\n"
        "    grids.append((app, q, np.array(one), np.array(app._interp(q.tolist()))))\n"
        "    for i in np.flatnonzero(~np.isfinite(np.array(one)).all(axis=1))[::7]:\n"
        "        app._interp.nearest(q[i].tolist())  # (outside the triangulation)\n"
        "loaded = [m for m in ('scipy.interpolate', 'scipy.spatial') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator\n"
        "from scipy.spatial import Delaunay\n"
        "same = lambda a, b: bool(((a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))).all())\n"
        "outside = 0\n"
        "for app, q, one, many in grids:\n"
        "    ours = app._interp\n"
        "    tri = Delaunay(ours.points)\n"
        "    assert (tri.simplices == np.array(ours.simplices)).all()\n"
        "    tri._transform = _barycentric_transforms(tri.points, tri.simplices)\n"
        "    lin = LinearNDInterpolator(tri, ours.values)\n"
        "    near = NearestNDInterpolator(ours.points, ours.values)\n"
        "    assert same(np.array([lin(q[i : i + 1])[0] for i in range(len(q))]), one), app.name\n"
        "    assert same(lin(q), many), app.name\n"
        "    for i in np.flatnonzero(~np.isfinite(one).all(axis=1)):\n"
        "        outside += 1\n"
        "        assert same(near(q[i : i + 1])[0], np.array(ours.nearest(q[i].tolist()))), (app.name, i)\n"
        "assert outside > 100\n"
        "print('ok')\n"
    )
    _fresh_interpreter_says_ok(code)


def test_unchanged_jobs_do_not_move_and_spread_jobs_get_consolidated():
    cur = {"a": {"n0": 1}, "b": {"n1": 1}}
    new, mig = place(NODES, cur, {"a": 1, "b": 1})
    assert new == cur and not mig
    cur = {"a": {"n0": 2, "n1": 2}, "b": {"n0": 2, "n1": 2}}
    new, mig = place(NODES, cur, {"a": 4, "b": 4})
    assert all(len(per) == 1 for per in new.values())
    assert sum(mig.values()) == 4  # two workers of each job move


def test_keep_mode_never_moves_a_running_job_and_spreads_new_ones_over_the_emptiest_nodes():
    """The Pollux artifact's Tiresias placement: running jobs keep their nodes, a (re)started job
    takes GPUs from the node with the most free ones (first such node on ties)."""
    nodes = [Node(f"n{i}", 4) for i in range(3)]
    cur = {"a": {"n0": 1, "n1": 1}, "b": {"n2": 3}}
    new, mig = place(nodes, cur, {"a": 2, "b": 3, "c": 4, "d": 1}, "keep")
    assert new["a"] == {"n0": 1, "n1": 1} and new["b"] == {"n2": 3} and not mig
    # free after a, b: n0 3, n1 3, n2 1 -> c takes 3 on n0 (first of the emptiest) and 1 on n1
    assert new["c"] == {"n0": 3, "n1": 1}
    assert new["d"] == {"n1": 1}
    # auto mode consolidates the spread job instead (a migration)
    new2, mig2 = place(nodes, cur, {"a": 2, "b": 3}, "auto")
    assert len(new2["a"]) == 1 and mig2 == {"a": 1}


def test_best_fit_counts_spilled_workers_exactly():
    # Voda recorded a spilled job's full request on the second node (free = -2)
    nodes = best_fit([4, 4], {"big": 6})
    assert sorted(sum(n.values()) for n in nodes) == [2, 4]


# -- simulator -----------------------------------------------------------------------------------
def _spec(name, t, work, lo=1, hi=1, req=None):
    """A job whose speed is linear in its workers (1 work unit per second per worker), as the
    measured speed-up annotations a Voda-style job carries."""
    from lavaflow.elastic import spec as es

    ann = {
        "lavaflow.io/speedup": "1:1,2:2,4:4,8:8",
        "lavaflow.io/epoch-time": "1s",
        "lavaflow.io/epochs": repr(float(work)),
    }
    sp = es.speed_spec(ann)
    return ElasticJobSpec(name, t, sp.speed, sp.work, req or lo, lo, hi, extra={"annotations": ann})


def simulate(
    jobs,
    nodes: int,
    policy: str,
    resize_cost: float = 30.0,
    resched_interval: float | None = None,
    oracle: bool = True,
):
    """The scheduler path: each job an elastic Volcano Job, sized by the elastic action. These
    tests check the policies' rules on speeds they know, so the policy is handed the true speed
    models (the oracle) unless ``oracle=False``."""
    from lavaflow.sim.replay import gpu_cluster, replay, spec_inputs

    return replay(
        spec_inputs(jobs, gpu_cluster(nodes=nodes)), policy, interval=resched_interval, cost=resize_cost, oracle=oracle
    )


# The scheduler sees a job one period (1 s) after it arrives, when its pods exist, and binds
# workers freed by an eviction a period later: times below allow for that.
def test_job_finishes_when_its_work_is_done():
    r = simulate([_spec("a", 10.0, 400.0, 4, 4)], 1, "FIFO", resize_cost=0)
    assert r.jobs[0].finish == pytest.approx(10.0 + 100.0, abs=2.0)
    r = simulate([_spec("a", 10.0, 400.0, 4, 4)], 1, "FIFO", resize_cost=25)
    assert r.jobs[0].finish == pytest.approx(10.0 + 25.0 + 100.0, abs=2.0)


def test_resize_cost_delays_progress_of_resized_jobs():
    jobs = [_spec("a", 0.0, 4000.0, 1, 4), _spec("b", 100.0, 400.0, 1, 4)]
    fast = simulate(jobs, 1, "ElasticFIFO", resize_cost=0)
    slow = simulate(jobs, 1, "ElasticFIFO", resize_cost=60)
    assert fast.summary()["resizes"] >= 1
    for f, s in zip(fast.jobs, slow.jobs):
        assert s.finish > f.finish


def test_reschedules_are_rate_limited():
    jobs = [_spec(f"j{i}", float(i), 50.0) for i in range(20)]
    r = simulate(jobs, 2, "FIFO", resched_interval=30, resize_cost=0)
    assert r.reschedules <= 20 and all(j.finish is not None for j in r.jobs)
    starts = sorted(j.start for j in r.jobs)
    assert starts[0] <= 2.0 and all(s <= 2.0 or s >= 30.0 for s in starts)


def test_literature_tiresias_in_the_simulator_demotes_at_16_gpu_hours_without_promotion():
    # a (4 GPUs, 10 h) runs first; b arrives at 100 s; literature Tiresias lets a run until it has
    # 16 GPU-h (4 h on 4 GPUs), then b (queue 0) preempts it; Voda's variant demotes a at 1 GPU-h
    jobs = [_spec("a", 0.0, 4 * 36000.0, 4, 4), _spec("b", 100.0, 4 * 600.0, 4, 4)]
    lit = simulate(jobs, 1, "Tiresias")
    a, b = lit.jobs
    assert 4 * 3600 <= b.start <= 4 * 3600 + 62  # 60 s tick
    assert b.finish == pytest.approx(b.start + 30 + 600, abs=2.0)  # 30 s pause per (re)start
    assert a.halts == 1 and a.finish > b.finish  # a waits, is not promoted, resumes after b
    voda = simulate(jobs, 1, "Tiresias-Voda")
    assert voda.jobs[1].start <= 3600 / 4 + 32
    # the literature tick is 60 s: no two scheduling rounds closer than that
    many = [_spec(f"j{i}", float(i), 50.0) for i in range(20)]
    r = simulate(many, 2, "Tiresias", resize_cost=0)
    starts = sorted({j.start for j in r.jobs})
    assert all(y - x >= 60 - 2.0 for x, y in zip(starts, starts[1:]))
    # ... and the rounds are periodic, at multiples of 60 s (the Pollux simulator's tick), where
    # a rate-limited policy starts a round as soon as the interval since the last one has passed
    spread = [_spec(f"j{i}", float(7 * i), 50.0) for i in range(20)]
    assert all(j.start % 60 == 0 for j in simulate(spread, 2, "Tiresias", resize_cost=0).jobs)
    voda = simulate(spread, 2, "Tiresias-Voda", resize_cost=0, resched_interval=60)
    assert any(j.start % 60 != 0 for j in voda.jobs)


@pytest.mark.parametrize("app, batch", [("cifar10", 256), ("imagenet", 800), ("yolov3", 64), ("ncf", 1024)])
def test_adaptive_batch_goodput_beats_the_fixed_batch_in_the_same_units(app, batch):
    fixed = PolluxJobSpeed(app, batch)
    ada = PolluxJobSpeed(app, batch, adaptive=True)
    # work units: statistical progress; a job kept at its batch needs exactly as long in both
    progress = ada.total_work()
    assert fixed.total_work() * fixed.gain(batch) == pytest.approx(progress)
    for n in (1, 2, 3, 4, 8, 16):
        pl = consolidated_placement(n, 4)
        fixed_progress_rate = fixed.rate(pl) * fixed.gain(batch)
        good, best = ada.best_batch(pl)
        assert ada.rate(pl) == pytest.approx(good)
        assert good >= fixed_progress_rate * (1 - 1e-12)
        assert best == batch or max(ada.model.init_batch_size, ada.model.min_local_bsz * n) <= best <= ada.batch_limit
        assert 0 < ada.efficiency(best) <= 1 + 1e-12
    assert all(ada.efficiency(b) <= 1 + 1e-12 for b in ada.candidate_batches(1))
    # more batch room, more workers worth having
    assert ada.max_useful_workers() >= fixed.max_useful_workers()


@pytest.mark.parametrize("app, batch", [("imagenet", 800), ("yolov3", 64), ("cifar10", 256)])
def test_adaptive_batch_is_rechosen_per_training_phase(app, batch):
    """Pollux re-tunes the batch as the gradient noise grows: in each phase the best batch for
    that phase, never slower than the whole-run choice, and larger (or equal) batches late."""
    from lavaflow.elastic.speed import advance, time_to

    ada = PolluxJobSpeed(app, batch, adaptive=True)
    stateless = PolluxJobSpeed(app, batch, adaptive=True, phases=1)
    assert len(ada.phase_bounds) >= 1 and stateless.phase_bounds == ()
    assert list(ada.phase_bounds) == sorted(ada.phase_bounds) and ada.phase_bounds[-1] < ada.total_work()
    for n in (1, 4, 16):
        pl = consolidated_placement(n, 4)
        whole = ada.best_batch(pl)[1]
        t_phases = time_to(ada, pl, None, 0.0, ada.total_work())
        t_whole = time_to(stateless, pl, None, 0.0, stateless.total_work())
        assert t_whole == pytest.approx(stateless.total_work() / stateless.rate(pl))
        assert t_phases <= t_whole * (1 + 1e-9)
        # in every phase the rate is at least the whole-run batch's rate in that phase
        for k in range(len(ada.phase_bounds) + 1):
            at_whole = ada.model.rate(pl, whole) * ada.gain(whole, k)
            assert ada.rate(pl, phase=k) >= at_whole * (1 - 1e-12)
        first, last = ada.best_batch(pl, 0)[1], ada.best_batch(pl, len(ada.phase_bounds))[1]
        assert last >= first
        # advance() and time_to() are inverse
        half = time_to(ada, pl, None, 0.0, 0.5 * ada.total_work())
        assert advance(ada, pl, None, 0.0, half) == pytest.approx(0.5 * ada.total_work())
    # a fixed-batch job's rate does not depend on its progress
    assert PolluxJobSpeed(app, batch).phase_bounds == ()


def test_training_model_runs_an_adaptive_job_phase_by_phase(tmp_path):
    """The simulator integrates the phase-dependent rate: a lone job finishes exactly when the
    speed model says (start one period after arrival, one 30 s start pause)."""
    from lavaflow.elastic.speed import time_to
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    p = tmp_path / "one.csv"
    p.write_text("name,time,application,num_replicas,batch_size,min_replicas,max_replicas\nj,0,cifar10,4,256,4,4\n")
    res = replay(trace_inputs([p], gpu_cluster(nodes=1), adaptive=True), "FIFO", oracle=True)
    sp = PolluxJobSpeed("cifar10", 256, adaptive=True)
    expect = time_to(sp, (4,), None, 0.0, sp.total_work())
    stateless = PolluxJobSpeed("cifar10", 256, adaptive=True, phases=1)
    assert expect < stateless.total_work() / stateless.rate((4,))  # re-choosing pays here
    j = res.jobs[0]
    assert j.finish - j.start == pytest.approx(30.0 + expect, rel=1e-6)


def test_adaptive_batch_improves_scaling_where_a_fixed_batch_is_too_small():
    # cifar10 at batch 256 on 8 GPUs crosses a node at 32 samples per GPU and runs slower than on
    # 4; the adaptive job takes a larger batch there and keeps speeding up
    fixed = PolluxJobSpeed("cifar10", 256)
    ada = PolluxJobSpeed("cifar10", 256, adaptive=True)
    assert fixed.rate(consolidated_placement(8, 4)) < fixed.rate(consolidated_placement(4, 4))
    assert ada.rate(consolidated_placement(8, 4)) > 1.2 * ada.rate(consolidated_placement(4, 4))
    assert ada.best_batch(consolidated_placement(8, 4))[1] > 256


def test_pollux_csv_adaptive_batch_column_and_argument(tmp_path):
    p = _write(
        tmp_path,
        "name,time,application,num_replicas,batch_size,adaptive_batch,max_batch_size\n"
        "a,0,cifar10,4,512,true,2048\nb,5,cifar10,4,512,false,\nc,9,cifar10,4,512,,\n",
    )
    a, b, c = read_workload(p, max_gpus=64)
    assert a.speed.adaptive and a.speed.batch_limit == 2048 and a.work == pytest.approx(a.speed.total_work())
    assert (a.min_workers, a.max_workers) == (1, 2048 // a.speed.model.min_local_bsz)
    assert not b.speed.adaptive and not c.speed.adaptive and (b.min_workers, b.max_workers) == (2, 8)
    a2, b2, c2 = read_workload(p, max_gpus=64, adaptive=True)
    assert a2.speed.adaptive and not b2.speed.adaptive and c2.speed.adaptive  # the column wins
    bad = _write(
        tmp_path, "name,time,application,num_replicas,batch_size,adaptive_batch\na,0,cifar10,4,512,maybe\n", "bad.csv"
    )
    with pytest.raises(WorkloadError, match=r":2: column 'adaptive_batch'"):
        read_workload(bad)
    low = _write(
        tmp_path, "name,time,application,num_replicas,batch_size,max_batch_size\na,0,cifar10,4,512,256\n", "low.csv"
    )
    with pytest.raises(WorkloadError, match=r"column 'max_batch_size'"):
        read_workload(low)


def test_pollux_workload_runs_every_policy_quickly():
    jobs = read_workload(PACKAGE_DATA / "pollux" / "workloads" / "workload-1.csv", max_gpus=64)[:40]
    for name in ("Tiresias", "Lavaflow", "AFS-L"):
        r = simulate(jobs, 16, name)
        assert r.summary()["completed"] == 40


# -- input formats -------------------------------------------------------------------------------
def _write(tmp_path: Path, text: str, name="w.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_pollux_csv_errors_name_file_line_and_column(tmp_path):
    p = _write(tmp_path, "name,time,application,num_replicas,batch_size\na,0,cifar10,2,256\nb,5,resnet,2,256\n")
    with pytest.raises(WorkloadError) as e:
        read_workload(p)
    assert e.value.line == 3 and e.value.column == "application" and str(p) in str(e.value)
    p = _write(tmp_path, "name,time,application,num_replicas,batch_size\na,0,cifar10,two,256\n")
    with pytest.raises(WorkloadError, match=r":2: column 'num_replicas'"):
        read_workload(p)
    p = _write(tmp_path, "name,time,application,batch_size\na,0,cifar10,256\n")
    with pytest.raises(WorkloadError, match="unknown CSV header|missing column"):
        read_workload(p)
    p = _write(tmp_path, "name,time,application,num_replicas,batch_size\na,-4,cifar10,1,256\n")
    with pytest.raises(WorkloadError, match="column 'time'"):
        read_workload(p)


def test_philly_csv(tmp_path):
    p = _write(
        tmp_path,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,600,1,600,x\n"
        "2017-10-09 07:05:00,3600,4,14400,x\n",
    )
    jobs = read_workload(p)
    assert len(jobs) >= 1
    p = _write(tmp_path, "timestamp,duration,num_gpus\nyesterday,60,1\n")
    with pytest.raises(WorkloadError, match="column 'timestamp'"):
        read_workload(p)


def test_tiresias_acts_on_a_second_queue_change_after_one_that_changed_nothing():
    # x (2 GPUs) runs from 0 and y (2 GPUs) from 300 on one 4-GPU node; z (4 GPUs, queue 0) waits.
    # x is demoted at ~1,800 s (1 GPU-h): z still does not fit beside y, so nothing moves. y is
    # demoted at ~2,100 s: now z is first and takes the node. Nothing else happens in between, so
    # only a wake for y's crossing (asked in the session that saw x cross) starts z on time.
    jobs = [_spec("x", 0.0, 36000.0, 2, 2), _spec("z", 10.0, 2400.0, 4, 4), _spec("y", 300.0, 36000.0, 2, 2)]
    r = simulate(jobs, 1, "Tiresias-Voda", resize_cost=0)
    z = next(j for j in r.jobs if j.name.endswith("z"))
    assert 2100 <= z.start <= 2100 + 5
