"""The sla plugin: a job's sla-waiting-time forces it in ahead of others once it has waited that long,
through the simulator."""

from __future__ import annotations

from conftest import node_group, simulate
from queue_scenarios import conf, decisions_of, job, job_of


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
