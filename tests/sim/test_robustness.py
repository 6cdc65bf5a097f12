"""Issue 15: refuse what the API server refuses, never loop, never report a loss as a success."""

from __future__ import annotations

import json

import pytest

from conftest import node_group, resources, simulate
from lavaflow.api.loader import InputError, load_text
from lavaflow.sim.inputs import prepare


def _refused(text: str) -> list[str]:
    """The problem lines of an input prepare() refuses."""
    with pytest.raises(InputError) as err:
        prepare(load_text(text))
    return err.value.problems


def _doc(obj: dict) -> str:
    return "---\n" + json.dumps(obj) + "\n"


def _task(name: str, replicas: int, requests: dict, duration: str = "10s", **extra) -> dict:
    return {
        "name": name,
        "replicas": replicas,
        **extra,
        "template": {
            "metadata": {"annotations": {"sim.lavaflow.io/duration": duration}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "resources": resources(requests)}]},
        },
    }


def _vcjob(
    name: str, tasks: list[dict], min_available: int, queue: str = "default", spec: dict | None = None, **meta
) -> str:
    return _doc(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name, **meta},
            "spec": {
                "schedulerName": "volcano",
                "queue": queue,
                "minAvailable": min_available,
                "tasks": tasks,
                **(spec or {}),
            },
        }
    )


def _queue(name: str, **spec) -> str:
    return _doc(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, **spec},
        }
    )


def _job(r: dict, name: str) -> dict:
    return next(j for j in r["jobs"] if j["name"] == name)


# ------------------------------------------------------------ 6: allocate skips a refused task
def test_allocate_skips_a_task_its_queue_refuses_and_places_the_others():
    # Task "a" (first in task order) needs more memory than the queue's capability; the two "b"
    # tasks are the job's minimum and fit. Volcano's allocate skips "a" and binds the gang.
    text = (
        node_group(cpu="8", memory="16Gi")
        + _queue("q", capability={"memory": "2Gi"})
        + _vcjob(
            "j",
            [_task("b", 2, {"cpu": "1", "memory": "1Gi"}), _task("a", 1, {"cpu": "1", "memory": "4Gi"})],
            2,
            queue="q",
        )
    )
    r = simulate(text, until=100)
    b = [p for p in r["pods"] if p["task"] == "b"]
    assert len(b) == 2 and all(p["startTime"] is not None for p in b)
    a = [p for p in r["pods"] if p["task"] == "a"]
    assert all(p["startTime"] is None for p in a)
    assert _job(r, "j")["phase"] == "Running"
    assert [s["name"] for s in r["stuck"]] == ["j"]


def _conf(actions: str, queue_plugin: str = "proportion") -> str:
    text = (
        f'actions: "{actions}"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n'
        f"- plugins:\n  - name: overcommit\n    arguments: {{overcommit-factor: 10}}\n  - name: drf\n  - name: predicates\n  - name: {queue_plugin}\n"
        "  - name: nodeorder\n"
    )
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": text},
        }
    )


def _priority_class(name: str, value: int) -> str:
    return _doc(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    )


def _with_priority(task: dict, pc: str) -> dict:
    task["template"]["spec"]["priorityClassName"] = pc
    return task


