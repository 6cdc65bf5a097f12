"""Issue 12: Volcano YAML and configurations that used to behave differently from Volcano.

One scenario per point of the issue; each asserts what Volcano v1.13 does."""

from __future__ import annotations

import json

from conftest import node_group, resources, simulate


def doc(obj: dict) -> str:
    return "---\n" + json.dumps(obj) + "\n"


def job_of(result: dict, name: str) -> dict:
    return next(j for j in result["jobs"] if j["name"] == name)


# ------------------------------------------------- 1. best-effort task inside a gang
MINDSPORE_LIKE = doc(
    {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "ms"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "plugins": {"ssh": [], "svc": []},
            "tasks": [
                {
                    "name": "mpimaster",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "m", "image": "x"}], "restartPolicy": "OnFailure"}},
                },
                {
                    "name": "mpiworker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                            ],
                            "restartPolicy": "OnFailure",
                        }
                    },
                },
            ],
        },
    }
)


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


def test_a_job_whose_templates_ask_gpus_as_limits_only_is_admitted_and_its_pods_wait():
    """Volcano's job controller sums the minResources from the tasks' templates as written (the quota
    evaluator's reading: a limit is no request there; only the API server's defaulting of each pod
    makes it one). So a job whose workers name nvidia.com/gpu only as a limit is admitted whatever
    the GPUs, and its pods wait for them, Pending: what vc-controller-manager and vc-scheduler did
    with this job beside lavaflow (docs/volcano-examples.md)."""
    r = simulate(node_group("gpu", count=1, cpu="8", **{"nvidia.com/gpu": "1"}) + MINDSPORE_LIKE)
    pg = next(p for p in r["podGroups"] if p["name"].startswith("ms-"))
    assert pg["phase"] == "Inqueue"
    assert sorted(p["name"] for p in r["pods"]) == ["ms-mpimaster-0", "ms-mpiworker-0", "ms-mpiworker-1"]
    assert all(p["startTime"] is None for p in r["pods"])  # one GPU for two workers: the gang waits


# ------------------------------------------------- 10. every jobs[] entry has phaseHistory and retryCount
def test_podgroup_entries_have_phase_history_and_retry_count():
    bare = doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
    )
    late = doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "q", "annotations": {"sim.lavaflow.io/duration": "10s"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
        }
    )
    r = simulate(node_group("n", cpu="2") + bare + late)
    entries = [j for j in r["jobs"] if j["kind"] == "PodGroup"]
    assert len(entries) == 2
    for j in entries:
        assert j["retryCount"] == 0
        assert [h["phase"] for h in j["phaseHistory"]] == ["Pending", "Running", "Completed"]
        assert [h["time"] for h in j["phaseHistory"]] == [j["submitTime"], j["startTime"], j["finishTime"]]
    second = max(entries, key=lambda j: j["startTime"])
    assert second["phaseHistory"][1]["time"] > second["submitTime"]  # it waited for the first


# ------------------------------------------------- 3. a stall does not depend on --until
def _spark_like_deadlock() -> str:
    # Two drivers take both CPUs under kube-default; their executors can never be placed.
    out = node_group("n", count=1, cpu="2")
    for i in (1, 2):
        out += doc(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"d{i}",
                    "annotations": {"scheduling.k8s.io/group-name": f"app{i}", "sim.lavaflow.io/duration": "10s"},
                },
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            }
        )
        out += doc(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"e{i}",
                    "annotations": {"scheduling.k8s.io/group-name": f"app{i}", "sim.lavaflow.io/spawned-by": f"d{i}"},
                },
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            }
        )
        out += doc(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"app{i}"},
                "spec": {"minMember": 1},
            }
        )
    return out


