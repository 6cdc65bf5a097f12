"""Queues and fairness (issue 4): preemption, reclaim, guarantee, queue states, explanations (the
capacity and sla plugins' scenarios are in plugins/test_capacity.py and plugins/test_sla.py).

Every scenario runs the simulator with preempt and reclaim enabled through a
``volcano-scheduler.conf`` ConfigMap and asserts the outcome exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import node_group, simulate
from queue_scenarios import (
    ACTIONS,
    PRIORITIES,
    conf,
    decisions_of,
    evicted,
    job,
    job_of,
    last_queues,
    priority_class,
    queue,
    stuck_reason,
)

# Preemption inside a full queue: the preemptor must first be admitted. With the default overcommit
# factor 1.2 a job larger than 20% of a full cluster stays Pending in enqueue — as in Volcano, where
# preempt skips Pending PodGroups (tested below) — so these scenarios raise the factor.
PREEMPT_CONF = conf(overcommit_factor=10)


def command(name: str, action: str, target: str, at: float) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"name": name, "annotations": {"sim.lavaflow.io/submit-at": str(at)}},
                "action": action,
                "target": {"kind": "Queue", "name": target},
            }
        )
        + "\n"
    )


def pods_of(result: dict, job_name: str) -> list[dict]:
    return [p for p in result["pods"] if p["job"] == job_name]


def running(result: dict, job_name: str) -> int:
    return sum(1 for p in pods_of(result, job_name) if p["phase"] == "Running")


def condition(result: dict, name: str) -> dict:
    pg = next(g for g in result["podGroups"] if g["name"].startswith(name + "-"))
    return next(c for c in pg["conditions"] if c["type"] == "Unschedulable")


def queue_state(result: dict, name: str) -> str:
    return next(q["state"] for q in result["queues"] if q["name"] == name)


def assert_min_available_kept(result: dict, job_name: str, min_available: int) -> None:
    """At every instant, the job has at least minAvailable pods running (evictions never break its gang)."""
    pods = [p for p in pods_of(result, job_name) if p["startTime"] is not None]
    times = sorted({p["startTime"] for p in pods} | {p["finishTime"] for p in pods if p["finishTime"] is not None})
    first = min(p["startTime"] for p in pods)
    for t in times:
        if t < first:
            continue
        alive = sum(1 for p in pods if p["startTime"] <= t and (p["finishTime"] is None or p["finishTime"] > t))
        assert alive >= min_available, (job_name, t, alive)


# ---------------------------------------------------------------- preempt
def test_enough_idle_capacity_means_no_preemption():
    text = (
        PREEMPT_CONF
        + PRIORITIES
        + node_group(count=2, cpu="4")
        + job("low", 4, min_available=1, prio="low")
        + job("high", 3, prio="high", at=5)
    )
    r = simulate(text, until=30)
    assert evicted(r) == []
    assert not any(p["phase"] == "Deleted" for p in r["pods"])
    assert job_of(r, "high")["startTime"] == 6.0
    assert running(r, "low") == 4 and running(r, "high") == 3
    assert not any(d["action"] in ("preempt", "reclaim", "evicted") for v in r["decisions"].values() for d in v)


def test_starving_high_priority_job_preempts_exactly_enough():
    text = (
        PREEMPT_CONF
        + PRIORITIES
        + node_group(count=2, cpu="4")
        + job("low", 8, min_available=2, prio="low")
        + job("high", 3, prio="high", at=5)
    )
    r = simulate(text, until=30)
    # Exactly the three cpus the gang of three needs, all from the low-priority job.
    assert evicted(r) == ["low-t-0", "low-t-2", "low-t-4"]
    assert all(p["finishTime"] == 6.0 for p in r["pods"] if p["phase"] == "Deleted")
    assert job_of(r, "high")["startTime"] == 7.0 and running(r, "high") == 3
    assert running(r, "low") == 5
    assert_min_available_kept(r, "low", 2)
    assert [d["action"] for d in decisions_of(r, "high")] == ["enqueue", "allocate", "preempt", "allocate"]
    assert decisions_of(r, "high")[2]["message"] == "preempted lower-priority tasks; waiting for them to terminate"
    assert sorted(d["message"] for d in decisions_of(r, "low") if d["action"] == "evicted") == [
        "low-t-0 evicted: preempted by default/high-t-0",
        "low-t-2 evicted: preempted by default/high-t-1",
        "low-t-4 evicted: preempted by default/high-t-2",
    ]


def test_victims_come_only_from_pods_beyond_min_available():
    # "lowest" is the cheaper victim by priority, but its gang (4 of 4) has nothing beyond minAvailable;
    # "lower" can give up to 3 of its 4 pods.
    text = (
        PREEMPT_CONF
        + priority_class("lowest", 1)
        + PRIORITIES
        + node_group(count=1, cpu="8")
        + job("gang", 4, min_available=4, prio="lowest")
        + job("elastic", 4, min_available=1, prio="low")
        + job("high", 3, prio="high", at=5)
    )
    r = simulate(text, until=30)
    assert [p for p in evicted(r) if p.startswith("gang")] == []
    assert len(evicted(r)) == 3 and all(p.startswith("elastic-") for p in evicted(r))
    assert running(r, "gang") == 4 and running(r, "elastic") == 1 and running(r, "high") == 3
    assert_min_available_kept(r, "gang", 4)
    assert_min_available_kept(r, "elastic", 1)


def test_nothing_evicted_when_the_preemptor_still_could_not_run():
    # Both 3-cpu pods of the gang must go to n-0 (4 cpus): evicting three 1-cpu pods makes room for one
    # of them only, so the statement is discarded and nothing is evicted, cycle after cycle.
    text = (
        PREEMPT_CONF
        + PRIORITIES
        + node_group(count=2, cpu="4")
        + job("low", 8, min_available=2, prio="low")
        + job("high", 2, cpu="3", prio="high", at=5, node_selector={"kubernetes.io/hostname": "n-0"})
    )
    r = simulate(text, until=60)
    assert evicted(r) == []
    assert running(r, "low") == 8 and running(r, "high") == 0
    assert not any(d["action"] in ("preempt", "evicted") for v in r["decisions"].values() for d in v)
    assert job_of(r, "high")["startTime"] is None


def test_gang_protected_victims_are_not_enough_so_nothing_is_evicted():
    # All preemptable resources (1 cpu beyond low's minAvailable of 7) are less than the 2 cpus needed.
    # Without the enqueue action the gang is not held back by admission.
    text = (
        conf(overcommit_factor=10).replace(ACTIONS, "allocate, backfill, reclaim, preempt")
        + PRIORITIES
        + node_group(count=1, cpu="8")
        + job("low", 8, min_available=7, prio="low")
        + job("high", 2, prio="high", at=5)
    )
    r = simulate(text, until=60)
    assert evicted(r) == []
    assert running(r, "low") == 8 and running(r, "high") == 0


def test_kube_system_pods_are_never_preempted():
    text = (
        PREEMPT_CONF
        + PRIORITIES
        + node_group(count=1, cpu="4")
        + job("sys", 4, min_available=1, prio="low", namespace="kube-system")
        + job("high", 2, prio="high", at=5)
    )
    r = simulate(text, until=30)
    assert evicted(r) == []
    assert running(r, "sys") == 4 and running(r, "high") == 0


def test_high_priority_job_is_admitted_into_a_full_queue_when_it_can_preempt():
    # Default overcommit factor 1.2: 8 of 8 cpus used leaves 1.6 cpus to admit, so Volcano keeps the
    # 3-cpu gang Pending and its preempt action never sees it ("preemption doesn't work"). lavaflow
    # admits it because lower-priority work in its queue can be preempted, then preempts exactly 3.
    text = (
        conf()
        + PRIORITIES
        + node_group(count=2, cpu="4")
        + job("low", 8, min_available=2, prio="low")
        + job("high", 3, prio="high", at=5)
    )
    r = simulate(text, until=30)
    assert len(evicted(r)) == 3 and all(p.startswith("low-") for p in evicted(r))
    assert running(r, "high") == 3
    actions = [d["action"] for d in decisions_of(r, "high")]
    assert "preempt" in actions and actions.index("enqueue") < actions.index("preempt")


def test_without_preempt_a_full_queue_still_refuses_admission():
    # Same cluster, preempt not configured: nothing can make room, so the job waits with the reason.
    text = (
        conf(actions="enqueue, allocate, backfill")
        + PRIORITIES
        + node_group(count=2, cpu="4")
        + job("low", 8, min_available=2, prio="low")
        + job("high", 3, prio="high", at=5)
    )
    r = simulate(text, until=30)
    assert evicted(r) == []
    reason = "minResources (cpu 3) exceed what the cluster can admit in cpu (overcommit factor 1.2: cpu 1600m left)"
    assert stuck_reason(r, "high") == f"3/3 tasks in gang unschedulable: {reason}"


# ---------------------------------------------------------------- reclaim
def test_reclaim_takes_only_from_queues_above_deserved():
    # q1 holds 14 of 16 cpus, q4 its 2; q2 arrives wanting 2: deserved becomes q1 12, q2 2, q4 2.
    text = (
        conf()
        + node_group(count=4, cpu="4")
        + queue("q1")
        + queue("q2")
        + queue("q4")
        + job("a", 14, min_available=1, queue="q1")
        + job("d", 2, queue="q4")
        + job("b", 2, queue="q2", at=5)
    )
    r = simulate(text, until=30)
    assert len(evicted(r)) == 2 and all(p.startswith("a-") for p in evicted(r))
    assert running(r, "d") == 2 and running(r, "b") == 2 and running(r, "a") == 12
    assert job_of(r, "b")["startTime"] == 7.0
    assert last_queues(r) == {"q1": 12.0, "q2": 2.0, "q4": 2.0}
    assert {q: v["cpu"] for q, v in r["timeline"][-1]["deserved"].items()} == {"q1": 12.0, "q2": 2.0, "q4": 2.0}
    msgs = [d["message"] for d in decisions_of(r, "b") if d["action"] == "reclaim"]
    assert msgs == ["reclaimed resources for queue q2; waiting for victims to terminate"]


@pytest.mark.parametrize("reclaimable", [True, False])
def test_reclaim_never_takes_from_a_reclaimable_false_queue(reclaimable):
    text = (
        conf()
        + node_group(count=2, cpu="4")
        + queue("q1", reclaimable=reclaimable)
        + queue("q2")
        + job("a", 8, min_available=1, queue="q1", duration=40)
        + job("b", 2, queue="q2", at=5)
    )
    r = simulate(text, until=100)
    if reclaimable:
        assert len(evicted(r)) == 2 and job_of(r, "b")["startTime"] == 7.0
    else:
        assert evicted(r) == []
        assert job_of(r, "b")["startTime"] == 41.0  # only once q1's pods finish
        assert not any(d["action"] == "reclaim" for d in decisions_of(r, "b"))


def test_guarantee_reserves_capacity_against_other_queues():
    # qb has 10x the weight and asks first, but qa's guarantee of 6 cpus is kept for it.
    text = (
        conf()
        + node_group(count=2, cpu="4")
        + queue("qa", 1, guarantee={"resource": {"cpu": "6"}})
        + queue("qb", 10)
        + job("b", 8, min_available=1, queue="qb")
        + job("a", 8, min_available=1, queue="qa", at=10)
    )
    r = simulate(text, until=30)
    assert evicted(r) == []
    at = {p["time"]: p for p in r["timeline"]}
    assert at[1.0]["queues"] == {"qb": {"cpu": 2.0}}
    assert job_of(r, "a")["startTime"] == 11.0
    assert last_queues(r) == {"qa": 6.0, "qb": 2.0}
    assert {q: v["cpu"] for q, v in r["timeline"][-1]["deserved"].items()} == {"qa": 6.0, "qb": 2.0}
    assert stuck_reason(r, "b") == "queue qb is overused (allocation has reached its deserved share)"
    assert stuck_reason(r, "a") == "queue qa is overused (allocation has reached its deserved share)"


# ---------------------------------------------------------------- queue states
def closing_text() -> str:
    return (
        conf()
        + node_group(count=1, cpu="4")
        + queue("q")
        + queue("p")
        + queue("c", parent="p")
        + job("run", 2, queue="q", duration=20)
        + command("close", "CloseQueue", "q", 5)
        + job("late", 1, queue="q", at=8)
        + job("cj", 1, queue="c", duration=30)
        + command("closep", "CloseQueue", "p", 6)
    )


def test_closing_a_queue_with_running_jobs_goes_closing_then_closed():
    states = {until: simulate(closing_text(), until=until) for until in (4, 10, 25)}
    assert queue_state(states[4], "q") == "Open"
    assert queue_state(states[10], "q") == "Closing"  # run's PodGroup still exists
    assert queue_state(states[25], "q") == "Closed"  # run finished at 21
    assert job_of(states[25], "run")["phase"] == "Completed" and job_of(states[25], "run")["finishTime"] == 21.0
    # A Job submitted to the closing queue is refused.
    assert [(x["kind"], x["name"], x["time"]) for x in states[25]["rejected"]] == [("Job", "late", 8.0)]
    assert "Closing" in states[25]["rejected"][0]["reason"]
    assert all(j["name"] != "late" for j in states[25]["jobs"])


def test_a_closed_parent_closes_its_children():
    r10 = simulate(closing_text(), until=10)
    r40 = simulate(closing_text(), until=40)
    assert queue_state(r10, "p") == "Closed"
    assert queue_state(r10, "c") == "Closing"  # its job is still running
    assert running(r10, "cj") == 1
    assert queue_state(r40, "c") == "Closed"
    assert job_of(r40, "cj")["phase"] == "Completed"


def test_hierarchical_queue_via_spec_parent():
    r = simulate(closing_text(), until=4)
    assert {q["name"]: q["parent"] for q in r["queues"]}["c"] == "p"
    assert {q["name"]: q["allocated"].get("cpu") for q in r["queues"] if q["name"] in ("c", "p")} == {
        "c": "1",
        "p": "1",
    }


# ---------------------------------------------------------------- why is my job pending
def test_reason_predicates_name_the_predicate_and_node_counts():
    r = simulate(conf() + node_group(count=2, cpu="4") + job("sel", 1, node_selector={"disk": "ssd"}), until=10)
    msg = (
        "1/1 tasks in gang unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )
    assert stuck_reason(r, "sel") == msg
    assert condition(r, "sel") == {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": msg,
    }


def test_reason_queue_overused():
    text = (
        conf()
        + node_group(count=2, cpu="4")
        + queue("q")
        + job("fill", 8, min_available=1, queue="q")
        + job("more", 1, queue="q", at=3)
    )
    r = simulate(text, until=10)
    msg = "1/1 tasks in gang unschedulable: queue q is overused (allocation has reached its deserved share)"
    assert stuck_reason(r, "more") == msg
    assert condition(r, "more")["message"] == msg


def test_reason_queue_at_capability():
    text = (
        conf("capacity")
        + node_group(count=2, cpu="4")
        + queue("q", capability={"cpu": "2"})
        + job("capd", 4, min_available=1, queue="q")
        + job("capd2", 1, queue="q", at=3)
    )
    r = simulate(text, until=10)
    msg = "queue q is at its capability (cpu 2, memory 8Gi; allocated cpu 2)"
    assert stuck_reason(r, "capd2") == f"1/1 tasks in gang unschedulable: {msg}"
    assert condition(r, "capd2")["message"] == f"1/1 tasks in gang unschedulable: {msg}"
    assert stuck_reason(r, "capd") == msg
    assert running(r, "capd") == 2


def test_reason_queue_closed():
    text = (
        conf()
        + node_group(count=1, cpu="4")
        + queue("q")
        + job("run", 2, queue="q", duration=100)
        + job("wait", 4, queue="q", at=2)
        + command("close", "CloseQueue", "q", 5)
    )
    r = simulate(text, until=10)
    msg = "4/4 tasks in gang unschedulable: queue q is closing; no new jobs are admitted"
    assert stuck_reason(r, "wait") == msg
    assert condition(r, "wait")["message"] == msg


def run_cli(tmp_path, text: str, *args: str) -> str:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    out = subprocess.run(
        [sys.executable, "-c", "from lavaflow.cli import main; main()", "simulate", str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return " ".join(out.stdout.split())  # undo the table's line wrapping


def test_explain_shows_waiting_for_victims(tmp_path):
    text = (
        PREEMPT_CONF
        + PRIORITIES
        + node_group(count=2, cpu="4")
        + job("low", 8, min_available=2, prio="low")
        + job("high", 3, prio="high", at=5)
    )
    out = run_cli(tmp_path, text, "--until", "30", "--explain", "default/high")
    assert "why default/high did what it did" in out
    assert "preempt │ preempted lower-priority tasks; waiting for them to terminate" in out
    out_low = run_cli(tmp_path, text, "--until", "30", "--explain", "default/low")
    assert "low-t-0 evicted: preempted by default/high-t-0" in out_low
    assert "low-t-0 deleted (Evicted)" in out_low


def test_explain_shows_reclaim_and_pending_reasons(tmp_path):
    text = (
        conf()
        + node_group(count=2, cpu="4")
        + queue("q1")
        + queue("q2")
        + job("a", 8, min_available=1, queue="q1")
        + job("b", 2, queue="q2", at=5)
    )
    out = run_cli(tmp_path, text, "--until", "30", "--explain", "default/b")
    assert "reclaim │ reclaimed resources for queue q2; waiting for victims to terminate" in out
    text = conf() + node_group(count=2, cpu="4") + job("sel", 1, node_selector={"disk": "ssd"})
    out = run_cli(tmp_path, text, "--until", "10", "--explain", "default/sel")
    assert (
        "still waiting: 1/1 tasks in gang unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
        in out
    )
    text = (
        conf()
        + node_group(count=1, cpu="4")
        + queue("q")
        + job("run", 2, queue="q", duration=100)
        + job("wait", 4, queue="q", at=2)
        + command("close", "CloseQueue", "q", 5)
    )
    out = run_cli(tmp_path, text, "--until", "10", "--explain", "default/wait")
    assert "queue q is closing; no new jobs are admitted" in out
    text = (
        conf()
        + node_group(count=2, cpu="4")
        + queue("q")
        + job("fill", 8, min_available=1, queue="q")
        + job("more", 1, queue="q", at=3)
    )
    out = run_cli(tmp_path, text, "--until", "10", "--explain", "default/more")
    assert "queue q is overused" in out