def _evictions(r: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in r["pods"]:
        if p["phase"] == "Deleted" and p.get("reason") == "Evicted":
            out[p["name"]] = out.get(p["name"], 0) + 1
    return out


def test_preemptor_with_a_refused_task_starts_after_one_eviction_no_loop():
    # The low-priority job holds 3 of the node's 4 CPUs. The high-priority job needs its two "b"
    # tasks (its minimum); its "a" task is refused by the queue. Preempt evicts "low" once, then
    # allocate binds the two "b" tasks (skipping "a"); "low" waits and runs afterwards.
    text = (
        _conf("enqueue, allocate, preempt, backfill")
        + node_group(cpu="4", memory="16Gi")
        + node_group("tainted", cpu="4", memory="16Gi", taints=[{"key": "x", "effect": "NoSchedule"}])
        + _priority_class("low", 10)
        + _priority_class("high", 1000)
        + _queue("q", capability={"memory": "2Gi"})
        + _vcjob(
            "low",
            [_with_priority(_task("t", 2, {"cpu": "1500m"}, "100s"), "low")],
            1,
            queue="q",
            spec={"priorityClassName": "low"},
        )
        + _vcjob(
            "j",
            [
                _with_priority(_task("b", 2, {"cpu": "1", "memory": "1Gi"}), "high"),
                _with_priority(_task("a", 1, {"cpu": "1", "memory": "4Gi"}), "high"),
            ],
            2,
            queue="q",
            spec={"priorityClassName": "high"},
            annotations={"sim.lavaflow.io/submit-at": "5"},
        )
    )
    r = simulate(text, until=1000)
    assert _evictions(r) == {"low-t-0": 1}
    b = [p for p in r["pods"] if p["task"] == "b"]
    assert len(b) == 2 and all(p["phase"] == "Succeeded" for p in b)
    low = [p for p in r["pods"] if p["job"] == "low"]
    assert low[-1]["phase"] == "Succeeded"


# ------------------------------------------------------------ 1: no reclaim/preempt livelock
def _pod(name: str, cpu: str, queue: str, submit_at: int, duration: str = "60s") -> str:
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "annotations": {
                    "sim.lavaflow.io/duration": duration,
                    "sim.lavaflow.io/submit-at": str(submit_at),
                    "scheduling.volcano.sh/queue-name": queue,
                },
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
    )


RECLAIM_LOOP = (
    # Both queues deserve the whole 2-CPU node; on a tie in share allocate serves q1 first, so the
    # room reclaim freed for q2's pod used to go straight back to q1's replacement pod, forever.
    _conf("enqueue, allocate, backfill, reclaim", "capacity")
    + node_group(cpu="2", memory="8Gi")
    + _queue("q1", weight=3)
    + _queue("q2")
    + _vcjob("w1", [_task("t", 3, {"cpu": "1500m"}, "20s")], 1, queue="q1")
    + _pod("w0", "1500m", "q2", 17)
)


def test_reclaim_gives_the_freed_room_to_the_reclaimer_no_livelock():
    r = simulate(RECLAIM_LOOP)  # no --until: the run must end on its own
    assert r["stuck"] == [] and r["stalled"] is False
    ev = _evictions(r)
    assert sum(ev.values()) <= 1, ev
    w0 = next(p for p in r["pods"] if p["name"] == "w0")
    assert w0["phase"] == "Succeeded"
    assert all(j["phase"] == "Completed" for j in r["jobs"])


# ------------------------------------------------------------ 2: lost work is never Completed
def _bare(name: str, duration: str, **ann) -> str:
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": {"sim.lavaflow.io/duration": duration, **ann}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
    )


def _node(name: str, **ann) -> str:
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "annotations": ann},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110"}},
        }
    )


LOST = (
    _node("n0", **{"sim.lavaflow.io/fail-at": "10"})
    + _bare("lost", "100s")
    + _bare("deleted", "100s", **{"sim.lavaflow.io/delete-at": "20"})
    + _bare("done", "5s")
    + _doc(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {"sim.lavaflow.io/delete-at": "8"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "annotations": {"sim.lavaflow.io/duration": "inf"}},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "0"}}}]},
                },
            },
        }
    )
)


def test_lost_and_deleted_work_of_podgroup_jobs_is_not_completed():
    r = simulate(LOST)
    by = {j["name"].split("-")[0] if j["name"].startswith("web") else j["name"]: j for j in r["jobs"]}
    phases = {p["name"]: p for p in r["pods"]}
    assert phases["done"]["phase"] == "Succeeded"
    jobs = {next(p["job"] for p in r["pods"] if p["name"] == n): n for n in ("lost", "deleted", "done", "web-0")}
    result = {jobs[j["name"]]: j for j in r["jobs"] if j["name"] in jobs}
    assert result["done"]["phase"] == "Completed" and "reason" not in result["done"]
    assert result["lost"]["phase"] == "Lost"
    assert result["lost"]["reason"] == "pod lost was lost with node n0 at t=10"
    assert result["deleted"]["phase"] == "Lost"  # lost with the node at t=10, before its delete-at
    assert result["web-0"]["phase"] == "Deleted"
    assert result["web-0"]["reason"] == "pod web-0 was deleted at t=8 after it started"
    assert r["summary"]["completed"] == 1
    assert r["stuck"] == []
    assert by  # every job listed


