"""`lavaflow simulate` on Sia-format workloads and a heterogeneous cluster (NodeGroups with the
lavaflow.io/accelerator label), with tables of our own in Sia's layout (tests/data/sia), and every
way the input can be refused (exit code 2, a message naming the file, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import node_group

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "tests" / "data" / "sia"
TRACE = ARTIFACT / "sia-simulator" / "workloads" / "tiny" / "workload-1.csv"
ENV_VAR = "LAVAFLOW_SIA_ARTIFACT"
ALL_TRACES_ENV = "LAVAFLOW_SIA_ALL_TRACES"
GPU = {"nvidia.com/gpu": "8"}


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in (ENV_VAR, ALL_TRACES_ENV)}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", "from lavaflow.cli import main; main()", "simulate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=environ,
    )


@pytest.fixture
def hetero(tmp_path) -> str:
    """One node of each of Sia's three types (T4 nodes have 4 GPUs, the others 8)."""
    p = tmp_path / "cluster.yaml"
    p.write_text(
        node_group(
            "t4", 1, cpu="32", memory="64Gi", labels={"lavaflow.io/accelerator": "t4"}, **{"nvidia.com/gpu": "4"}
        )
        + node_group("rtx", 1, cpu="32", memory="64Gi", labels={"lavaflow.io/accelerator": "rtx"}, **GPU)
        + node_group("a100", 1, cpu="32", memory="64Gi", labels={"lavaflow.io/accelerator": "a100"}, **GPU)
    )
    return str(p)


def refused(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in p.stderr, (w, p.stderr)


def test_a_sia_workload_replays_on_a_heterogeneous_cluster(hetero):
    p = run("--sia-artifact", str(ARTIFACT), str(TRACE), hetero, "--output", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    jobs = out["jobs"]
    assert len(jobs) == 6 and all(j["phase"] == "Completed" for j in jobs)
    assert out["elastic"]["summary"]["completed"] == 6
    done = {j["name"]: j for j in out["elastic"]["jobs"]}
    types = {seg[2] for j in done.values() for seg in j["workers"]}
    assert types <= {"t4", "rtx", "a100", None} and types & {"t4", "rtx", "a100"}
    # each start pauses the job for its application's checkpoint-restore delay (bert: 120 s)
    assert all(j["jct"] > 120 for name, j in done.items() if name.startswith("bert"))


def test_the_environment_variable_gives_the_artifact_too(hetero):
    p = run(str(TRACE), hetero, "--output", "json", env={ENV_VAR: str(ARTIFACT / "sia-simulator")})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["elastic"]["summary"]["completed"] == 6


def test_a_sia_workload_without_the_artifact_is_refused(hetero):
    refused(run(str(TRACE), hetero), str(TRACE), "placements-<type>.csv", "--sia-artifact", ENV_VAR)


def test_an_artifact_directory_that_is_not_there_is_refused(hetero, tmp_path):
    refused(run("--sia-artifact", str(tmp_path / "nope"), str(TRACE), hetero), "--sia-artifact", "no such directory")
    refused(run("--sia-artifact", str(tmp_path), str(TRACE), hetero), "--sia-artifact", "no sia-simulator/traces")
    refused(run(str(TRACE), hetero, env={ENV_VAR: str(tmp_path / "nope")}), str(TRACE), "no such directory")


def test_a_gpu_type_sia_did_not_measure_is_refused(tmp_path):
    cluster = tmp_path / "v100.yaml"
    cluster.write_text(node_group("v100", 2, labels={"lavaflow.io/accelerator": "v100"}, **GPU))
    refused(
        run("--sia-artifact", str(ARTIFACT), str(TRACE), str(cluster)), str(TRACE), "'v100' has no Sia measurements"
    )


def test_a_gpu_type_without_a_table_is_refused(tmp_path):
    cluster = tmp_path / "quad.yaml"
    cluster.write_text(node_group("quad", 1, labels={"lavaflow.io/accelerator": "quad"}, **GPU))
    refused(run("--sia-artifact", str(ARTIFACT), str(TRACE), str(cluster)), str(TRACE), "placements-quad.csv")


def test_an_application_without_tables_is_refused(hetero, tmp_path):
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nimagenet-0,0,imagenet,4,800\n")
    refused(run("--sia-artifact", str(ARTIFACT), str(trace), hetero), f"{trace}:2", "imagenet", "placements-rtx.csv")


def test_a_yaml_job_on_sias_tables_is_checked_against_the_cluster(tmp_path):
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "bert",
            "annotations": {"lavaflow.io/application": "bert", "lavaflow.io/speed-tables": "sia"},
        },
        "spec": {
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "t",
                                    "image": "x",
                                    "resources": {
                                        "requests": {"nvidia.com/gpu": "1"},
                                        "limits": {"nvidia.com/gpu": "1"},
                                    },
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    inp = tmp_path / "job.yaml"
    inp.write_text(json.dumps(job) + "\n" + node_group("v100", 1, labels={"lavaflow.io/accelerator": "v100"}, **GPU))
    refused(run(str(inp)), "speed-tables", ENV_VAR)
    refused(run("--sia-artifact", str(ARTIFACT), str(inp)), "speed-tables", "'v100' has no Sia measurements")
    inp.write_text(json.dumps(job) + "\n" + node_group("quad", 1, labels={"lavaflow.io/accelerator": "quad"}, **GPU))
    refused(
        run("--sia-artifact", str(ARTIFACT), str(inp)), "speed-tables", "bert on GPU type quad", "placements-quad.csv"
    )


def test_the_example_cluster_is_sias_heterogeneous_setting():
    from lavaflow.api.loader import load_text

    groups = {it.obj.name: it.obj.spec for it in load_text((ROOT / "examples" / "gpu-cluster-sia.yaml").read_text())}
    shape = {
        name: (g.count, int(g.capacity["nvidia.com/gpu"]), g.labels["lavaflow.io/accelerator"])
        for name, g in groups.items()
    }
    assert shape == {"t4": (6, 4, "t4"), "rtx": (3, 8, "rtx"), "a100": (2, 8, "a100")}
    assert sum(n * g for n, g, _ in shape.values()) == 64


def test_a_sia_workload_streams_as_the_other_traces(monkeypatch, hetero):
    from lavaflow.api.loader import Problems, load_files
    from lavaflow.sim.traces import TraceFeed

    monkeypatch.setenv(ENV_VAR, str(ARTIFACT))
    monkeypatch.delenv(ALL_TRACES_ENV, raising=False)
    problems = Problems()
    feed = TraceFeed.open([str(TRACE)], load_files([hetero]), problems)
    assert not problems.lines and feed is not None and feed.count == 6
    items = list(feed)
    assert [it.obj.name for it in items] == ["cifar10-0", "bert-1", "cifar10-2", "bert-3", "cifar10-4", "bert-5"]
    assert items[1].obj.metadata.annotations["lavaflow.io/speed-tables"] == "sia"


@pytest.mark.parametrize("policy", ["Sia", "Gavel", "Pollux-Fix"])
def test_sias_baselines_replay_a_sia_workload(hetero, policy):
    p = run(
        "--sia-artifact", str(ARTIFACT), str(TRACE), hetero, "--policy", policy, "--adaptive-batch", "--output", "json"
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["elastic"]["summary"]["completed"] == 6
    assert out["elastic"]["summary"]["policy"] == policy
    jobs = out["elastic"]["jobs"]
    # every job ran on one of Sia's types, and on one type at a time
    segs = [seg for j in jobs for seg in j["workers"] if seg[2]]
    assert segs and {seg[2] for seg in segs} <= {"t4", "rtx", "a100"}
