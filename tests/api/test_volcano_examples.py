"""Behaviours exercised by Volcano's own examples and user guides, in scenarios written for lavaflow
(tests/data/volcano/*.yaml; docs/volcano-examples.md lists which kinds of example run and why)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import node_group, simulate
from lavaflow.api.loader import load_files
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

DATA = Path(__file__).resolve().parents[1] / "data" / "volcano"


def run_file(name: str, **kw) -> dict:
    return Simulation(prepare(load_files([DATA / name])), **kw).run()


def doc(obj: dict) -> str:
    return "---\n" + json.dumps(obj) + "\n"


def test_capacity_guide_queue2_reclaims_what_its_podgroup_needs_and_queue1_keeps_its_deserved():
    r = run_file("capacity-borrow-reclaim.yaml", until=120)
    lender = [p for p in r["pods"] if p["name"].startswith("lender-")]
    borrower = [p for p in r["pods"] if p["name"].startswith("borrower-")]
    # Before the borrower: queue1 runs on the whole idle cluster.
    assert all(p["startTime"] == 0 for p in lender[:8])
    # After: six of queue1's pods were reclaimed (queue1 keeps its deserved 2 cpus) and replaced.
    assert sum(1 for p in lender if p["phase"] == "Deleted") == 6
    assert sum(1 for p in lender if p["phase"] == "Running") == 2
    assert sum(1 for p in lender if p["phase"] == "Pending") == 6
    assert sum(1 for p in borrower if p["phase"] == "Running") == 6
    alloc = {q["name"]: q["allocated"].get("cpu") for q in r["queues"]}
    assert (alloc["queue1"], alloc["queue2"]) == ("2", "6")
    assert r["stalled"] is True  # the replacements and the borrower's last two pods wait for room


def test_capacity_guide_with_a_one_pod_gang_reclaims_for_one_pod():
    # Volcano v1.13 re-checks JobStarving after each reclaimed task: a Deployment's PodGroup has
    # minMember 1 by default, so it stops after one pod (the guide's 6 needs group-min-member).
    text = (
        (DATA / "capacity-borrow-reclaim.yaml")
        .read_text()
        .replace('scheduling.volcano.sh/group-min-member: "6"', 'scheduling.volcano.sh/group-min-member: "1"')
    )
    r = simulate(text, until=120)
    lender = [p for p in r["pods"] if p["name"].startswith("lender-")]
    borrower = [p for p in r["pods"] if p["name"].startswith("borrower-")]
    assert sum(1 for p in lender if p["phase"] == "Deleted") == 1
    assert sum(1 for p in borrower if p["phase"] == "Running") == 1


def test_deployment_example_runs_in_its_queue_on_kubelet_labels():
    r = run_file("deployment-in-a-queue.yaml", until=60)
    assert [(p["phase"], p["node"]) for p in r["pods"]] == [("Running", "worker-0")] * 3
    [job] = r["jobs"]
    assert (job["queue"], job["owner"], job["phase"]) == ("test", "Deployment/web", "Running")
    test = next(q for q in r["queues"] if q["name"] == "test")
    assert test["allocated"]["cpu"] == "0.9"
    assert r["stalled"] is False and r["warnings"] == []


def test_ray_job_plugin_runs_without_warnings():
    job = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "ray"},
            "spec": {
                "minAvailable": 3,
                "schedulerName": "volcano",
                "plugins": {"ray": []},
                "tasks": [
                    {"name": "head", "replicas": 1, "template": {"spec": {"containers": [{"name": "h"}]}}},
                    {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "w"}]}}},
                ],
            },
        }
    )
    r = simulate(node_group("n", cpu="4") + job)
    assert r["jobs"][0]["phase"] == "Completed"
    assert not r.get("warnings")  # the ray job plugin is implemented (head service, ports, commands)


def test_priority_class_of_older_api_versions_is_accepted():
    pcs = "".join(
        doc(
            {
                "apiVersion": f"scheduling.k8s.io/{v}",
                "kind": "PriorityClass",
                "metadata": {"name": f"pc-{v}"},
                "value": 10,
            }
        )
        for v in ("v1beta1", "v1alpha1")
    )
    job = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {
                "minAvailable": 1,
                "priorityClassName": "pc-v1beta1",
                "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
            },
        }
    )
    r = simulate(node_group("n") + pcs + job)
    assert r["jobs"][0]["phase"] == "Completed"


def test_task_start_dependency_chain_on_linux_nodes():
    # After Volcano's example/task-start-dependency: minAvailable 1, three tasks chained by
    # dependsOn, every pod selecting kubernetes.io/os: linux (set by the kubelet on real nodes).
    def task(name: str, replicas: int, after: str | None) -> dict:
        t = {
            "name": name,
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": {"sim.lavaflow.io/duration": "20s"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}],
                },
            },
        }
        if after:
            t["dependsOn"] = {"name": [after]}
        return t

    job = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "chain"},
            "spec": {
                "schedulerName": "volcano",
                "queue": "default",
                "minAvailable": 1,
                "tasks": [task("first", 1, None), task("second", 2, "first"), task("third", 2, "second")],
            },
        }
    )
    r = simulate(node_group("n", cpu="2") + job)
    assert r["jobs"][0]["phase"] == "Completed"
    start = {}
    for p in r["pods"]:
        start.setdefault(p["task"], set()).add(p["startTime"])
    first, second, third = (min(start[t]) for t in ("first", "second", "third"))
    assert first < second < third