def test_deleted_bare_pod_is_reported_deleted_in_json_table_and_report(tmp_path):
    import subprocess
    import sys

    f = tmp_path / "in.yaml"
    f.write_text(_node("n0") + _bare("gone", "100s", **{"sim.lavaflow.io/delete-at": "20"}) + _bare("ok", "5s"))
    env_py = [sys.executable, "-m", "lavaflow.cli", "simulate", str(f)]
    out = subprocess.run(env_py + ["--output", "json"], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    gone = next(j for j in r["jobs"] if j["phase"] not in ("Completed",))
    assert gone["phase"] == "Deleted" and gone["reason"] == "pod gone was deleted at t=20 after it started"
    assert r["summary"]["completed"] == 1
    table = subprocess.run(
        env_py + ["--report", str(tmp_path / "r.html")], capture_output=True, text=True, check=True
    ).stdout
    assert "1 job(s) ended without completing their work" in table
    assert "Deleted: pod gone was deleted at t=20 after it started" in table
    html = (tmp_path / "r.html").read_text()
    assert "Job that lost work" in html and "pod gone was deleted at t=20" in html


# ------------------------------------------------------------ 3, 4, 5: refuse what the API server refuses
def _run_cli(tmp_path, text: str):
    import subprocess
    import sys

    f = tmp_path / "bad.yaml"
    f.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "lavaflow.cli", "simulate", str(f), "--output", "json"], capture_output=True, text=True
    )


def _errors(proc) -> list[str]:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def test_negative_requests_capacity_and_capability_are_refused(tmp_path):
    text = (
        _doc(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n0"},
                "status": {"allocatable": {"cpu": "-4", "memory": "4Gi"}},
            }
        )
        + node_group("g", cpu="-1")
        + _queue("q", capability={"cpu": "-2"}, deserved={"memory": "-1Gi"})
        + _bare("neg", "5s").replace('"cpu": "1"', '"cpu": "-1"')
        + _vcjob("j", [_task("t", 1, {"cpu": "-500m"})], 1)
    )
    lines = _errors(_run_cli(tmp_path, text))
    assert any(
        "Node/n0: status.allocatable[cpu]: allocatable cpu is -4; it must not be negative." in x for x in lines
    ), lines
    assert any("NodeGroup/g: spec.capacity[cpu]: capacity cpu is -1; it must not be negative." in x for x in lines), (
        lines
    )
    assert any("Queue/q: spec.capability[cpu]: capability cpu is -2; it must not be negative." in x for x in lines), (
        lines
    )
    assert any("Queue/q: spec.deserved[memory]" in x for x in lines), lines
    assert any(
        "Pod/neg: spec.containers[0].resources.requests[cpu]: request cpu is -1; it must not be negative." in x
        for x in lines
    ), lines
    assert any("Job/j: spec.tasks[0].template.spec.containers[0].resources.requests[cpu]" in x for x in lines), lines


def test_negative_request_can_no_longer_overcommit_a_node():
    text = node_group(cpu="4") + _bare("neg", "5s").replace('"cpu": "1"', '"cpu": "-2"')
    try:
        prepare(load_text(text))
    except InputError as exc:
        assert any("must not be negative" in str(p) for p in exc.problems), exc.problems
    else:
        raise AssertionError("a negative request was accepted")


def test_replicas_beyond_int32_and_beyond_the_simulator_limit_are_refused_quickly(tmp_path):
    text = (
        node_group()
        + _vcjob("huge", [_task("t", 2**31, {"cpu": "1"})], 1)
        + _vcjob("big", [_task("t", 10**6, {"cpu": "1"})], 1)
        + _doc(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {"replicas": 2**40, "template": {"spec": {"containers": [{"name": "c"}]}}},
            }
        )
    )
    lines = _errors(_run_cli(tmp_path, text))
    assert any(
        "Job/huge: spec.tasks[0].replicas: replicas is 2147483648; it does not fit Kubernetes' 32-bit integer" in x
        for x in lines
    ), lines
    assert any(
        "Job/big: spec.tasks[0].replicas: replicas is 1000000; the simulator creates at most 100000 pods" in x
        for x in lines
    ), lines
    assert any("Deployment/d: spec.replicas: replicas is 1099511627776; it does not fit" in x for x in lines), lines


