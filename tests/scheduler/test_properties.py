"""Property tests over small random clusters and workloads (hypothesis)."""

from __future__ import annotations

import json
from collections import defaultdict

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import as_json, node_group, simulate

FINAL = ("Completed", "Failed", "Terminated", "Aborted")
RES = ("cpu", "memory", "nvidia.com/gpu")  # cpu in millicores, memory in Mi, gpu in units
UNTIL = 300.0


@st.composite
def clusters(draw):
    groups = []
    for i in range(draw(st.integers(1, 3))):
        groups.append(
            {
                "name": f"g{i}",
                "count": draw(st.integers(1, 2)),
                "cpu": draw(st.integers(1, 8)) * 1000,
                "memory": draw(st.sampled_from([1024, 2048, 4096, 8192])),
                "gpu": draw(st.sampled_from([0, 0, 1, 2, 4])),
            }
        )
    # 1-5 nodes in all
    total = 0
    kept = []
    for g in groups:
        if total + g["count"] > 5:
            continue
        total += g["count"]
        kept.append(g)
    return kept


@st.composite
def workloads(draw):
    queues = draw(st.sampled_from([["q1"], ["q1", "q2"]]))
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        tasks = []
        for t in range(draw(st.integers(1, 2))):
            tasks.append(
                {
                    "name": f"t{t}",
                    "replicas": draw(st.integers(1, 4)),
                    "cpu": draw(st.sampled_from([100, 250, 500, 1000, 1500, 2000, 4000])),
                    "memory": draw(st.sampled_from([0, 128, 512, 1024, 2048])),
                    "gpu": draw(st.sampled_from([0, 0, 0, 1, 2])),
                    "duration": draw(st.integers(1, 120)),
                }
            )
        total = sum(t["replicas"] for t in tasks)
        jobs.append(
            {
                "name": f"job{j}",
                "tasks": tasks,
                "minAvailable": draw(st.integers(1, total)),
                "queue": draw(st.sampled_from(queues)),
                "submitAt": draw(st.integers(0, 60)),
            }
        )
    return queues, jobs


def render(cluster: list[dict], workload) -> str:
    queues, jobs = workload
    text = ""
    for g in cluster:
        extra = {"nvidia.com/gpu": str(g["gpu"])} if g["gpu"] else {}
        text += node_group(g["name"], g["count"], cpu=f"{g['cpu']}m", memory=f"{g['memory']}Mi", **extra)
    for q in queues:
        text += (
            "---\n"
            + json.dumps(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": q},
                    "spec": {"weight": 1},
                }
            )
            + "\n"
        )
    for j in jobs:
        tasks = []
        for t in j["tasks"]:
            req = {"cpu": f"{t['cpu']}m"}
            if t["memory"]:
                req["memory"] = f"{t['memory']}Mi"
            if t["gpu"]:
                req["nvidia.com/gpu"] = str(t["gpu"])
            tasks.append(
                {
                    "name": t["name"],
                    "replicas": t["replicas"],
                    "template": {
                        "metadata": {"annotations": {"sim.lavaflow.io/duration": f"{t['duration']}s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "resources": {"requests": req, "limits": dict(req)}}],
                        },
                    },
                }
            )
        doc = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": j["name"], "annotations": {"sim.lavaflow.io/submit-at": str(j["submitAt"])}},
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": j["minAvailable"],
                "queue": j["queue"],
                "tasks": tasks,
            },
        }
        text += "---\n" + json.dumps(doc) + "\n"
    return text


def capacities(cluster: list[dict]) -> dict[str, tuple[int, int, int]]:
    return {f"{g['name']}-{i}": (g["cpu"], g["memory"], g["gpu"]) for g in cluster for i in range(g["count"])}


def requests(workload) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {(j["name"], t["name"]): (t["cpu"], t["memory"], t["gpu"]) for j in workload[1] for t in j["tasks"]}


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@SETTINGS
@given(clusters(), workloads(), st.sampled_from(["lavaflow", "kube-default"]))
def test_no_node_is_ever_overallocated(cluster, workload, scheduler):
    r = simulate(render(cluster, workload), scheduler=scheduler, until=UNTIL)
    cap = capacities(cluster)
    req = requests(workload)
    by_node: dict[str, list[tuple[float, float, tuple[int, int, int]]]] = defaultdict(list)
    for p in r["pods"]:
        if p["startTime"] is None:
            continue
        assert p["node"] in cap, p
        end = p["finishTime"] if p["finishTime"] is not None else r["endTime"] + 1
        by_node[p["node"]].append((p["startTime"], end, req[(p["job"], p["task"])]))
    for node, intervals in by_node.items():
        for t in sorted({s for s, _, _ in intervals}):
            live = [rq for s, e, rq in intervals if s <= t < e]
            for k, name in enumerate(RES):
                used = sum(rq[k] for rq in live)
                assert used <= cap[node][k], f"{node} {name} {used} > {cap[node][k]} at t={t}"


@SETTINGS
@given(clusters(), workloads())
def test_gangs_start_with_at_least_min_available(cluster, workload):
    r = simulate(render(cluster, workload), until=UNTIL)
    for j in workload[1]:
        starts = [p["startTime"] for p in r["pods"] if p["job"] == j["name"] and p["startTime"] is not None]
        if not starts:
            continue
        first = min(starts)
        assert starts.count(first) >= j["minAvailable"], (j["name"], sorted(starts), j["minAvailable"])


@SETTINGS
@given(clusters(), workloads(), st.sampled_from(["lavaflow", "kube-default"]))
def test_every_job_ends_or_is_reported_stuck(cluster, workload, scheduler):
    r = simulate(render(cluster, workload), scheduler=scheduler, until=UNTIL)
    stuck = {s["name"]: s["reason"] for s in r["stuck"]}
    assert {j["name"] for j in r["jobs"]} == {j["name"] for j in workload[1]}
    for j in r["jobs"]:
        if j["phase"] in FINAL:
            assert j["name"] not in stuck
            assert j["finishTime"] is not None
        else:
            assert stuck.get(j["name"]), (j["name"], j["phase"], r["stuck"])
    assert r["endTime"] <= UNTIL


@SETTINGS
@given(clusters(), workloads(), st.integers(0, 3))
def test_same_seed_same_output(cluster, workload, seed):
    text = render(cluster, workload)
    assert as_json(simulate(text, seed=seed, until=UNTIL)) == as_json(simulate(text, seed=seed, until=UNTIL))
