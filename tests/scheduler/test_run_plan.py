"""Allocate places a gang's same-class tasks from one run plan (NodeSelection.plan_run) instead of
rescoring after every placement: the nodes must be exactly those select_node picks one by one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lavaflow.scheduler.actions.allocate as allocate_mod
from lavaflow.scheduler.framework.node_selection import NodeSelection
from scheduler_helpers import make_cache, make_node, make_pg, make_pod, run_cycle, tiers_conf

SCORING = {
    "binpack": tiers_conf(["priority", "gang"], ["predicates", "proportion", "binpack"]),
    "nodeorder": tiers_conf(["priority", "gang"], ["predicates", "proportion", "nodeorder"]),
    "both": tiers_conf(["priority", "gang"], ["drf", "predicates", "proportion", "nodeorder", "binpack"]),
}


def _placements(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], conf: str) -> dict[str, str]:
    node_objs, pgs, pods = [], [], []
    for i, n in enumerate(nodes):
        node_objs.append(make_node(f"n{i}", cpu=n["cpu"], mem=f"{n['mem']}Gi", labels={"zone": n["zone"]}))
        for k in range(n["busy"]):  # pods already running there (uneven usage)
            pods.append(make_pod(f"busy-{i}-{k}", cpu="500m", mem="1Gi", node=f"n{i}", phase="Running"))
    for j, job in enumerate(jobs):
        pgs.append(make_pg(f"pg{j}", min_member=job["min"], creation=j))
        for t in range(job["replicas"]):
            pods.append(
                make_pod(
                    f"j{j}-{t}",
                    group=f"pg{j}",
                    cpu=job["cpu"],
                    mem=f"{job['mem']}Gi",
                    node_selector={"zone": job["zone"]} if job["zone"] else None,
                    index=t,
                    creation=j,
                )
            )
    cache = make_cache(nodes=node_objs, pgs=pgs, pods=pods)
    _, decisions = run_cycle(cache, conf)
    return dict(decisions.binds)


node_st = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from([2, 4, 8, 16]),
        "mem": st.sampled_from([4, 8, 16, 32]),
        "zone": st.sampled_from(["a", "b"]),
        "busy": st.integers(0, 3),
    }
)
job_st = st.fixed_dictionaries(
    {
        "replicas": st.integers(1, 12),
        "cpu": st.sampled_from(["250m", "500m", "1", "1500m", "2"]),
        "mem": st.sampled_from([1, 2, 3]),
        "zone": st.sampled_from([None, None, "a"]),
    }
).map(lambda j: {**j, "min": max(1, j["replicas"] - 1)})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_st, min_size=1, max_size=12),
    st.lists(job_st, min_size=1, max_size=4),
    st.sampled_from(sorted(SCORING)),
)
def test_run_plans_place_every_task_where_one_by_one_selection_would(nodes, jobs, scoring):
    conf = SCORING[scoring]
    planned = _placements(nodes, jobs, conf)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(allocate_mod, "_planned", lambda *a: None)
        one_by_one = _placements(nodes, jobs, conf)
    finally:
        mp.undo()
    assert planned == one_by_one


def test_a_gang_is_planned_once_and_lands_where_it_would(monkeypatch):
    """The plan is really used (not silently skipped) and still matches: ten tasks onto nodes
    whose scores change as they fill."""
    nodes = [{"cpu": 4, "mem": 8, "zone": "a", "busy": b} for b in (0, 1, 2, 3, 0, 1)]
    jobs = [{"replicas": 10, "min": 10, "cpu": "1", "mem": 1, "zone": None}]
    made = []
    real = NodeSelection.plan_run

    def spy(self, task, count):
        plan = real(self, task, count)
        made.append((count, plan))
        return plan

    monkeypatch.setattr(NodeSelection, "plan_run", spy)
    planned = _placements(nodes, jobs, SCORING["both"])
    assert made and made[0][0] == 10 and made[0][1] is not None and len(made[0][1].nodes) == 10
    monkeypatch.setattr(allocate_mod, "_planned", lambda *a: None)
    assert planned == _placements(nodes, jobs, SCORING["both"])
    assert len(planned) == 10