def test_stall_is_reported_the_same_with_or_without_until():
    text = _spark_like_deadlock()
    free = simulate(text, scheduler="kube-default")
    capped = simulate(text, scheduler="kube-default", until=900)
    assert free["stalled"] is True and capped["stalled"] is True
    assert free["stalledAt"] == capped["stalledAt"] is not None
    assert capped["endTime"] == 900
    assert [s["reason"] for s in free["stuck"]] == [s["reason"] for s in capped["stuck"]]


def test_running_services_are_not_a_stall_either_way():
    svc = doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "svc", "annotations": {"sim.lavaflow.io/duration": "inf"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
    )
    for kw in ({}, {"until": 300}):
        r = simulate(node_group("n", cpu="2") + svc, **kw)
        assert r["stalled"] is False and r["stalledAt"] is None
        assert len(r["stuck"]) == 1


# ------------------------------------------------- 4. a JobFlow whose JobTemplates are missing
def _template(name: str, submit_at: str | None = None) -> str:
    meta: dict = {"name": name}
    if submit_at:
        meta["annotations"] = {"sim.lavaflow.io/submit-at": submit_at}
    return doc(
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobTemplate",
            "metadata": meta,
            "spec": {
                "minAvailable": 1,
                "schedulerName": "volcano",
                "tasks": [
                    {
                        "name": "t",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                                "restartPolicy": "Never",
                            }
                        },
                    }
                ],
            },
        }
    )


FLOW = doc(
    {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": "flow"},
        "spec": {"jobRetainPolicy": "retain", "flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]},
    }
)


def test_jobflow_naming_a_missing_jobtemplate_is_refused(tmp_path):
    from lavaflow.api.loader import InputError, load_text
    from lavaflow.sim.inputs import prepare

    text = node_group("n", cpu="2") + _template("a") + FLOW
    try:
        prepare(load_text(text, "flow.yaml"))
    except InputError as exc:
        assert exc.problems == [
            "flow.yaml: document 3: JobFlow/flow: spec.flows[1].name: no JobTemplate 'b' in namespace default "
            "in the input (a flow runs the JobTemplate of its name)"
        ]
    else:
        raise AssertionError("a JobFlow with a missing JobTemplate was accepted")


def test_jobflow_runs_a_template_submitted_after_it():
    r = simulate(node_group("n", cpu="2") + FLOW + _template("a") + _template("b", submit_at="100s"))
    assert [(j["name"], j["phase"]) for j in r["jobs"]] == [("flow-a", "Completed"), ("flow-b", "Completed")]
    assert job_of(r, "flow-b")["submitTime"] == 100


def test_jobflow_whose_patched_job_is_invalid_is_reported():
    flow = doc(
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobFlow",
            "metadata": {"name": "flow"},
            "spec": {"flows": [{"name": "a", "patch": {"spec": {"minAvailable": 5}}}]},
        }
    )
    r = simulate(node_group("n", cpu="2") + _template("a") + flow)
    assert r["jobs"] == []
    [x] = r["rejected"]
    assert (x["kind"], x["name"]) == ("JobFlow", "flow")
    assert "flow 'a': Job flow-a refused: " in x["reason"] and "minAvailable" in x["reason"]


# ------------------------------------------------- 5. auto-created PodGroups naming an undeclared queue
def _deployment(queue: str, submit_at: str | None = None, on_owner: bool = False) -> str:
    ann = {"scheduling.volcano.sh/queue-name": queue}
    meta: dict = {"name": "web", "annotations": dict(ann) if on_owner else {}}
    if submit_at:
        meta["annotations"]["sim.lavaflow.io/submit-at"] = submit_at
    return doc(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "annotations": {} if on_owner else ann},
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "300m"}}}],
                    },
                },
            },
        }
    )


def _queue_doc(name: str, submit_at: str | None = None) -> str:
    meta: dict = {"name": name}
    if submit_at:
        meta["annotations"] = {"sim.lavaflow.io/submit-at": submit_at}
    return doc(
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta, "spec": {"weight": 1}}
    )


