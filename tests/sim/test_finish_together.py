"""Pods that finish at the same instant reach the controllers together when nothing could act on
one of them alone (issue 35, item 24: the cost of a sparse trace follows what changed).

A Volcano Job's workers that started together end together; without lifecycle policies or
minSuccess, the job controller syncs once for all of them. Where a policy reacts to one pod's
completion, each finish is still settled on its own, so the first one's policy acts first."""

from __future__ import annotations

import copy
import json

import yaml

from conftest import node_group
from lavaflow.api.loader import load_text
from lavaflow.controllers.job import JobController
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare


def job(policies: list | None = None, task_policies: list | None = None, min_success: int | None = None) -> dict:
    task: dict = {
        "name": "worker",
        "replicas": 6,
        "template": {
            "metadata": {"annotations": {"sim.lavaflow.io/duration": "60"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        },
    }
    if task_policies:
        task["policies"] = task_policies
    spec: dict = {"minAvailable": 6, "schedulerName": "volcano", "tasks": [task]}
    if policies:
        spec["policies"] = policies
    if min_success is not None:
        spec["minSuccess"] = min_success
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}


def run(doc: dict, monkeypatch) -> tuple[dict, list[float]]:
    """The result, and the simulated times of the job controller's syncs of job j."""
    syncs: list[float] = []
    sync = JobController.sync
    sims: list[Simulation] = []

    def counted(self, key):
        if key == "default/j":
            syncs.append(sims[0].now)
        return sync(self, key)

    monkeypatch.setattr(JobController, "sync", counted)
    text = node_group("n", 2, "8", "16Gi") + "---\n" + json.dumps(copy.deepcopy(doc))
    sims.append(Simulation(prepare(load_text(text))))
    return sims[0].run(), syncs


def phases(result: dict) -> list[str]:
    return sorted(p["phase"] for p in result["pods"])


def test_workers_ending_together_are_synced_once(monkeypatch):
    result, syncs = run(job(), monkeypatch)
    assert phases(result) == ["Succeeded"] * 6
    assert [j["phase"] for j in result["jobs"]] == ["Completed"]
    # at the end: one sync for the six finishes (it sees them all and completes the job) and one
    # for the job's own status write; one per pod without the coalescing (see below)
    assert syncs.count(max(syncs)) == 2, syncs


def test_a_completion_policy_still_acts_on_the_first_pod_to_end(monkeypatch):
    # TaskCompleted needs every pod of the task; PodSucceeded... is not an event Volcano has, so a
    # job-level CompleteJob on the first pod's end is what minSuccess gives: the others are killed.
    result, syncs = run(job(min_success=1), monkeypatch)
    assert phases(result).count("Succeeded") == 1, phases(result)
    assert [j["phase"] for j in result["jobs"]] == ["Completed"]
    assert syncs.count(max(syncs)) >= 1


def test_a_failed_pod_among_those_ending_together_is_settled_alone(monkeypatch):
    doc = job(policies=[{"event": "PodFailed", "action": "AbortJob"}])
    doc["spec"]["tasks"].insert(
        0,
        {
            "name": "bad",
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {"sim.lavaflow.io/duration": "60", "sim.lavaflow.io/exit-code": "1"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    )
    doc["spec"]["minAvailable"] = 7
    result, _ = run(doc, monkeypatch)
    assert [j["phase"] for j in result["jobs"]] == ["Aborted"], result["jobs"]
    # its pod ends first (its task comes first): AbortJob kills the workers before they end
    assert phases(result) == ["Deleted"] * 6 + ["Failed"], phases(result)


def test_the_same_result_as_one_settle_per_finish(monkeypatch):
    """The coalescing changes how often the controllers run, not what they decide: the whole
    output equals the output with every finish settled on its own."""
    base, _ = run(job(), monkeypatch)
    monkeypatch.setattr(Simulation, "_finish_joins", lambda self, payload: False)
    alone, syncs = run(job(), monkeypatch)
    assert syncs.count(max(syncs)) == 7  # one per pod and the status write's, without the coalescing
    assert yaml.safe_dump(base) == yaml.safe_dump(alone)
