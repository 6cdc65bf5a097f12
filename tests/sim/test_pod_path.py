"""The simulator's pod path (issue 11): shortcuts that must give what the plain code gives."""

from __future__ import annotations

import gc
import importlib
import random
import sys
import uuid

import pytest

from lavaflow.api.core import Pod
from lavaflow.api.loader import load_text
from lavaflow.api.meta import set_fields
from lavaflow.api.quantity import parse_quantity
from lavaflow.scheduler.cache import DEFAULT_MAX_PODS, SchedulerCache
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare
from lavaflow.store.memory import MemoryStore

GANG = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110", nvidia.com/gpu: "4"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  minAvailable: 2
  schedulerName: volcano
  tasks:
  - name: ps
    replicas: 1
    template:
      metadata: {labels: {role: ps}, annotations: {note: x}}
      spec:
        priorityClassName: high
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  - name: worker
    replicas: 3
    template:
      spec:
        initContainers: [{name: i, resources: {requests: {cpu: "2"}}}]
        containers:
        - {name: c, resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {nvidia.com/gpu: "1"}}}
"""


def test_new_uid_is_the_uuid4_of_the_same_random_bits():
    store = MemoryStore(seed=3)
    rng = random.Random(3)
    for _ in range(200):
        assert store.new_uid() == str(uuid.UUID(int=rng.getrandbits(128), version=4))


def test_set_fields_is_pydantic_assignment():
    a, b = Pod(), Pod()
    a.spec.node_name = "n1"
    a.status.phase = "Running"
    a.status.start_time = 4.0
    set_fields(b.spec, {"node_name": "n1"})
    set_fields(b.status, {"phase": "Running", "start_time": 4.0})
    assert b.model_dump() == a.model_dump()
    assert b.spec.model_fields_set == a.spec.model_fields_set == {"node_name"}
    assert b.status.model_fields_set == a.status.model_fields_set
    assert b.model_dump(exclude_unset=True) == a.model_dump(exclude_unset=True)


def _sim() -> Simulation:
    return Simulation(prepare(load_text(GANG)), seed=0, until=5)


def test_template_made_pods_equal_fully_validated_ones():
    """Pods the job controller copies from a task's template are the pods full validation makes."""
    sim = _sim()
    sim.run()
    ctrl = sim.job_ctrl
    job = sim.store.get("Job", "default/j")
    for task in job.spec.tasks:
        for i in range(task.replicas):
            made = ctrl._new_pod(job, task, i)
            validated = ctrl._validated_pod(job, task, i)
            assert made.model_dump() == validated.model_dump()
            assert made.dump() == validated.dump()  # what the kube backend sends
            # no container, label or annotation shared with another pod but the template's spec
            assert made.metadata.labels is not validated.metadata.labels


def test_pods_of_one_template_share_one_request_computation():
    sim = _sim()
    sim.run()
    cache = sim.cache
    workers = [t for t in cache.tasks.values() if t.role == "worker"]
    assert len(workers) == 3
    # init container 2 cpu > 500m, gpu from the limit, memory 1Gi, one pod slot
    expected = cache.index.vector({"cpu": 2.0, "memory": 2.0**30, "nvidia.com/gpu": 1.0, "pods": 1.0})
    for t in workers:
        assert (t.resreq == expected).all()
    assert len({id(t.resreq) for t in workers}) == 3  # each task owns its vector
    containers = workers[0].pod.spec.containers
    assert all(t.pod.spec.containers is containers for t in workers)
    assert sum(1 for hit in cache._requests.values() if hit.owner is containers) == 1