def test_deployment_naming_an_undeclared_queue_is_refused_with_the_queue_name():
    from lavaflow.api.loader import InputError, load_text
    from lavaflow.sim.inputs import prepare

    try:
        prepare(load_text(node_group("n") + _deployment("test"), "d.yaml"))
    except InputError as exc:
        assert exc.problems == [
            "d.yaml: document 2: Deployment/web: spec.template.metadata.annotations[scheduling.volcano.sh/queue-name]: "
            "Queue 'test' does not exist; existing queues are: 'default', 'root'."
        ]
    else:
        raise AssertionError("accepted a Deployment whose queue does not exist")


def test_a_queue_named_on_the_deployment_itself_is_not_read_as_volcano_does_not():
    """Volcano's podgroup controller takes the gang size from the owner's annotations but the
    queue from the pod's own: a queue named on the Deployment's metadata is not read (the
    differential harness showed vc-scheduler running such pods in 'default'). Accepted with a
    warning, the pods in queue 'default'."""
    from lavaflow.api.loader import load_text
    from lavaflow.sim.inputs import prepare

    text = node_group("n") + _queue_doc("test") + _deployment("test", on_owner=True)
    sim = prepare(load_text(text, "d.yaml"))
    assert any("metadata.annotations[scheduling.volcano.sh/queue-name]: not read" in w for w in sim.warnings)
    r = simulate(text, until=30)
    assert {j["queue"] for j in r["jobs"]} == {"default"}
    r = simulate(node_group("n") + _queue_doc("test") + _deployment("test"), until=30)
    assert {j["queue"] for j in r["jobs"]} == {"test"}


def test_bare_pod_naming_an_undeclared_queue_is_refused():
    from lavaflow.api.loader import InputError, load_text
    from lavaflow.sim.inputs import prepare

    p = doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"scheduling.volcano.sh/queue-name": "gone"}},
            "spec": {"containers": [{"name": "c"}]},
        }
    )
    try:
        prepare(load_text(node_group("n") + p, "p.yaml"))
    except InputError as exc:
        assert (
            len(exc.problems) == 1
            and "Pod/p: metadata.annotations[scheduling.volcano.sh/queue-name]: Queue 'gone' does not exist"
            in exc.problems[0]
        )
    else:
        raise AssertionError("accepted a Pod whose queue does not exist")


def test_deployment_waiting_for_a_queue_created_later_says_which_queue():
    r = simulate(node_group("n") + _deployment("test") + _queue_doc("test", submit_at="50s"), until=20)
    [s] = r["stuck"]
    assert s["reason"] == "Queue 'test' does not exist; existing queues are: 'default', 'root'."
    r = simulate(node_group("n") + _deployment("test") + _queue_doc("test", submit_at="50s"), until=200)
    pod = r["pods"][0]
    assert pod["startTime"] == 50


