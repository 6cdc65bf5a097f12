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
from lavaflow.scheduler.cache import SchedulerCache
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare
from lavaflow.store.memory import MemoryStore

GANG = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110", nvidia.com/gpu: "4"}}
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
    assert sum(1 for hit in cache._requests.values() if hit[0] is containers) == 1


def test_request_cache_follows_replaced_containers_and_new_resources():
    cache = SchedulerCache()
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
            "spec": {"schedulerName": "volcano", "containers": [{"resources": {"requests": {"example.com/x": "2"}}}]},
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
    cache = SchedulerCache()
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