def test_request_cache_follows_replaced_containers_and_new_resources():
    cache = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    cache.register_resources(["cpu", "memory"])
    pod = Pod.model_validate(
        {
            "metadata": {"name": "p", "annotations": {"scheduling.k8s.io/group-name": "g"}},
            "spec": {"schedulerName": "volcano", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
        }
    )
    cache.on_pod(pod)
    assert cache.tasks["default/p"].resreq.tolist() == [1.0, 0.0, 1.0]  # cpu, memory, pods
    twin = pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"name": "q"})})
    twin.spec = pod.spec.model_copy()  # shares the containers list: the cached vector, copied
    cache.on_pod(twin)
    assert cache.tasks["default/q"].resreq.tolist() == [1.0, 0.0, 1.0]
    # a pod whose containers were replaced (a job plugin's way) gets its own computation, and a
    # resource first seen there widens every vector, cached ones included
    other = Pod.model_validate(
        {
            "metadata": {"name": "r", "annotations": {"scheduling.k8s.io/group-name": "g"}},
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"resources": {"requests": {"example.com/x": "2"}, "limits": {"example.com/x": "2"}}}],
            },
        }
    )
    cache.on_pod(other)
    assert cache.tasks["default/r"].resreq.tolist() == [0.0, 0.0, 1.0, 2.0]
    third = pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"name": "s"})})
    cache.on_pod(third)
    assert cache.tasks["default/s"].resreq.tolist() == [1.0, 0.0, 1.0, 0.0]
    cache.check_consistency()


def test_simulate_command_collects_garbage_in_fewer_larger_passes(monkeypatch, tmp_path, capsys):
    cli = importlib.import_module("lavaflow.cli.main")  # the package exports its main() as "main"

    path = tmp_path / "in.yaml"
    path.write_text(GANG)
    before = gc.get_threshold()
    monkeypatch.setattr(sys, "argv", ["lavaflow", "simulate", str(path), "--output", "json"])
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main()
        assert exc.value.code in (0, None)
        assert gc.get_threshold() == cli.BATCH_GC_THRESHOLDS != before
    finally:
        gc.set_threshold(*before)
    assert '"pods": [' in capsys.readouterr().out


def test_request_cache_keeps_only_the_last_templates(monkeypatch):
    """Pods decoded from an API server share no containers: the cache must not keep them all."""
    from lavaflow.scheduler import cache as cache_mod

    monkeypatch.setattr(cache_mod, "_REQUESTS_KEPT", 3)
    cache = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    for i in range(10):
        pod = Pod.model_validate(
            {
                "metadata": {"name": f"p{i}", "annotations": {"scheduling.k8s.io/group-name": "g"}},
                "spec": {"schedulerName": "volcano", "containers": [{"resources": {"requests": {"cpu": str(i + 1)}}}]},
            }
        )
        cache.on_pod(pod)
        assert len(cache._requests) <= 3
        assert cache.tasks[f"default/p{i}"].resreq[cache.index.pos["cpu"]] == i + 1


def _queue_vectors(cache: SchedulerCache, name: str) -> list:
    info = cache.queues[name]  # (as text: deserved is NaN where not given)
    return [None if v is None else repr(v.tolist()) for v in (info.capability, info.guarantee, info.deserved)]


def test_queue_vectors_follow_spec_changes_not_status_writes():
    """on_queue keeps a queue's vectors across status writes; any change of the amounts (a new
    dict, or the same dict changed in place) or of the resources known recomputes them."""
    from lavaflow.api.volcano import Queue

    q = Queue.model_validate(
        {"metadata": {"name": "q"}, "spec": {"weight": 2, "capability": {"cpu": "8"}, "deserved": {"cpu": "4"}}}
    )
    cache = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    cache.register_resources(["cpu", "memory"])
    cache.on_queue(q)
    first = _queue_vectors(cache, "q")
    q.status.allocated = {"cpu": "1"}  # a status write: the same vectors, as fresh arrays
    before = cache.queues["q"].capability
    cache.on_queue(q)
    assert _queue_vectors(cache, "q") == first and cache.queues["q"].capability is not before
    q.spec.capability["cpu"] = parse_quantity("16")  # changed in place
    q.spec.guarantee.resource = {"memory": parse_quantity("1Gi")}
    cache.on_queue(q)
    fresh = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    fresh.register_resources(["cpu", "memory"])
    fresh.on_queue(q)
    assert _queue_vectors(cache, "q") == _queue_vectors(fresh, "q")
    assert cache.queues["q"].capability[0] == 16.0 and cache.queues["q"].guarantee[1] == 2.0**30
    cache.on_pod(  # a resource first seen later widens the index: the kept vectors are not reused
        Pod.model_validate(
            {
                "metadata": {"name": "p", "annotations": {"scheduling.k8s.io/group-name": "g"}},
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [
                        {"resources": {"requests": {"example.com/x": "1"}, "limits": {"example.com/x": "1"}}}
                    ],
                },
            }
        )
    )
    cache.on_queue(q)
    fresh.register_resources(["example.com/x"])
    fresh.on_queue(q)
    assert _queue_vectors(cache, "q") == _queue_vectors(fresh, "q")
    assert len(cache.queues["q"].capability) == 4


