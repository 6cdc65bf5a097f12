"""Sia's policy (goodput-matrix ILP) and Pollux with the Sia paper's heterogeneity fix-up, on tiny
cases whose answers can be worked out by hand."""

from __future__ import annotations

import itertools

import pytest

from lavaflow.elastic.policies import Assignment, JobView, check_allocation, make_policy
from lavaflow.elastic.policies.pollux import pollux_fix
from lavaflow.elastic.policies.sia import configurations, objective, realloc_factor, sia


def _view(
    name: str,
    rates: dict[str, list[float]],
    t: float = 0.0,
    lo: int = 1,
    hi: int | None = None,
    cur: tuple[str, int] | None = None,
    restarts: int = 0,
) -> JobView:
    curves = {ty: tuple([0.0, *r]) for ty, r in rates.items()}
    width = max(len(r) for r in rates.values())
    return JobView(
        name=name,
        submit_time=t,
        min_workers=lo,
        max_workers=hi if hi is not None else width,
        requested=lo,
        rates=curves,
        remaining_work=1e9,
        current_workers=cur[1] if cur else 0,
        current_type=cur[0] if cur else None,
        restarts=restarts,
    )


def test_the_menu_is_powers_of_two_below_a_node_then_whole_nodes():
    assert configurations(24, 4) == [1, 2, 4, 8, 12, 16, 20, 24]
    assert configurations(16, 8) == [1, 2, 4, 8, 16]
    assert configurations(24, 8) == [1, 2, 4, 8, 16, 24]
    assert configurations(3, 8) == [1, 2]


def test_one_job_takes_its_best_goodput_configuration():
    job = _view("a", {"t4": [1, 1.8, 2.5, 3.0], "a100": [3, 5.5, 7, 9]})
    out = sia([job], {"t4": 4, "a100": 8}, now=0.0, node_sizes={"t4": 4, "a100": 8})
    assert out == {"a": Assignment("a100", 4)}  # 4 is on the menu, 3 is not


def test_configurations_off_the_menu_are_not_taken():
    # 3 workers would be best, but the menu has 1, 2, 4: the job may not take 4 (its max is 3)
    job = _view("a", {"rtx": [1, 1.9, 2.7]})
    assert sia([job], {"rtx": 8}, now=0.0, node_sizes={"rtx": 8}) == {"a": Assignment("rtx", 2)}


def test_a_minimum_off_the_menu_is_a_configuration_of_its_own():
    # A Pollux-trace job asking 6 GPUs has a minimum of 3 and, not yet measured, a maximum of 3:
    # the menu on 4-GPU nodes (1, 2, 4, 8) has nothing in [3, 3]. The job runs on its minimum.
    job = _view("cifar10-1", {"default": [1, 2, 3]}, lo=3, hi=3)
    assert sia([job], {"default": 8}, now=0.0, node_sizes={"default": 4}) == {"cifar10-1": Assignment("default", 3)}
    # a wider range keeps the menu's counts beside its minimum: 8 when the GPUs are there
    wide = _view("cifar10-2", {"default": [1, 2, 3, 3.8, 4.5, 5.1, 5.6, 6.0]}, lo=3, hi=8)
    assert sia([wide], {"default": 8}, now=0.0, node_sizes={"default": 4}) == {"cifar10-2": Assignment("default", 8)}
    assert sia([wide], {"default": 3}, now=0.0, node_sizes={"default": 4}) == {"cifar10-2": Assignment("default", 3)}


def test_a_large_minimum_is_worth_its_speed_up_over_one_gpu():
    # As the artifact values a job (its row normalised to one GPU, a rigid job's to its GPU count),
    # a job that must take 8 GPUs is worth 8^-0.5 = 0.35 there, not 1 (its own minimum taken as
    # one GPU's worth). On 8 GPUs: it alone, 0.35 + 4 x 1.1 = 4.75, beats the four 1-GPU jobs,
    # 4 x 1 + 1.1 = 5.1, which would leave 4 GPUs idle while it waits.
    big = _view("imagenet-0", {"default": [1, 2, 3, 4, 5, 6, 7, 8]}, lo=8, hi=8)
    small = [_view(f"cifar10-{i}", {"default": [1.0]}, t=1.0 + i) for i in range(4)]
    out = sia([big, *small], {"default": 8}, now=0.0, node_sizes={"default": 4})
    assert out == {"imagenet-0": Assignment("default", 8)}


