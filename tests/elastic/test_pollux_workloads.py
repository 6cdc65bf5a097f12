"""benchmarks/pollux_workloads.py: fresh Pollux-style workloads, sampled as the Pollux artifact sampled
its own (issue 31, the held-out check). It must be deterministic by seed, write the published files'
columns with 160 x load jobs in the 8-hour window, and, with the artifact's seeds, give its files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from lavaflow.elastic.data_paths import find_data

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("pollux_workloads", ROOT / "benchmarks" / "pollux_workloads.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pollux_workloads"] = mod
    spec.loader.exec_module(mod)
    return mod


pw = _module()


@pytest.fixture(scope="module")
def philly():
    try:
        path = find_data("pollux/traces/philly.csv")
    except FileNotFoundError:
        pytest.skip("philly.csv not available (set LAVAFLOW_DATA)")
    return pw.load_philly(path)


def test_configurations_are_those_the_published_workloads_request():
    # every (num_replicas, batch_size) the artifact's workloads hold, and no other
    assert pw.configurations("cifar10") == ((6, 2048), (8, 2048), (12, 4096), (16, 4096))
    assert pw.configurations("bert") == ((6, 384), (8, 384), (12, 384), (16, 384))
    assert pw.configurations("deepspeech2") == ((6, 320), (8, 320), (12, 640))
    assert pw.configurations("imagenet") == ((24, 3200), (32, 6400), (48, 6400))
    assert pw.configurations("yolov3") == ((4, 64),)
    assert pw.configurations("ncf") == ((1, 32768),)  # none scales within 0.5-0.8: one GPU


def test_same_seed_same_workload_other_seed_other_workload(philly):
    a = pw.generate(philly, 160, 101)
    assert a == pw.generate(philly, 160, 101)
    assert a != pw.generate(philly, 160, 102)


@pytest.mark.parametrize("load", ["0.5", "1.0", "1.5", "2.0"])
def test_columns_counts_and_window(philly, load, tmp_path):
    rows = pw.generate(philly, pw.jobs_for(load), 101)
    path = tmp_path / "workload-101.csv"
    pw.write_csv(rows, path)
    lines = path.read_text().splitlines()
    assert lines[0] == "name,time,application,num_replicas,batch_size"
    assert len(lines) == 1 + 160 * float(load)
    back = pw.read_csv(path)
    assert back == rows
    times = [r["time"] for r in back]
    assert times == sorted(times) and 0 <= times[0] and times[-1] < 8 * 3600
    assert [r["name"] for r in back] == [f"{r['application']}-{k}" for k, r in enumerate(back)]
    assert all((r["num_replicas"], r["batch_size"]) in pw.configurations(r["application"]) for r in back)


def test_a_higher_load_adds_jobs_to_the_lower_one(philly):
    # the load variants scale the arrival rate: the same draw, more of it (as in the artifact)
    def key(rows):
        return {(r["time"], r["application"], r["num_replicas"], r["batch_size"]) for r in rows}

    low, high = key(pw.generate(philly, 80, 103)), key(pw.generate(philly, 160, 103))
    assert low < high


def test_the_artifacts_seeds_give_its_published_workloads(philly):
    for load, seed in (("1.0", 1), ("1.0", 7), ("0.5", 2), ("2.0", 8)):
        try:
            published = pw.read_csv(pw.published_dir(load) / f"workload-{seed}.csv")
        except FileNotFoundError:
            pytest.skip(f"published Pollux workloads at load {load} not available")
        assert pw.generate(philly, pw.jobs_for(load), seed) == published
