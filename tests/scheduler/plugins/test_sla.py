"""The sla plugin: jobs with an SLA waiting time go first, earliest deadline first, and a job that has
waited that long is forced in ahead of others: through the simulator and through its callbacks."""

from __future__ import annotations

from conftest import node_group, simulate
from lavaflow.api.volcano import SLA_WAITING_TIME_KEY
from lavaflow.scheduler.framework.session import ABSTAIN, PERMIT, Session
from queue_scenarios import conf, decisions_of, job, job_of
from scheduler_helpers import conf_of, fn, make_cache, make_node, make_pg, make_pod, only


def sla_text(with_sla: bool) -> str:
    t = conf(tier1=(("sla", {}),) if with_sla else ()) + node_group(count=1, cpu="4")
    t += job("big", 4, at=1, duration=10, annotations={"volcano.sh/sla-waiting-time": "20s"} if with_sla else None)
    for i in range(40):
        t += job(f"s{i:02d}", 1, at=i * 2, duration=7)
    return t


def test_sla_waiting_time_forces_a_large_job_in_ahead_of_smaller_ones():
    without = simulate(sla_text(False))
    with_sla = simulate(sla_text(True))
    # Without SLA the 4-cpu gang waits behind the stream of 1-cpu jobs until the stream ends.
    assert job_of(without, "big")["startTime"] == 87.0
    # With 20 s it is forced in at its deadline (t=21): jobs admitted later wait until the running ones
    # drain (t=28) and it runs alone.
    assert job_of(with_sla, "big")["startTime"] == 28.0
    later = [j for j in with_sla["jobs"] if j["name"].startswith("s") and j["submitTime"] >= 21]
    assert later and all(j["startTime"] >= 38.0 for j in later)
    assert any(d["action"] == "sla" and "forced in" in d["message"] for d in decisions_of(with_sla, "big"))
    assert all(j["phase"] == "Completed" for j in with_sla["jobs"])


# ---------------------------------------------------------------- the callbacks it registers
def _sla_pg(name: str, creation: float, waiting: str | None = None):
    pg = make_pg(name, 1, creation=creation)
    if waiting is not None:
        pg.metadata.annotations[SLA_WAITING_TIME_KEY] = waiting
    return pg


def _sla_session(pgs, now: float = 0.0, default: str | None = None) -> Session:
    args = f"    arguments: {{sla-waiting-time: {default}}}\n" if default else ""
    cache = make_cache(
        [make_node("n1", 8, "16Gi")], pgs=pgs, pods=[make_pod(f"{pg.metadata.name}-0", pg.metadata.name) for pg in pgs]
    )
    ssn = Session(cache, conf_of(only("sla") + args), now=now)
    ssn.open()
    return ssn


def test_sla_orders_jobs_with_a_deadline_first_earliest_deadline_first():
    # deadlines: b 10 + 20 = 30, c 15 + 5 = 20; a has no SLA and goes after both
    ssn = _sla_session([_sla_pg("a", 0), _sla_pg("b", 10, "20s"), _sla_pg("c", 15, "5s")])
    a, b, c = (ssn.jobs[f"default/{n}"] for n in "abc")
    order = fn(ssn, "JobOrder", "sla")
    assert order(c, b) == -1 and order(b, c) == 1
    assert order(b, a) == -1 and order(a, b) == 1
    assert order(a, a) == 0 and order(b, b) == 0
    assert sorted([a, b, c], key=ssn.job_key)[:2] == [c, b]


def test_sla_permits_admission_and_pipelining_only_once_the_waiting_time_is_over():
    pgs = [_sla_pg("sla", 10, "30s"), _sla_pg("plain", 0)]
    before = _sla_session(pgs, now=25)
    job = before.jobs["default/sla"]
    assert fn(before, "JobEnqueueable", "sla")(job) == ABSTAIN
    assert fn(before, "JobPipelined", "sla")(job) == ABSTAIN
    assert 40 in before.cache.decisions.wakeups  # a cycle at the deadline, even if nothing else changes
    assert fn(before, "JobEnqueueable", "sla")(before.jobs["default/plain"]) == ABSTAIN  # no SLA: no say

    after = _sla_session(pgs, now=41)
    job = after.jobs["default/sla"]
    assert fn(after, "JobEnqueueable", "sla")(job) == PERMIT
    assert fn(after, "JobPipelined", "sla")(job) == PERMIT
    assert ("default/sla", "sla", "waited 31s, over its SLA waiting time 30s: forced in") in after.log


def test_sla_waiting_time_argument_is_the_default_an_annotation_overrides():
    pgs = [_sla_pg("own", 0, "50s"), _sla_pg("bad", 0, "soon"), _sla_pg("none", 0)]
    ssn = _sla_session(pgs, now=20, default="10s")
    permit = fn(ssn, "JobEnqueueable", "sla")
    assert permit(ssn.jobs["default/none"]) == PERMIT  # the argument's 10 s are over
    assert permit(ssn.jobs["default/bad"]) == PERMIT  # an annotation that is no duration: the argument's
    assert permit(ssn.jobs["default/own"]) == ABSTAIN  # its own 50 s are not
