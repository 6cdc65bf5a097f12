"""framework/memo.py: per-job records, records across jobs under the session's jobs token, the
session-jobs token itself and plugin state kept in the cache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from lavaflow.scheduler.framework.memo import (
    MISS,
    CacheRecord,
    JobRecord,
    JobsRecord,
    Reuse,
    session_jobs_token,
    state,
)
from lavaflow.scheduler.model import JobInfo

VALUE: JobRecord[str] = JobRecord("test_value")
OPTIONAL: JobRecord[str | None] = JobRecord("test_optional")
SUMS: JobsRecord[list[int]] = JobsRecord("test_sums")
TREE: CacheRecord[str] = CacheRecord("test_tree")


def _job(uid: str) -> JobInfo:
    return JobInfo(uid=uid, name=uid, namespace="default")


def _cache() -> Any:
    return SimpleNamespace(plugin_memo={})


def _session(cache: Any, jobs: list[JobInfo]) -> Any:
    """What a Session holds of the token, as Session.__init__ sets it."""
    token, previous, changed = session_jobs_token(cache, tuple(jobs), [j.version for j in jobs])
    return SimpleNamespace(cache=cache, jobs_token=token, jobs_previous_token=previous, jobs_changed=changed)


# ---------------------------------------------------------------------- per-job records
def test_job_record_hits_only_under_an_equal_key() -> None:
    job = _job("a")
    assert VALUE.get(job, 0) is MISS and VALUE.kept(job) is None
    assert VALUE.put(job, (0, "x"), "made") == "made"
    assert VALUE.get(job, (0, "x")) == "made"
    assert VALUE.get(job, (1, "x")) is MISS
    assert VALUE.get(job, (0, "y")) is MISS
    VALUE.put(job, (1, "x"), "again")
    assert VALUE.get(job, (1, "x")) == "again" and VALUE.get(job, (0, "x")) is MISS
    VALUE.drop(job)
    assert VALUE.kept(job) is None


def test_a_kept_none_is_a_hit_not_a_miss() -> None:
    job = _job("a")
    OPTIONAL.put(job, 3, None)
    assert OPTIONAL.get(job, 3) is None
    assert OPTIONAL.get(job, 4) is MISS


def test_records_of_one_job_are_apart() -> None:
    job = _job("a")
    VALUE.put(job, 1, "value")
    OPTIONAL.put(job, 1, "optional")
    assert VALUE.get(job, 1) == "value" and OPTIONAL.get(job, 1) == "optional"
    assert set(job.memo) == {"test_value", "test_optional"}


def test_restamp_keeps_the_value_under_a_new_key() -> None:
    job = _job("a")
    VALUE.put(job, 1, "made", basis=("tasks", 7))
    kept = VALUE.kept(job)
    assert kept is not None
    assert JobRecord.restamp(kept, 2) == "made"
    assert VALUE.get(job, 2) == "made" and VALUE.get(job, 1) is MISS
    assert kept.basis == ("tasks", 7)  # what it is made of stays with it


def test_get_on_basis_restamps_only_while_the_basis_holds() -> None:
    job = _job("a")
    VALUE.put(job, 1, "made", basis="gang-1")
    assert VALUE.get_on_basis(job, 1, "anything") == "made"  # the key itself
    assert VALUE.get_on_basis(job, 2, "gang-1") == "made"  # a new version, the same gang
    assert VALUE.get(job, 2) == "made"  # re-stamped
    assert VALUE.get_on_basis(job, 3, "gang-2") is MISS  # the gang moved: work it out again
    assert VALUE.get_on_basis(_job("b"), 1, "gang-1") is MISS


# ---------------------------------------------------------------------- cache records and state
def test_cache_record_and_state() -> None:
    cache = _cache()
    assert TREE.get(cache, 1) is MISS and TREE.last(cache) is None
    TREE.put(cache, 1, "tree")
    assert TREE.get(cache, 1) == "tree" and TREE.get(cache, 2) is MISS and TREE.last(cache) == "tree"
    made = state(cache, "test_state", dict)
    made["x"] = 1
    assert state(cache, "test_state", dict) is made  # the factory runs once
    assert state(cache, "other", list) == []


# ---------------------------------------------------------------------- the jobs token
def test_token_stands_while_the_same_jobs_are_at_the_same_versions() -> None:
    cache = _cache()
    a, b = _job("a"), _job("b")
    first = _session(cache, [a, b])
    second = _session(cache, [a, b])
    assert second.jobs_token == first.jobs_token
    assert second.jobs_previous_token is None and not second.jobs_changed


def test_versions_moved_give_the_previous_token_and_the_changed_uids() -> None:
    cache = _cache()
    a, b, c = _job("a"), _job("b"), _job("c")
    first = _session(cache, [a, b, c])
    b.version += 1
    c.version += 2
    second = _session(cache, [a, b, c])
    assert second.jobs_token != first.jobs_token
    assert second.jobs_previous_token == first.jobs_token
    assert second.jobs_changed == {"b", "c"}
    third = _session(cache, [a, b, c])  # nothing moved since: the token stands again
    assert third.jobs_token == second.jobs_token and third.jobs_previous_token is None


def test_jobs_added_removed_or_reordered_give_a_new_token_and_no_previous() -> None:
    cache = _cache()
    a, b, c = _job("a"), _job("b"), _job("c")
    tokens = [_session(cache, [a, b]).jobs_token]
    for jobs in ([a, b, c], [a, c], [c, a], [_job("a"), c]):  # added, removed, reordered, a new object
        ssn = _session(cache, jobs)
        assert ssn.jobs_token not in tokens
        assert ssn.jobs_previous_token is None and not ssn.jobs_changed
        tokens.append(ssn.jobs_token)


# ---------------------------------------------------------------------- records across jobs
def test_jobs_record_same_since_none() -> None:
    cache = _cache()
    a, b = _job("a"), _job("b")
    ssn = _session(cache, [a, b])
    found = SUMS.lookup(ssn, 3)
    assert found.how is Reuse.NONE and found.value is None
    SUMS.put(ssn, [1, 2], 3)

    # The same jobs at the same versions: reuse as it is.
    ssn = _session(cache, [a, b])
    found = SUMS.lookup(ssn, 3)
    assert found.how is Reuse.SAME and found.value == [1, 2] and not found.changed
    assert SUMS.same(ssn, 3) == [1, 2] and SUMS.since(ssn, 3) is MISS
    assert SUMS.lookup(ssn, 4).how is Reuse.NONE  # another extra key: nothing
    assert SUMS.same(ssn, 4) is MISS

    # A version moved: the value kept under the previous token, with the jobs to revisit.
    b.version += 1
    ssn = _session(cache, [a, b])
    found = SUMS.lookup(ssn, 3)
    assert found.how is Reuse.SINCE and found.value == [1, 2] and found.changed == {"b"}
    assert SUMS.same(ssn, 3) is MISS and SUMS.since(ssn, 3) == [1, 2]
    SUMS.put(ssn, [1, 3], 3)
    assert SUMS.lookup(ssn, 3).how is Reuse.SAME

    # Kept two sessions back (not refreshed in between): neither same nor since.
    a.version += 1
    _session(cache, [a, b])
    b.version += 1
    ssn = _session(cache, [a, b])
    assert SUMS.lookup(ssn, 3).how is Reuse.NONE
    assert SUMS.last(ssn) == [1, 3]  # still there for callers that compare its parts themselves

    # A job added: a new token without a previous one.
    ssn = _session(cache, [a, b, _job("c")])
    SUMS.put(ssn, [0], 3)
    ssn = _session(cache, [a, b])
    assert SUMS.lookup(ssn, 3).how is Reuse.NONE
