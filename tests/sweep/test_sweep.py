"""`lavaflow sweep`: a small grid on the local pool, resuming, a failed run, bad sweep files, and
the same grid on a local Ray instance giving the same table."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

DATA = ROOT / "tests" / "data"
CLI = [sys.executable, "-c", "from lavaflow.cli import main; main()"]

# 2 policies × 2 seeds of a 20-job Pollux trace on 16 GPUs, cut at 3 simulated hours: < 1 s a run
SPEC = f"""\
name: tiny
inputs: [{DATA / "pollux-20.csv"}]
clusters: [{DATA / "gpu-16.yaml"}]
policies: [Pollux, Tiresias]
seeds: 2
settings:
  until: 3h
  report_noise: 0.1
"""


def sweep(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "sweep", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    d = tmp_path_factory.mktemp("sweep")
    (d / "tiny.yaml").write_text(SPEC)
    return d, sweep("tiny.yaml", "--jobs", "2", cwd=d)


def test_grid_on_the_local_pool(local_run):
    d, r = local_run
    assert r.returncode == 0, r.stderr
    out = d / "tiny-sweep"
    rows = read_csv(out / "results.csv")
    assert len(rows) == 4
    assert [x["key"] for x in rows] == sorted(x["key"] for x in rows)
    assert len({x["key"] for x in rows}) == 4
    assert {(x["policy"], x["seed"]) for x in rows} == {
        ("Pollux", "0"),
        ("Pollux", "1"),
        ("Tiresias", "0"),
        ("Tiresias", "1"),
    }
    assert all(x["status"] == "ok" and x["error"] == "" for x in rows)
    for col in (
        "input",
        "cluster",
        "until",
        "report_noise",
        "jct_mean",
        "makespan",
        "elastic_avg_jct",
        "elastic_gpu_utilization",
    ):
        assert col in rows[0], col
    assert all(float(x["elastic_avg_jct"]) > 0 for x in rows)
    # one file per run under its key
    assert sorted(p.stem for p in (out / "runs").glob("*.json")) == sorted(x["key"] for x in rows)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        assert "pyarrow is not installed: results.parquet not written" in r.stderr
        assert not (out / "results.parquet").exists()
    else:
        table = pq.read_table(out / "results.parquet").to_pylist()
        assert [x["key"] for x in table] == [x["key"] for x in rows]
        assert [x["elastic_avg_jct"] for x in table] == [float(x["elastic_avg_jct"]) for x in rows]
    report = (out / "report.html").read_text()
    assert "Best configuration per trace" in report and "<svg" in report and "95&nbsp;%" in report
    # cut at 3 h, Tiresias finishes fewer jobs than Pollux: the report says JCT means mislead then
    assert "Some runs left jobs unfinished" in report


def test_means_and_confidence_intervals():
    from lavaflow.report.sweep import mean_ci

    m, hw = mean_ci([1.0, 2.0, 3.0])  # sd 1, t(0.975, 2) = 4.3027
    assert m == 2.0 and abs(hw - 4.302653 / 3**0.5) < 1e-5
    assert mean_ci([5.0]) == (5.0, None)


def test_a_run_is_what_simulate_gives(local_run):
    """Each run goes through `lavaflow simulate`'s path: same input, seed and options, same figures."""
    d, _ = local_run
    row = next(x for x in read_csv(d / "tiny-sweep" / "results.csv") if x["policy"] == "Pollux" and x["seed"] == "1")
    sim = subprocess.run(
        [*CLI, "simulate", DATA / "pollux-20.csv", DATA / "gpu-16.yaml", "--policy", "Pollux", "--seed", "1"]
        + ["--until", "3h", "--report-noise", "0.1", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sim.returncode == 0, sim.stderr
    res = json.loads(sim.stdout)
    assert float(row["elastic_avg_jct"]) == res["elastic"]["summary"]["avg_jct"]
    assert float(row["jct_mean"]) == res["summary"]["jctMean"]
    assert int(row["elastic_resizes"]) == res["elastic"]["summary"]["resizes"]
    # the seed matters here (report noise): the other seed's run differs
    other = next(x for x in read_csv(d / "tiny-sweep" / "results.csv") if x["policy"] == "Pollux" and x["seed"] == "0")
    assert other["elastic_avg_jct"] != row["elastic_avg_jct"]


def test_resume_skips_finished_runs(tmp_path, local_run):
    import shutil

    shutil.copytree(local_run[0], tmp_path, dirs_exist_ok=True)
    d = tmp_path
    out = d / "tiny-sweep"
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    csv_before = (out / "results.csv").read_bytes()
    r = sweep("tiny.yaml", "--jobs", "1", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "4 runs, 4 already done, 0 to run" in r.stderr
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")} == before
    assert (out / "results.csv").read_bytes() == csv_before
    listed = sweep("tiny.yaml", "--dry-run", cwd=d)
    assert listed.returncode == 0 and listed.stdout.count("  done  ") == 4, listed.stdout
    # one more seed: only its two runs are new; a lost run record is run again
    victim = sorted(before)[0]
    (out / "runs" / victim).unlink()
    (d / "tiny.yaml").write_text(SPEC.replace("seeds: 2", "seeds: 3"))
    try:
        r = sweep("tiny.yaml", "--jobs", "1", cwd=d)
    finally:
        (d / "tiny.yaml").write_text(SPEC)
    assert r.returncode == 0, r.stderr
    assert "6 runs, 3 already done, 3 to run" in r.stderr
    rows = read_csv(out / "results.csv")
    assert len(rows) == 6 and {x["seed"] for x in rows} == {"0", "1", "2"}
    after = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    assert all(after[n] == t for n, t in before.items() if n != victim)
    old = {x["key"]: x for x in csv.DictReader(csv_before.decode().splitlines())}
    for x in rows:  # the re-run record gives the same figures as before
        if x["key"] in old:
            assert x == old[x["key"]]


def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 3
  tasks:
  - name: w
    replicas: 2
    template:
      spec:
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""
    )
    (tmp_path / "s.yaml").write_text(
        SPEC.replace(f"inputs: [{DATA / 'pollux-20.csv'}]", f"inputs: [bad.yaml, {DATA / 'pollux-20.csv'}]").replace(
            "seeds: 2", "seeds: 1"
        )
    )
    r = sweep("s.yaml", "--jobs", "2", "--no-report", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    rows = read_csv(tmp_path / "s-sweep" / "results.csv")
    assert len(rows) == 4
    failed = [x for x in rows if x["status"] == "failed"]
    assert len(failed) == 2 and all(x["input"] == "bad.yaml" for x in failed)
    assert all("bad.yaml" in x["error"] and "minAvailable" in x["error"] for x in failed), failed
    assert "lavaflow-sweep-" not in failed[0]["error"]  # the file named as the sweep names it
    assert all(x["status"] == "ok" for x in rows if x["input"] != "bad.yaml")
    assert "2 failed" in r.stderr and "minAvailable" in r.stderr
    rec = json.loads((tmp_path / "s-sweep" / "runs" / f"{failed[0]['key']}.json").read_text())
    assert rec["status"] == "failed" and rec["error"] == failed[0]["error"]


@pytest.mark.parametrize(
    "change, expected",
    [
        (("policies:", "polices:"), "s.yaml: polices: unknown field"),
        (("[Pollux, Tiresias]", "[Pollux, Nope]"), "s.yaml: policies[1]: unknown policy 'Nope'"),
        (("until: 3h", "until: soon"), "s.yaml: settings.until:"),
        (("seeds: 2", "seeds: 0"), "s.yaml: seeds: a number of seeds is at least 1"),
        (("pollux-20.csv", "no-such-*.csv"), "s.yaml: inputs[0]: no file matches"),
        (("seeds: 2", "seeds: 2\nparams: {nope: [1, 2]}"), "s.yaml: params.nope: no policy of this sweep takes it"),
        (("seeds: 2", "seeds: 2\nloads: [0.5]"), "s.yaml: loads: no load-0.5 variant of"),
        (("seeds: 2", "seeds: 2\nruns: [{seeds: [x]}]"), "s.yaml: runs[0].seeds"),
        (("name: tiny", "name: [tiny"), "s.yaml: line 2: not valid YAML"),
        (("seeds: 2", "seeds: 2\nseeds: 3"), "s.yaml: line 6: not valid YAML (duplicate key 'seeds'"),
        (("until: 3h", "until: [3h, soon]"), "s.yaml: settings.until: "),
    ],
)
def test_a_bad_sweep_file_names_file_and_field(tmp_path, change, expected):
    (tmp_path / "s.yaml").write_text(SPEC.replace(*change))
    r = sweep("s.yaml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"error: {expected}" in r.stderr, r.stderr
    assert not (tmp_path / "s-sweep").exists()


def test_expansion_loads_lists_and_params(tmp_path):
    """Load variants are sibling folders (workloads/ = 1.0, workloads-0.5/); ``runs:`` is a union of
    grids; a parameter only splits the policies that take it; keys follow file contents."""
    from lavaflow.cli.sweep_spec import expand, read_spec

    for folder in ("workloads", "workloads-0.5"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "w-1.csv").write_text(
            (DATA / "pollux-20.csv").read_text() + ("" if folder == "workloads" else "\n")
        )
    (tmp_path / "s.yaml").write_text(
        """\
inputs: [workloads/w-*.csv]
loads: [1.0, 0.5]
policies: [Tiresias]
runs:
- {}
- policies: [Goodput, Tiresias]
  params: {switch_factor: [12, 24]}
  seeds: [3]
"""
    )
    runs, _, contents = expand(read_spec(tmp_path / "s.yaml"), tmp_path / "s.yaml")
    got = sorted((r.axes["load"], r.axes["policy"], r.axes.get("param.switch_factor"), r.seed) for r in runs)
    assert got == sorted(
        [(ld, "Tiresias", None, 0) for ld in (1.0, 0.5)]
        + [(ld, "Goodput", sf, 3) for ld in (1.0, 0.5) for sf in (12, 24)]
        + [(ld, "Tiresias", None, 3) for ld in (1.0, 0.5)]
    )
    by = {(r.axes["load"], r.policy, r.seed, r.params.get("switch_factor")): r for r in runs}
    assert by[(0.5, "Tiresias", 0, None)].files[0].path == tmp_path / "workloads-0.5" / "w-1.csv"
    assert by[(1.0, "Tiresias", 0, None)].files[0].name == "workloads/w-1.csv"
    assert by[(1.0, "Goodput", 3, 24)].params == {"switch_factor": 24}
    key = by[(1.0, "Tiresias", 0, None)].key
    (tmp_path / "workloads" / "w-1.csv").write_text((DATA / "pollux-20.csv").read_text() + "\n\n")
    runs2, _, _ = expand(read_spec(tmp_path / "s.yaml"), tmp_path / "s.yaml")
    keys2 = {(r.axes["load"], r.policy, r.seed, r.params.get("switch_factor")): r.key for r in runs2}
    assert keys2[(1.0, "Tiresias", 0, None)] != key  # the trace changed: a new run
    assert keys2[(0.5, "Tiresias", 0, None)] == by[(0.5, "Tiresias", 0, None)].key
    assert contents


def _dies_on_boom(task: dict) -> dict:
    if task["key"] == "boom":
        os._exit(3)  # as a worker killed for its memory
    return {"key": task["key"], "axes": {}, "status": "ok", "figures": {}}


def test_a_worker_that_dies_fails_its_run_only():
    from lavaflow.cli.sweep import local_records

    tasks = [{"key": k, "axes": {}} for k in ("a", "b", "boom", "c", "d", "e")]
    got = {r["key"]: r for r in local_records(tasks, 2, fn=_dies_on_boom)}
    assert set(got) == {"a", "b", "boom", "c", "d", "e"}
    assert got["boom"]["status"] == "failed" and "died" in got["boom"]["error"]
    assert all(got[k]["status"] == "ok" for k in "abcde")


def _ray_or_skip():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - CI installs the ray extra
        pytest.skip(f"Ray is not installed ({exc}); pip install 'lavaflow[ray]'")
    return ray


def test_ray_gives_the_local_table(local_run, tmp_path):
    ray = _ray_or_skip()
    from lavaflow.cli.sweep import sweep as run_sweep

    d, _ = local_run
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    # (the workers inherit this process' environment, so they import the same lavaflow)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        code = run_sweep(spec, tmp_path / "ray-out", ray="auto", report=False)
        pids = {json.loads(p.read_text())["pid"] for p in (tmp_path / "ray-out" / "runs").glob("*.json")}
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():  # Ray's init installs its own; later tests expect theirs
            signal.signal(sig, handler)
    assert code == 0
    assert os.getpid() not in pids  # the runs ran in Ray's workers
    assert (tmp_path / "ray-out" / "results.csv").read_bytes() == (d / "tiny-sweep" / "results.csv").read_bytes()


def test_a_ray_address_where_nothing_answers_is_told_at_once(tmp_path):
    _ray_or_skip()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "s.yaml").write_text(SPEC)
    started = time.monotonic()
    r = sweep("s.yaml", "--ray", f"127.0.0.1:{port}", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"error: --ray: 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}" in r.stderr, r.stderr
    assert time.monotonic() - started < 60  # Ray alone retries such an address for minutes