def test_the_fast_type_goes_to_the_job_that_gains_most_from_it():
    # a gains 4x on an a100, b 1.2x; one GPU of each: a: 4^-0.5 + b: 1 = 1.5 beats 1 + 1.2^-0.5 = 1.91
    a = _view("a", {"t4": [1.0], "a100": [4.0]})
    b = _view("b", {"t4": [1.0], "a100": [1.2]})
    out = sia([a, b], {"t4": 1, "a100": 1}, now=0.0)
    assert out == {"a": Assignment("a100", 1), "b": Assignment("t4", 1)}


def test_goodputs_are_normalised_per_job():
    # the same shape at a hundred times the rate: the same choice
    slow = _view("a", {"t4": [1, 1.8], "a100": [2, 3.5]})
    fast = _view("a", {"t4": [100, 180], "a100": [200, 350]})
    cap = {"t4": 2, "a100": 2}
    assert sia([slow], cap, 0.0) == sia([fast], cap, 0.0) == {"a": Assignment("a100", 2)}


def test_restarts_keep_a_job_where_it_runs():
    # on 1 t4 GPU; an a100 is 1.3x. age 400 s, cifar's 30 s penalty.
    rates = {"t4": [1.0], "a100": [1.3]}
    fresh = _view("cifar10-0", rates, cur=("t4", 1), restarts=0)
    assert realloc_factor(fresh, 400.0, 30.0) == pytest.approx(400 / 430)
    # 1.3 * 0.93 = 1.21 -> 0.91 < 1 (staying): it moves
    assert sia([fresh], {"t4": 1, "a100": 1}, now=400.0) == {"cifar10-0": Assignment("a100", 1)}
    # three restarts: (400 - 90) / 430 = 0.72, 1.3 * 0.72 = 0.94 -> 1.03 > 1: it stays
    tired = _view("cifar10-0", rates, cur=("t4", 1), restarts=3)
    assert sia([tired], {"t4": 1, "a100": 1}, now=400.0) == {"cifar10-0": Assignment("t4", 1)}
    # the penalty is the model's, by name (imagenet: 250 s, so the factor is 1 at 200 s of age)
    young = _view("imagenet-7", rates, cur=("t4", 1), restarts=3)
    assert sia([young], {"t4": 1, "a100": 1}, now=200.0) == {"imagenet-7": Assignment("a100", 1)}


def test_lambda_n_decides_whether_a_poor_configuration_beats_none():
    # restarted so often that any change is worth 0.5 of its goodput: A = 0.5^-0.5 = 1.41
    job = _view("bert-0", {"rtx": [1.0, 2.0]}, cur=("rtx", 2), restarts=5)
    cap = {"rtx": 1}  # its 2 GPUs are gone: only the 1-GPU configuration is left
    f = realloc_factor(job, 1000.0, 120.0)
    assert f == pytest.approx(400 / 1120)
    # normalised: 1 GPU = 1 (x f = 0.36: A = 1.67)
    assert sia([job], cap, now=1000.0) == {}
    assert sia([job], cap, now=1000.0, lambda_n=2.0) == {"bert-0": Assignment("rtx", 1)}
    # a job that holds nothing pays no penalty: its 1-GPU configuration is worth 1 < 1.1
    idle = _view("bert-1", {"rtx": [1.0, 2.0]}, restarts=5)
    assert sia([idle], cap, now=1000.0) == {"bert-1": Assignment("rtx", 1)}
    assert sia([idle], cap, now=1000.0, lambda_n=0.9) == {}


def _brute_force(jobs, cap, now, sizes):
    menus = []
    for j in jobs:
        opts: list[Assignment | None] = [None]
        for t in sorted(cap):
            # the menu, and the job's minimum as a configuration of its own
            counts = sorted({*configurations(cap[t], sizes[t]), j.min_workers})
            opts += [Assignment(t, n) for n in counts if j.min_workers <= n <= min(j.max_workers, cap[t])]
        menus.append(opts)
    best = None
    for combo in itertools.product(*menus):
        used = {t: 0 for t in cap}
        for a in combo:
            if a is not None:
                used[a.gpu_type] += a.workers
        if any(used[t] > cap[t] for t in cap):
            continue
        res = {j.name: a for j, a in zip(jobs, combo, strict=True) if a is not None}
        val = objective(jobs, cap, now, res, node_sizes=sizes)
        best = val if best is None else min(best, val)
    return best


