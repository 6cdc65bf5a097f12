"""Issue 12: Volcano YAML and configurations that used to behave differently from Volcano.

One scenario per point of the issue; each asserts what Volcano v1.13 does."""

from __future__ import annotations

import json

from conftest import node_group, simulate


def doc(obj: dict) -> str:
    return "---\n" + json.dumps(obj) + "\n"


def job_of(result: dict, name: str) -> dict:
    return next(j for j in result["jobs"] if j["name"] == name)


# ------------------------------------------------- 1. best-effort task inside a gang
MINDSPORE_LIKE = doc({
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "ms"},
    "spec": {"minAvailable": 3, "schedulerName": "volcano", "plugins": {"ssh": [], "svc": []},
             "tasks": [
                 {"name": "mpimaster", "replicas": 1,
                  "template": {"spec": {"containers": [{"name": "m", "image": "x"}], "restartPolicy": "OnFailure"}}},
                 {"name": "mpiworker", "replicas": 2,
                  "template": {"spec": {"containers": [{"name": "w", "image": "x",
                                                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                                        "restartPolicy": "OnFailure"}}},
             ]},
})


def test_gang_with_a_best_effort_master_and_gpu_workers_runs():
    r = simulate(node_group("gpu", count=2, cpu="8", **{"nvidia.com/gpu": "1"}) + MINDSPORE_LIKE)
    assert job_of(r, "ms")["phase"] == "Completed"
    assert not r["stalled"]
    nodes = sorted(p["node"] for p in r["pods"] if "mpiworker" in p["name"])
    assert nodes == ["gpu-0", "gpu-1"]
    master = next(p for p in r["pods"] if "mpimaster" in p["name"])
    workers = [p for p in r["pods"] if "mpiworker" in p["name"]]
    assert master["node"] is not None
    assert master["startTime"] == workers[0]["startTime"]  # backfill places it in the workers' cycle


def test_best_effort_task_counts_toward_its_own_task_minimum_only_once_workers_fit():
    # Only one GPU for two workers: the gang must still wait, best-effort master or not.
    r = simulate(node_group("gpu", count=1, cpu="8", **{"nvidia.com/gpu": "1"}) + MINDSPORE_LIKE)
    assert job_of(r, "ms")["phase"] != "Completed"
    assert all(p["startTime"] is None for p in r["pods"])
