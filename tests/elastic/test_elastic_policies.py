"""Property tests for every elastic allocation policy."""

from __future__ import annotations

import dataclasses
import math
import random

from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.elastic.policies import POLICY_NAMES, JobView, check_allocation, make_policy

TYPES = ("k80", "p100", "v100")


@st.composite
def scenarios(draw):
    ntypes = draw(st.integers(1, 3))
    types = TYPES[:ntypes]
    capacity = {t: draw(st.integers(0, 24)) for t in types}
    njobs = draw(st.integers(0, 12))
    jobs = []
    for i in range(njobs):
        lo = draw(st.integers(1, 6))
        hi = draw(st.integers(lo, 12))
        req = draw(st.integers(lo, hi))
        rates = {}
        for t in types:
            base = draw(st.floats(0.1, 10))
            incs = draw(st.lists(st.floats(-0.5, 1.5), min_size=hi, max_size=hi))
            curve = [0.0, base]
            for k in range(2, hi + 1):
                curve.append(max(1e-3, curve[-1] + incs[k - 1] * base))
            rates[t] = tuple(curve)
        pinned = draw(st.one_of(st.none(), st.sampled_from(types)))
        cur = draw(st.integers(0, hi))
        cur = cur if cur >= lo else 0
        cur_type = (pinned or draw(st.sampled_from(types))) if cur else None
        jobs.append(
            JobView(
                name=f"job-{i}",
                submit_time=draw(st.integers(0, 5)) * 10.0,
                min_workers=lo,
                max_workers=hi,
                requested=req,
                rates=rates,
                remaining_work=draw(st.floats(1.0, 1e5)),
                total_work=1e5,
                priority=draw(st.integers(0, 2)),
                current_workers=cur,
                current_type=cur_type,
                pinned_type=pinned,
                first_start=draw(st.one_of(st.none(), st.floats(0, 100))),
                attained_service=draw(st.floats(0, 1e4)),
                queue_service=draw(st.floats(0, 1e4)),
            )
        )
    return jobs, capacity


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(name, jobs, capacity):
    return make_policy(name)(jobs, capacity, 1000.0)


@SETTINGS
@given(scenarios())
def test_every_policy_respects_min_max_capacity_and_pinning(sc):
    jobs, capacity = sc
    for name in POLICY_NAMES:
        res = _run(name, jobs, capacity)
        check_allocation(jobs, capacity, res)  # raises on violation
        by = {j.name: j for j in jobs}
        for job, a in res.items():
            assert a.workers == 0 or by[job].min_workers <= a.workers <= by[job].max_workers, name


@SETTINGS
@given(scenarios())
def test_identical_inputs_identical_outputs_in_any_order(sc):
    jobs, capacity = sc
    shuffled = list(jobs)
    random.Random(7).shuffle(shuffled)
    for name in POLICY_NAMES:
        a = _run(name, jobs, capacity)
        b = _run(name, jobs, capacity)
        c = _run(name, shuffled, capacity)
        assert a == b, name
        assert a == c, name


@SETTINGS
@given(scenarios())
def test_job_at_max_never_gets_more(sc):
    jobs, capacity = sc
    for name in POLICY_NAMES:
        res = _run(name, jobs, capacity)
        for j in jobs:
            if j.current_workers == j.max_workers and j.name in res:
                assert res[j.name].workers <= j.max_workers, name


def _job(name, lo, hi, req=None, rate=lambda n: float(n), t=0.0, work=100.0, **kw):
    return JobView(
        name=name,
        submit_time=t,
        min_workers=lo,
        max_workers=hi,
        requested=req or lo,
        rates={"gpu": tuple(rate(n) for n in range(hi + 1))},
        remaining_work=work,
        total_work=work,
        **kw,
    )