# ------------------------------------------------- 6. lost pods of Deployments / StatefulSets are replaced
RECLAIM_CONF = doc(
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-scheduler-configmap"},
        "data": {
            "volcano-scheduler.conf": """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
        },
    }
)


def _workload(kind: str, name: str, replicas: int, queue: str, cpu: str = "1") -> str:
    return doc(
        {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}, "annotations": {"scheduling.volcano.sh/queue-name": queue}},
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                    },
                },
            },
        }
    )


def _batch_job(name: str, queue: str, replicas: int, submit_at: str, duration: str = "30s") -> str:
    return doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name, "annotations": {"sim.lavaflow.io/submit-at": submit_at}},
            "spec": {
                "minAvailable": replicas,
                "schedulerName": "volcano",
                "queue": queue,
                "tasks": [
                    {
                        "name": "t",
                        "replicas": replicas,
                        "template": {
                            "metadata": {"annotations": {"sim.lavaflow.io/duration": duration}},
                            "spec": {
                                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                                "restartPolicy": "Never",
                            },
                        },
                    }
                ],
            },
        }
    )


def test_reclaimed_deployment_pod_is_replaced_and_runs_again():
    text = (
        node_group("n", count=2, cpu="2")
        + RECLAIM_CONF
        + _queue_doc("svc")
        + _queue_doc("batch")
        + _workload("Deployment", "web", 4, "svc")
        + _batch_job("train", "batch", 2, "10s")
    )
    r = simulate(text, until=300)
    assert job_of(r, "train")["phase"] == "Completed"
    web = [p for p in r["pods"] if p["name"].startswith("web-")]
    evicted = [p for p in web if p["phase"] == "Deleted"]
    assert len(evicted) == 2  # the batch queue deserved half the cluster
    replaced = [p for p in web if p["createTime"] > 0]
    assert sorted(p["name"] for p in replaced) == sorted(p["name"] for p in evicted)
    assert all(p["phase"] == "Running" and p["startTime"] >= job_of(r, "train")["finishTime"] for p in replaced)
    assert sum(1 for p in web if p["phase"] == "Running") == 4  # the owner is whole again


def test_service_pods_run_until_deleted_by_default():
    r = simulate(node_group("n", count=1, cpu="4") + _workload("StatefulSet", "db", 2, "default"), until=1000)
    assert [p["phase"] for p in r["pods"]] == ["Running", "Running"]
    assert r["stalled"] is False


def test_pods_lost_with_a_failed_node_are_recreated_elsewhere():
    nodes = doc(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "a", "annotations": {"sim.lavaflow.io/fail-at": "20s"}},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
        }
    ) + doc(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "b"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
        }
    )
    r = simulate(nodes + _workload("ReplicaSet", "rs", 2, "default", cpu="500m"), until=100)
    live = [p for p in r["pods"] if p["phase"] == "Running"]
    assert len(live) == 2 and all(p["node"] == "b" for p in live)


# ------------------------------------------------- 7. kubelet labels, ephemeral-storage, resource named
def _job_with(requests: dict, node_selector: dict | None = None) -> str:
    spec: dict = {
        "containers": [{"name": "c", "image": "x", "resources": resources(requests)}],
        "restartPolicy": "Never",
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {
                "minAvailable": 1,
                "schedulerName": "volcano",
                "tasks": [{"name": "t", "replicas": 1, "template": {"spec": spec}}],
            },
        }
    )


def test_nodes_carry_the_kubelet_labels_volcano_examples_select():
    plain_node = doc(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "worker"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}},
        }
    )
    for nodes in (node_group("n"), plain_node):
        r = simulate(nodes + _job_with({"cpu": "1"}, {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}))
        assert job_of(r, "j")["phase"] == "Completed", r["stuck"]
    r = simulate(plain_node + _job_with({"cpu": "1"}, {"kubernetes.io/hostname": "worker"}))
    assert job_of(r, "j")["phase"] == "Completed"


def test_nodes_have_ephemeral_storage_by_default():
    r = simulate(node_group("n") + _job_with({"cpu": "1", "ephemeral-storage": "2Gi"}))
    assert job_of(r, "j")["phase"] == "Completed", r["stuck"]


def test_admission_refusal_names_the_missing_resource():
    r = simulate(node_group("n", cpu="8") + _job_with({"cpu": "1", "example.com/fpga": "1"}))
    [s] = r["stuck"]
    assert "exceed what the cluster can admit in example.com/fpga " in s["reason"]
    assert "example.com/fpga 0 left" in s["reason"]
    assert "in cpu" not in s["reason"]


# ------------------------------------------------- 11. a queue's capability is called its capability
def test_queue_at_its_capability_is_not_called_its_deserved_share():
    q = doc(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "capped"},
            "spec": {"weight": 1, "capability": {"cpu": "2"}},
        }
    )
    job = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "wide"},
            "spec": {
                "minAvailable": 1,
                "schedulerName": "volcano",
                "queue": "capped",
                "tasks": [
                    {
                        "name": "t",
                        "replicas": 3,
                        "template": {
                            "metadata": {"annotations": {"sim.lavaflow.io/duration": "inf"}},
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                        },
                    }
                ],
            },
        }
    )
    r = simulate(node_group("n", count=2, cpu="4") + q + job, until=10)
    [s] = r["stuck"]
    assert s["reason"].endswith("queue capped has reached its capability in cpu (capability cpu 2)"), s
    assert "deserved" not in s["reason"]


# ------------------------------------------------- 8. unknown plugins are skipped, visibly
REAL_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: deviceshare
    arguments: {deviceshare.GPUSharingEnable: true}
  - name: predicates
  - name: numa-aware
  - name: task-topology
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
  - name: usage
  - name: tdm
  - name: pdb
  - name: cdp
"""


def _configmap(conf: str) -> str:
    return doc(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": conf},
        }
    )


def test_real_volcano_conf_with_unknown_plugins_runs_with_warnings():
    r = simulate(
        node_group("gpu", count=2, cpu="8", **{"nvidia.com/gpu": "1"}) + _configmap(REAL_CONF) + MINDSPORE_LIKE
    )
    assert job_of(r, "ms")["phase"] == "Completed"
    skipped = [w for w in r["warnings"] if "unknown plugin" in w]
    assert [w.split(": ")[3] for w in skipped] == [
        "data[volcano-scheduler.conf].tiers[1].plugins[9].name",
        "data[volcano-scheduler.conf].tiers[1].plugins[10].name",
        "data[volcano-scheduler.conf].tiers[1].plugins[11].name",
        "data[volcano-scheduler.conf].tiers[1].plugins[12].name",
    ]
    assert all(w.startswith("<input>: document 2: ConfigMap/volcano-scheduler-configmap: ") for w in skipped)
    assert "'usage' skipped" in skipped[0]


def test_cli_prints_skipped_plugins_on_stderr_and_in_json(tmp_path):
    import subprocess
    import sys

    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(REAL_CONF)
    inp = tmp_path / "in.yaml"
    inp.write_text(node_group("gpu", count=2, cpu="8", **{"nvidia.com/gpu": "1"}) + MINDSPORE_LIKE)
    res = subprocess.run(
        [sys.executable, "-m", "lavaflow.cli", "simulate", str(inp), "--config", str(conf), "--output", "json"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("warning: ")]
    assert len(lines) == 4 and lines[0].startswith(
        f"warning: {conf}: tiers[1].plugins[9].name: unknown plugin 'usage' skipped"
    )
    assert len(json.loads(res.stdout)["warnings"]) == 4


def test_unknown_action_and_kube_default_action_are_still_refused():
    from lavaflow.api.loader import InputError, load_text
    from lavaflow.sim.inputs import prepare

    for actions, expect in (
        ("enqueue, allocate, shuffle-all", "unknown action 'shuffle-all'"),
        ("enqueue, kube-default", "'kube-default' is not a Volcano action"),
    ):
        text = node_group("n") + _configmap(f'actions: "{actions}"\ntiers:\n- plugins:\n  - name: gang\n')
        try:
            prepare(load_text(text, "c.yaml"))
        except InputError as exc:
            [line] = exc.problems
            assert line.startswith(
                "c.yaml: document 2: ConfigMap/volcano-scheduler-configmap: data[volcano-scheduler.conf].actions: "
            )
            assert expect in line
        else:
            raise AssertionError(f"accepted actions {actions!r}")


def test_kube_scheduler_exposes_skipped_plugins_as_a_metric():
    import pytest

    pytest.importorskip("prometheus_client")
    from prometheus_client import generate_latest

    from lavaflow.kube.client import ClientConfig, KubeClient
    from lavaflow.kube.scheduler_process import KubeScheduler
    from lavaflow.scheduler.framework.conf import load_scheduler_conf

    s = KubeScheduler(
        KubeClient(ClientConfig(server="http://127.0.0.1:9")), load_scheduler_conf(REAL_CONF), emit_events=False
    )
    text = generate_latest(s.metrics.registry).decode()
    for name in ("usage", "tdm", "pdb", "cdp"):
        assert f'lavaflow_scheduler_skipped_plugins{{plugin="{name}"}} 1.0' in text


# ------------------------------------------------- 9. constraints lavaflow does not implement: warned once per job
def test_unimplemented_constraints_are_warned_once_per_job():
    job = json.loads(MINDSPORE_LIKE.split("\n", 1)[1])
    job["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    job["spec"]["tasks"][1]["topologyPolicy"] = "single-numa-node"
    job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    plain = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "plain"},
            "spec": {
                "minAvailable": 1,
                "tasks": [
                    {
                        "name": "t",
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                    }
                ],
            },
        }
    )
    part = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "part"},
            "spec": {
                "tasks": [
                    {
                        "name": "t",
                        "replicas": 2,
                        "partitionPolicy": {"totalPartitions": 2, "partitionSize": 1},
                        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                    }
                ]
            },
        }
    )
    pod = doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "dra"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "x"}], "containers": [{"name": "c"}]},
        }
    )
    r = simulate(node_group("gpu", count=2, cpu="8", **{"nvidia.com/gpu": "1"}) + doc(job) + plain + part + pod)
    assert r["warnings"] == [
        "<input>: document 2: Job/ms: "
        "spec.tasks[1].template.spec.containers[0].resources.claims: not implemented by lavaflow, ignored "
        "(the job is scheduled without it)",
        "<input>: document 4: Job/part: spec.tasks[0].partitionPolicy: not implemented by lavaflow, ignored "
        "(the job is scheduled without it)",
        "<input>: document 5: Pod/dra: spec.resourceClaims: not implemented by lavaflow, ignored "
        "(the job is scheduled without it)",
    ]
    assert job_of(r, "ms")["phase"] == "Completed"


