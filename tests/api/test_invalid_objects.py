"""Invalid objects of every kind lavaflow reads are refused, one line per problem (issue 15).

Each kind starts from a valid object; hypothesis picks a set of defects from a catalogue in
which every defect is one thing kube-apiserver or Volcano's webhook refuses, at a known
path. The whole input must be refused (InputError; exit code 2 from the CLI) with exactly
one line per defect, each naming the document, the object and the field.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.api.loader import InputError, load_text
from lavaflow.sim.inputs import prepare


def _container(name="c", cpu="1"):
    return {"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu}}}


def _template():
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [_container()]}}


VALID = {
    "Node": {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    },
    "NodeGroup": {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": "grp"},
        "spec": {"count": 2, "capacity": {"cpu": "4", "memory": "8Gi"}},
    },
    "Queue": {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "team"},
        "spec": {"weight": 1, "capability": {"cpu": "8"}},
    },
    "PriorityClass": {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    },
    "Namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-a"}},
    "Pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-a"}, "spec": {"containers": [_container()]}},
    "Job": {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "job-a"},
        "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 2, "template": _template()}]},
    },
    "PodGroup": {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg-a"},
        "spec": {"minMember": 1, "minResources": {"cpu": "1"}},
    },
    "Deployment": {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "dep-a"},
        "spec": {"replicas": 2, "template": _template()},
    },
    "ReplicaSet": {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs-a"},
        "spec": {"replicas": 2, "template": _template()},
    },
    "StatefulSet": {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "sts-a"},
        "spec": {"replicas": 2, "template": _template()},
    },
    "BatchJob": {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bj-a"},
        "spec": {"parallelism": 2, "template": _template()},
    },
}


def _pod_spec(doc: dict) -> dict:
    if doc["kind"] == "Pod":
        return doc["spec"]
    if doc["apiVersion"].startswith("batch.volcano.sh"):
        return doc["spec"]["tasks"][0]["template"]["spec"]
    return doc["spec"]["template"]["spec"]


def _pod_base(doc: dict) -> str:
    if doc["kind"] == "Pod":
        return "spec"
    if doc["apiVersion"].startswith("batch.volcano.sh"):
        return "spec.tasks[0].template.spec"
    return "spec.template.spec"


# defect name -> (kinds it applies to, mutate(doc), expected path)
def _bad_name(doc):
    doc["metadata"]["name"] = doc["metadata"]["name"].upper() + "_X"


def _bad_namespace(doc):
    doc["metadata"]["namespace"] = "Team.A"


def _no_containers(doc):
    _pod_spec(doc)["containers"] = []


def _unnamed_container(doc):
    _pod_spec(doc)["containers"].append({"image": "x"})


def _bad_container_name(doc):
    _pod_spec(doc)["containers"].append({"name": "Side_Car"})


def _negative_request(doc):
    _pod_spec(doc)["containers"][0]["resources"]["requests"]["memory"] = "-1Gi"


def _negative_limit(doc):
    _pod_spec(doc)["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "-1"}


def _negative_capacity(doc):
    key = "capacity" if doc["kind"] == "NodeGroup" else "allocatable"
    holder = doc["spec"] if doc["kind"] == "NodeGroup" else doc["status"]
    holder[key]["memory"] = "-8Gi"


def _negative_capability(doc):
    doc["spec"]["capability"]["memory"] = "-1"


def _huge_value(doc):
    doc["value"] = 1_000_000_001


def _huge_replicas(doc):
    if doc["apiVersion"].startswith("batch.volcano.sh"):
        doc["spec"]["tasks"][0]["replicas"] = 2**31
    elif "parallelism" in doc["spec"]:
        doc["spec"]["parallelism"] = 2**31
    else:
        doc["spec"]["replicas"] = 2**31


def _negative_min_resources(doc):
    doc["spec"]["minResources"]["cpu"] = "-1"


POD_KINDS = ("Pod", "Job", "Deployment", "ReplicaSet", "StatefulSet", "BatchJob")
NAMED = (
    "Node",
    "NodeGroup",
    "Queue",
    "PriorityClass",
    "Namespace",
    "Pod",
    "PodGroup",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "BatchJob",
    "Job",
)
DEFECTS = {
    "name": (NAMED, _bad_name, lambda d: "metadata.name"),
    "namespace": (("Pod", "PodGroup", "Deployment", "Job"), _bad_namespace, lambda d: "metadata.namespace"),
    "no-containers": (POD_KINDS, _no_containers, lambda d: f"{_pod_base(d)}.containers"),
    "unnamed-container": (POD_KINDS, _unnamed_container, lambda d: f"{_pod_base(d)}.containers[1].name"),
    "bad-container-name": (POD_KINDS, _bad_container_name, lambda d: f"{_pod_base(d)}.containers[1].name"),
    "negative-request": (
        POD_KINDS,
        _negative_request,
        lambda d: f"{_pod_base(d)}.containers[0].resources.requests[memory]",
    ),
    "negative-limit": (
        POD_KINDS,
        _negative_limit,
        lambda d: f"{_pod_base(d)}.containers[0].resources.limits[nvidia.com/gpu]",
    ),
    "negative-capacity": (
        ("Node", "NodeGroup"),
        _negative_capacity,
        lambda d: "spec.capacity[memory]" if d["kind"] == "NodeGroup" else "status.allocatable[memory]",
    ),
    "negative-capability": (("Queue",), _negative_capability, lambda d: "spec.capability[memory]"),
    "priority-value": (("PriorityClass",), _huge_value, lambda d: "value"),
    "int32-replicas": (
        ("Job", "Deployment", "ReplicaSet", "StatefulSet", "BatchJob"),
        _huge_replicas,
        lambda d: (
            "spec.tasks[0].replicas"
            if d["kind"] == "Job" and "tasks" in d["spec"]
            else ("spec.parallelism" if "parallelism" in d["spec"] else "spec.replicas")
        ),
    ),
    "negative-min-resources": (("PodGroup",), _negative_min_resources, lambda d: "spec.minResources[cpu]"),
}
# Defects whose fix of one field would hide another (an empty container list has no container[1]).
EXCLUSIVE = {
    ("no-containers", "unnamed-container"),
    ("no-containers", "bad-container-name"),
    ("no-containers", "negative-request"),
    ("no-containers", "negative-limit"),
    ("unnamed-container", "bad-container-name"),
}


@st.composite
def invalid_docs(draw):
    kind = draw(st.sampled_from(sorted(VALID)))
    doc = copy.deepcopy(VALID[kind])
    applicable = sorted(n for n, (kinds, _, _) in DEFECTS.items() if kind in kinds)
    chosen = draw(st.lists(st.sampled_from(applicable), min_size=1, max_size=3, unique=True))
    chosen = [
        c for i, c in enumerate(chosen) if not any((p, c) in EXCLUSIVE or (c, p) in EXCLUSIVE for p in chosen[:i])
    ]
    expected = []
    for name in chosen:
        _, mutate, path = DEFECTS[name]
        mutate(doc)
    for name in chosen:
        expected.append(DEFECTS[name][2](doc))
    return kind, doc, chosen, expected


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _problems(text: str) -> list[str]:
    try:
        prepare(load_text(text, "in.yaml"))
    except InputError as exc:
        return exc.problems
    return []


@SETTINGS
@given(invalid_docs())
def test_every_defect_of_every_kind_is_one_line(case):
    kind, doc, chosen, expected = case
    lines = _problems("---\n" + json.dumps(doc) + "\n")
    assert len(lines) == len(expected), (kind, chosen, lines)
    for path in expected:
        assert sum(f": {path}: " in line for line in lines) >= 1, (kind, chosen, path, lines)
    for line in lines:
        assert line.startswith("in.yaml: document 1: ") and "\n" not in line, line


def test_valid_objects_of_every_kind_are_accepted():
    text = "".join("---\n" + json.dumps(d) + "\n" for d in VALID.values())
    assert _problems(text) == []


def test_cli_exit_code_2_and_one_line_per_problem(tmp_path):
    docs = []
    for kind in ("Node", "Pod", "Queue", "PriorityClass"):
        d = copy.deepcopy(VALID[kind])
        _bad_name(d)
        docs.append(d)
    f = tmp_path / "bad.yaml"
    f.write_text("".join("---\n" + json.dumps(d) + "\n" for d in docs))
    proc = subprocess.run([sys.executable, "-m", "lavaflow.cli", "simulate", str(f)], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith(f"error: {f}: document ") for line in lines), lines
    assert "Traceback" not in proc.stderr


def _pod_with(resources: dict) -> str:
    doc = copy.deepcopy(VALID["Pod"])
    doc["spec"]["containers"][0]["resources"] = resources
    return json.dumps(doc)


def _refused(text: str) -> list[str]:
    try:
        load_text(text, name="in.yaml")
    except InputError as exc:
        return exc.problems
    raise AssertionError("accepted")


def test_extended_resources_follow_the_api_servers_rules():
    """Issue 35, item 14: whole units, a limit equal to the request, no request above its limit."""
    where = "in.yaml: document 1: Pod/pod-a: spec.containers[0].resources: "
    cases = [
        (
            {"requests": {"nvidia.com/gpu": "0.5"}, "limits": {"nvidia.com/gpu": "0.5"}},
            "requests[nvidia.com/gpu]: must be a whole number, got 0.5",
        ),
        (
            {"limits": {"volcano.sh/gpu-number": "1.5"}},
            "limits[volcano.sh/gpu-number]: must be a whole number, got 1.5",
        ),
        (
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
            "requests[nvidia.com/gpu]: must equal its limit of 2, got 1",
        ),
        (
            {"requests": {"nvidia.com/gpu": "1"}},
            "limits[nvidia.com/gpu]: must be set for a resource that cannot be overcommitted",
        ),
    ]
    for resources, message in cases:
        assert _refused(_pod_with(resources)) == [where + message]
    # what the API server accepts stays accepted: a limit alone (the request defaults to it),
    # fractional CPU, kubernetes.io-prefixed names
    for ok in (
        {"limits": {"nvidia.com/gpu": "2"}},
        {"requests": {"cpu": "500m", "nvidia.com/gpu": "2"}, "limits": {"cpu": "1", "nvidia.com/gpu": "2"}},
        {"requests": {"kubernetes.io/batch-cpu": "0.5"}},
    ):
        load_text(_pod_with(ok))


def test_both_network_topology_bounds_are_refused():
    doc = copy.deepcopy(VALID["Job"])
    doc["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "spine"}
    assert _refused(json.dumps(doc)) == [
        f"in.yaml: document 1: Job/{doc['metadata']['name']}: spec.networkTopology: highestTierAllowed and "
        "highestTierName cannot both be set: give one"
    ]


def test_quoted_numbers_and_booleans_are_not_whole_numbers():
    """Issue 35, item 15: the API server decodes strictly; "2" and true are not integers."""
    pc = dict(copy.deepcopy(VALID["PriorityClass"]), value="1000")
    queue = copy.deepcopy(VALID["Queue"])
    queue["spec"]["weight"] = "3"
    job = copy.deepcopy(VALID["Job"])
    job["spec"]["tasks"][0]["replicas"] = True
    text = "\n---\n".join(json.dumps(d) for d in (pc, queue, job))
    assert _refused(text) == [
        "in.yaml: document 1: PriorityClass/high: value: expected a whole number, found the string '1000'",
        "in.yaml: document 2: Queue/team: spec.weight: expected a whole number, found the string '3'",
        f"in.yaml: document 3: Job/{job['metadata']['name']}: spec.tasks[0].replicas: expected a whole number, "
        "found true",
    ]


def test_cluster_wide_rules_of_the_api_server():
    """Issue 35, item 16: PriorityClass references and defaults, quota values, metadata limits, and
    a node's recovery before its failure."""
    from lavaflow.sim.inputs import prepare

    def refused(docs: list[dict]) -> list[str]:
        try:
            prepare(load_text("\n---\n".join(json.dumps(d) for d in docs), name="in.yaml"))
        except InputError as exc:
            return exc.problems
        raise AssertionError("accepted")

    pc = copy.deepcopy(VALID["PriorityClass"])
    pod = copy.deepcopy(VALID["Pod"])
    pod["spec"]["priorityClassName"] = "urgent"
    assert refused([pc, pod]) == [
        "in.yaml: document 2: Pod/pod-a: spec.priorityClassName: no PriorityClass named 'urgent' (define one, "
        "or leave the field out)"
    ]
    pod["spec"]["priorityClassName"] = "system-node-critical"  # every cluster has the system classes
    prepare(load_text(json.dumps(pod)))
    first, second = (dict(copy.deepcopy(pc), globalDefault=True) for _ in range(2))
    second["metadata"]["name"] = "higher"
    assert refused([first, second]) == [
        "in.yaml: document 2: PriorityClass/higher: globalDefault: PriorityClass 'high' (in.yaml: document 1) is "
        "already the global default; only one may be"
    ]
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {
            "hard": {"cpu": "-1", "pods": "2.5", "gpus": "1", "requests.nvidia.com/gpu": "2"},
            "scopes": ["Often"],
        },
    }
    assert [p.split(": ", 3)[-1] for p in refused([quota])] == [
        "spec.hard[cpu]: cpu is -1; it must not be negative.",
        "spec.hard[pods]: pods is 2.5; it must be a whole number.",
        "spec.hard[gpus]: 'gpus' is not a resource a quota can limit (e.g. cpu, requests.memory, pods).",
        "spec.scopes[0]: unknown scope 'Often' (known: Terminating, NotTerminating, BestEffort, NotBestEffort, "
        "PriorityClass, CrossNamespacePodAffinity).",
    ]
    big = copy.deepcopy(VALID["Pod"])
    big["metadata"]["labels"] = {"tier": "x" * 100_000}
    big["metadata"]["annotations"] = {"blob": "y" * (300 * 1024)}
    assert [p.split(": ", 3)[-1] for p in refused([big])] == [
        "metadata.labels[tier]: label value is 100000 characters long, over the limit of 63.",
        "metadata.annotations: annotations total 307,204 bytes, over the limit of 262,144 (256 KiB).",
    ]
    node = copy.deepcopy(VALID["Node"])
    node["metadata"]["annotations"] = {"sim.lavaflow.io/fail-at": "10m", "sim.lavaflow.io/recover-at": "5m"}
    assert refused([node]) == [
        "in.yaml: document 1: Node/node-a: metadata.annotations[sim.lavaflow.io/recover-at]: must be after fail-at"
    ]