def test_podgroup_min_resources_follow_changes_in_place():
    """on_podgroup keeps a PodGroup's minResources vector across status writes, and follows a
    change of its amounts (the job controller changes them in place when a job is scaled)."""
    from lavaflow.api.volcano import PodGroup

    pg = PodGroup.model_validate(
        {"metadata": {"name": "g"}, "spec": {"minMember": 2, "minResources": {"cpu": "2", "pods": "2"}}}
    )
    cache = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    cache.register_resources(["cpu", "memory"])
    cache.on_podgroup(pg)
    job = cache.jobs["default/g"]
    first = job.min_resources.tolist()
    kept = job.min_resources
    pg.status.phase = "Inqueue"
    cache.on_podgroup(pg)
    assert job.min_resources.tolist() == first and job.min_resources is not kept
    pg.spec.min_resources["cpu"] = parse_quantity("3")
    cache.on_podgroup(pg)
    assert job.min_resources[cache.index.pos["cpu"]] == 3.0
    pg.spec.min_resources = None
    cache.on_podgroup(pg)
    assert job.min_resources is None
    cache.on_podgroup(pg, deleted=True)
    assert "default/g" not in cache.jobs
    assert all(type(k) is tuple for k in cache._min_resources)  # kept by amounts, not by PodGroup


def test_training_gpu_counts_follow_replaced_containers():
    sim = _sim()
    pod = Pod.model_validate(
        {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "1"}}}]}}
    )
    assert sim.training._gpus_of(pod) == 2.0
    twin = pod.model_copy()
    twin.spec = pod.spec.model_copy()  # the same containers: the count kept
    assert sim.training._gpus_of(twin) == 2.0
    assert len(sim.training._gpus) == 1
    pod.spec.containers = [c.model_copy(update={"resources": c.resources.model_copy()}) for c in pod.spec.containers]
    pod.spec.containers[0].resources.limits = {"nvidia.com/gpu": 3}
    assert sim.training._gpus_of(pod) == 3.0
    pod.spec.overhead = {"nvidia.com/gpu": 1}  # overhead replaced: counted again
    assert sim.training._gpus_of(pod) == 4.0


def test_podgroup_conditions_written_back_equal_validated_ones():
    from lavaflow.api.volcano import PodGroupCondition

    sim = _sim()
    raw = {"type": "Scheduled", "status": "True", "transitionID": "x", "lastTransitionTime": 3, "reason": "r"}
    a, b = sim._condition(raw), sim._condition(dict(raw))
    expected = PodGroupCondition.model_validate(raw)
    for c in (a, b):
        assert c.model_dump() == expected.model_dump() and c.model_fields_set == expected.model_fields_set
        assert c.dump() == expected.dump()
    assert a is not b  # each PodGroup gets its own object
    # equal but of another type (3 and 3.0): not taken for one another
    c = sim._condition({**raw, "lastTransitionTime": 3.0})
    assert type(c.last_transition_time) is float and type(a.last_transition_time) is int
    d = sim._condition({**raw, "lastTransitionTime": [1]})  # unhashable: validated as it is
    assert d.last_transition_time == [1]


