"""The Kubernetes Workload API (KEP-4671) in the simulator: 1.35's `scheduling.k8s.io/v1alpha1`
Workload with pods naming their group through `spec.workloadRef` (gang per podGroup and replica
key, `basic` pod by pod), 1.36's `scheduling.k8s.io/v1alpha2` PodGroup with `spec.schedulingGroup`,
native workloads whose pod template names a group, and input errors (CLI exit code 2). On a
cluster: tests/kube/test_kube_workload_api.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import node_group
from lavaflow.api.loader import InputError, load_text
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

V1 = "scheduling.k8s.io/v1alpha1"
V2 = "scheduling.k8s.io/v1alpha2"


def _doc(d: dict) -> str:
    return "---\n" + json.dumps(d) + "\n"


def _workload(name: str, groups: dict[str, int | None], ns: str = "ml", **meta) -> str:
    """``groups``: podGroup name -> minCount (None: the basic policy)."""
    return _doc(
        {
            "apiVersion": V1,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
                "podGroups": [
                    {"name": g, "policy": {"basic": {}} if n is None else {"gang": {"minCount": n}}}
                    for g, n in groups.items()
                ],
            },
        }
    )


def _pod_spec(ref: dict, cpu: str = "1", field: str = "workloadRef") -> dict:
    return {
        "schedulerName": "lavaflow",
        field: ref,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }


def _pods(prefix: str, n: int, ref: dict, ns: str = "ml", duration: str = "60s", **kw) -> str:
    return "".join(
        _doc(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{prefix}-{i}",
                    "namespace": ns,
                    "annotations": {"sim.lavaflow.io/duration": duration},
                },
                "spec": _pod_spec(ref, **kw),
            }
        )
        for i in range(n)
    )


def _run(text: str, **kw) -> tuple[Simulation, dict]:
    sim = Simulation(prepare(load_text(text)), **kw)
    return sim, sim.run()


def _started(result: dict, prefix: str) -> dict[str, float | None]:
    return {p["name"]: p["startTime"] for p in result["pods"] if p["name"].startswith(prefix)}


def test_a_gang_is_placed_all_or_nothing_and_a_smaller_one_beside_it_runs():
    # 3 CPUs: "workers" needs 4 at once (never fits), "small" needs 2 (fits).
    text = (
        node_group(cpu="3")
        + _workload("train", {"workers": 4, "small": 2})
        + _pods("w", 4, {"name": "train", "podGroup": "workers"}, duration="inf")
        + _pods("s", 2, {"name": "train", "podGroup": "small"}, duration="inf")
    )
    sim, result = _run(text, until=30)
    assert all(t is None for t in _started(result, "w-").values()), "part of a gang was bound"
    assert set(_started(result, "s-").values()) == {0.0}
    # each gang stands for an internal PodGroup named after its Workload and podGroup; no other
    assert sorted(pg.key for pg in sim.store.list("PodGroup")) == [
        "ml/workload:train:small",
        "ml/workload:train:workers",
    ]
    entry = next(e for e in result["podGroups"] if e["name"] == "workload:train:workers")
    assert entry["minMember"] == 4
    assert entry["workload"] == {"apiVersion": V1, "policy": "gang", "workload": "train", "podGroup": "workers"}
    # no status in v1alpha1: one Warning Event on the Workload says why, and it is not repeated
    events = [e for e in result["events"] if e["kind"] == "Workload"]
    assert [(e["object"], e["type"], e["reason"]) for e in events] == [("ml/train", "Warning", "Unschedulable")]
    assert events[0]["message"].startswith("podGroup 'workers' of Workload ml/train: ")
    assert "tasks in gang unschedulable" in events[0]["message"]


def test_the_unschedulable_event_waits_for_the_gangs_pods_to_exist():
    """Issue 36: the one Event of a wait gives why the whole gang does not fit, not the count of a
    gang whose pods were still being created (the first pod comes at 0 s, the others at 5 s)."""
    first = _pods("w", 1, {"name": "train", "podGroup": "workers"}, duration="inf")
    later = _pods("w", 4, {"name": "train", "podGroup": "workers"}, duration="inf").split("---\n")[2:]
    later = "".join("---\n" + d.replace('"annotations": {', '"annotations": {"sim.lavaflow.io/submit-at": "5s", ')
                    for d in later)  # fmt: skip
    text = node_group(cpu="3") + _workload("train", {"workers": 4}) + first + later
    _, result = _run(text, until=30)
    events = [e for e in result["events"] if e["kind"] == "Workload"]
    assert len(events) == 1, events
    assert "/4 tasks in gang unschedulable" in events[0]["message"], events[0]
    assert "valid tasks" not in events[0]["message"], events[0]


def test_min_count_below_the_pod_count_binds_at_least_min_count_or_nothing():
    # 3 CPUs, 5 pods of 1 CPU, minCount 3: 3 run at once, the others when room comes back.
    text = node_group(cpu="3") + _workload("t", {"g": 3}) + _pods("p", 5, {"name": "t", "podGroup": "g"})
    _, result = _run(text)
    starts = sorted(t for t in _started(result, "p-").values())
    assert starts == [0.0, 0.0, 0.0, 60.0, 60.0], starts
    # and with minCount 4 on the same 3 CPUs nothing of it ever runs
    text = node_group(cpu="3") + _workload("t", {"g": 4}) + _pods("p", 5, {"name": "t", "podGroup": "g"})
    _, result = _run(text, until=200)
    assert all(t is None for t in _started(result, "p-").values())


def test_basic_policy_places_pods_one_by_one():
    # kube-scheduler's behaviour for a basic group: as many as fit, the rest later (no gang).
    text = node_group(cpu="3") + _workload("b", {"side": None}) + _pods("p", 4, {"name": "b", "podGroup": "side"})
    sim, result = _run(text)
    assert sorted(_started(result, "p-").values()) == [0.0, 0.0, 0.0, 60.0]
    pg = sim.store.get("PodGroup", "ml/workload:b:side")
    assert pg.spec.min_member == 1
    assert not [e for e in result.get("events", []) if e["kind"] == "Workload"], "a basic group is no gang to report"


def test_each_replica_key_is_its_own_gang():
    # minCount 2 per replica, 3 CPUs: replica "0" and "1" are two gangs of 2; only one fits at a
    # time, and neither is ever split (a single gang of 4 would never run).
    text = (
        node_group(cpu="3")
        + _workload("lws", {"group": 2})
        + _pods("a", 2, {"name": "lws", "podGroup": "group", "podGroupReplicaKey": "0"})
        + _pods("b", 2, {"name": "lws", "podGroup": "group", "podGroupReplicaKey": "1"})
    )
    sim, result = _run(text)
    a, b = _started(result, "a-"), _started(result, "b-")
    assert len(set(a.values())) == 1 and len(set(b.values())) == 1, (a, b)  # each gang starts whole
    assert sorted([*set(a.values()), *set(b.values())]) == [0.0, 60.0]
    assert {pg.key for pg in sim.store.list("PodGroup")} == {"ml/workload:lws:group:0", "ml/workload:lws:group:1"}
    entry = next(e for e in result["podGroups"] if e["name"] == "workload:lws:group:1")
    assert entry["workload"]["podGroupReplicaKey"] == "1"


def test_the_queue_comes_from_the_workloads_annotation():
    queue = _doc({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}})
    text = (
        node_group(cpu="4")
        + queue
        + _workload("q", {"g": 2}, annotations={"scheduling.volcano.sh/queue-name": "research"})
        + _pods("p", 2, {"name": "q", "podGroup": "g"})
    )
    sim, result = _run(text)
    assert sim.store.get("PodGroup", "ml/workload:q:g").spec.queue == "research"
    assert set(_started(result, "p-").values()) == {0.0}


def test_a_batch_job_whose_template_names_a_gang_is_gang_scheduled():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "parallelism": 4,
            "completions": 4,
            "template": {
                "metadata": {"annotations": {"sim.lavaflow.io/duration": "60s"}},
                "spec": {**_pod_spec({"name": "train", "podGroup": "workers"}), "restartPolicy": "Never"},
            },
        },
    }
    text = _workload("train", {"workers": 4}) + _doc(job)
    _, small = _run(node_group(cpu="3") + text, until=200)
    assert small["pods"] and all(p["startTime"] is None for p in small["pods"]), "part of the Job's gang ran"
    _, big = _run(node_group(cpu="4") + text)
    assert len(big["pods"]) == 4 and {p["startTime"] for p in big["pods"]} == {0.0}


def test_a_v1alpha2_podgroup_is_a_gang_and_gets_its_scheduled_condition():
    templates = _doc(
        {
            "apiVersion": V2,
            "kind": "Workload",
            "metadata": {"name": "job", "namespace": "ml"},
            "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]},
        }
    )

    def podgroup(name: str) -> str:
        return _doc(
            {
                "apiVersion": V2,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {
                    "podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}},
                    "schedulingPolicy": {"gang": {"minCount": 3}},
                },
            }
        )

    text = (
        node_group(cpu="4")
        + templates
        + podgroup("job-0")
        + podgroup("job-1")
        + _pods("x", 3, {"podGroupName": "job-0"}, field="schedulingGroup")
        + _pods("y", 3, {"podGroupName": "job-1"}, field="schedulingGroup")
    )
    sim, result = _run(text)
    x, y = _started(result, "x-"), _started(result, "y-")
    assert sorted([*set(x.values()), *set(y.values())]) == [0.0, 60.0], (x, y)  # one gang after the other
    for name in ("job-0", "job-1"):
        cond = sim.store.get("SchedulingPodGroup", f"ml/{name}").status.conditions
        assert [(c.type, c.status, c.reason) for c in cond] == [("PodGroupScheduled", "True", "Scheduled")]
    entry = next(e for e in result["podGroups"] if e["name"] == "podgroup:job-1")
    assert entry["workload"]["apiVersion"] == V2 and entry["workload"]["podGroup"] == "job-1"


def test_a_v1alpha2_podgroup_that_cannot_fit_says_so_in_its_condition():
    pg = {
        "apiVersion": V2,
        "kind": "PodGroup",
        "metadata": {"name": "big", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    text = node_group(cpu="2") + _doc(pg) + _pods("z", 3, {"podGroupName": "big"}, field="schedulingGroup")
    sim, result = _run(text, until=30)
    assert all(t is None for t in _started(result, "z-").values())
    (cond,) = sim.store.get("SchedulingPodGroup", "ml/big").status.conditions
    assert (cond.type, cond.status, cond.reason) == ("PodGroupScheduled", "False", "Unschedulable")
    assert "tasks in gang unschedulable" in (cond.message or "")


# ------------------------------------------------------------------ input errors
@pytest.mark.parametrize(
    ("groups", "where", "message"),
    [
        (
            [{"name": "g", "policy": {"gang": {"minCount": 0}}}],
            "spec.podGroups[0].policy.gang.minCount",
            "minCount is 0",
        ),
        ([{"name": "g", "policy": {"gang": {}}}], "spec.podGroups[0].policy.gang.minCount", "minCount is required"),
        (
            [{"name": "g", "policy": {"basic": {}}}, {"name": "g", "policy": {"basic": {}}}],
            "spec.podGroups[1].name",
            "duplicate name 'g'",
        ),
        ([{"name": "g", "policy": {}}], "spec.podGroups[0].policy", "exactly one of `basic`, `gang` is required"),
        (
            [{"name": "g", "policy": {"basic": {}, "gang": {"minCount": 1}}}],
            "spec.podGroups[0].policy",
            "but both are set",
        ),
        ([{"name": "Bad_Name", "policy": {"basic": {}}}], "spec.podGroups[0].name", "not a valid DNS-1123 label"),
        ([], "spec.podGroups", "at least one item"),
        ([{"name": f"g{i}", "policy": {"basic": {}}} for i in range(9)], "spec.podGroups", "at most 8"),
        ([{"name": "g", "policy": {"gang": {"minCount": "four"}}}], "spec.podGroups[0].policy.gang.minCount", ""),
    ],
)
def test_invalid_workloads_are_refused_naming_the_field(groups, where, message):
    doc = {"apiVersion": V1, "kind": "Workload", "metadata": {"name": "w"}, "spec": {"podGroups": groups}}
    with pytest.raises(InputError) as exc:
        prepare(load_text(node_group() + _doc(doc), "in.yaml"))
    line = exc.value.problems[0]
    assert line.startswith("in.yaml: document 2: Workload/w: " + where + ": "), line
    assert message in line, line


@pytest.mark.parametrize(
    ("ref", "field", "where", "message"),
    [
        ({"name": "w", "podGroup": "nope"}, "workloadRef", "spec.workloadRef.podGroup", "has no podGroup 'nope'"),
        (
            {"name": "other", "podGroup": "g"},
            "workloadRef",
            "spec.workloadRef.name",
            "no scheduling.k8s.io/v1alpha1 Workload 'other'",
        ),
        (
            {"name": "w", "podGroup": "g", "podGroupReplicaKey": "A B"},
            "workloadRef",
            "spec.workloadRef.podGroupReplicaKey",
            "not a valid DNS-1123 label",
        ),
        (
            {"podGroupName": "missing"},
            "schedulingGroup",
            "spec.schedulingGroup.podGroupName",
            "no scheduling.k8s.io/v1alpha2 PodGroup 'missing'",
        ),
    ],
)
def test_a_pod_naming_a_group_the_input_lacks_is_refused(ref, field, where, message):
    text = node_group() + _workload("w", {"g": 1}, ns="default") + _pods("p", 1, ref, ns="default", field=field)
    with pytest.raises(InputError) as exc:
        prepare(load_text(text, "in.yaml"))
    line = exc.value.problems[0]
    assert line.startswith("in.yaml: document 3: Pod/p-0: " + where + ": "), line
    assert message in line, line


def test_a_deployment_template_naming_a_missing_group_is_refused():
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": _pod_spec({"name": "w", "podGroup": "x"})},
        },
    }
    with pytest.raises(InputError) as exc:
        prepare(load_text(node_group() + _workload("w", {"g": 1}, ns="default") + _doc(dep), "in.yaml"))
    assert any(
        p.startswith("in.yaml: document 3: Deployment/web: spec.template.spec.workloadRef.podGroup: ")
        for p in exc.value.problems
    ), exc.value.problems


def test_the_cli_refuses_bad_workload_input_with_exit_code_2(tmp_path):
    doc = {
        "apiVersion": V1,
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"podGroups": [{"name": "g", "policy": {"gang": {"minCount": -1}}}]},
    }
    path = tmp_path / "bad.yaml"
    path.write_text(node_group() + _doc(doc) + _pods("p", 1, {"name": "w", "podGroup": "missing"}, ns="default"))
    r = subprocess.run(
        [sys.executable, "-c", "from lavaflow.cli import main; main()", "simulate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert f"{path}: document 2: Workload/w: spec.podGroups[0].policy.gang.minCount: minCount is -1" in r.stderr, (
        r.stderr
    )
    assert (
        f"{path}: document 3: Pod/p-0: spec.workloadRef.podGroup: Workload default/w has no podGroup 'missing'"
        in r.stderr
    )