def test_voda_elastic_fifo_counterexample_is_fixed():
    # Voda: A(min1,max4), B(min4,max4), 4 GPUs -> {A:3, B:1} (B below its minimum)
    jobs = [_job("A", 1, 4, t=0), _job("B", 4, 4, t=1)]
    res = make_policy("ElasticFIFO")(jobs, {"gpu": 4}, 0)
    check_allocation(jobs, {"gpu": 4}, res)
    assert res["A"].workers == 4 and "B" not in res


def test_voda_elastic_srjf_counterexample_is_fixed():
    # Voda: A(2,2), B(1,4), 8 GPUs -> A:5 (above its maximum)
    jobs = [_job("A", 2, 2, work=10), _job("B", 1, 4, work=100)]
    res = make_policy("ElasticSRJF")(jobs, {"gpu": 8}, 0)
    check_allocation(jobs, {"gpu": 8}, res)
    assert res["A"].workers == 2 and res["B"].workers == 4


def test_ffdl_and_afsl_respect_minimum():
    jobs = [_job("A", 3, 6, t=0), _job("B", 4, 4, t=1), _job("C", 2, 5, t=2)]
    for name in ("FfDLOptimizer", "AFS-L"):
        res = make_policy(name)(jobs, {"gpu": 8}, 0)
        check_allocation(jobs, {"gpu": 8}, res)


def test_voda_tiresias_prefers_low_attained_service():
    old = _job("old", 4, 4, t=0, queue_service=10_000.0, first_start=0.0, current_workers=4, current_type="gpu")
    new = _job("new", 4, 4, t=5)
    res = make_policy("Tiresias-Voda")([old, new], {"gpu": 4}, 100)
    assert "new" in res and "old" not in res


def test_literature_tiresias_demotes_at_16_gpu_hours_only():
    # below 16 GPU-h the earlier arrival keeps its GPUs (Voda's variant demotes it at 1 GPU-h)
    old = _job("old", 4, 4, t=0, queue_service=15.9 * 3600, first_start=0.0, current_workers=4, current_type="gpu")
    new = _job("new", 4, 4, t=5)
    assert set(make_policy("Tiresias")([old, new], {"gpu": 4}, 100)) == {"old"}
    assert set(make_policy("Tiresias-Voda")([old, new], {"gpu": 4}, 100)) == {"new"}
    # at 16 GPU-h it is demoted behind the new job
    old16 = dataclasses.replace(old, queue_service=16 * 3600.0)
    assert set(make_policy("Tiresias")([old16, new], {"gpu": 4}, 100)) == {"new"}


def test_literature_tiresias_orders_queue0_by_arrival_and_queue1_by_demotion():
    # queue 0: arrival order, whatever the attained service or first start (no LAS inside a queue)
    a = _job("a", 2, 2, t=0, queue_service=10 * 3600.0, first_start=50.0)
    b = _job("b", 2, 2, t=10, queue_service=0.0, first_start=0.0, current_workers=2, current_type="gpu")
    assert set(make_policy("Tiresias")([a, b], {"gpu": 2}, 100)) == {"a"}
    # queue 1: the job demoted first comes first, although it arrived later
    x = _job("x", 2, 2, t=0, queue_service=20 * 3600.0, queue_entered=900.0)
    y = _job("y", 2, 2, t=10, queue_service=20 * 3600.0, queue_entered=500.0)
    assert set(make_policy("Tiresias")([x, y], {"gpu": 2}, 1000)) == {"y"}
    # requested workers (rigid), never more
    big = _job("big", 1, 8, req=3, t=0)
    assert make_policy("Tiresias")([big], {"gpu": 8}, 0)["big"].workers == 3


def test_policies_declare_clairvoyance_and_tiresias_its_tick():
    reads = {n for n in POLICY_NAMES if make_policy(n).clairvoyant}
    assert reads == {"ElasticFIFO", "SRJF", "ElasticSRJF", "AFS-L", "Lavaflow"}
    lit = make_policy("Tiresias")
    assert lit.default_interval == 60.0 and lit.thresholds == (16 * 3600.0,) and lit.promote_knob == math.inf
    assert make_policy("Tiresias-Voda").thresholds == (3600.0,)