def test_names_and_objects_the_api_server_refuses(tmp_path):
    bad_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "Bad_Pod", "namespace": "Team.A"},
        "spec": {"containers": []},
    }
    unnamed = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "unnamed"},
        "spec": {"containers": [{"image": "x"}, {"name": "Main"}]},
    }
    text = (
        _doc(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "Node_1"},
                "status": {"allocatable": {"cpu": "4"}},
            }
        )
        + _doc(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "Q1"},
                "spec": {"weight": 1},
            }
        )
        + _doc(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "Top"}, "value": 1000}
        )
        + _priority_class("too-high", 2_000_000_000)
        + _doc({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}})
        + _doc(bad_pod)
        + _doc(unnamed)
    )
    lines = _errors(_run_cli(tmp_path, text))
    expected = [
        "Node/Node_1: metadata.name: Node name 'Node_1' is not a valid DNS-1123 subdomain",
        "Queue/Q1: metadata.name: Queue name 'Q1' is not a valid DNS-1123 subdomain",
        "PriorityClass/Top: metadata.name: PriorityClass name 'Top' is not a valid DNS-1123 subdomain",
        "PriorityClass/too-high: value: value is 2000000000; a PriorityClass may have at most 1000000000",
        "Namespace/a.b: metadata.name: Namespace name 'a.b' is not a valid DNS-1123 label",
        "metadata.name: Pod name 'Bad_Pod' is not a valid DNS-1123 subdomain",
        "metadata.namespace: Namespace 'Team.A' is not a valid DNS-1123 label",
        "spec.containers: The pod has no containers",
        "Pod/unnamed: spec.containers[0].name: The container has no name",
        "Pod/unnamed: spec.containers[1].name: Container name 'Main' is not a valid DNS-1123 label",
    ]
    for e in expected:
        assert sum(e in x for x in lines) == 1, (e, lines)
    assert len(lines) == len(expected), lines


def test_the_webhook_applies_the_same_rules():
    from lavaflow.kube.webhook import review

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]},
    }
    resp = review({"uid": "u", "operation": "CREATE", "object": pod}, "Pod", False)
    assert resp["allowed"] is False
    assert (
        "spec.containers[0].resources.requests[cpu]: request cpu is -1; it must not be negative."
        in resp["status"]["message"]
    )
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 1, "capability": {"cpu": "-1"}},
    }
    resp = review({"uid": "u", "operation": "CREATE", "object": q}, "Queue", False, queues={})
    assert resp["allowed"] is False and "capability cpu is -1" in resp["status"]["message"]


# ------------------------------------------------------------ 7: minResources from each task's minimum first
def _min_resources(tasks: list[tuple[str, int, int | None, str]], min_available: int) -> dict:
    from lavaflow.api.volcano import Job
    from lavaflow.controllers.job import JobController

    job = Job.model_validate(
        {
            "metadata": {"name": "j"},
            "spec": {
                "minAvailable": min_available,
                "tasks": [
                    {
                        "name": n,
                        "replicas": r,
                        **({"minAvailable": m} if m is not None else {}),
                        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
                    }
                    for n, r, m, cpu in tasks
                ],
            },
        }
    )

    class Stub:
        def priority_of(self, name):
            return 0

    return JobController._min_resources(Stub(), job)


def test_min_resources_take_each_tasks_minimum_first():
    # Volcano's design table (master 50m x2, work 100m x2): job/master/work minAvailable -> minResources.
    assert _min_resources([("master", 2, 1, "50m"), ("work", 2, 1, "100m")], 2)["cpu"] == "0.15"
    assert _min_resources([("master", 2, 1, "50m"), ("work", 2, 1, "100m")], 3)["cpu"] == "0.2"
    assert _min_resources([("master", 2, 1, "50m"), ("work", 2, None, "100m")], 3)["cpu"] == "0.25"
    # minAvailable below the tasks' minimums: the first minAvailable pods by priority.
    assert _min_resources([("master", 2, None, "50m"), ("work", 2, 1, "100m")], 2)["cpu"] == "0.1"


