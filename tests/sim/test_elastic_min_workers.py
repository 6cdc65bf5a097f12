"""A running elastic job never runs on fewer workers than its minimum (issue 35, item 13).

A shrink or a move with migration used to evict workers first and bind their replacements a
session later, so for one scheduling period the job ran below its minimum (AFS-L and
ElasticTiresias on the first 60 jobs of Pollux workload 1 did, among others). Checked after every
step of the simulation: no elastic job has between 1 and minimum - 1 workers placed.
"""

from __future__ import annotations

import collections

import pytest

from lavaflow.elastic import spec as es
from lavaflow.elastic.data_paths import PACKAGE_DATA
from lavaflow.sim import engine
from lavaflow.sim.replay import replay, trace_inputs
from lavaflow.sim.traces import default_cluster


@pytest.mark.parametrize("policy", ["AFS-L", "ElasticTiresias", "Lavaflow"])
def test_no_running_elastic_job_below_its_minimum(tmp_path, monkeypatch, policy):
    rows = (PACKAGE_DATA / "pollux" / "workloads" / "workload-1.csv").read_text().splitlines()[:61]
    trace = tmp_path / "w.csv"
    trace.write_text("\n".join(rows) + "\n")
    below: list[tuple[float, str, int, int]] = []
    checks = collections.Counter()
    sample = engine.Simulation._sample

    def checked(self):
        sample(self)
        placed = collections.Counter(
            (p.namespace, p.metadata.annotations.get("scheduling.k8s.io/group-name"))
            for p in self.store.list("Pod")
            if p.spec.node_name and p.status.phase in ("Pending", "Running")
        )
        for pg in self.store.list("PodGroup"):
            shape = pg.metadata.annotations.get(es.WORKERS)
            if shape:
                lo, n = int(shape.split("-")[0]), placed.get((pg.namespace, pg.name), 0)
                checks["jobs"] += 1
                if 0 < n < lo:
                    below.append((self.now, pg.name, n, lo))

    monkeypatch.setattr(engine.Simulation, "_sample", checked)
    result = replay(trace_inputs([trace], cluster=[default_cluster()]), policy)
    assert checks["jobs"] > 1000 and result.summary()["completed"] == 60
    assert below == []