@SETTINGS
@given(scenarios())
def test_non_clairvoyant_policies_ignore_remaining_work(sc):
    jobs, capacity = sc
    other = [dataclasses.replace(j, remaining_work=j.remaining_work * 7 + 3, total_work=j.total_work * 2) for j in jobs]
    for name in POLICY_NAMES:
        if make_policy(name).clairvoyant:
            continue
        assert _run(name, jobs, capacity) == _run(name, other, capacity), name


def test_goodput_prefers_the_job_with_less_progress_and_ignores_remaining_work():
    # two running-size-1 candidates, one GPU: the one that has done less gets it (LAS), even when
    # its true remaining work is much larger (Lavaflow, clairvoyant, picks the other)
    young = _job("young", 1, 1, t=10, work=1e6, done_work=100.0)
    old = _job("old", 1, 1, t=0, work=10.0, done_work=1e5)
    assert set(make_policy("Goodput")([young, old], {"gpu": 1}, 0)) == {"young"}
    assert set(make_policy("Lavaflow")([young, old], {"gpu": 1}, 0)) == {"old"}
    # below the prior (4 single-GPU hours) jobs are equal: arrival order
    a = _job("a", 1, 1, t=0, work=1e6, done_work=5000.0)
    b = _job("b", 1, 1, t=5, work=1.0, done_work=0.0)
    assert set(make_policy("Goodput")([a, b], {"gpu": 1}, 0)) == {"a"}


def test_goodput_grows_a_job_only_where_it_speeds_up():
    flat = _job("flat", 1, 8, rate=lambda n: 1.0 if n else 0.0)
    lin = _job("lin", 1, 8, t=1)
    res = make_policy("Goodput")([flat, lin], {"gpu": 8}, 0)
    assert res["flat"].workers == 1 and res["lin"].workers == 7


def test_lavaflow_does_not_grow_a_job_that_does_not_speed_up():
    flat = _job("flat", 1, 8, rate=lambda n: 1.0 if n else 0.0)
    res = make_policy("Lavaflow")([flat], {"gpu": 8}, 0)
    assert res["flat"].workers == 1


def test_lavaflow_keeps_a_running_size_unless_the_gain_beats_the_switching_cost():
    # running on 4 of 8 GPUs, sqrt speed-up: growing to 8 saves ~146 s of its 500 s, more than one
    # 30 s pause but less than the switching cost (12 pauses), so the size stays; with the pause
    # alone as the cost (switch_factor=1, the previous rule) it grows
    job = _job("j", 4, 8, req=4, rate=lambda n: n**0.5, work=1000, current_workers=4, current_type="gpu")
    assert make_policy("Lavaflow")([job], {"gpu": 8}, 0)["j"].workers == 4
    assert make_policy("Lavaflow", switch_factor=1)([job], {"gpu": 8}, 0)["j"].workers == 8
    # a long job still grows when it gains much (linear speed-up, 10^5 s left)
    big = _job("b", 4, 8, req=4, work=1e5, current_workers=4, current_type="gpu")
    assert make_policy("Lavaflow")([big], {"gpu": 8}, 0)["b"].workers == 8


def test_spare_pass_gives_idle_gpus_to_a_running_job_at_a_lower_switching_cost():
    # the same job as above: at the full switching cost it stays on 4 of 8 GPUs and 4 stay idle;
    # with the spare pass (spare_factor 1: one pause) those idle GPUs are offered again and it grows
    job = _job("j", 4, 8, req=4, rate=lambda n: n**0.5, work=1000, current_workers=4, current_type="gpu")
    assert make_policy("Lavaflow", spare_factor=1)([job], {"gpu": 8}, 0)["j"].workers == 8
    # the spare pass only hands out what nobody took: a waiting job still gets its GPUs first
    other = _job("o", 4, 4, t=5, work=1e4)
    res = make_policy("Lavaflow", spare_factor=1)([job, other], {"gpu": 8}, 0)
    assert res["o"].workers == 4 and res["j"].workers == 4