# ------------------------------------------------- 2. reclaim takes only what a starving job needs
def _elastic_job(name: str, queue: str, replicas: int, min_available: int, duration: str, submit_at: str = "0s") -> str:
    return doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name, "annotations": {"sim.lavaflow.io/submit-at": submit_at}},
            "spec": {
                "minAvailable": min_available,
                "schedulerName": "volcano",
                "queue": queue,
                "tasks": [
                    {
                        "name": "t",
                        "replicas": replicas,
                        "minAvailable": min_available,
                        "template": {
                            "metadata": {"annotations": {"sim.lavaflow.io/duration": duration}},
                            "spec": {
                                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                                "restartPolicy": "Never",
                            },
                        },
                    }
                ],
            },
        }
    )


def test_reclaim_stops_once_the_job_is_no_longer_starving():
    text = (
        node_group("n", count=1, cpu="4")
        + RECLAIM_CONF
        + _queue_doc("qa")
        + _queue_doc("qb")
        + _elastic_job("big", "qa", 4, 1, "1000s")
        + _elastic_job("small", "qb", 3, 1, "100s", submit_at="10s")
    )
    r = simulate(text, until=50)
    evicted = [p for p in r["pods"] if p["job"] == "big" and p["phase"] == "Deleted"]
    assert len(evicted) == 1  # minAvailable 1: one task's room, not the two cpus qb deserves
    small = [p for p in r["pods"] if p["job"] == "small"]
    assert sum(1 for p in small if p["startTime"] is not None) == 1