def test_job_whose_minimum_fits_is_admitted_on_a_small_gpu_cluster():
    # minAvailable 2 = one "gpu" pod (its task's minimum) + one "cpu" pod: 1 GPU, which the node has.
    # Taking the first two pods in task order asked for 2 GPUs and the job was never admitted.
    text = node_group(cpu="8", memory="16Gi", **{"nvidia.com/gpu": "1"}) + _vcjob(
        "train",
        [
            _task("gpu", 2, {"cpu": "1", "nvidia.com/gpu": "1"}, minAvailable=1),
            _task("cpu", 1, {"cpu": "1"}, minAvailable=1),
        ],
        2,
    )
    r = simulate(text)
    assert _job(r, "train")["phase"] == "Completed"
    assert _job(r, "train")["startTime"] is not None and _job(r, "train")["startTime"] <= 1


# ------------------------------------------------------------ 8: broken YAML inside volcano-scheduler.conf
BROKEN_CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n   - name: gang\n'


def test_broken_yaml_in_the_configmap_is_one_line_naming_file_key_and_line(tmp_path):
    cm = _doc(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap"},
            "data": {"volcano-scheduler.conf": BROKEN_CONF},
        }
    )
    proc = _run_cli(tmp_path, node_group() + cm)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"error: {tmp_path / 'bad.yaml'}: document 2: ConfigMap/volcano-scheduler-configmap: "
        "data[volcano-scheduler.conf]: not valid YAML at line 5, column 4 of the configuration: "
    )
    assert "<unicode string>" not in lines[0]


