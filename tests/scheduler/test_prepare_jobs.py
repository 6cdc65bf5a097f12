"""Scheduler.prepare_jobs: what plugins keep per job, worked out ahead of a session (as the
Kubernetes scheduler does while its informers sync), is exactly what the session would work out.

- A session after preparing decides the same (bindings, PodGroup and Queue statuses) and opens
  with the same queue accounting, to the bit, as one without, whichever jobs were prepared and
  whatever changed after preparing.
- The session uses what was prepared instead of working it out again.
- Preparing leaves the jobs as they were (their session phase).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.scheduler.framework.memo import JobRecord
from lavaflow.scheduler.plugins import proportion
from lavaflow.scheduler.plugins.drf import DRF_SHARE
from lavaflow.scheduler.scheduler import PREPARED, Scheduler
from scheduler_helpers import make_cache, make_node, make_pg, make_pod, make_queue

CONF = None  # lavaflow's default configuration (Volcano's, with the elastic action and plugin)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@st.composite
def clusters(draw: Any) -> dict[str, Any]:
    nodes = draw(st.integers(1, 4))
    queues = draw(st.integers(1, 3))
    jobs = []
    for j in range(draw(st.integers(1, 10))):
        tasks = draw(st.integers(1, 4))
        jobs.append(
            {
                "name": f"j{j}",
                "queue": f"q{draw(st.integers(0, queues - 1))}",
                "phase": draw(st.sampled_from(["Pending", "Inqueue", "Running"])),
                "min": draw(st.integers(1, tasks)),
                "min_cpu": draw(st.one_of(st.none(), st.sampled_from([0.5, 1, 3, 7]))),
                "tasks": [
                    (draw(st.sampled_from([0.1, 0.25, 1, 2])), draw(st.one_of(st.none(), st.integers(0, nodes - 1))))
                    for _ in range(tasks)
                ],
            }
        )
    prepared = draw(st.lists(st.integers(0, len(jobs) - 1), unique=True))
    later = draw(st.one_of(st.none(), st.integers(0, len(jobs) - 1)))  # a job that changes after preparing
    return {"nodes": nodes, "queues": queues, "jobs": jobs, "prepared": prepared, "later": later}


def _cache(c: dict[str, Any]) -> Any:
    cache = make_cache(
        nodes=[make_node(f"n{i}", 4, "16Gi") for i in range(c["nodes"])],
        queues=[make_queue(f"q{i}", weight=i + 1) for i in range(c["queues"])],
    )
    for job in c["jobs"]:
        min_resources = None if job["min_cpu"] is None else {"cpu": job["min_cpu"]}
        cache.on_podgroup(make_pg(job["name"], job["min"], job["queue"], min_resources, phase=job["phase"]))
        for k, (cpu, node) in enumerate(job["tasks"]):
            bound = node is not None and job["phase"] == "Running"
            cache.on_pod(
                make_pod(
                    f"{job['name']}-{k}",
                    job["name"],
                    cpu=cpu,
                    mem="1Gi",
                    node=f"n{node}" if bound else None,
                    phase="Running" if bound else "Pending",
                )
            )
    return cache


def _change(cache: Any, c: dict[str, Any]) -> None:
    """A pod of job ``later`` goes (or, for a job without one, comes) after preparing."""
    i = c["later"]
    if i is None:
        return
    job = c["jobs"][i]
    name = f"{job['name']}-0"
    cpu, node = job["tasks"][0]
    bound = node is not None and job["phase"] == "Running"
    pod = make_pod(name, job["name"], cpu=cpu, mem="1Gi", node=f"n{node}" if bound else None)
    cache.on_pod(pod, True)


def _run(c: dict[str, Any], prepare: bool) -> tuple[Any, ...]:
    cache = _cache(c)
    sched = Scheduler(cache, load_scheduler_conf(CONF), reraise=True)
    if prepare:
        jobs = list(cache.scheduled_jobs().values())
        before = [job.sphase for job in jobs]
        sched.prepare_jobs([jobs[i] for i in c["prepared"]])
        assert [job.sphase for job in jobs] == before
    _change(cache, c)
    if prepare:  # again, after the change: the changed job's vectors are worked out anew
        sched.prepare_jobs([jobs[i] for i in c["prepared"]])
    ssn = sched.run_once(100.0)
    d = cache.take_decisions()
    attrs = ssn.plugins["proportion"].attrs  # type: ignore[attr-defined]
    accounting = {
        name: tuple(getattr(a, f).tobytes() for f in ("allocated", "request", "inqueue", "elastic", "deserved"))
        for name, a in attrs.items()
    }
    shares = dict(ssn.plugins["drf"]._shares)  # type: ignore[attr-defined]
    inqueue = ssn.plugins["overcommit"].inqueue.tobytes()  # type: ignore[attr-defined]
    return d.binds, d.podgroups, d.queues, accounting, shares, inqueue


@SETTINGS
@given(clusters())
def test_a_session_after_preparing_decides_and_accounts_exactly_as_one_without(c: dict[str, Any]) -> None:
    assert _run(c, prepare=True) == _run(c, prepare=False)


def test_the_first_session_uses_the_prepared_vectors_instead_of_working_them_out() -> None:
    c = {
        "nodes": 2,
        "queues": 2,
        "jobs": [
            {"name": f"j{i}", "queue": f"q{i % 2}", "phase": "Running", "min": 1, "min_cpu": 1, "tasks": [(1, i % 2)]}
            for i in range(6)
        ],
    }
    cache = _cache(c)
    sched = Scheduler(cache, load_scheduler_conf(CONF), reraise=True)
    jobs = list(cache.scheduled_jobs().values())
    sched.prepare_jobs(jobs)
    rows = {job.uid: _kept(proportion.JOB_ROWS, job)[1] for job in jobs}
    shares = {job.uid: _kept(DRF_SHARE, job) for job in jobs}
    worked_out = []
    real = proportion.job_rows

    def counting(job: Any, width: int) -> Any:
        out = real(job, width)
        worked_out.append(out is not rows.get(job.uid))
        return out

    proportion.job_rows = counting
    try:
        sched.run_once(100.0)
    finally:
        proportion.job_rows = real
    assert worked_out and not any(worked_out)  # every job's rows were the prepared ones
    assert {job.uid: _kept(DRF_SHARE, job) for job in jobs} == shares
    # Preparing again finds nothing to do: the jobs did not change.
    versions = {job.uid: _kept(PREPARED, job) for job in jobs}
    sched.prepare_jobs(jobs)
    assert {job.uid: _kept(PREPARED, job) for job in jobs} == versions


def test_preparing_without_plugins_that_keep_anything_per_job_does_nothing() -> None:
    cache = make_cache(nodes=[make_node("n0", 4, "16Gi")], pgs=[make_pg("a", 1)], pods=[make_pod("a-0", "a")])
    conf = load_scheduler_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n')
    sched = Scheduler(cache, conf)
    sched.prepare_jobs(cache.scheduled_jobs().values())
    assert all(PREPARED.kept(job) is None for job in cache.jobs.values())
    assert np.array_equal(cache.nodes.view("used").sum(axis=0), np.zeros(len(cache.index)))


def _kept(record: JobRecord[Any], job: Any) -> tuple[Any, Any]:
    """(key, value) of what ``record`` keeps for ``job``."""
    kept = record.kept(job)
    assert kept is not None
    return kept.key, kept.value