# ------------------------------------------------- 11. the CLI starts without the cluster modules
def test_simulate_starts_without_kubernetes_matplotlib_or_scipy():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.argv = ['lavaflow', 'simulate', '--help']\n"
        "from lavaflow.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('lavaflow.kube', 'lavaflow.elastic', 'matplotlib', "
        "'scipy', 'aiohttp', 'prometheus_client', 'markdown_it', 'rich.markdown')))\n"
        "print('HEAVY', heavy)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stdout
    assert "--explain" in res.stdout  # the help itself was printed


def test_full_app_still_has_the_cluster_commands():
    from typer.main import get_command

    from lavaflow.cli import app

    assert {"simulate", "version", "scheduler", "queue", "job"} <= set(get_command(app).commands)


# ------------------------------------------------- 11. smaller things a user hits
def _cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "lavaflow.cli", *args], capture_output=True, text=True)


def test_explain_takes_a_deployment_or_a_pod_name(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text(node_group("n", cpu="4") + _workload("Deployment", "web", 2, "default", cpu="3"))
    for target in ("default/web", "web-0"):
        res = _cli("simulate", str(f), "--until", "10", "--explain", target)
        assert res.returncode == 0, res.stderr
        assert "(Deployment/web) did what it did" in res.stdout
        assert "web-0 started on n-0" in res.stdout
    res = _cli("simulate", str(f), "--until", "10", "--explain", "default/nope")
    assert res.returncode == 2 and "(jobs: default/web)" in res.stderr


def test_generate_name_objects_are_named_by_their_prefix_in_errors():
    from lavaflow.api.loader import InputError, load_text
    from lavaflow.sim.inputs import prepare

    job = doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"generateName": "train-"},
            "spec": {
                "minAvailable": 3,
                "tasks": [{"name": "t", "replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}],
            },
        }
    )
    try:
        prepare(load_text(job, "g.yaml"))
    except InputError as exc:
        [line] = exc.problems
        assert line.startswith("g.yaml: document 1: Job/train-*: spec.minAvailable: ")
    else:
        raise AssertionError("accepted minAvailable above replicas")