def test_broken_yaml_in_a_config_file_is_one_line(tmp_path):
    import subprocess
    import sys

    conf = tmp_path / "sched.conf"
    conf.write_text(BROKEN_CONF)
    f = tmp_path / "in.yaml"
    f.write_text(node_group())
    proc = subprocess.run(
        [sys.executable, "-m", "lavaflow.cli", "simulate", str(f), "--config", str(conf)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {conf}: not valid YAML at line 5, column 4 of the configuration: ")


def test_a_preemptor_whose_evictions_never_let_it_start_stops_evicting(monkeypatch):
    # Without the nominated job going first, the freed room goes back to the victim's replacement
    # every cycle (Volcano's behaviour): evicting then never helps the reclaimer. After two futile
    # rounds it evicts no more, the run ends on its own and says why the reclaimer waited.
    from lavaflow.scheduler.actions.allocate import AllocateAction

    monkeypatch.setattr(AllocateAction, "_serve_nominated", lambda self, ssn, per_queue, eligible, held: set())
    r = simulate(RECLAIM_LOOP)
    ev = _evictions(r)
    assert ev == {"w1-t-1": 3}, ev
    w0 = next(p for p in r["pods"] if p["name"] == "w0")
    assert w0["phase"] == "Succeeded"  # once w1 finished
    assert any(
        "preemption stopped: evicting for this job 3 times did not let it start" in d["message"]
        for hist in r["decisions"].values()
        for d in hist
    )


def test_allocate_goes_on_past_a_task_that_fits_no_node_when_other_roles_can_make_the_gang():
    # Volcano's NeedContinueAllocating: "a" (first in task order) fits no node, but the two "b"
    # tasks make minAvailable. Stopping at "a" stalled the job, and reclaim/preempt (which place
    # every task that fits) evicted for placements allocate then refused: a livelock.
    text = node_group(count=2, cpu="2", memory="8Gi") + _vcjob(
        "j", [_task("b", 2, {"cpu": "1"}), _task("a", 1, {"cpu": "3"})], 2
    )
    r = simulate(text, until=100)
    b = [p for p in r["pods"] if p["task"] == "b"]
    assert len(b) == 2 and all(p["phase"] == "Succeeded" for p in b)
    assert [s["name"] for s in r["stuck"]] == ["j"]
    assert "Insufficient cpu" in r["stuck"][0]["reason"]  # "a" fits no node


def test_objects_saved_with_kubectl_get_keep_their_meaning(tmp_path):
    """``kubectl get -o yaml`` output carries what the API server set (creationTimestamp as an
    RFC 3339 string, resourceVersion, uid): the simulator stamps its own, as the server would on
    create, instead of failing on the string."""
    text = """apiVersion: v1
kind: Node
metadata: {name: n1, creationTimestamp: "2026-11-27T10:00:00Z", resourceVersion: "17", uid: 5c1d6d0e-aaaa-bbbb-cccc-000000000001}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, namespace: default, creationTimestamp: "2026-11-27T10:00:00Z", resourceVersion: "123"}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata:
  name: p0
  namespace: default
  creationTimestamp: "2026-11-27T10:00:01Z"
  resourceVersion: "124"
  uid: 5c1d6d0e-aaaa-bbbb-cccc-000000000002
  annotations: {scheduling.k8s.io/group-name: g, sim.lavaflow.io/duration: "30"}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: default
  creationTimestamp: "2026-11-27T10:00:02Z"
  annotations: {scheduling.k8s.io/group-name: g, sim.lavaflow.io/duration: "30"}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
    proc = _run_cli(tmp_path, text)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout)
    assert r["summary"]["completed"] == 1 and r["summary"]["jctMean"] == 30
    pods = {p["name"]: p for p in r["pods"]}
    assert pods["p0"]["startTime"] == pods["p1"]["startTime"] == 0.0


# ---------------------------------------------------------------- every object ends in the output (issue 35)
_NODE = node_group(cpu="4", memory="8Gi")


def _plain_pod(name: str, namespace: str = "default", labels: dict | None = None, annotations: dict | None = None):
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "annotations": {"sim.lavaflow.io/duration": "10s", **(annotations or {})},
            },
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": resources({"cpu": "1"})}]},
        }
    )


def _podgroup(name: str, namespace: str = "default") -> str:
    return _doc(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": 1},
        }
    )


def test_an_empty_pod_group_label_names_no_group_and_the_pod_runs():
    """Item 9: scheduling.x-k8s.io/pod-group: "" is no group; the pod runs as any other."""
    r = simulate(_NODE + _plain_pod("p", labels={"scheduling.x-k8s.io/pod-group": ""}))
    assert [p["phase"] for p in r["pods"]] == ["Succeeded"] and not r["stalled"] and r["stuck"] == []
    assert r["summary"]["completed"] == 1


def test_a_group_reference_never_crosses_namespaces():
    """Item 11: a pod in b naming group g waits for b/g (reported), and a/g is not given it."""
    ns = "".join(_doc({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}) for n in "ab")
    r = simulate(
        _NODE + ns + _podgroup("g", "a") + _plain_pod("p", "b", annotations={"scheduling.k8s.io/group-name": "g"})
    )
    stuck = {(s["namespace"], s["name"]): s["reason"] for s in r["stuck"]}
    assert stuck[("b", "g")] == "no PodGroup 'g' in namespace b: 1 pod(s) name it (p) and wait for it"
    assert stuck[("a", "g")].startswith("no pod belongs to it (minMember 1)")
    assert r["stalled"] and [p["phase"] for p in r["pods"]] == ["Pending"]


def test_an_empty_podgroup_beside_a_volcano_job_of_its_name_is_not_given_the_jobs_pods():
    """Item 10: PodGroup j is not the Volcano Job j's group (that is j-<uid>)."""
    r = simulate(_NODE + _podgroup("j") + _vcjob("j", [_task("t", 1, {"cpu": "1"})], 1))
    by_kind = {j["kind"]: j for j in r["jobs"]}
    assert by_kind["Job"]["phase"] == "Completed"
    assert by_kind["PodGroup"]["phase"] == "Pending" and by_kind["PodGroup"]["startTime"] is None
    assert r["summary"]["completed"] == 1 and r["summary"]["stuck"] == 1


def test_pods_that_spawn_each_other_are_refused():
    """Item 9: a circle of spawned-by would leave every pod of it unborn and unreported."""

    text = _NODE + _plain_pod("a", annotations={"sim.lavaflow.io/spawned-by": "b"})
    text += _plain_pod("b", annotations={"sim.lavaflow.io/spawned-by": "a"})
    assert [p.split(": ", 4)[-1] for p in _refused(text)] == [
        "pods spawn each other in a circle (a → b → a): none of them would ever start",
        "pods spawn each other in a circle (b → a → b): none of them would ever start",
    ]


def test_pod_names_that_would_meet_never_crash_the_run():
    """Item 1: a Deployment and a batch Job of one name both run; fixed names that meet are refused."""

    tmpl = {
        "metadata": {"labels": {"app": "x"}, "annotations": {"sim.lavaflow.io/duration": "10s"}},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [{"name": "c"}]},
    }
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": tmpl},
    }
    batch = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": {"template": tmpl}}
    r = simulate(_NODE + _doc(deploy) + _doc(batch), until=60.0)
    assert [p["phase"] for p in r["pods"]] == ["Succeeded", "Succeeded"]
    assert len({p["name"] for p in r["pods"]}) == 2
    text = _NODE + _vcjob("a-b", [_task("c", 1, {"cpu": "1"})], 1) + _vcjob("a", [_task("b-c", 1, {"cpu": "1"})], 1)
    text += _plain_pod("a-b-c-1")
    text += _vcjob("z", [_task("t", 2, {"cpu": "1"})], 1) + _plain_pod("z-t-1")
    assert [p.split(": ", 2)[-1] for p in _refused(text)] == [
        "Job/a: metadata.name: its pod a-b-c-0 (task b-c, index 0) would have the name of the pod of Job/a-b "
        "(task c, index 0) at <input>: document 2; one of them could never be created: rename one",
        "Pod/z-t-1: metadata.name: its pod z-t-1 would have the name of the pod of Job/z (task t, index 1) at "
        "<input>: document 5; one of them could never be created: rename one",
    ]


