"""Invariants over random scenarios (issue 15): the `make test` share of benchmarks/invariants.py.

Scenarios come from tests/invariants.py (node faults, preempt/reclaim configurations,
hierarchical queues, mixed Volcano Jobs / PodGroups / bare pods / Deployments / batch Jobs,
finite durations). Each must: end on its own (no --until), evict no pod more than a bounded
number of times for one preemptor, keep every node within its allocatable and every queue
within its capability at every instant, start no gang below its minimum, end every job or
list it stuck with a reason, and give the same JSON for the same input and seed.
benchmarks/invariants.py runs 10,000 of them.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

import invariants

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_random_scenarios_keep_every_invariant(seed):
    sc = invariants.generate(seed)
    problems = invariants.check(sc, determinism=seed % 8 == 0)
    assert problems == [], (seed, sc.conf, problems)


def test_generated_scenarios_cover_every_configuration_and_workload_kind():
    confs, kinds, faults = set(), set(), 0
    for seed in range(200):
        sc = invariants.generate(seed)
        confs.add(sc.conf)
        faults += sc.faults
        for kind in ('"kind": "Job"', '"kind": "PodGroup"', '"kind": "Deployment"', '"kind": "Pod"', '"parent": "q0"'):
            if kind in sc.text:
                kinds.add(kind)
    assert confs == set(invariants.CONFS)
    assert len(kinds) == 5 and faults > 10