def test_type_errors_are_in_the_users_words():
    from lavaflow.api.loader import InputError, load_text

    bad = doc(
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "a"}, "spec": [1, 2]}
    ) + doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "b"},
            "spec": {"minAvailable": "two", "tasks": {"name": "t"}},
        }
    )
    try:
        load_text(bad, "t.yaml")
    except InputError as exc:
        assert exc.problems == [
            "t.yaml: document 1: Job/a: spec: expected a mapping (key: value), found a list",
            "t.yaml: document 2: Job/b: spec.minAvailable: expected a whole number, found the string 'two'",
            "t.yaml: document 2: Job/b: spec.tasks: expected a list, found a mapping",
        ]
        assert not any("JobSpec" in p or "Input should" in p for p in exc.problems)
    else:
        raise AssertionError("accepted malformed Jobs")


RAY_BUNDLE = _queue_doc("kuberay-test-queue") + doc(
    {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "test-cluster-0", "labels": {"ray.io/scheduler-name": "volcano"}},
        "spec": {"rayVersion": "2.9.0"},
    }
)


def test_unsupported_kind_refuses_the_bundle_unless_asked_to_skip(tmp_path):
    f = tmp_path / "ray.yaml"
    f.write_text(node_group("n", cpu="4") + RAY_BUNDLE + _workload("Deployment", "web", 1, "kuberay-test-queue"))
    res = _cli("simulate", str(f))
    assert res.returncode == 2
    assert (
        f"{f}: document 3: RayCluster/test-cluster-0: unsupported kind 'RayCluster' of 'ray.io/v1' (--skip-unsupported"
        in res.stderr
    )
    res = _cli("simulate", str(f), "--skip-unsupported", "--output", "json", "--until", "5")
    assert res.returncode == 0, res.stderr
    assert (
        f"warning: {f}: document 3: RayCluster/test-cluster-0: unsupported kind 'RayCluster' of 'ray.io/v1', skipped"
        in res.stderr
    )
    out = json.loads(res.stdout)
    assert out["warnings"] == [
        f"{f}: document 3: RayCluster/test-cluster-0: unsupported kind 'RayCluster' of 'ray.io/v1', skipped"
    ]
    assert [j["owner"] for j in out["jobs"]] == ["Deployment/web"]
