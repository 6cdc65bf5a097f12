"""Which events give a scheduling cycle, and what each decides (issue 35, item 24).

A sparse trace runs about four cycles per one-pod job. None of them is idle: each writes
something the output shows (docs/benchmarks.md, "the cycles of a sparse trace"), so the simulator
runs them all, once a period while something changed, as Volcano does."""

from __future__ import annotations

import json

from conftest import node_group, resources
from lavaflow.api.loader import load_text
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: one
  annotations: {sim.lavaflow.io/submit-at: "10"}
spec:
  minAvailable: 1
  schedulerName: volcano
  tasks:
  - name: worker
    replicas: 1
    template:
      metadata: {annotations: {sim.lavaflow.io/duration: "30"}}
      spec:
        containers: [{name: c, resources: %s}]
"""


def test_a_lone_one_pod_job_takes_four_cycles_and_each_decides_something():
    text = node_group("n", 2, "4", "8Gi") + "---\n" + JOB % json.dumps(resources({"cpu": "1"}))
    sim = Simulation(prepare(load_text(text)))
    cycles: list[tuple[float, tuple[str, ...]]] = []
    run_once = sim.scheduler.run_once

    def watched(now: float):
        ssn = run_once(now)
        d = sim.cache.decisions
        made = {"bind": d.binds, "podgroup": d.podgroups, "queue": d.queues, "explain": ssn.log}
        cycles.append((now, tuple(k for k, v in made.items() if v)))
        return ssn

    sim.scheduler.run_once = watched  # type: ignore[method-assign]
    result = sim.run()
    assert cycles == [
        (0.0, ()),  # the nodes: nothing to decide (the only idle cycle)
        (10.0, ("podgroup", "explain")),  # the Job arrived: enqueue admits its PodGroup (Inqueue)
        (11.0, ("bind", "podgroup", "queue", "explain")),  # its pod was created: allocate binds it
        (12.0, ("podgroup",)),  # the pod runs: the PodGroup's running count, one period after the bind
        (41.0, ("queue",)),  # the pod finished: the queue's allocation goes back
    ]
    assert result["cycles"] == 5
    # The last cycle is what the timeline's deserved share and the queue's status follow.
    deserved = {p["time"]: p["deserved"] for p in result["timeline"]}
    assert deserved[11.0] == {"default": {"cpu": 1.0}} and deserved[41.0] == {}
    assert {q["name"]: q["allocated"] for q in result["queues"]}["default"] == {}