@pytest.mark.parametrize("minimums", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_the_ilp_reaches_exhaustive_searchs_objective(seed, minimums):
    import random

    rnd = random.Random(seed)
    cap = {"t4": rnd.choice([2, 4, 8]), "a100": rnd.choice([1, 2, 8])}
    sizes = {"t4": 4, "a100": 8}
    jobs = []
    for i in range(rnd.randint(1, 4)):
        width = rnd.randint(1, 8)
        rates = {}
        for t, speed in (("t4", 1.0), ("a100", rnd.uniform(1.0, 4.0))):
            r, cur = [], 0.0
            for k in range(width):
                cur += speed * rnd.uniform(0.2, 1.0) / (k + 1) ** 0.5
                r.append(cur)
            rates[t] = r
        lo = rnd.randint(1, width) if minimums else 1  # a minimum may lie off the menu
        held = None
        if rnd.random() < 0.5:
            t = rnd.choice(["t4", "a100"])
            ns = sorted(n for n in {*configurations(cap[t], sizes[t]), lo} if lo <= n <= min(width, cap[t]))
            held = (t, rnd.choice(ns)) if ns else None
        jobs.append(_view(f"cifar10-{i}", rates, t=10.0 * i, lo=lo, cur=held, restarts=rnd.randint(0, 4)))
    now = 600.0
    out = sia(jobs, cap, now, node_sizes=sizes)
    check_allocation(jobs, cap, out)
    assert objective(jobs, cap, now, out, node_sizes=sizes) == pytest.approx(_brute_force(jobs, cap, now, sizes))


@pytest.mark.parametrize("seed", range(40))
def test_one_gpu_type_is_solved_exactly_without_the_ilp_solver(seed, monkeypatch):
    """On one GPU type the ILP is a multiple-choice knapsack, solved by dynamic programming: the
    same optimum as exhaustive search and as the ILP solver, and the solver is not called."""
    import importlib
    import random

    import scipy.optimize

    sia_module = importlib.import_module("lavaflow.elastic.policies.sia")

    rnd = random.Random(seed)
    cap = {"rtx": rnd.choice([3, 4, 8, 12])}
    sizes = {"rtx": rnd.choice([4, 8])}
    jobs = []
    for i in range(rnd.randint(1, 5)):
        width = rnd.randint(1, 12)
        r, cur = [], 0.0
        for k in range(width):
            cur += rnd.uniform(0.2, 1.0) / (k + 1) ** 0.5
            r.append(cur)
        lo = rnd.randint(1, min(width, 3))
        ns = sorted(n for n in {*configurations(cap["rtx"], sizes["rtx"]), lo} if lo <= n <= min(width, cap["rtx"]))
        held = ("rtx", rnd.choice(ns)) if ns and rnd.random() < 0.5 else None
        jobs.append(_view(f"bert-{i}", {"rtx": r}, t=10.0 * i, lo=lo, cur=held, restarts=rnd.randint(0, 4)))
    now = 600.0
    lam = rnd.choice([1.1, 1.5, 3.0])
    with_solver = sia_module._one_type
    monkeypatch.setattr(sia_module, "_one_type", lambda *a: None)  # the ILP solver's answer
    by_ilp = sia(jobs, cap, now, node_sizes=sizes, lambda_n=lam)
    monkeypatch.setattr(sia_module, "_one_type", with_solver)
    monkeypatch.setattr(scipy.optimize, "milp", lambda *a, **k: pytest.fail("the ILP solver was called"))
    out = sia(jobs, cap, now, node_sizes=sizes, lambda_n=lam)
    check_allocation(jobs, cap, out)
    value = objective(jobs, cap, now, out, node_sizes=sizes, lambda_n=lam)
    assert value == pytest.approx(objective(jobs, cap, now, by_ilp, node_sizes=sizes, lambda_n=lam))
    if lam == 1.1:  # (the exhaustive search values every configuration with the default λ_n)
        assert value == pytest.approx(_brute_force(jobs, cap, now, sizes))


def test_a_time_limit_still_gives_a_feasible_allocation():
    jobs = [_view(f"j{i}", {"t4": [1, 1.7, 2.2, 2.5], "rtx": [1.5, 2.8, 3.9, 4.5]}, t=i) for i in range(40)]
    cap = {"t4": 24, "rtx": 24}
    out = sia(jobs, cap, now=0.0, time_limit=0.5, node_sizes={"t4": 4, "rtx": 8})
    check_allocation(jobs, cap, out)
    assert sum(a.workers for a in out.values()) == 48  # every GPU used


def test_sia_is_registered_as_the_artifact_configures_it():
    pol = make_policy("sia")
    assert pol.name == "Sia" and pol.default_interval == 60 and pol.periodic and pol.aligned_tick
    assert pol.node_aware and not pol.clairvoyant
    job = _view("a", {"t4": [1, 1.8, 2.5, 3.0], "a100": [3, 5.5, 7, 9]})
    # the node sizes the scheduler passes reach the policy (on 2-GPU nodes the menu is 1, 2, 4)
    assert pol([job], {"t4": 4, "a100": 4}, 0.0, node_sizes={"t4": 2, "a100": 2}) == {"a": Assignment("a100", 4)}
    assert make_policy("sia", p=-1.0, lambda_n=1.5).params == {"p": -1.0, "lambda_n": 1.5}
    with pytest.raises(ValueError, match="p < 0"):
        make_policy("sia", p=0.5)([job], {"t4": 4}, 0.0)


# -- Pollux with the fix-up ------------------------------------------------------------------


def test_the_fix_up_keeps_the_type_a_job_holds_most_of():
    # Pollux gives the job 4 GPUs of a pool where only 3 t4 and 1 a100 are free: it keeps its 3 t4
    # (at age 100 s: at age 0 Pollux's restart penalty leaves a new job nothing)
    job = _view("a", {"t4": [1, 2, 3, 4], "a100": [1, 2, 3, 4]})
    assert pollux_fix([job], {"t4": 3, "a100": 1}, now=100.0) == {"a": Assignment("t4", 3)}


def test_fix_up_ties_go_to_the_faster_type():
    job = _view("a", {"t4": [1, 2, 3, 4], "a100": [3, 6, 9, 12]})
    assert pollux_fix([job], {"t4": 2, "a100": 2}, now=100.0) == {"a": Assignment("a100", 2)}
    other = _view("a", {"t4": [3, 6, 9, 12], "a100": [1, 2, 3, 4]})
    assert pollux_fix([other], {"t4": 2, "a100": 2}, now=100.0) == {"a": Assignment("t4", 2)}


def test_fix_up_leaves_a_running_job_on_its_gpus():
    # b keeps its 2 a100 GPUs at an unchanged size; a, new, takes what is left
    a = _view("a", {"t4": [1, 2], "a100": [1, 2]}, t=10.0, hi=2)
    b = _view("b", {"t4": [1, 2], "a100": [1, 2]}, t=0.0, hi=2, cur=("a100", 2))
    out = pollux_fix([a, b], {"t4": 2, "a100": 2}, now=100.0)
    assert out == {"a": Assignment("t4", 2), "b": Assignment("a100", 2)}
    check_allocation([a, b], {"t4": 2, "a100": 2}, out)


def test_fix_up_is_registered():
    pol = make_policy("pollux-unaware")
    assert pol.name == "Pollux-Fix" and pol.default_interval == 60 and not pol.shares_profiles


# -- Gavel (TunedJobs) ---------------------------------------------------------------------------


def test_gavel_gives_each_type_to_the_jobs_that_run_fastest_there():
    from lavaflow.elastic.policies.gavel import allocation, gavel

    # max-sum-throughput: a runs 4x faster on an a100, b only 1.5x; one 2-GPU slot on each type
    a = _view("a", {"t4": [1, 2], "a100": [4, 8]})
    b = _view("b", {"t4": [1, 2], "a100": [1.5, 3]})
    a, b = (JobView(**{**v.__dict__, "requested": 2, "min_workers": 2}) for v in (a, b))
    cap = {"t4": 2, "a100": 2}
    x = allocation([a, b], cap)
    assert x == pytest.approx({("a", "a100"): 1.0, ("b", "t4"): 1.0})
    assert gavel([a, b], cap, now=0.0) == {"a": Assignment("a100", 2), "b": Assignment("t4", 2)}


def test_gavel_time_shares_by_what_each_job_has_received():
    from lavaflow.elastic.policies.gavel import allocation, gavel

    # two identical 1-GPU jobs, one GPU: half the time each; the one that ran less goes first
    a = _view("a", {"rtx": [1.0]}, t=0.0)
    b = _view("b", {"rtx": [1.0]}, t=1.0)
    fr = allocation([a, b], {"rtx": 1})
    assert sum(fr.values()) == pytest.approx(1.0)
    ran = JobView(**{**a.__dict__, "attained_service": 3600.0})
    assert gavel([ran, b], {"rtx": 1}, now=4000.0) == {"b": Assignment("rtx", 1)}
    ran_b = JobView(**{**b.__dict__, "attained_service": 3600.0})
    assert gavel([a, ran_b], {"rtx": 1}, now=4000.0) == {"a": Assignment("rtx", 1)}


def test_gavel_max_min_fairness_on_a_two_type_toy():
    from lavaflow.elastic.policies.gavel import allocation

    # one GPU of each type; a is 3x faster on the a100, b 1.5x (throughputs normalised by the best
    # type's). With a share y of the a100 to b: b = (1 - y) / 1.5 + y on t4 + a100, a = (1 - y) on
    # the a100 + y / 3 on the t4 time b leaves; equal at y = 1/3: both 7/9 (max-sum: b gets none)
    a = _view("a", {"t4": [1.0], "a100": [3.0]})
    b = _view("b", {"t4": [1.0], "a100": [1.5]})
    x = allocation([a, b], {"t4": 1, "a100": 1}, objective="max_min")
    norm_a = x.get(("a", "t4"), 0) / 3 + x.get(("a", "a100"), 0)
    norm_b = x.get(("b", "t4"), 0) / 1.5 + x.get(("b", "a100"), 0)
    assert min(norm_a, norm_b) == pytest.approx(7 / 9, abs=1e-6)
    assert x.get(("b", "a100"), 0) == pytest.approx(1 / 3, abs=1e-6)
    with pytest.raises(ValueError, match="unknown objective"):
        allocation([a, b], {"t4": 1, "a100": 1}, objective="fifo")


def test_gavel_is_registered_rigid_with_360_s_rounds():
    pol = make_policy("gavel")
    assert pol.name == "Gavel" and not pol.elastic and pol.default_interval == 360 and pol.periodic


def test_a_job_restarted_past_its_age_keeps_only_what_it_holds():
    # restarts x penalty > age: the factor is 0, every other configuration is worth nothing
    job = _view("cifar10-0", {"t4": [1.0, 1.9], "a100": [3.0, 5.0]}, cur=("t4", 1), restarts=50)
    assert realloc_factor(job, 600.0, 30.0) == 0.0
    assert sia([job], {"t4": 2, "a100": 2}, now=600.0) == {"cifar10-0": Assignment("t4", 1)}


# -- Lavaflow / Goodput: moving between types ---------------------------------------------------


def test_type_moves_let_a_job_leave_a_full_fast_type_for_a_larger_slow_one():
    from lavaflow.elastic.policies.lavaflow import lavaflow

    # one A100 (2x per GPU) or four T4s (4 in all): 1 A100 GPU is the best start per GPU, but once
    # there the job cannot grow; with moves it takes the four T4s instead
    job = _view("a", {"t4": [1, 2, 3, 4], "a100": [2]}, hi=4)
    cap = {"t4": 4, "a100": 1}
    assert lavaflow([job], cap, 0.0, switch_factor=0) == {"a": Assignment("a100", 1)}
    assert lavaflow([job], cap, 0.0, switch_factor=0, type_moves=True) == {"a": Assignment("t4", 4)}
    # the A100 it leaves goes to whoever can use it
    other = _view("b", {"t4": [1], "a100": [1.5]}, t=5.0, hi=1)
    out = lavaflow([job, other], cap, 0.0, switch_factor=0, type_moves=True)
    assert out == {"a": Assignment("t4", 4), "b": Assignment("a100", 1)}
    check_allocation([job, other], cap, out)
