"""Job lifecycle (issue 3): policies, retries, updates, Commands, plugins, JobFlow, GC and node faults.

Each test builds a cluster and a workload in YAML, simulates it and asserts the
exact phase sequence (``jobs[].phaseHistory``) and pod counts. Times are the
simulator's: pods bind on the scheduler tick after they are created (1 s
period), so a job submitted at 0 runs from 1 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, simulate
from lavaflow.api.loader import InputError, load_text
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

FINAL = ("Completed", "Failed", "Terminated", "Aborted")
CLI = [sys.executable, "-c", "from lavaflow.cli import main; main()"]
SUBMIT_AT = "sim.lavaflow.io/submit-at"


# ---------------------------------------------------------------- builders
def vjob(
    name: str,
    tasks: list[dict],
    min_available: int | None = None,
    policies: list[dict] | None = None,
    max_retry: int | None = None,
    min_success: int | None = None,
    plugins: dict | None = None,
    ttl: int | None = None,
    submit_at: str | None = None,
    queue: str | None = None,
) -> str:
    """A batch.volcano.sh Job document; each task dict takes name, replicas, duration, exit, delete_at,
    requests, priority_class, and the TaskSpec keys minAvailable, policies, maxRetry, dependsOn."""
    spec: dict = {"schedulerName": "volcano", "tasks": []}
    for key, value in (
        ("minAvailable", min_available),
        ("policies", policies),
        ("maxRetry", max_retry),
        ("minSuccess", min_success),
        ("plugins", plugins),
        ("ttlSecondsAfterFinished", ttl),
        ("queue", queue),
    ):
        if value is not None:
            spec[key] = value
    for t in tasks:
        ann = {}
        for k, a in (
            ("duration", "sim.lavaflow.io/duration"),
            ("exit", "sim.lavaflow.io/exit-code"),
            ("delete_at", "sim.lavaflow.io/delete-at"),
        ):
            if k in t:
                ann[a] = str(t[k])
        pod_spec: dict = {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": t.get("requests", {"cpu": "1"})}}
            ],
            "restartPolicy": "Never",
        }
        if "priority_class" in t:
            pod_spec["priorityClassName"] = t["priority_class"]
        task = {
            "name": t.get("name", "t"),
            "replicas": t.get("replicas", 1),
            "template": {"metadata": {"annotations": ann}, "spec": pod_spec},
        }
        for k in ("minAvailable", "policies", "maxRetry", "dependsOn"):
            if k in t:
                task[k] = t[k]
        spec["tasks"].append(task)
    meta: dict = {"name": name}
    if submit_at is not None:
        meta["annotations"] = {SUBMIT_AT: submit_at}
    return (
        "---\n"
        + json.dumps({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": spec})
        + "\n"
    )


def nodes(name: str = "n", count: int = 1, cpu: str = "4", **annotations: str) -> str:
    """A NodeGroup whose annotations (fail-at, recover-at) are copied to its nodes."""
    doc = {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"count": count, "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }
    return "---\n" + json.dumps(doc) + "\n"


def command(name: str, action: str, kind: str, target: str, at: str) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"name": name, "annotations": {SUBMIT_AT: at}},
                "action": action,
                "target": {"kind": kind, "name": target},
            }
        )
        + "\n"
    )


def queue(name: str) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1},
            }
        )
        + "\n"
    )


def priority_class(name: str, value: int) -> str:
    return (
        "---\n"
        + json.dumps(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        )
        + "\n"
    )


def run_sim(text: str, until: float | None = 300, watch: dict | None = None) -> tuple[Simulation, dict]:
    """Simulate keeping the Simulation (its store holds the live objects at the end)."""
    sim = Simulation(prepare(load_text(text)), until=until)
    for kind, fn in (watch or {}).items():
        sim.store.watch(kind, fn)
    return sim, sim.run()


def job_of(result: dict, name: str = "j") -> dict:
    return next(j for j in result["jobs"] if j["name"] == name)


def phases(result: dict, name: str = "j") -> list[tuple[str, float]]:
    return [(h["phase"], h["time"]) for h in job_of(result, name)["phaseHistory"]]


def phase_names(result: dict, name: str = "j") -> list[str]:
    return [h["phase"] for h in job_of(result, name)["phaseHistory"]]


def records(result: dict, job: str = "j") -> list[dict]:
    return [p for p in result["pods"] if p["job"] == job]


def live_pods(sim: Simulation, job: str = "j") -> dict[str, str]:
    """Pods still in the store at the end: name -> phase."""
    return {
        p.name: p.status.phase for p in sim.store.list("Pod") if p.metadata.labels.get("volcano.sh/job-name") == job
    }


# ------------------------------------------------------- §6 scenario 19: policies
# Volcano's e2e (jobseq/job_error_handling.go): 2 long-running pods and 2 pods that fail after 10 s.
CLUSTER = nodes(count=2, cpu="4")
RESTART_CYCLE = [("Restarting", 11.0), ("Pending", 11.0), ("Running", 12.0)]


def error_job(policies: list[dict] | None, bad_extra: dict | None = None, **kw) -> str:
    bad = {"name": "bad", "replicas": 2, "duration": "10s", "exit": 3}
    bad.update(bad_extra or {})
    return CLUSTER + vjob(
        "j", [{"name": "ok", "replicas": 2, "duration": "inf"}, bad], min_available=4, policies=policies, **kw
    )


# RestartJob on every failure: restarted twice, the third restart exceeds maxRetry (default 3) → Failed.
RESTARTED_TO_FAILURE = (
    [("Pending", 0.0), ("Running", 1.0)]
    + RESTART_CYCLE
    + [("Restarting", 22.0), ("Pending", 22.0), ("Running", 23.0)]
    + [("Restarting", 33.0), ("Failed", 33.0)]
)


@pytest.mark.parametrize(
    "policies,bad_extra",
    [
        pytest.param([{"event": "PodFailed", "action": "RestartJob"}], None, id="PodFailed-RestartJob"),
        pytest.param([{"exitCode": 3, "action": "RestartJob"}], None, id="exitCode3-RestartJob"),
        pytest.param([{"event": "*", "action": "RestartJob"}], None, id="star-RestartJob"),
        pytest.param(
            [{"event": "PodFailed", "action": "AbortJob"}],
            {"policies": [{"event": "PodFailed", "action": "RestartJob"}]},
            id="task-level-overrides-job-level",
        ),
    ],
)
def test_restart_job_policies(policies, bad_extra):
    sim, r = run_sim(error_job(policies, bad_extra), until=200)
    assert phases(r) == RESTARTED_TO_FAILURE
    j = job_of(r)
    assert (j["phase"], j["retryCount"], j["version"]) == ("Failed", 3, 3)
    assert len(records(r)) == 12  # three incarnations of 4 pods
    # Last retry: the failed pods are retained, the running ones deleted.
    assert live_pods(sim) == {"j-bad-0": "Failed"}  # j-bad-1 was still Running when j-bad-0's failure killed it


def test_exit_code_policy_ignores_other_codes():
    r = simulate(error_job([{"exitCode": 4, "action": "RestartJob"}]), until=200)
    # exit code 3 matches no policy: SyncJob; the failing pods finish, the others run on.
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0)]
    assert job_of(r)["retryCount"] == 0


@pytest.mark.parametrize("action,via", [("TerminateJob", "Terminating"), ("AbortJob", "Aborting")])
def test_pod_failed_kills_job(action, via):
    sim, r = run_sim(error_job([{"event": "PodFailed", "action": action}]), until=200)
    final = {"Terminating": "Terminated", "Aborting": "Aborted"}[via]
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), (via, 11.0), (final, 11.0)]
    assert job_of(r)["retryCount"] == 0
    assert len(records(r)) == 4
    # Soft kill: the finished (failed) pod is kept, every live pod deleted.
    assert live_pods(sim) == {"j-bad-0": "Failed"}
    assert r["stuck"] == []


def test_pod_evicted_restart_job():
    # delete-at on the template evicts the two "ev" pods at 10 s; the replacements, created at 10 s
    # replacement pods are created after it, at the 11 s tick, and are not evicted themselves).
    text = CLUSTER + vjob(
        "j",
        [
            {"name": "ok", "replicas": 2, "duration": "inf"},
            {"name": "ev", "replicas": 2, "duration": "inf", "delete_at": "10s"},
        ],
        min_available=4,
        policies=[{"event": "PodEvicted", "action": "RestartJob"}],
    )
    sim, r = run_sim(text, until=100)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Restarting", 10.0), ("Pending", 10.0), ("Running", 11.0)]
    j = job_of(r)
    # j-ev-0's eviction restarts the job, whose full kill deletes j-ev-1 before its own eviction: one restart.
    assert (j["retryCount"], j["version"]) == (1, 1)
    evicted = [p for p in records(r) if p["reason"] == "Evicted"]
    assert [p["name"] for p in evicted] == ["j-ev-0"]
    assert len(records(r)) == 8
    assert live_pods(sim) == {f"j-{t}-{i}": "Running" for t in ("ok", "ev") for i in (0, 1)}


def test_task_completed_complete_job():
    text = CLUSTER + vjob(
        "j",
        [{"name": "ok", "replicas": 2, "duration": "inf"}, {"name": "short", "replicas": 2, "duration": "5s"}],
        min_available=4,
        policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
    )
    sim, r = run_sim(text, until=100)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Completing", 6.0), ("Completed", 6.0)]
    assert live_pods(sim) == {"j-short-0": "Succeeded", "j-short-1": "Succeeded"}
    assert r["stuck"] == []


def test_task_failed_after_task_max_retry_terminates():
    # The failing task is restarted (RestartTask) on each failure; after its maxRetry (3) restarts the
    # next failure is TaskFailed → TerminateJob. Job maxRetry 10 so the job's own limit is not hit first.
    # (lavaflow counts a task's restarts by RestartTask/RestartPod actions; Volcano counts container
    # restarts — with restartPolicy Never these coincide.)
    text = error_job(
        [{"event": "TaskFailed", "action": "TerminateJob"}],
        {"maxRetry": 3, "policies": [{"event": "PodFailed", "action": "RestartTask"}]},
        max_retry=10,
    )
    sim, r = run_sim(text, until=200)
    assert phases(r) == [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Restarting", 11.0),
        ("Pending", 11.0),
        ("Running", 11.0),
        ("Restarting", 21.0),
        ("Pending", 21.0),
        ("Running", 21.0),
        ("Restarting", 31.0),
        ("Pending", 31.0),
        ("Running", 31.0),
        ("Terminating", 41.0),
        ("Terminated", 41.0),
    ]
    assert job_of(r)["retryCount"] == 3
    # RestartTask keeps the other task's pods: only the bad task's 2 pods are recreated each time.
    assert len(records(r)) == 2 + 2 * 4
    assert sum(1 for p in records(r) if p["task"] == "ok") == 2


def test_job_level_max_retry_wins_over_task_max_retry():
    # Same job with the default job maxRetry (3): the job fails before the task's retries run out.
    text = error_job(
        [{"event": "TaskFailed", "action": "TerminateJob"}],
        {"maxRetry": 3, "policies": [{"event": "PodFailed", "action": "RestartTask"}]},
    )
    r = simulate(text, until=200)
    assert phase_names(r)[-2:] == ["Restarting", "Failed"]
    assert job_of(r)["retryCount"] == 3


# --------------------------------------------------- scenario 19: Unknown via node failure
FAILING_PAIR = nodes("a", 1, "2", **{"sim.lavaflow.io/fail-at": "10s", "sim.lavaflow.io/recover-at": "30s"}) + nodes(
    "b", 1, "2"
)


def test_unknown_restart_job_on_broken_gang():
    # rep = min = 4 on two 2-CPU nodes; node a-0 fails at 10 s: its 2 pods are evicted, replacements
    # cannot be placed, the gang breaks (PodGroup Unknown) → RestartJob; a-0 recovers at 30 s → Running.
    text = FAILING_PAIR + vjob(
        "j",
        [{"name": "t", "replicas": 4, "duration": "inf"}],
        min_available=4,
        policies=[{"event": "Unknown", "action": "RestartJob"}],
    )
    sim, r = run_sim(text, until=100)
    assert phases(r) == [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Pending", 10.0),
        ("Restarting", 10.0),
        ("Pending", 10.0),
        ("Running", 30.0),
    ]
    assert job_of(r)["retryCount"] == 1
    assert r["nodeEvents"] == [
        {"node": "a-0", "time": 10.0, "event": "NotReady"},
        {"node": "a-0", "time": 30.0, "event": "Ready"},
    ]
    assert sorted(p["name"] for p in records(r) if p["reason"] == "NodeLost") == ["j-t-0", "j-t-1"]
    assert live_pods(sim) == {f"j-t-{i}": "Running" for i in range(4)}


def test_unknown_abort_job_on_broken_gang():
    text = FAILING_PAIR + vjob(
        "j",
        [{"name": "t", "replicas": 4, "duration": "inf"}],
        min_available=4,
        policies=[{"event": "Unknown", "action": "AbortJob"}],
    )
    sim, r = run_sim(text, until=100)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Pending", 10.0), ("Aborting", 10.0), ("Aborted", 10.0)]
    assert live_pods(sim) == {}
    assert r["stuck"] == []


# ------------------------------------------------------------ scenario 20: minSuccess
def test_min_success_completes_and_kills_long_pods():
    text = CLUSTER + vjob(
        "j",
        [
            {"name": "short", "replicas": 3, "duration": "3s", "minAvailable": 1},
            {"name": "log", "replicas": 2, "duration": "inf", "minAvailable": 1},
        ],
        min_available=2,
        min_success=2,
    )
    sim, r = run_sim(text, until=100)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Completing", 4.0), ("Completed", 4.0)]
    # Processing the first success of the three (all at 4 s) finds 2 succeeded... the third short pod is
    # deleted with the long-running ones (what the code does: events are handled one pod at a time).
    assert live_pods(sim) == {"j-short-0": "Succeeded", "j-short-1": "Succeeded"}
    assert r["stuck"] == []


def test_min_success_not_reached_fails():
    text = CLUSTER + vjob(
        "j",
        [{"name": "t", "replicas": 3, "duration": "3s", "exit": 1, "minAvailable": 1}],
        min_available=1,
        min_success=2,
    )
    r = simulate(text, until=100)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Failed", 4.0)]


# ------------------------------------------------------------ scenario 21: maxRetry
RETRY_POLICIES = [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}]


def test_max_retry_two_fails_retaining_failed_pod():
    text = CLUSTER + vjob(
        "j",
        [
            {"name": "run", "replicas": 1, "duration": "inf"},
            {"name": "bad", "replicas": 1, "duration": "5s", "exit": 1},
        ],
        min_available=2,
        max_retry=2,
        policies=RETRY_POLICIES,
    )
    sim, r = run_sim(text, until=200)
    assert phases(r) == [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Restarting", 6.0),
        ("Pending", 6.0),
        ("Running", 7.0),
        ("Restarting", 12.0),
        ("Failed", 12.0),
    ]
    j = job_of(r)
    assert (j["phase"], j["retryCount"]) == ("Failed", 2)
    # The last retry (retryCount 1 ≥ maxRetry−1): the failed pod is retained, the running one deleted.
    assert live_pods(sim) == {"j-bad-0": "Failed"}
    assert len(records(r)) == 4


def test_max_retry_two_first_retry_deletes_failed_pod():
    # With maxRetry 3 the first restart is not the last one: the failed pod is deleted with the rest.
    text = CLUSTER + vjob(
        "j",
        [
            {"name": "run", "replicas": 1, "duration": "inf"},
            {"name": "bad", "replicas": 1, "duration": "5s", "exit": 1},
        ],
        min_available=2,
        max_retry=3,
        policies=RETRY_POLICIES,
    )
    sim, r = run_sim(text, until=9)
    assert phase_names(r) == ["Pending", "Running", "Restarting", "Pending", "Running"]
    assert live_pods(sim) == {"j-bad-0": "Running", "j-run-0": "Running"}


def test_max_retry_succeeding_job_completes_without_retries():
    text = CLUSTER + vjob(
        "j",
        [{"name": "run", "replicas": 1, "duration": "20s"}, {"name": "good", "replicas": 1, "duration": "5s"}],
        min_available=2,
        max_retry=2,
        policies=RETRY_POLICIES,
    )
    sim, r = run_sim(text, until=200)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Completed", 21.0)]
    j = job_of(r)
    assert (j["retryCount"], j["version"]) == (0, 0)
    assert live_pods(sim) == {"j-good-0": "Succeeded", "j-run-0": "Succeeded"}


# ------------------------------------------------------------ scenario 22: scale up/down
def scaled(steps: list[tuple[str | None, int]]) -> str:
    text = nodes(count=2, cpu="4")
    for at, n in steps:
        text += vjob(
            "j",
            [{"name": "t", "replicas": n, "duration": "inf", "requests": {"cpu": "500m"}}],
            min_available=n,
            plugins={"svc": []},
            submit_at=at,
        )
    return text


def hosts(n: int) -> dict[str, str]:
    names = [f"j-t-{i}.j" for i in range(n)]
    return {"t.host": "\n".join(names), "VC_T_HOSTS": ",".join(names), "VC_T_NUM": str(n)}


def test_scale_up():
    sim, r = run_sim(scaled([(None, 2), ("10s", 4)]), until=50)
    assert r["rejected"] == []
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Pending", 10.0), ("Running", 10.0)]
    assert live_pods(sim) == {f"j-t-{i}": "Running" for i in range(4)}
    assert sim.store.get("ConfigMap", "default/j-svc").data == hosts(4)
    pg = next(p for p in sim.store.list("PodGroup") if p.name.startswith("j-"))
    assert pg.spec.min_member == 4
    assert job_of(r)["retryCount"] == 0


def test_scale_down():
    sim, r = run_sim(scaled([(None, 4), ("10s", 2)]), until=50)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0)]
    assert live_pods(sim) == {"j-t-0": "Running", "j-t-1": "Running"}
    assert sim.store.get("ConfigMap", "default/j-svc").data == hosts(2)
    deleted = [p for p in records(r) if p["phase"] == "Deleted"]
    assert sorted((p["name"], p["finishTime"]) for p in deleted) == [("j-t-2", 10.0), ("j-t-3", 10.0)]


def test_scale_to_zero_and_back():
    sim, r = run_sim(scaled([(None, 2), ("10s", 0), ("20s", 2)]), until=50)
    assert r["rejected"] == []
    # replicas == 0 keeps the job Running (Volcano's running state); scaling back up recreates the pods.
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Pending", 20.0), ("Running", 20.0)]
    assert live_pods(sim) == {"j-t-0": "Running", "j-t-1": "Running"}
    assert sim.store.get("ConfigMap", "default/j-svc").data == hosts(2)
    assert len(records(r)) == 4


def test_update_of_forbidden_field_refused_at_load(tmp_path: Path):
    text = (
        CLUSTER
        + vjob("j", [{"name": "t", "replicas": 2, "duration": "50s"}])
        + vjob("j", [{"name": "t", "replicas": 2, "duration": "50s"}], submit_at="10s", max_retry=5)
    )
    with pytest.raises(InputError) as exc:
        prepare(load_text(text))
    assert any("spec.maxRetry" in p for p in exc.value.problems)
    f = tmp_path / "update.yaml"
    f.write_text(text, encoding="utf-8")
    out = subprocess.run([*CLI, "simulate", str(f)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "spec.maxRetry" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------ scenario 23: task priority
def test_task_priority_fills_nodes_with_higher_priority_task():
    n = 3
    text = (
        nodes(count=n, cpu="4")
        + priority_class("master-pri", 100)
        + priority_class("worker-pri", -50)
        + vjob(
            "j",
            [
                {
                    "name": "worker",
                    "replicas": n,
                    "duration": "inf",
                    "requests": {"cpu": "3"},
                    "priority_class": "worker-pri",
                },
                {
                    "name": "master",
                    "replicas": n,
                    "duration": "inf",
                    "requests": {"cpu": "3"},
                    "priority_class": "master-pri",
                },
            ],
            min_available=n,
        )
    )
    sim, r = run_sim(text, until=30)
    running = {p["name"] for p in records(r) if p["phase"] == "Running"}
    assert running == {f"j-master-{i}" for i in range(n)}
    assert sum(1 for p in records(r) if p["task"] == "worker" and p["phase"] == "Pending") == n
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0)]


# ------------------------------------------------------------ delayed actions (timeout)
def pending_job(first_duration: str, action: str) -> str:
    # One 4-CPU node, two 3-CPU pods: "b" waits until "a" finishes (minAvailable 1 admits the job).
    return nodes(count=1, cpu="4") + vjob(
        "j",
        [
            {"name": "a", "replicas": 1, "duration": first_duration, "requests": {"cpu": "3"}},
            {"name": "b", "replicas": 1, "duration": "5s", "requests": {"cpu": "3"}, "minAvailable": 0},
        ],
        min_available=1,
        policies=[{"event": "PodPending", "action": action, "timeout": "10s"}],
    )


@pytest.mark.parametrize("action", ["RestartPod", "RestartJob"])
def test_pending_timeout_cancelled_when_pod_starts_in_time(action):
    r = simulate(pending_job("5s", action), until=200)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Completed", 11.0)]
    assert job_of(r)["retryCount"] == 0
    assert len(records(r)) == 2


def test_pending_timeout_restart_pod():
    sim, r = run_sim(pending_job("30s", "RestartPod"), until=200)
    # Every 10 s the still-pending pod is restarted; the third restart exceeds maxRetry.
    assert phases(r) == [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Restarting", 10.0),
        ("Pending", 10.0),
        ("Running", 10.0),
        ("Restarting", 20.0),
        ("Pending", 20.0),
        ("Running", 20.0),
        ("Restarting", 30.0),
        ("Failed", 30.0),
    ]
    recs = records(r)
    assert [(p["name"], p["createTime"]) for p in recs if p["task"] == "b"] == [
        ("j-b-0", 0.0),
        ("j-b-0", 10.0),
        ("j-b-0", 20.0),
    ]
    assert sum(1 for p in recs if p["task"] == "a") == 1  # RestartPod leaves the other pod alone
    assert job_of(r)["version"] == 0  # no full kill
    assert live_pods(sim) == {}


def test_pending_timeout_restart_job():
    r = simulate(pending_job("30s", "RestartJob"), until=200)
    assert phases(r) == [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Restarting", 10.0),
        ("Pending", 10.0),
        ("Running", 11.0),
        ("Restarting", 20.0),
        ("Pending", 20.0),
        ("Running", 21.0),
        ("Restarting", 30.0),
        ("Failed", 30.0),
    ]
    j = job_of(r)
    assert (j["retryCount"], j["version"]) == (3, 3)
    assert len(records(r)) == 6


# ------------------------------------------------------------ Commands
def test_abort_and_resume_commands():
    text = (
        CLUSTER
        + vjob("j", [{"name": "t", "replicas": 2, "duration": "inf"}])
        + command("stop", "AbortJob", "Job", "j", "10s")
        + command("go", "ResumeJob", "Job", "j", "20s")
    )
    sim, r = run_sim(text, until=50)
    assert phases(r) == [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Aborting", 10.0),
        ("Aborted", 10.0),
        ("Restarting", 20.0),
        ("Pending", 20.0),
        ("Running", 21.0),
    ]
    assert job_of(r)["retryCount"] == 1
    assert job_of(r)["finishTime"] is None  # resumed: no longer finished
    assert live_pods(sim) == {"j-t-0": "Running", "j-t-1": "Running"}
    assert len(records(r)) == 4
    # Each Command is consumed once: none is left in the store.
    assert sim.store.list("Command") == []


def test_abort_command_alone_stays_aborted():
    text = (
        CLUSTER
        + vjob("j", [{"name": "t", "replicas": 2, "duration": "inf"}])
        + command("stop", "AbortJob", "Job", "j", "10s")
    )
    sim, r = run_sim(text, until=50)
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Aborting", 10.0), ("Aborted", 10.0)]
    assert live_pods(sim) == {}
    assert sim.store.list("Command") == []


def test_close_and_open_queue_commands():
    states: list[tuple[float, str]] = []
    sim_ref: list[Simulation] = []

    def on_queue(event, q, old):
        if q.name == "q" and event != "DELETED":
            st = q.status.state or "Open"
            if not states or states[-1][1] != st:
                states.append((sim_ref[0].now, st))

    text = (
        CLUSTER
        + queue("q")
        + vjob("j", [{"name": "t", "replicas": 2, "duration": "20s"}], queue="q")
        + command("close", "CloseQueue", "Queue", "q", "5s")
        + command("open", "OpenQueue", "Queue", "q", "40s")
    )
    sim = Simulation(prepare(load_text(text)), until=100)
    sim_ref.append(sim)
    sim.store.watch("Queue", on_queue)
    r = sim.run()
    # Closing while the job's PodGroup exists; Closed once it is gone (the job finished at 21 s); reopened.
    assert [s for _, s in states] == ["Open", "Closing", "Closed", "Open"]
    assert [t for t, _ in states][1:] == [5.0, 21.0, 40.0]
    assert phases(r) == [("Pending", 0.0), ("Running", 1.0), ("Completed", 21.0)]
    assert sim.store.list("Command") == []


def test_job_submitted_to_closed_queue_is_rejected():
    text = (
        CLUSTER
        + queue("q")
        + command("close", "CloseQueue", "Queue", "q", "1s")
        + vjob("late", [{"name": "t", "replicas": 1, "duration": "5s"}], queue="q", submit_at="5s")
    )
    r = simulate(text, until=50)
    assert [(x["kind"], x["name"]) for x in r["rejected"]] == [("Job", "late")]


# ------------------------------------------------------------ plugins
PLUGIN_CLUSTER = nodes(count=2, cpu="8")


def plugin_run(plugins: dict, tasks: list[tuple[str, int]]) -> tuple[Simulation, dict, dict[str, dict]]:
    text = PLUGIN_CLUSTER + vjob("j", [{"name": n, "replicas": k, "duration": "5s"} for n, k in tasks], plugins=plugins)
    sim, r = run_sim(text, until=100)
    assert phase_names(r) == ["Pending", "Running", "Completed"]
    return sim, r, {p["name"]: p["env"] for p in records(r)}


def test_env_and_svc_plugins():
    sim, r, env = plugin_run({"env": [], "svc": []}, [("a", 2), ("b-x", 1)])
    common = {"VC_A_HOSTS": "j-a-0.j,j-a-1.j", "VC_A_NUM": "2", "VC_B_X_HOSTS": "j-b-x-0.j", "VC_B_X_NUM": "1"}
    assert env == {
        "j-a-0": {**common, "VK_TASK_INDEX": "0", "VC_TASK_INDEX": "0"},
        "j-a-1": {**common, "VK_TASK_INDEX": "1", "VC_TASK_INDEX": "1"},
        "j-b-x-0": {**common, "VK_TASK_INDEX": "0", "VC_TASK_INDEX": "0"},
    }
    assert job_of(r)["generated"] == {"services": ["j"], "configMaps": ["j-svc"], "secrets": []}
    svc = sim.store.get("Service", "default/j")
    assert svc.spec.cluster_ip == "None"
    # Volcano's keys (each a file at /etc/volcano): task names with "-" as "_"
    assert sim.store.get("ConfigMap", "default/j-svc").data == {
        "a.host": "j-a-0.j\nj-a-1.j",
        "VC_A_HOSTS": "j-a-0.j,j-a-1.j",
        "VC_A_NUM": "2",
        "b_x.host": "j-b-x-0.j",
        "VC_B_X_HOSTS": "j-b-x-0.j",
        "VC_B_X_NUM": "1",
    }


def test_svc_plugin_sets_hostname_and_subdomain():
    seen: dict[str, tuple[str | None, str | None]] = {}
    text = PLUGIN_CLUSTER + vjob("j", [{"name": "t", "replicas": 2, "duration": "5s"}], plugins={"svc": []})
    run_sim(
        text, until=50, watch={"Pod": lambda ev, p, old: seen.__setitem__(p.name, (p.spec.hostname, p.spec.subdomain))}
    )
    assert seen == {"j-t-0": ("j-t-0", "j"), "j-t-1": ("j-t-1", "j")}


def test_pytorch_plugin_env_and_default_svc():
    sim, r, env = plugin_run(
        {"pytorch": ["--master=master", "--worker=worker", "--port=23456"]}, [("master", 1), ("worker", 2)]
    )
    torch = {k: {v: e[v] for v in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")} for k, e in env.items()}
    assert torch == {
        "j-master-0": {"MASTER_ADDR": "j-master-0.j", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "0"},
        "j-worker-0": {"MASTER_ADDR": "j-master-0.j", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "1"},
        "j-worker-1": {"MASTER_ADDR": "j-master-0.j", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "2"},
    }
    # The mutating default adds svc for pytorch.
    assert env["j-worker-1"]["VC_WORKER_HOSTS"] == "j-worker-0.j,j-worker-1.j"
    assert job_of(r)["generated"] == {"services": ["j"], "configMaps": ["j-svc"], "secrets": []}
    assert "svc" in sim.store.get("Job", "default/j").spec.plugins


def test_mpi_plugin_defaults_add_ssh_and_svc():
    sim, r, env = plugin_run(
        {"mpi": ["--master=mpimaster", "--worker=mpiworker"]}, [("mpimaster", 1), ("mpiworker", 2)]
    )
    assert env["j-mpimaster-0"]["MPI_HOST"] == "j-mpiworker-0.j,j-mpiworker-1.j"
    assert "MPI_HOST" not in env["j-mpiworker-0"] and "MPI_HOST" not in env["j-mpiworker-1"]
    assert env["j-mpiworker-0"]["VC_MPIWORKER_NUM"] == "2"
    assert job_of(r)["generated"] == {"services": ["j"], "configMaps": ["j-svc"], "secrets": ["j-ssh"]}
    assert set(sim.store.get("Job", "default/j").spec.plugins) == {"mpi", "ssh", "svc"}
    secret = sim.store.get("Secret", "default/j-ssh")
    assert set(secret.data) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
    import base64

    data = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    assert data["id_rsa"].startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert data["id_rsa.pub"].startswith("ssh-rsa ") and data["authorized_keys"] == data["id_rsa.pub"]
    for host in ("j-mpimaster-0", "j-mpiworker-0", "j-mpiworker-1"):
        assert f"Host {host}\n  HostName {host}.j\n" in data["config"]


def test_ssh_keys_are_fresh_per_job():
    text = PLUGIN_CLUSTER + "".join(
        vjob(n, [{"name": "t", "replicas": 1, "duration": "5s"}], plugins={"ssh": []}) for n in ("x", "y")
    )
    sim, _ = run_sim(text, until=50)
    assert (
        sim.store.get("Secret", "default/x-ssh").data["id_rsa"]
        != sim.store.get("Secret", "default/y-ssh").data["id_rsa"]
    )


def test_tensorflow_plugin_tf_config():
    sim, r, env = plugin_run({"tensorflow": []}, [("ps", 1), ("worker", 2)])
    cluster = {"ps": ["j-ps-0.j:2222"], "worker": ["j-worker-0.j:2222", "j-worker-1.j:2222"]}
    assert {k: json.loads(e["TF_CONFIG"]) for k, e in env.items()} == {
        "j-ps-0": {"cluster": cluster, "task": {"type": "ps", "index": 0}},
        "j-worker-0": {"cluster": cluster, "task": {"type": "worker", "index": 0}},
        "j-worker-1": {"cluster": cluster, "task": {"type": "worker", "index": 1}},
    }
    assert job_of(r)["generated"] == {"services": ["j"], "configMaps": ["j-svc"], "secrets": []}


# ------------------------------------------------------------ JobFlow
def template(name: str, duration: str) -> str:
    spec = json.loads(vjob(name, [{"name": "t", "replicas": 1, "duration": duration}])[4:])["spec"]
    return (
        "---\n"
        + json.dumps(
            {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": name}, "spec": spec}
        )
        + "\n"
    )


def jobflow(deps: list[tuple[str, list[str]]]) -> str:
    flows = [{"name": n, **({"dependsOn": {"targets": d}} if d else {})} for n, d in deps]
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "flow.volcano.sh/v1alpha1",
                "kind": "JobFlow",
                "metadata": {"name": "f"},
                "spec": {"jobRetainPolicy": "retain", "flows": flows},
            }
        )
        + "\n"
    )


def test_jobflow_chain_creates_each_job_after_its_dependency_completes():
    text = (
        CLUSTER
        + template("a", "5s")
        + template("b", "5s")
        + template("c", "5s")
        + jobflow([("a", []), ("b", ["a"]), ("c", ["b"])])
    )
    sim, r = run_sim(text, until=100)
    assert phases(r, "f-a") == [("Pending", 0.0), ("Running", 1.0), ("Completed", 6.0)]
    assert job_of(r, "f-b")["submitTime"] == 6.0  # created only when f-a Completed
    assert phases(r, "f-b") == [("Pending", 6.0), ("Running", 7.0), ("Completed", 12.0)]
    assert phases(r, "f-c") == [("Pending", 12.0), ("Running", 13.0), ("Completed", 18.0)]
    st = sim.store.get("JobFlow", "default/f").status
    assert st.state.phase == "Succeed" and st.completed_jobs == ["f-a", "f-b", "f-c"]


def test_jobflow_dependent_not_created_when_dependency_fails():
    fail = json.loads(template("a", "5s")[4:])
    fail["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["sim.lavaflow.io/exit-code"] = "1"
    text = CLUSTER + "---\n" + json.dumps(fail) + "\n" + template("b", "5s") + jobflow([("a", []), ("b", ["a"])])
    sim, r = run_sim(text, until=100)
    assert job_of(r, "f-a")["phase"] == "Failed"
    assert [j["name"] for j in r["jobs"]] == ["f-a"]
    assert sim.store.get("JobFlow", "default/f").status.state.phase == "Failed"


def test_jobflow_cycle_refused_by_cli(tmp_path: Path):
    text = CLUSTER + template("a", "5s") + template("b", "5s") + jobflow([("a", ["b"]), ("b", ["a"])])
    with pytest.raises(InputError) as exc:
        prepare(load_text(text))
    assert exc.value.problems and "not a DAG" in exc.value.problems[0]
    f = tmp_path / "flow.yaml"
    f.write_text(text, encoding="utf-8")
    out = subprocess.run([*CLI, "simulate", str(f)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "not a DAG" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------ ttlSecondsAfterFinished
def test_ttl_deletes_finished_job_with_its_pods_and_podgroup():
    deleted: dict[str, float] = {}
    sim_ref: list[Simulation] = []
    text = CLUSTER + vjob("j", [{"name": "t", "replicas": 2, "duration": "5s"}], ttl=30, plugins={"svc": []})
    sim = Simulation(prepare(load_text(text)), until=100)
    sim_ref.append(sim)
    sim.store.watch("Job", lambda ev, j, old: deleted.__setitem__(j.name, sim.now) if ev == "DELETED" else None)
    r = sim.run()
    assert deleted == {"j": 36.0}  # finished at 6 s + 30 s
    # The deleted job stays in the report, finished, with the time it was collected.
    assert [(j["name"], j["phase"], j["deleteTime"]) for j in r["jobs"]] == [("j", "Completed", 36.0)]
    assert sim.store.list("Pod") == [] and sim.store.list("PodGroup") == []
    assert sim.store.get("ConfigMap", "default/j-svc") is None and sim.store.get("Service", "default/j") is None
    assert [p["phase"] for p in r["pods"]] == ["Succeeded", "Succeeded"]


def test_controller_keeps_nothing_of_a_collected_job():
    """Per-job state lives as long as the job: after TTL collection the job controller holds nothing
    of it (it also runs on a cluster for ever), while the simulator still reports its history."""
    text = CLUSTER + "".join(
        vjob(
            f"j{i}",
            [
                {
                    "name": "t",
                    "replicas": 2,
                    "duration": "5s",
                    "maxRetry": 3,
                    "policies": [{"event": "PodFailed", "action": "RestartTask"}],
                    **({"exit": 1} if i == 0 else {}),
                }
            ],
            ttl=10,
            plugins={"svc": []},
            max_retry=2,
        )
        for i in range(3)
    )
    sim, r = run_sim(text, until=400)
    assert [j["deleteTime"] is not None for j in r["jobs"]] == [True, True, True]
    assert all(j["phaseHistory"] for j in r["jobs"]) and job_of(r, "j1")["generated"]["services"] == ["j1"]
    ctrl = sim.job_ctrl
    assert not hasattr(ctrl, "history") and not hasattr(ctrl, "generated")
    for name in (
        "pods_by_job",
        "tallies",
        "requests",
        "pod_phase",
        "killing",
        "task_restarts",
        "pg_phase",
        "podgroups_of",
        "specs",
        "_templates",
        "_timer_tokens",
    ):
        assert not getattr(ctrl, name), (name, getattr(ctrl, name))
    assert not sim.queue_ctrl.pg_seen and not sim.queue_ctrl.pg_counts


def test_job_status_counts_follow_pod_events():
    """The job status counts (kept from pod events) match the pods in the store at every change."""
    from lavaflow.controllers.job.tally import PHASES

    seen: list[tuple] = []

    def check(ev, job, old):
        pods = [p for p in sim.store.list("Pod") if p.metadata.labels.get("volcano.sh/job-name") == job.name]
        want = {ph: sum(1 for p in pods if p.status.phase == ph) for ph in PHASES}
        st = job.status
        got = {
            "Pending": st.pending,
            "Running": st.running,
            "Succeeded": st.succeeded,
            "Failed": st.failed,
            "Unknown": st.unknown,
            "Terminating": st.terminating,
        }
        assert got == want
        per_task: dict = {}
        for p in pods:
            per_task.setdefault(p.metadata.labels["volcano.sh/task-spec"], {}).setdefault(p.status.phase, 0)
            per_task[p.metadata.labels["volcano.sh/task-spec"]][p.status.phase] += 1
        assert {t: c["phase"] for t, c in st.task_status_count.items()} == per_task
        seen.append(tuple(got.values()))

    text = CLUSTER + vjob(
        "j",
        [{"name": "a", "replicas": 2, "duration": "5s"}, {"name": "b", "replicas": 3, "duration": "9s", "exit": 1}],
        min_available=5,
    )
    sim = Simulation(prepare(load_text(text)), until=100)
    sim.store.watch("Job", check)
    r = sim.run()
    assert job_of(r)["phase"] == "Failed"
    assert (0, 0, 2, 3, 0, 0) in seen and (5, 0, 0, 0, 0, 0) in seen


def test_no_ttl_keeps_finished_job():
    sim, r = run_sim(CLUSTER + vjob("j", [{"name": "t", "replicas": 2, "duration": "5s"}]), until=100)
    assert job_of(r)["phase"] == "Completed"
    assert sorted(live_pods(sim).values()) == ["Succeeded", "Succeeded"]


# ------------------------------------------------------------ node failures: no job lost
def test_node_failures_lose_no_job():
    cluster = (
        nodes("a", 1, "4", **{"sim.lavaflow.io/fail-at": "15s", "sim.lavaflow.io/recover-at": "40s"})
        + nodes("b", 1, "4", **{"sim.lavaflow.io/fail-at": "25s", "sim.lavaflow.io/recover-at": "60s"})
        + nodes("c", 1, "4", **{"sim.lavaflow.io/fail-at": "70s", "sim.lavaflow.io/recover-at": "90s"})
        + nodes("d", 2, "4", **{"sim.lavaflow.io/fail-at": "35s", "sim.lavaflow.io/recover-at": "50s"})
        + nodes("e", 1, "4")
    )
    restart = [{"event": "PodEvicted", "action": "RestartJob"}]
    jobs = {
        "r1": vjob("r1", [{"name": "t", "replicas": 4, "duration": "50s"}], min_available=4, policies=restart),
        "r2": vjob(
            "r2", [{"name": "t", "replicas": 3, "duration": "40s"}], min_available=3, policies=restart, max_retry=5
        ),
        "r3": vjob(
            "r3", [{"name": "t", "replicas": 2, "duration": "40s"}], min_available=2, policies=restart, submit_at="10s"
        ),
        "abort": vjob(
            "abort",
            [{"name": "t", "replicas": 4, "duration": "60s"}],
            min_available=4,
            policies=[{"event": "PodEvicted", "action": "AbortJob"}],
        ),
        "once": vjob(
            "once", [{"name": "t", "replicas": 4, "duration": "60s"}], min_available=4, policies=restart, max_retry=1
        ),
        "plain1": vjob("plain1", [{"name": "t", "replicas": 4, "duration": "25s"}], min_available=4),
        "plain2": vjob("plain2", [{"name": "t", "replicas": 3, "duration": "50s"}], min_available=2, submit_at="20s"),
    }
    r = simulate(cluster + "".join(jobs.values()), until=1000)
    assert r["stuck"] == []
    assert {j["name"] for j in r["jobs"]} == set(jobs)
    evicted_jobs = {p["job"] for p in r["pods"] if p["reason"] == "NodeLost"}
    assert evicted_jobs  # the faults did hit running pods
    for j in r["jobs"]:
        assert j["phase"] in FINAL, j
        hist = [h["phase"] for h in j["phaseHistory"]]
        if j["name"].startswith("r"):
            # restarted as often as its pods were evicted, and finished
            assert j["phase"] in ("Completed", "Failed"), j
            if j["phase"] == "Failed":
                assert j["retryCount"] == (5 if j["name"] == "r2" else 3)
            assert hist.count("Restarting") == j["retryCount"]
        elif j["name"].startswith("plain"):
            # no policy: evicted pods are recreated (SyncJob) and the job completes
            assert j["phase"] == "Completed", j
            assert j["retryCount"] == 0
        elif j["name"] == "abort":
            assert j["phase"] == ("Aborted" if "abort" in evicted_jobs else "Completed"), j
        elif j["name"] == "once":
            assert j["phase"] == ("Failed" if "once" in evicted_jobs else "Completed"), j
    # Every RestartJob job lost pods to a failure, was restarted (once per incident) and completed.
    assert {"r1", "r2", "r3", "abort", "once"} <= evicted_jobs
    assert {n: (job_of(r, n)["phase"], job_of(r, n)["retryCount"]) for n in ("r1", "r2", "r3")} == {
        "r1": ("Completed", 2),
        "r2": ("Completed", 1),
        "r3": ("Completed", 1),
    }
    assert [(e["node"], e["time"], e["event"]) for e in r["nodeEvents"]] == [
        ("a-0", 15.0, "NotReady"),
        ("b-0", 25.0, "NotReady"),
        ("d-0", 35.0, "NotReady"),
        ("d-1", 35.0, "NotReady"),
        ("a-0", 40.0, "Ready"),
        ("d-0", 50.0, "Ready"),
        ("d-1", 50.0, "Ready"),
        ("b-0", 60.0, "Ready"),
        ("c-0", 70.0, "NotReady"),
        ("c-0", 90.0, "Ready"),
    ]


# ------------------------------------------------------------ examples
PLUGIN_EXAMPLES = {
    "pytorch-ddp.yaml": ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"),
    "mpi-plugin.yaml": ("MPI_HOST",),
    "tensorflow-ps-worker.yaml": ("TF_CONFIG",),
}


@pytest.mark.parametrize("name", sorted(PLUGIN_EXAMPLES))
def test_plugin_examples_complete_and_show_env(name):
    r = simulate((EXAMPLES / name).read_text(encoding="utf-8"))
    assert r["stuck"] == [] and r["rejected"] == []
    vc = [j for j in r["jobs"] if j["kind"] == "Job"]
    assert vc and all(j["phase"] == "Completed" for j in vc)
    shown = set().union(*(p["env"] for p in r["pods"]))
    assert set(PLUGIN_EXAMPLES[name]) <= shown
    assert any(k.startswith("VC_") and k.endswith("_HOSTS") for k in shown)


def test_pytorch_example_ranks():
    r = simulate((EXAMPLES / "pytorch-ddp.yaml").read_text(encoding="utf-8"))
    ranks = sorted(int(p["env"]["RANK"]) for p in r["pods"])
    world = {p["env"]["WORLD_SIZE"] for p in r["pods"]}
    assert ranks == list(range(len(r["pods"]))) and world == {str(len(r["pods"]))}


def test_node_failure_example_recovers_by_restart():
    r = simulate((EXAMPLES / "lifecycle-node-failure.yaml").read_text(encoding="utf-8"))
    assert r["stuck"] == []
    assert [e["event"] for e in r["nodeEvents"]] == ["NotReady", "Ready"]
    jobs = [j for j in r["jobs"] if j["kind"] == "Job"]
    assert all(j["phase"] == "Completed" for j in jobs)
    restarted = [j for j in jobs if j["retryCount"] > 0]
    assert restarted and all("Restarting" in [h["phase"] for h in j["phaseHistory"]] for j in restarted)
    assert any(p["reason"] == "NodeLost" for p in r["pods"])


def test_job_reconciled_on_what_concerns_it_not_on_status_echoes():
    """As Volcano's job controller: a PodGroup update concerns the job only when its phase moves,
    and the controller's own status write of a phase that did not move asks for no reconcile;
    a phase change (of either), another writer's update and every pod event still do."""
    text = CLUSTER + vjob("j", [{"name": "t", "replicas": 2, "duration": "50s"}], min_available=1)
    sim, r = run_sim(text, until=10)
    ctrl, store = sim.job_ctrl, sim.store
    assert not ctrl.dirty
    pg = next(p for p in store.list("PodGroup") if p.name.startswith("j-"))
    job = store.get("Job", "default/j")
    assert pg.status.phase == "Running" and job.status.state.phase == "Running"

    pg.status.running = 2  # a status write that leaves the phase
    store.update(pg)
    assert not ctrl.dirty
    pg.status.phase = "Unknown"  # a phase that moved
    store.update(pg)
    assert "default/j" in ctrl.dirty
    ctrl.run()
    pg.status.phase = "Running"
    store.update(pg)
    assert "default/j" in ctrl.dirty
    ctrl.run()
    assert not ctrl.dirty

    syncs: list[str] = []
    writes: list[str] = []
    sync = ctrl.sync
    ctrl.sync = lambda key: (syncs.append(key), sync(key))[1]  # type: ignore[method-assign]
    store.watch("Job", lambda ev, obj, old: writes.append(obj.status.state.phase))
    pod = next(p for p in store.list("Pod") if p.metadata.labels.get("volcano.sh/job-name") == "j")
    pod.status.phase = "Pending"  # a pod event that changes the counts, not the job's phase
    store.update(pod)
    ctrl.run()
    assert syncs == ["default/j"] and writes == ["Running"] and job.status.pending == 1
    assert not ctrl.dirty  # the controller's own count write asked for no second reconcile

    store.update(job)  # another writer's update: reconciled
    assert "default/j" in ctrl.dirty
    ctrl.run()
    assert syncs == ["default/j", "default/j"]


@pytest.mark.parametrize("resized_out", [False, True])
def test_a_worker_the_elastic_scheduler_removed_may_exit_non_zero_without_failing_the_job(resized_out):
    # torchrun exits 1 when a resize's SIGTERM reaches it, so a pod taken away by a resize can end
    # Failed before it is gone. That is the scheduler's own doing, not a PodFailed for the policies.
    from lavaflow.elastic.spec import RESIZED_OUT

    text = CLUSTER + vjob(
        "j",
        [{"name": "w", "replicas": 2, "duration": "inf"}],
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
    )
    sim, _ = run_sim(text, until=5)
    pod = next(p for p in sim.store.list("Pod") if p.status.phase == "Running")
    if resized_out:
        pod.metadata.annotations[RESIZED_OUT] = "ElasticResize: resized by the elastic policy"
    pod.status.phase = "Failed"
    pod.status.exit_code = 1
    sim.store.update(pod)
    sim._settle()
    job = sim.store.get("Job", "default/j")
    assert (job.status.state.phase == "Running") == resized_out
    assert (job.status.retry_count == 0) == resized_out