def test_lavaflow_prefers_the_faster_gpu_type_by_comparative_advantage():
    # a (10x faster on v100) and b (1.1x) compete for one v100 and one k80 GPU
    a = JobView("a", 0, 1, 1, 1, {"v100": (0, 10.0), "k80": (0, 1.0)}, 1e5, 1e5)
    b = JobView("b", 0, 1, 1, 1, {"v100": (0, 1.1), "k80": (0, 1.0)}, 1e5, 1e5)
    res = make_policy("Lavaflow")([a, b], {"v100": 1, "k80": 1}, 0)
    assert res["a"].gpu_type == "v100" and res["b"].gpu_type == "k80"


def test_elastic_srjf_shrinks_instead_of_halting_and_keeps_sizes():
    # long job running on 8 of 8 GPUs; a shorter job arrives asking for 4: rigid SRJF halts the
    # long job, ElasticSRJF shrinks it to the 4 GPUs left (E2)
    long = _job("long", 2, 8, req=8, work=1000, current_workers=8, current_type="gpu")
    short = _job("short", 2, 8, req=4, work=10, t=1)
    assert "long" not in make_policy("SRJF")([long, short], {"gpu": 8}, 0)
    res = make_policy("ElasticSRJF")([long, short], {"gpu": 8}, 0)
    assert res["short"].workers == 4 and res["long"].workers == 4
    # a running job keeps its size when a little growth would not pay for the resize pause (E1, E4)
    a = _job("a", 1, 4, req=2, work=10, current_workers=2, current_type="gpu")
    assert make_policy("ElasticSRJF")([a], {"gpu": 4}, 0)["a"].workers == 2
    b = _job("b", 1, 4, req=2, work=10_000, current_workers=2, current_type="gpu")
    assert make_policy("ElasticSRJF")([b], {"gpu": 4}, 0)["b"].workers == 4


def test_elastic_srjf_starts_waiting_job_on_leftover_gpus():
    # the shortest waiting job's request (6) does not fit beside a running job, its minimum does (E3)
    run = _job("run", 4, 4, req=4, work=50, current_workers=4, current_type="gpu")
    wait = _job("wait", 2, 8, req=6, work=500, t=1)
    assert "wait" not in make_policy("SRJF")([run, wait], {"gpu": 8}, 0)
    assert make_policy("ElasticSRJF")([run, wait], {"gpu": 8}, 0)["wait"].workers == 4


def test_goodput_node_size_gives_only_whole_node_sizes_and_ignores_remaining_work():
    # linear speed-up, 8 GPUs on 4-GPU nodes, a job of at most 6 workers: unaligned it takes 6;
    # with node_size 4 only 1..4 or whole nodes may be chosen, so it takes 4 and the rest goes to
    # the second job
    a = _job("a", 1, 6)
    b = _job("b", 1, 8, t=1, done_work=1e7)  # far past the prior: a comes first
    res = make_policy("Goodput")([a, b], {"gpu": 8}, 0)
    assert res["a"].workers == 6
    res4 = make_policy("Goodput", node_size=4)([a, b], {"gpu": 8}, 0)
    # on learned models (the scheduler's default) Goodput takes node_size 4 unless configured
    assert make_policy("Goodput", learned=True)([a, b], {"gpu": 8}, 0) == res4
    assert make_policy("Goodput", learned=True).params["switch_factor"] == 12.0
    assert make_policy("Goodput", learned=True, node_size=0)([a, b], {"gpu": 8}, 0) == res
    assert res4["a"].workers == 4 and res4["b"].workers == 4
    check_allocation([a, b], {"gpu": 8}, res4)
    # a job running at an unaligned size may keep it; a minimum that is not aligned is allowed
    run = _job("r", 1, 8, current_workers=6, current_type="gpu", done_work=1e7)
    assert make_policy("Goodput", node_size=4)([run], {"gpu": 6}, 0)["r"].workers == 6
    odd = _job("o", 6, 6)
    assert make_policy("Goodput", node_size=4)([odd], {"gpu": 8}, 0)["o"].workers == 6
    # never reads remaining_work / total_work
    other = [dataclasses.replace(j, remaining_work=j.remaining_work * 7 + 3, total_work=99.0) for j in (a, b)]
    assert make_policy("Goodput", node_size=4)(other, {"gpu": 8}, 0) == res4


