"""`lavaflow simulate --workload` and the Kubernetes YAML inputs of lavaflow.elastic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lavaflow.elastic.data_paths import PACKAGE_DATA
from lavaflow.elastic.k8s import read_k8s
from lavaflow.elastic.workload import WorkloadError

ROOT = Path(__file__).resolve().parents[1]
W1 = PACKAGE_DATA / "pollux" / "workloads" / "workload-1.csv"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from lavaflow.cli import main; main()", "simulate", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )


def test_compare_policies_json_and_report(tmp_path):
    rep = tmp_path / "r.html"
    p = cli("--workload", str(W1), "--compare-policies", "Tiresias,Lavaflow", "--output", "json", "--report", str(rep))
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)["results"]
    assert [r["policy"] for r in res] == ["Tiresias", "Lavaflow"]
    assert [r["clairvoyant"] for r in res] == [False, True]
    assert all(r["completed"] == 160 for r in res)
    html = rep.read_text()
    assert html.count("<svg") >= 3 and "JCT CDF" in html


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--policy", "Nope"], "unknown policy 'Nope'"),
        (["--resize-cost", "soon"], "--resize-cost"),
        (["--gpu-types", "k80"], "--gpu-types"),
    ],
)
def test_bad_options_exit_2_without_traceback(args, msg):
    p = cli("--workload", str(W1), *args)
    assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr


def test_malformed_csv_row_names_file_line_column(tmp_path):
    f = tmp_path / "w.csv"
    f.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,1,128\nb,7,cifar10,1,lots\n")
    p = cli("--workload", str(f))
    assert p.returncode == 2 and f"{f}:3: column 'batch_size'" in p.stderr and "Traceback" not in p.stderr


def test_examples_parse_and_simulate():
    jobs, nodes = read_k8s(ROOT / "examples" / "elastic-pytorch.yaml")
    assert [(j.min_workers, j.max_workers) for j in jobs] == [(2, 8), (1, 4)]
    assert {n.gpu_type for n in nodes} == {"v100"} and jobs[0].gpu_type == "v100"
    jobs, _ = read_k8s(ROOT / "examples" / "voda-mpijob.yaml")
    a, b = jobs
    assert (a.requested, a.min_workers, a.max_workers, a.gpu_type) == (2, 1, 4, "nvidia-tesla-v100")
    assert b.priority == 1 and b.submit_time == 300.0
    p = cli("--workload", "examples/voda-mpijob.yaml", "--gpu-types", "nvidia-tesla-v100:2",
            "--compare-policies", "ElasticFIFO,Lavaflow")
    assert p.returncode == 0, p.stderr


def test_mpijob_without_min_max_is_rejected(tmp_path):
    f = tmp_path / "j.yaml"
    f.write_text(
        "apiVersion: kubeflow.org/v1\nkind: MPIJob\nmetadata: {name: x, annotations: {lavaflow.io/application: cifar10}}\n"
        "spec:\n  mpiReplicaSpecs:\n    Launcher:\n      template:\n        spec:\n"
        "          containers: [{name: l, env: [{name: NP, value: '2'}]}]\n"
    )
    with pytest.raises(WorkloadError, match="MIN_NUM_PROC"):
        read_k8s(f)


CLUSTER = """\
apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {name: steady}
spec: {count: 12, capacity: {nvidia.com/gpu: 4}}
---
apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata:
  name: flaky
  annotations: {ANNOTATIONS}
spec: {count: 4, capacity: {nvidia.com/gpu: 4}}
"""


def _cluster(tmp_path, annotations: str) -> Path:
    f = tmp_path / "cluster.yaml"
    f.write_text(CLUSTER.replace("{ANNOTATIONS}", annotations))
    return f


def test_cluster_node_failures_and_recoveries_are_replayed(tmp_path):
    from lavaflow.elastic.k8s import read_k8s_cluster

    faulty = _cluster(tmp_path, "{sim.lavaflow.io/fail-at: 30m, sim.lavaflow.io/recover-at: 3h}")
    nodes, events = read_k8s_cluster(faulty)
    assert len(nodes) == 16
    assert sorted((e.time, e.up) for e in events) == [(1800.0, False)] * 4 + [(10800.0, True)] * 4
    assert {e.node.name for e in events} == {f"flaky-{i}" for i in range(4)}

    def avg_jct(cluster: Path) -> float:
        p = cli("--workload", str(W1), "--cluster", str(cluster), "--policy", "Tiresias", "--output", "json")
        assert p.returncode == 0, p.stderr
        (res,) = json.loads(p.stdout)["results"]
        assert res["completed"] == 160
        return res["avg_jct"]

    steady = tmp_path / "steady"
    steady.mkdir()
    # a quarter of the GPUs gone for 2.5 hours: jobs finish later
    assert avg_jct(faulty) > avg_jct(_cluster(steady, "{}"))


@pytest.mark.parametrize(
    "annotations, field, msg",
    [
        ("{sim.lavaflow.io/fail-at: soon}", "sim.lavaflow.io/fail-at", ""),
        ("{sim.lavaflow.io/fail-at: 2h, sim.lavaflow.io/recover-at: 1h}", "sim.lavaflow.io/recover-at", "must be later than"),
    ],
)
def test_bad_node_fault_annotations_name_file_and_field(tmp_path, annotations, field, msg):
    f = _cluster(tmp_path, annotations)
    p = cli("--workload", str(W1), "--cluster", str(f))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert str(f) in p.stderr and f"metadata.annotations[{field}]" in p.stderr and msg in p.stderr


def test_adaptive_batch_annotations(tmp_path):
    text = (ROOT / "examples" / "elastic-pytorch.yaml").read_text()
    ada = text.replace('lavaflow.io/batch-size: "1024"',
                       'lavaflow.io/batch-size: "1024"\n    lavaflow.io/adaptive-batch: "true"\n    lavaflow.io/max-batch-size: "2048"')
    assert ada != text
    p = tmp_path / "ada.yaml"
    p.write_text(ada)
    jobs, _ = read_k8s(p)
    fixed, adaptive = jobs
    assert not fixed.speed.adaptive
    assert adaptive.speed.adaptive and adaptive.speed.batch_limit == 2048
    assert adaptive.work == adaptive.speed.total_work()  # statistical progress units
    p.write_text(ada.replace('adaptive-batch: "true"', 'adaptive-batch: "maybe"'))
    with pytest.raises(WorkloadError, match="lavaflow.io/adaptive-batch"):
        read_k8s(p)