def test_store_stamps_objects_as_attribute_assignment_does():
    """create/update/delete write uid, creationTimestamp, resourceVersion and deletionTimestamp
    into __dict__ and the set fields, as pydantic's assignment does (exclude_unset dumps see them)."""
    store = MemoryStore(clock=lambda: 7.0, seed=1)
    pod = store.create(Pod.model_validate({"metadata": {"name": "p"}}))
    rng = random.Random(1)
    ref = Pod.model_validate({"metadata": {"name": "p"}})
    ref.metadata.namespace = "default"
    ref.metadata.uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    ref.metadata.creation_timestamp = 7.0
    ref.metadata.resource_version = "1"
    assert pod.model_dump() == ref.model_dump()
    assert pod.metadata.model_fields_set == ref.metadata.model_fields_set
    assert pod.model_dump(exclude_unset=True) == ref.model_dump(exclude_unset=True)
    store.update(pod)
    assert pod.metadata.resource_version == "2"
    store.delete("Pod", "default/p")
    assert pod.metadata.deletion_timestamp == 7.0 and "deletion_timestamp" in pod.metadata.model_fields_set
    # a given uid and creation time are kept
    kept = store.create(Pod.model_validate({"metadata": {"name": "q", "uid": "u", "creationTimestamp": 1.0}}))
    assert (kept.metadata.uid, kept.metadata.creation_timestamp, kept.metadata.resource_version) == ("u", 1.0, "4")


def test_job_controller_finds_a_pods_job_as_job_key_of_does():
    sim = _sim()
    sim.run()
    ctrl = sim.job_ctrl
    base = {
        "namespace": "ns",
        "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "o", "uid": "x"}],
    }
    cases = [
        {"labels": {"volcano.sh/job-name": "l"}},
        {"labels": {"volcano.sh/job-name": ""}, "annotations": {"volcano.sh/job-name": "a"}},
        {"labels": {"volcano.sh/job-name": ""}},  # empty: the owner's name
        {},
    ]
    for i, extra in enumerate(cases):
        pod = Pod.model_validate({"metadata": {"name": f"p{i}", **base, **extra}})
        key = ctrl._job_key_of(pod)
        ctrl._on_pod("ADDED", pod, None)
        assert pod.metadata.name in ctrl.pods_by_job[key]
    orphan = Pod.model_validate({"metadata": {"name": "x", "labels": {"volcano.sh/job-name": ""}}})
    before = {k: dict(v) for k, v in ctrl.pods_by_job.items()}
    ctrl._on_pod("ADDED", orphan, None)  # no job: ignored
    assert {k: dict(v) for k, v in ctrl.pods_by_job.items()} == before


def test_tally_put_counts_as_removing_then_adding_the_pods_entry():
    """Tally.put's shortcut for a phase change keeps every count, and each task's phase order,
    as taking the pod's previous entry out and putting the new one in does."""
    from lavaflow.controllers.job.tally import Tally

    rng = random.Random(5)
    fast, ref = Tally(), Tally()
    phases = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]
    for _ in range(3000):
        name = f"p{rng.randrange(12)}"
        if rng.random() < 0.1:
            fast.drop(name)
            ref.drop(name)
            continue
        labels = {"volcano.sh/task-spec": rng.choice(["a", "b"])}
        if rng.random() < 0.9:
            labels["volcano.sh/task-index"] = str(rng.randrange(3)) if rng.random() < 0.95 else "x"
        pod = Pod.model_validate(
            {"metadata": {"name": name, "labels": labels}, "status": {"phase": rng.choice(phases)}}
        )
        if rng.random() < 0.2:
            pod.metadata.deletion_timestamp = 1.0
        fast.put(pod)
        # the plain way
        meta = pod.metadata
        raw = pod.status.phase
        entry = (
            labels.get("volcano.sh/task-spec", ""),
            "Terminating" if meta.deletion_timestamp is not None else raw,
            raw,
            int(labels["volcano.sh/task-index"]) if labels.get("volcano.sh/task-index", "x").isdigit() else None,
        )
        prev = ref.seen.get(name)
        if prev != entry:
            if prev is not None:
                ref._add(prev, -1)
            ref.seen[name] = entry
            ref._add(entry, 1)
        assert fast.seen == ref.seen and fast.counts == ref.counts
        assert {t: list(c.items()) for t, c in fast.tasks.items()} == {t: list(c.items()) for t, c in ref.tasks.items()}
        assert fast.raw == ref.raw and fast.indices == ref.indices
        assert fast.status() == ref.status()