def test_a_later_version_of_a_job_passes_the_checks_of_a_create():
    """Item 6: raising replicas to 2^31 or 1e6 in an update was not checked (the run reached 4 GB)."""

    text = _NODE + _vcjob("j", [_task("t", 1, {"cpu": "1"})], 1)
    for at, replicas in (("10s", 2**31), ("20s", 10**6)):
        text += _vcjob("j", [_task("t", replicas, {"cpu": "1"})], 1, annotations={"sim.lavaflow.io/submit-at": at})
    assert [p.split(": ", 3)[-1] for p in _refused(text)] == [
        "spec.tasks[0].replicas: replicas is 2147483648; it does not fit Kubernetes' 32-bit integer (at most "
        "2147483647).",
        "spec.tasks[0].replicas: replicas is 1000000; the simulator creates at most 100000 pods per task or "
        "workload; lower it.",
    ]


def test_device_and_cpu_counts_the_simulator_would_model_one_by_one_are_bounded():
    """Item 2: no per-device or per-CPU structure whose size the input chooses."""

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110", "volcano.sh/gpu-number": "1e12"}},
    }
    numa = {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": "n"},
        "spec": {"numares": {"cpu": {"allocatable": "0-4000000000", "capacity": 8}}},
    }
    group = {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": "g"},
        "spec": {"count": 2, "capacity": {"cpu": "1000000", "memory": "8Gi"}, "numa": {"nodes": 2}},
    }
    assert sorted(p.split(": ", 3)[-1] for p in _refused(_doc(node) + _doc(numa) + _doc(group))) == [
        "spec.capacity[cpu]: is 1000000; with spec.numa every CPU is modelled, and a node has at most 8192",
        "spec.numares[cpu].allocatable: CPU id 4000000000 in '0-4000000000' is beyond what a node can have (ids "
        "below 8192)",
        "status.allocatable[volcano.sh/gpu-number]: volcano.sh/gpu-number is 1000000000000; the simulator models "
        "each device of a node, at most 1024.",
    ]


def _quota(hard: dict, name: str = "compute") -> str:
    return _doc({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard}})


