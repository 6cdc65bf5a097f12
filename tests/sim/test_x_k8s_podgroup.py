"""scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1) in the simulator: gangs by the
`scheduling.x-k8s.io/pod-group` label, status in that API's form, scheduleTimeoutSeconds, input
checks. (On a cluster: tests/kube/test_kube_x_k8s_podgroup.py and tests/kube/test_kube_real.py.)"""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES, node_group
from lavaflow.api.loader import InputError, load_text
from lavaflow.api.x_k8s_podgroup import (
    CoschedulingPodGroup,
    Counts,
    internal_podgroup,
    phase_of,
    status_of,
    waiting,
)
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare


def _pg(name: str, min_member: int, ns: str = "ml", **spec) -> str:
    doc = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, **spec},
    }
    return "---\n" + json.dumps(doc) + "\n"


def _pods(
    group: str, n: int, cpu: str = "1", ns: str = "ml", duration: str = "60s", scheduler: str = "lavaflow"
) -> str:
    out = ""
    for i in range(n):
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{group}-{i}",
                "namespace": ns,
                "labels": {"scheduling.x-k8s.io/pod-group": group},
                "annotations": {"sim.lavaflow.io/duration": duration},
            },
            "spec": {
                "schedulerName": scheduler,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
        out += "---\n" + json.dumps(doc) + "\n"
    return out


def _run(text: str, **kw) -> tuple[Simulation, dict]:
    sim = Simulation(prepare(load_text(text)), **kw)
    return sim, sim.run()


def _started(result: dict) -> dict[str, float | None]:
    return {p["name"]: p["startTime"] for p in result["pods"]}


def test_gang_with_min_member_below_replicas_binds_at_least_min_member_or_nothing():
    # 3 CPUs. "big" needs 4 of its 5 pods: nothing of it may run. "small" needs 3 of its 5: 3 run.
    text = (
        node_group(cpu="3")
        + _pg("big", 4)
        + _pods("big", 5, duration="inf")
        + _pg("small", 3)
        + _pods("small", 5, duration="inf")
    )
    sim, result = _run(text, until=30)
    started = _started(result)
    assert not [n for n, t in started.items() if n.startswith("big-") and t is not None], "part of a gang was bound"
    assert sorted(n for n, t in started.items() if n.startswith("small-") and t is not None) == [
        "small-0",
        "small-1",
        "small-2",
    ]
    big = sim.store.get("CoschedulingPodGroup", "ml/big").status
    small = sim.store.get("CoschedulingPodGroup", "ml/small").status
    assert (big.phase, big.running, big.schedule_start_time) == ("Scheduling", 0, 0.0)
    assert (small.phase, small.running, small.succeeded, small.failed) == ("Running", 3, 0, 0)
    # no automatic Volcano PodGroup was made for the labelled pods: only the two stand-ins
    assert sorted(pg.key for pg in sim.store.list("PodGroup")) == ["ml/big", "ml/small"]


def test_group_short_of_min_member_pods_stays_pending_and_binds_nothing():
    sim, result = _run(node_group(cpu="8") + _pg("g", 3) + _pods("g", 2), until=20)
    assert all(t is None for t in _started(result).values())
    st = sim.store.get("CoschedulingPodGroup", "ml/g").status
    assert st.phase == "Pending" and st.schedule_start_time is None


def test_example_runs_gangs_whole_and_reports_the_timeout():
    sim, result = _run((EXAMPLES / "coscheduling-podgroup.yaml").read_text())
    started = _started(result)
    assert {started[f"trainer-a-node-{i}"] for i in range(4)} == {0.0}  # 4 of minMember 3: all run
    assert {started[f"trainer-b-node-{i}"] for i in range(3)} == {90.0}  # whole, after trainer-a
    a = sim.store.get("CoschedulingPodGroup", "ml/trainer-a").status
    b = sim.store.get("CoschedulingPodGroup", "ml/trainer-b").status
    assert (a.phase, a.succeeded, b.phase, b.succeeded) == ("Finished", 4, "Finished", 3)
    assert b.schedule_start_time == 0.0
    entry = next(e for e in result["podGroups"] if e["name"] == "trainer-b")
    assert entry["coscheduling"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert entry["coscheduling"]["status"]["phase"] == "Finished" and entry["coscheduling"]["status"]["succeeded"] == 3
    timeouts = [e for e in result["events"] if e["reason"] == "ScheduleTimeout"]
    assert [(e["object"], e["time"], e["type"]) for e in timeouts] == [("ml/trainer-b", 30.0, "Warning")]
    assert "not scheduled within scheduleTimeoutSeconds (30s)" in timeouts[0]["message"]
    assert "tasks in gang unschedulable" in timeouts[0]["message"], timeouts[0]["message"]  # the gang's reason
    # kube-default places pods one by one: trainer-b starts part of its gang
    _, kd = _run((EXAMPLES / "coscheduling-podgroup.yaml").read_text(), scheduler="kube-default")
    kd_started = _started(kd)
    b_starts = sorted(t for n, t in kd_started.items() if n.startswith("trainer-b"))
    assert b_starts[0] == 0.0 and b_starts[-1] > 0.0, b_starts


def test_queue_annotation_and_min_resources_reach_the_internal_podgroup():
    text = (
        node_group(cpu="4")
        + '---\n{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}, "spec": {"weight": 1, "capability": {"cpu": "2"}}}\n'
        + "---\n"
        + json.dumps(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {
                    "name": "g",
                    "namespace": "ml",
                    "annotations": {"scheduling.volcano.sh/queue-name": "research"},
                },
                "spec": {"minMember": 3, "minResources": {"cpu": "3"}},
            }
        )
        + "\n"
        + _pods("g", 3)
    )
    sim, result = _run(text, until=20)
    internal = sim.store.get("PodGroup", "ml/g")
    assert internal.spec.queue == "research" and str(internal.spec.min_resources["cpu"]) == "3"
    # the queue's capability (2 CPUs) cannot admit a 3-CPU gang: nothing runs
    assert all(t is None for t in _started(result).values())
    assert sim.store.get("CoschedulingPodGroup", "ml/g").status.phase == "Scheduling"


def test_status_phases_follow_the_pods():
    """The phases of the upstream CRD, by its controller's rules (since scheduler-plugins v0.26.7:
    no PreScheduling or Scheduled phase, no status.scheduled; issue 36)."""
    pg = CoschedulingPodGroup.model_validate({"metadata": {"name": "g"}, "spec": {"minMember": 3}})
    assert phase_of(3, Counts(members=2)) == "Pending"
    assert phase_of(3, Counts(members=2, placed=2, running=2)) == "Pending"
    assert phase_of(3, Counts(members=4)) == "Scheduling"
    assert phase_of(3, Counts(members=4, placed=1)) == "Scheduling"
    assert phase_of(3, Counts(members=4, placed=3, running=1)) == "Scheduling"
    assert phase_of(3, Counts(members=4, placed=3, running=3)) == "Running"
    assert phase_of(3, Counts(members=4, placed=1, running=1, succeeded=2)) == "Running"
    assert phase_of(3, Counts(members=4, succeeded=3)) == "Finished"
    assert phase_of(3, Counts(members=4, placed=2, running=2, failed=1)) == "Failed"
    assert phase_of(3, Counts(members=4, placed=1, running=1), "Unknown") == "Unknown"
    assert all(waiting(3, Counts(members=4, placed=n), "Scheduling") == (n < 3) for n in range(5))
    assert not waiting(3, Counts(members=2), "Pending")
    first = status_of(pg, Counts(members=3), "t0", occupied_by="ml/trainjob")
    assert set(first) <= {"phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime"}
    assert first == {
        "phase": "Scheduling",
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "t0",
        "occupiedBy": "ml/trainjob",
    }
    pg.status.schedule_start_time, pg.status.occupied_by = "t0", "ml/trainjob"
    later = status_of(pg, Counts(members=3, placed=3, running=3), "t1", occupied_by="other")
    assert later["scheduleStartTime"] == "t0" and later["occupiedBy"] == "ml/trainjob" and later["phase"] == "Running"


def test_internal_podgroup_mapping():
    pg = CoschedulingPodGroup.model_validate(
        {
            "metadata": {"name": "g", "namespace": "ml", "labels": {"scheduling.volcano.sh/queue-name": "q"}},
            "spec": {
                "minMember": 5,
                "minResources": {"cpu": "500m", "nvidia.com/gpu": 4},
                "scheduleTimeoutSeconds": 10,
            },
        }
    )
    internal = internal_podgroup(pg, {"phase": "Inqueue"})
    assert (internal.key, internal.spec.min_member, internal.spec.queue, internal.status.phase) == (
        "ml/g",
        5,
        "q",
        "Inqueue",
    )
    assert {k: float(v) for k, v in internal.spec.min_resources.items()} == {"cpu": 0.5, "nvidia.com/gpu": 4.0}
    assert internal.metadata.annotations["lavaflow.io/gang-api"] == "scheduling.x-k8s.io/v1alpha1"
    assert internal_podgroup(CoschedulingPodGroup.model_validate({"metadata": {"name": "h"}})).spec.queue == "default"


@pytest.mark.parametrize(
    "spec,meta,where,message",
    [
        ({"minMember": -1}, {}, "spec.minMember", "must not be negative"),
        ({"minMember": 1, "scheduleTimeoutSeconds": -5}, {}, "spec.scheduleTimeoutSeconds", "must not be negative"),
        ({"minMember": 1, "minResources": {"cpu": "-1"}}, {}, "spec.minResources[cpu]", "must not be negative"),
        ({"minMember": "three"}, {}, "spec.minMember", "expected a whole number"),
        (
            {"minMember": 1},
            {"annotations": {"scheduling.volcano.sh/queue-name": "nope"}},
            "metadata.annotations[scheduling.volcano.sh/queue-name]",
            "Queue 'nope' does not exist",
        ),
    ],
)
def test_invalid_podgroups_are_refused_naming_the_field(spec, meta, where, message):
    doc = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", **meta},
        "spec": spec,
    }
    with pytest.raises(InputError) as exc:
        prepare(load_text(node_group() + "---\n" + json.dumps(doc) + "\n", "in.yaml"))
    line = exc.value.problems[0]
    assert line.startswith("in.yaml: document 2: PodGroup/g: " + where + ": "), line
    assert message in line, line


def test_same_name_as_a_volcano_podgroup_is_refused():
    volcano = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 1},
    }
    with pytest.raises(InputError) as exc:
        prepare(load_text(node_group() + "---\n" + json.dumps(volcano) + "\n" + _pg("g", 1, ns="default"), "in.yaml"))
    assert any("scheduling.volcano.sh PodGroup default/g is in the input too" in p for p in exc.value.problems), (
        exc.value.problems
    )


def test_a_pod_labelled_with_a_missing_group_is_refused():
    with pytest.raises(InputError) as exc:
        prepare(load_text(node_group() + _pg("g", 1) + _pods("other", 1), "in.yaml"))
    assert exc.value.problems == [
        "in.yaml: document 3: Pod/other-0: metadata.labels[scheduling.x-k8s.io/pod-group]: no scheduling.x-k8s.io "
        "PodGroup 'other' in namespace ml in the input (the pod would wait for it for ever)"
    ]
