"""proportion's queue sums updated by what changed between sessions (``_updated_sums``) are, bit
for bit, the sums worked out from all the jobs, and a run gives the same result either way."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import simulate
from lavaflow.scheduler.plugins import proportion as P

REAL = P._updated_sums
CPUS = {"whole": ["1", "2", "4"], "halves": ["500m", "1500m", "250m"], "tenths": ["100m", "300m", "1"]}


def _scenario(rng_jobs: list[tuple[int, int, str, str, int, int]], queues: int) -> str:
    docs = [
        """apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {name: n}
spec: {count: 4, capacity: {cpu: "8", memory: 32Gi, pods: "110"}}"""
    ]
    for q in range(queues):
        docs.append(
            f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: q{q}}}
spec: {{weight: {q + 1}}}"""
        )
    for i, (at, q, cpu, mem, replicas, duration) in enumerate(rng_jobs):
        docs.append(
            f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: j{i}
  annotations: {{sim.lavaflow.io/submit-at: "{at}"}}
spec:
  minAvailable: {replicas}
  schedulerName: volcano
  queue: q{q % queues}
  tasks:
  - name: t
    replicas: {replicas}
    template:
      metadata: {{annotations: {{sim.lavaflow.io/duration: "{duration}"}}}}
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "{cpu}", memory: {mem}}}}}"""
        )
    return "\n---\n".join(docs) + "\n"


def _checked(monkeypatch) -> dict[str, int]:
    """Compare every updated sum with the sums from all the jobs; count how often each path ran and
    how often they differed (counted, not raised: a session's error is caught by the scheduler)."""
    seen = {"updated": 0, "full": 0, "differ": 0}
    real = REAL
    monkeypatch.setattr(P, "UPDATE_FROM", 1)  # (these scenarios are small: update from the first job)

    def checked(ssn, width):
        got = real(ssn, width)
        if got is None:
            seen["full"] += 1
            return None
        seen["updated"] += 1
        slot: dict[str, int] = {}
        names: list[str] = []
        entries = []
        for job in ssn.jobs.values():
            q = ssn.queues.get(job.queue)
            if q is None:
                continue
            if q.name not in slot:
                slot[q.name] = len(names)
                names.append(q.name)
            entries.append((slot[q.name], P.job_rows(job, width)))
        sums, counts = P._queue_sums(entries, len(names), width)
        same = got.names == names and got.counts == counts
        for mine, theirs in zip(got.sums, sums, strict=True):
            if (mine is None) != (theirs is None) or (
                mine is not None and (mine.shape != theirs.shape or mine.tobytes() != theirs.tobytes())
            ):
                same = False
        seen["differ"] += not same
        return got

    monkeypatch.setattr(P, "_updated_sums", checked)
    return seen


job = st.tuples(
    st.integers(0, 600),  # arrival
    st.integers(0, 2),  # queue
    st.integers(0, 2),  # which of the cpu amounts
    st.sampled_from(["1Gi", "2Gi", "512Mi", "3Gi"]),
    st.integers(1, 3),  # replicas
    st.integers(30, 400),  # duration
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(job, min_size=5, max_size=40), queues=st.integers(1, 3), cpus=st.sampled_from(sorted(CPUS)))
def test_updated_sums_are_the_sums_from_all_the_jobs(monkeypatch, jobs, queues, cpus):
    text = _scenario([(a, q, CPUS[cpus][k], m, r, d) for a, q, k, m, r, d in jobs], queues)
    seen = _checked(monkeypatch)  # (each example replaces what the one before set)
    fast = simulate(text)
    monkeypatch.setattr(P, "_updated_sums", lambda ssn, width: None)
    slow = simulate(text)
    assert json.dumps(fast, sort_keys=True, default=str) == json.dumps(slow, sort_keys=True, default=str)
    assert seen["differ"] == 0 and seen["updated"] + seen["full"] > 0, seen
    if cpus != "tenths" and len({a for a, *_ in jobs}) > 3:
        assert seen["updated"] > 0, seen


def test_a_stream_of_jobs_is_summed_by_what_changed(monkeypatch):
    """Whole cores and memory in bytes: every session after the first updates the kept sums."""
    jobs = [(10 * i, i % 2, "whole", "2Gi", 1 + i % 2, 60 + 7 * i) for i in range(40)]
    text = _scenario([(a, q, CPUS[c][i % 3], m, r, d) for i, (a, q, c, m, r, d) in enumerate(jobs)], 2)
    seen = _checked(monkeypatch)
    simulate(text)
    assert seen["differ"] == 0 and seen["updated"] > 10 * seen["full"], seen


def test_cpu_in_tenths_is_summed_from_all_the_jobs(monkeypatch):
    """100m is no multiple of 2**-10: its sums depend on their order, so they are worked out again."""
    jobs = [(10 * i, 0, "tenths", "1Gi", 1, 60) for i in range(20)]
    text = _scenario([(a, q, "100m", m, r, d) for a, q, _c, m, r, d in jobs], 1)
    seen = _checked(monkeypatch)
    simulate(text)
    assert seen["updated"] == 0 and seen["full"] > 0, seen


def test_exactness_of_a_vector():
    assert P._exact_vec(np.array([1.0, 0.5, 2.0**31, 0.0]))
    assert not P._exact_vec(np.array([0.1]))
    assert not P._exact_vec(np.array([-1.0]))
    assert not P._exact_vec(np.array([-0.0]))
    assert not P._exact_vec(np.array([np.inf]))
    assert not P._exact_vec(np.array([2.0**44]))