def test_goodput_fills_idle_gpus_only_while_few_jobs_arrive():
    """On learned models Goodput offers GPUs nobody takes at the full switching cost again, valued
    over the time they are likely to stay idle (idle GPUs / (arrival rate x GPUs a new job takes)):
    a job grows into them when no job has arrived lately, not when many have."""

    def rate(n):
        return float(min(n, 4)) + 0.075 * max(n - 4, 0)  # 4 -> 8 workers: +7.5 %

    run = _job("r", 1, 8, rate=rate, t=0.0, current_workers=4, current_type="gpu")
    quiet = make_policy("Goodput", learned=True)([run], {"gpu": 8}, 7200.0)
    assert quiet["r"].workers == 8
    # the main pass alone (no filling) keeps it: the gain does not beat the full switching cost
    assert make_policy("Goodput", learned=True, fill_window=0)([run], {"gpu": 8}, 7200.0)["r"].workers == 4
    # twenty arrivals in the last half hour (jobs pinned to a type this cluster lacks: they take
    # nothing, but they arrived): the idle GPUs are likely wanted soon
    busy = [run] + [_job(f"n{i}", 1, 4, t=7200.0 - 60 * i, pinned_type="tpu") for i in range(20)]
    res = make_policy("Goodput", learned=True)(busy, {"gpu": 8}, 7200.0)
    assert res["r"].workers == 4
    check_allocation(busy, {"gpu": 8}, res)


def test_goodput_serves_its_last_queue_first_come_first_served():
    """On learned models, jobs past 16 single-GPU hours of progress (the last queue) are served in
    arrival order, as in Tiresias's last queue, not least progress first: two long jobs that share
    GPUs by least attained service both finish late; one after the other, the first finishes early."""
    first = _job("first", 1, 4, t=0, done_work=2e5, work=1.0)  # unit rate: progress in 1-GPU seconds
    second = _job("second", 1, 4, t=10, done_work=1e5, work=1e9)
    res = make_policy("Goodput", learned=True)([first, second], {"gpu": 4}, 100.0)
    assert res["first"].workers == 4 and "second" not in res
    # without the last queue (and with the oracle's parameters) least progress comes first
    assert make_policy("Goodput", learned=True, last_queue=0)([first, second], {"gpu": 4}, 100.0)["second"].workers == 4
    assert make_policy("Goodput")([first, second], {"gpu": 4}, 100.0)["second"].workers == 4
    # a job below the threshold keeps its place before every job of the last queue
    young = _job("young", 1, 4, t=20, done_work=5e4)
    res = make_policy("Goodput", learned=True)([first, second, young], {"gpu": 4}, 100.0)
    assert res["young"].workers == 4
    # what it reads is progress and arrival, never remaining or total work
    other = [dataclasses.replace(j, remaining_work=j.remaining_work * 7 + 3, total_work=99.0) for j in (first, second)]
    assert make_policy("Goodput", learned=True)(other, {"gpu": 4}, 100.0) == make_policy("Goodput", learned=True)(
        [first, second], {"gpu": 4}, 100.0
    )
    # many in the last queue: the weights stay finite
    many = [_job(f"j{i}", 1, 1, t=float(i), done_work=1e6) for i in range(800)]
    res = make_policy("Goodput", learned=True)(many, {"gpu": 2}, 1e4)
    assert set(res) == {"j0", "j1"}
