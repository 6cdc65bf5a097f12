"""The Pollux baseline policy: its objective and its search."""

from __future__ import annotations

import itertools

from hypothesis import given, settings, strategies as st

from lavaflow.elastic.policies import JobView, check_allocation, make_policy
from lavaflow.elastic.policies.pollux import objective, pollux


def _view(name: str, t: float, rates: list[float], lo: int = 1, cur: int = 0, restarts: int = 0) -> JobView:
    curve = tuple([0.0, *rates])
    return JobView(
        name=name,
        submit_time=t,
        min_workers=lo,
        max_workers=len(rates),
        requested=lo,
        rates={"default": curve},
        remaining_work=1e9,
        current_workers=cur,
        current_type="default" if cur else None,
        restarts=restarts,
        rate_fn=lambda ty, n, c=curve: c[min(n, len(c) - 1)] if n <= len(c) - 1 else c[-1] * n / (len(c) - 1),
    )


def _best_by_search(jobs, cap: int, now: float) -> float:
    best = 0.0
    for sizes in itertools.product(*[range(0, j.max_workers + 1) for j in jobs]):
        if sum(sizes) > cap or any(0 < n < j.min_workers for n, j in zip(sizes, jobs)):
            continue
        from lavaflow.elastic.policies import Assignment

        res = {j.name: Assignment("default", n) for j, n in zip(jobs, sizes) if n}
        best = max(best, objective(jobs, {"default": cap}, now, res))
    return best


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 4))
    jobs = []
    for i in range(n):
        m = draw(st.integers(1, 5))
        gains = draw(st.lists(st.floats(0.0, 1.0), min_size=m, max_size=m))
        rates, r = [], 0.0
        for k, g in enumerate(gains):
            r += g / (k + 1) + (1.0 if k == 0 else 0.0)  # concave-ish, first worker worth 1
            rates.append(r)
        cur = draw(st.integers(0, m))
        jobs.append(
            _view(f"j{i}", draw(st.floats(0, 500)), rates, cur=cur, restarts=draw(st.integers(0, 3)) if cur else 0)
        )
    return jobs, draw(st.integers(1, 8)), draw(st.floats(600, 5000))


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_search_reaches_the_best_objective_on_small_instances(sc):
    """The greedy reaches what exhaustive search over every allocation reaches (the artifact's
    NSGA-II approximates the same optimum), within 1 %."""
    jobs, cap, now = sc
    res = pollux(jobs, {"default": cap}, now)
    check_allocation(jobs, {"default": cap}, res)
    got = objective(jobs, {"default": cap}, now, res)
    assert got >= 0.99 * _best_by_search(jobs, cap, now) - 1e-12


def test_every_job_runs_when_there_are_gpus_for_all():
    jobs = [_view(f"j{i}", 0.0, [1.0, 1.9, 2.7, 3.4]) for i in range(4)]
    res = pollux(jobs, {"default": 8}, 3600.0)
    assert sorted(a.workers for a in res.values()) == [2, 2, 2, 2]


def test_restart_penalty_keeps_young_running_jobs_where_they_are():
    # a job submitted 20 s ago keeps 20 / (20 + 30) of its speed-up if its allocation changes:
    # doubling it (1.9 -> 3.4) does not pay that
    young = _view("young", 980.0, [1.0, 1.9, 2.7, 3.4], cur=2)
    res = pollux([young], {"default": 4}, 1000.0)
    assert res["young"].workers == 2
    old = _view("old", 0.0, [1.0, 1.9, 2.7, 3.4], cur=2)
    assert pollux([old], {"default": 4}, 100_000.0)["old"].workers == 4


def test_registered_as_the_literature_baseline():
    p = make_policy("Pollux")
    assert p.elastic and not p.clairvoyant
    assert p.default_interval == 60.0 and p.aligned_tick


def test_pollux_rounds_come_every_minute_even_when_nothing_else_happens(tmp_path):
    """A lone job: Pollux's restart penalty first keeps it where it is (it is young), and a later
    round — with no arrival, completion or report to call for one — grows it."""
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    p = tmp_path / "one.csv"
    p.write_text("name,time,application,num_replicas,batch_size\nds2,0,deepspeech2,2,20\n")
    res = replay(trace_inputs([p], gpu_cluster(nodes=4), adaptive=True), "Pollux")
    sizes = [n for _t, n, _ty in res.jobs[0].history]
    assert max(sizes) >= 4, res.jobs[0].history
