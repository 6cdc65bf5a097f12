"""`lavaflow forecast` as a subprocess: the table, JSON, and every refusal (exit code 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT

CLI = [sys.executable, "-c", "from lavaflow.cli import main; main()", "forecast"]


def run(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120)


def refused(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("error: ") for ln in lines), lines
    return r.stderr


def test_json_and_table_on_a_simulation():
    r = run(EXAMPLES / "spark-wordcount.yaml", "--at", "30s", "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["now"] == 30.0 and out["runs"] == 1
    jobs = {f"{j['namespace']}/{j['name']}": j for j in out["jobs"]}
    j3 = jobs["spark/spark-wordcount-3-podgroup"]
    assert (j3["running"], j3["source"], j3["start"], j3["finish"]) == (False, "annotation", 60.0, 120.0)
    assert set(j3) >= {"startLow", "startHigh", "finishLow", "finishHigh", "reason", "queue"}
    r = run(EXAMPLES / "spark-wordcount.yaml", "--at", "30s")
    assert r.returncode == 0, r.stderr
    assert "spark/spark-wordcount-5-podgroup" in r.stdout and "pending" in r.stdout and "annotation" in r.stdout


@pytest.mark.parametrize(
    "args,words",
    [
        ((EXAMPLES / "spark-wordcount.yaml",), ["--at: give the simulated time"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "soon"), ["--at:", "soon"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "-5s"), ["--at:"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "1m", "-o", "xml"), ["--output: unknown format 'xml'"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "1m", "--samples", "-1"), ["--samples"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "1m", "--default-duration", "x"), ["--default-duration"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "1m", "--kubeconfig", "k"), ["not both"]),
        (("--at", "1m"), ["--at: applies to a simulation input"]),
        (("--policy", "FIFO"), ["--policy: applies to a simulation input"]),
        ((EXAMPLES / "spark-wordcount.yaml", "--at", "1m", "--policy", "Nope"), ["--policy: unknown policy 'Nope'"]),
        (("missing.yaml", "--at", "1m"), ["missing.yaml"]),
    ],
)
def test_bad_options_are_refused(args, words):
    err = refused(run(*args))
    for w in words:
        assert w in err


def test_bad_input_names_file_object_and_field(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\n"
        "spec: {minAvailable: 3, tasks: [{name: t, replicas: 2, template: {spec: {containers: [{name: c}]}}}]}\n"
    )
    err = refused(run(bad, "--at", "1m"))
    assert "bad.yaml" in err and "Job/j" in err and "minAvailable" in err


def test_bad_config_is_refused(tmp_path: Path):
    conf = tmp_path / "conf.yaml"
    conf.write_text('actions: "enqueue, allocate, nosuchaction"\ntiers: []\n')
    err = refused(run(EXAMPLES / "spark-wordcount.yaml", "--at", "1m", "--config", conf))
    assert "conf.yaml" in err


def test_a_missing_kubeconfig_is_refused(tmp_path: Path):
    err = refused(run("--kubeconfig", tmp_path / "nope"))
    assert "--kubeconfig" in err and "nope" in err


def test_bad_config_for_a_cluster_is_refused_before_connecting(tmp_path: Path):
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: [\n")
    err = refused(run("--kubeconfig", tmp_path / "nope", "--config", conf))
    assert "conf.yaml" in err


QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}


def _gang(name: str, phase: str, node: str | None, started: str | None) -> list[dict]:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 2, "queue": "default", "minResources": {"cpu": "6"}},
        "status": {"phase": phase},
    }
    pods = []
    for i in range(2):
        pod: dict = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": name, "sim.lavaflow.io/duration": "100s"},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}],
            },
            "status": {"phase": "Pending"},
        }
        if node is not None:
            pod["spec"]["nodeName"] = f"{node}-{i}"
            pod["status"] = {"phase": "Running", "startTime": started}
        pods.append(pod)
    return [pg, *pods]


def test_a_live_cluster_snapshot(tmp_path: Path):
    """Against the API double: a gang running for about 40 s of its 100 s, one waiting for its
    nodes; the forecast (wall-clock times) starts the second when the first ends."""
    pytest.importorskip("aiohttp")
    import time
    from datetime import UTC, datetime

    from typer.testing import CliRunner

    from lavaflow.cli import app
    from lavaflow.testing import ApiDouble, fake_node

    double = ApiDouble().start()
    try:
        queue = {"metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}}
        for obj in [fake_node("n-0", cpu="4"), fake_node("n-1", cpu="4"), {**QUEUE, **queue}]:
            double.put_object(obj)
        kc = double.kubeconfig(str(tmp_path / "kubeconfig"))
        began = int(time.time()) - 40
        started = datetime.fromtimestamp(began, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for obj in _gang("first", "Running", "n", started) + _gang("second", "Inqueue", None, None):
            double.put_object(obj)
        res = CliRunner().invoke(app, ["forecast", "--kubeconfig", kc, "-o", "json"])
        assert res.exit_code == 0, res.output
        jobs = {j["name"]: j for j in json.loads(res.output)["jobs"]}
        first, second = jobs["first"], jobs["second"]
        assert first["running"] and first["source"] == "annotation"
        assert (first["start"], first["finish"]) == (began, began + 100)
        assert not second["running"] and second["source"] == "annotation"
        assert began + 100 <= second["start"] <= began + 102  # the next scheduling period
        assert second["finish"] == second["start"] + 100
        table = CliRunner().invoke(app, ["forecast", "--kubeconfig", kc])
        assert table.exit_code == 0 and "default/second" in table.output and "UTC" in table.output
    finally:
        double.stop()