def test_a_resource_quota_limits_every_pod_as_the_api_server_does():
    """Item 12: pods beyond minAvailable are held to the quota by the API server's admission."""
    r = simulate(_NODE + _quota({"requests.cpu": "2"}) + _vcjob("j", [_task("t", 4, {"cpu": "1"})], 1))
    spans = sorted((p["startTime"], p["finishTime"]) for p in r["pods"])
    assert spans == [(1.0, 11.0), (1.0, 11.0), (11.0, 21.0), (11.0, 21.0)]  # two at a time, then two
    assert r["jobs"][0]["phase"] == "Completed"
    # a gang the quota can never hold is stuck, saying so; a bare pod past the quota is refused
    text = _NODE + _quota({"pods": "1"}) + _vcjob("g", [_task("t", 2, {"cpu": "1"})], 2)
    r = simulate(text + _plain_pod("p", annotations={"sim.lavaflow.io/submit-at": "5s"}))
    (stuck,) = r["stuck"]
    assert stuck["reason"] == (
        "the API server refused some of its pods (exceeded quota: compute, requested: pods=1, used: pods=1, "
        "limited: pods=1)"
    )
    assert [(x["kind"], x["name"]) for x in r["rejected"]] == [("Pod", "p")]
    assert r["rejected"][0]["reason"].startswith("exceeded quota: compute, requested: pods=1")


def _batch(name: str, duration: str = "10s", exit_code: str | None = None, **spec) -> str:
    ann = {"sim.lavaflow.io/duration": duration}
    if exit_code is not None:
        ann["sim.lavaflow.io/exit-code"] = exit_code
    tmpl = {
        "metadata": {"annotations": ann},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [{"name": "c"}]},
    }
    return _doc(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {**spec, "template": tmpl}}
    )


def _batch_run(text: str) -> tuple[dict, dict]:
    from lavaflow.sim.engine import Simulation

    sim = Simulation(prepare(load_text(text)))
    r = sim.run()
    return r, {j.name: j for j in sim.store.list("BatchJob")}


def test_batch_jobs_run_to_their_completions_two_at_a_time():
    """Item 8: completions 5, parallelism 2: five pods succeed, never more than two at once."""
    r, jobs = _batch_run(_NODE + _batch("c5", completions=5, parallelism=2))
    spans = sorted((p["startTime"], p["finishTime"]) for p in r["pods"])
    assert len(spans) == 5 and all(p["phase"] == "Succeeded" for p in r["pods"])
    assert max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans) == 2
    st = jobs["c5"].status
    assert (st.succeeded, st.failed, st.active) == (5, 0, 0)
    assert [(c.type, c.reason) for c in st.conditions] == [("Complete", "CompletionsReached")]
    (entry,) = r["jobs"]
    assert entry["phase"] == "Completed" and entry["finishTime"] == spans[-1][1]


def test_a_failing_batch_job_is_retried_up_to_its_backoff_limit_then_fails():
    r, jobs = _batch_run(_NODE + _batch("f", duration="5s", exit_code="1", backoffLimit=2))
    assert [p["phase"] for p in r["pods"]] == ["Failed"] * 3  # the first try and two retries
    st = jobs["f"].status
    assert (st.succeeded, st.failed) == (0, 3)
    assert [(c.type, c.reason) for c in st.conditions] == [("Failed", "BackoffLimitExceeded")]
    (entry,) = r["jobs"]
    assert entry["phase"] == "Failed" and entry["reason"].startswith("BackoffLimitExceeded")


def test_a_batch_jobs_pod_lost_with_its_node_is_replaced():
    """A lost pod counts as a failure and is replaced; the Job completes (it was reported Lost)."""
    nodes = _node("a", **{"sim.lavaflow.io/fail-at": "5s"}) + _node("b")
    r, jobs = _batch_run(nodes + _batch("j", duration="20s", completions=1))
    assert [(p["name"], p["node"], p["phase"], p["finishTime"]) for p in r["pods"]] == [
        ("j-0", "a", "Deleted", 5.0),
        ("j-1", "b", "Succeeded", 25.0),
    ]
    (entry,) = r["jobs"]
    assert entry["phase"] == "Completed" and "reason" not in entry
    assert (jobs["j"].status.succeeded, jobs["j"].status.failed) == (1, 1)


def test_pods_created_before_their_quota_count_against_it():
    """A ResourceQuota that comes after pods of its namespace (later in the input, or later in
    time) counts them, as the quota controller's status.used would."""
    early = _plain_pod("a", annotations={"sim.lavaflow.io/duration": "100s"})
    late = _plain_pod("b", annotations={"sim.lavaflow.io/submit-at": "10s"})
    r = simulate(_NODE + early + _quota({"pods": "1"}) + late)
    assert [(x["kind"], x["name"]) for x in r["rejected"]] == [("Pod", "b")]
