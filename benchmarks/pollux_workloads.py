"""Fresh Pollux-style workloads from the Philly trace, sampled the way the Pollux artifact sampled its own.

The Pollux artifact (OSDI'21 branch of petuum/adaptdl, ``simulator/workload.py``) made each of its
workloads from ``traces/philly.csv`` as follows; this module follows the same procedure with its own
code, so that a seed it was never run with gives a workload nobody has looked at:

* keep the Philly jobs that ran at least 60 s and used less than 1,000 GPU-hours, shift their
  submission times back by 2 hours and keep those submitted in the first 8 hours of a day (hours
  2:00-9:59 of any day of the trace); a job's arrival is its second within that window (0-28,799);
* draw ``num_jobs`` of them without replacement (a numpy ``RandomState`` permutation, seeded from a
  Python ``random.Random(seed)``), 160 for load 1.0 and ``160 × load`` for the other loads, over the
  same 8 hours: a higher load is a higher arrival rate, and, as the permutation is the same, the jobs
  of a lower load are among those of a higher one;
* choose the application from the job's GPU time: below 1 GPU-hour cifar10 or ncf (even odds),
  below 10 deepspeech2 (half of them, by a second generator seeded ``seed + 3``, become bert),
  below 100 yolov3, else imagenet;
* choose ``num_replicas`` and ``batch_size`` uniformly among the application's *configurations*:
  every replica count in (1, 2, 4, 6, 8, 12, 16, 24, 32, 48) on nodes of 4 GPUs, with the measured
  batch size that finishes training soonest there, whose scaling efficiency against one GPU
  (its best time on 1 GPU ÷ (its best time on r GPUs × r)) is strictly between 0.5 and 0.8 and
  which finishes within 12 hours; an application with none (ncf) takes its 1-GPU configuration.
  Times come from the traces' step times (``lavaflow.elastic.speed.pollux.PolluxApp``) and the
  iterations its validation files give for the last epoch.
* sort by arrival and name each job ``<application>-<index>``.

With seeds 1-8 this reproduces the artifact's published ``workloads*/workload-1..8.csv`` row for row
at every load (``--check-published``; docs/elastic.md, "Fresh held-out workloads").

Usage: python benchmarks/pollux_workloads.py --out DIR [--seeds 101-108] [--loads 0.5,1.0,1.5,2.0]
           [--trace philly.csv] [--check-published] [--summary]

writes ``DIR/workloads-<load>/workload-<seed>.csv`` (columns ``name,time,application,num_replicas,
batch_size``, as the published files), which ``benchmarks/elastic_pollux.py --workloads
DIR/workloads-<load>`` replays; ``--summary`` prints the application mix, the GPU requests and the
arrivals per hour of the written workloads next to the published ones of the same load.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path

import numpy as np

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
JOBS_PER_LOAD = 160  # jobs of a load-1.0 workload
HOURS = 8  # the window the jobs arrive in
START_HOUR = 2  # the window starts at this hour of a Philly day
REPLICA_COUNTS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48)
GPUS_PER_NODE = 4
EFFICIENCY = (0.5, 0.8)  # open interval of scaling efficiency a configuration must have
LONGEST = 12 * 3600.0  # a configuration must finish training within this (s)
LOADS = ("0.5", "1.0", "1.5", "2.0")


class Job:
    """One Philly job kept for sampling: arrival second within the window and GPU time (s)."""

    __slots__ = ("arrival", "gpu_time")

    def __init__(self, arrival: int, gpu_time: float) -> None:
        self.arrival = arrival
        self.gpu_time = gpu_time


def load_philly(path: Path) -> list[Job]:
    """The Philly jobs a workload may draw from, in the file's order (the order the draw indexes)."""
    jobs = []
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if float(row["duration"]) < 60 or float(row["gpu_time"]) >= 1000 * 3600:
                continue
            t = datetime.fromisoformat(row["timestamp"])
            hour = (t.hour - START_HOUR) % 24
            if hour >= HOURS:
                continue
            jobs.append(Job(hour * 3600 + t.minute * 60 + t.second, float(row["gpu_time"])))
    return jobs


def _iterations(trace_dir: Path) -> dict[int, list[float]]:
    """Per measured global batch size, the optimiser steps done by the end of each epoch."""
    out = {}
    for p in trace_dir.glob("validation-*.csv"):
        with p.open(newline="") as fh:
            out[int(p.stem.split("-")[-1])] = [float(r["iteration"]) for r in csv.DictReader(fh)]
    return dict(sorted(out.items()))


def _node_fill(replicas: int) -> list[int]:
    """``replicas`` workers on as few nodes of GPUS_PER_NODE as possible, e.g. 6 -> [4, 2]."""
    return [min(GPUS_PER_NODE, replicas - k) for k in range(0, replicas, GPUS_PER_NODE)]


def _training_time(app: object, iterations: dict[int, list[float]], replicas: int) -> tuple[float, int] | None:
    """(seconds to train, batch size) of the fastest measured batch on ``replicas`` GPUs, or None."""
    from lavaflow.elastic.speed.pollux import PolluxApp

    assert isinstance(app, PolluxApp)
    last = app.max_epochs - 1
    best: tuple[float, int] | None = None
    for batch, steps in iterations.items():
        local = math.ceil(batch / replicas - 1e-8)
        if local < app.min_local_bsz:
            continue
        accum = math.ceil(local / app.max_local_bsz - 1e-8) - 1
        micro = math.ceil(local / (accum + 1) - 1e-8)
        step, sync = app.step_time(_node_fill(replicas), micro)
        seconds = steps[last] * (step + accum * (step - sync))
        if best is None or seconds < best[0]:
            best = (seconds, batch)
    return best


@cache
def configurations(application: str) -> tuple[tuple[int, int], ...]:
    """The (num_replicas, batch_size) pairs a job of ``application`` may request, in the order drawn."""
    from lavaflow.elastic.data_paths import pollux_trace_dir
    from lavaflow.elastic.speed.pollux import PolluxApp

    trace_dir = pollux_trace_dir(application)
    app = PolluxApp(application, trace_dir)
    iterations = _iterations(trace_dir)
    largest = max(iterations)
    out: list[tuple[int, int]] = []
    single: tuple[float, int] | None = None
    for replicas in REPLICA_COUNTS:
        if replicas * app.min_local_bsz > largest:
            break
        best = _training_time(app, iterations, replicas)
        if best is None:
            continue
        if replicas == 1:
            single = best
            continue
        assert single is not None
        efficiency = single[0] / best[0] / replicas
        if best[0] < LONGEST and EFFICIENCY[0] < efficiency < EFFICIENCY[1]:
            out.append((replicas, best[1]))
    if not out:
        assert single is not None
        out.append((1, single[1]))
    return tuple(out)


def _application(gpu_time: float, rng: random.Random) -> str:
    if gpu_time < 1 * 3600:
        return rng.choice(["cifar10", "ncf"])
    if gpu_time < 10 * 3600:
        return "deepspeech2"
    if gpu_time < 100 * 3600:
        return "yolov3"
    return "imagenet"


def generate(jobs: Sequence[Job], num_jobs: int, seed: int) -> list[dict[str, object]]:
    """One workload of ``num_jobs`` jobs, rows with the COLUMNS, sorted by arrival."""
    rng = random.Random(seed)
    bert_rng = random.Random(seed + 3)  # its own generator, so that bert leaves the other draws alone
    order = np.random.RandomState(rng.randint(0, 1 << 32)).permutation(len(jobs))[:num_jobs]
    drawn = []
    for i in order:
        job = jobs[int(i)]
        app = _application(job.gpu_time, rng)
        replicas, batch = rng.choice(configurations(app))
        if app == "deepspeech2" and bert_rng.randint(0, 1):
            app = "bert"
            replicas, batch = bert_rng.choice(configurations(app))
        drawn.append((job.arrival, app, replicas, batch))
    drawn.sort(key=lambda d: d[0])  # stable: equal arrivals keep the order drawn
    return [
        {"name": f"{app}-{k}", "time": t, "application": app, "num_replicas": r, "batch_size": b}
        for k, (t, app, r, b) in enumerate(drawn)
    ]


def jobs_for(load: str) -> int:
    return round(JOBS_PER_LOAD * float(load))


def write_csv(rows: Iterable[dict[str, object]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def read_csv(path: Path) -> list[dict[str, object]]:
    with path.open(newline="") as fh:
        return [
            {
                "name": r["name"],
                "time": int(r["time"]),
                "application": r["application"],
                "num_replicas": int(r["num_replicas"]),
                "batch_size": int(r["batch_size"]),
            }
            for r in csv.DictReader(fh)
        ]


def published_dir(load: str) -> Path:
    from lavaflow.elastic.data_paths import find_data

    return find_data("pollux/workloads" if float(load) == 1.0 else f"pollux/workloads-{load}")


def summary(workloads: Sequence[Sequence[dict[str, object]]]) -> dict[str, object]:
    """Application mix (share of jobs), GPU requests (share per num_replicas, mean, GPU share of the
    large jobs), arrivals per hour of the window (mean over workloads) and their spread."""
    rows = [r for w in workloads for r in w]
    n = len(rows)
    apps = Counter(str(r["application"]) for r in rows)
    gpus = Counter(int(str(r["num_replicas"])) for r in rows)
    per_hour = [[sum(1 for r in w if int(str(r["time"])) // 3600 == h) for w in workloads] for h in range(HOURS)]
    per_workload_gpus = [sum(int(str(r["num_replicas"])) for r in w) for w in workloads]
    return {
        "workloads": len(workloads),
        "jobs": n,
        "apps": {a: apps[a] / n for a in sorted(apps)},
        "gpus": {g: gpus[g] / n for g in sorted(gpus)},
        "mean_gpus": statistics.mean(int(str(r["num_replicas"])) for r in rows),
        "gpus_per_workload": (min(per_workload_gpus), statistics.mean(per_workload_gpus), max(per_workload_gpus)),
        "per_hour": [statistics.mean(h) for h in per_hour],
        "per_hour_range": [(min(h), max(h)) for h in per_hour],
    }


def print_summary(label: str, s: dict[str, object]) -> None:
    apps = s["apps"]
    gpus = s["gpus"]
    assert isinstance(apps, dict) and isinstance(gpus, dict)
    print(f"{label}: {s['workloads']} workloads, {s['jobs']} jobs")
    print("  application mix: " + ", ".join(f"{a} {100 * v:.1f} %" for a, v in apps.items()))
    print("  num_replicas:     " + ", ".join(f"{g}: {100 * v:.1f} %" for g, v in gpus.items()))
    lo, mean, hi = s["gpus_per_workload"]  # type: ignore[misc]
    print(f"  mean GPUs per job {s['mean_gpus']:.2f}; GPUs requested per workload {lo}-{hi} (mean {mean:.0f})")
    print("  arrivals per hour (mean): " + " ".join(f"{v:5.1f}" for v in s["per_hour"]))  # type: ignore[attr-defined]
    print("  arrivals per hour (range): " + " ".join(f"{a}-{b}" for a, b in s["per_hour_range"]))  # type: ignore[attr-defined]


def parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    return out


def main(argv: list[str] | None = None) -> int:
    from lavaflow.elastic.data_paths import find_data

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="write DIR/workloads-<load>/workload-<seed>.csv here")
    ap.add_argument("--seeds", default="101-108", help="e.g. 101-108 or 1,2,5 (the artifact's own were 1-8)")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--trace", type=Path, default=None, help="philly.csv (default: pollux/traces/philly.csv)")
    ap.add_argument(
        "--check-published", action="store_true", help="seeds 1-8 must give the published workloads row for row"
    )
    ap.add_argument("--summary", action="store_true", help="compare the written workloads with the published ones")
    args = ap.parse_args(argv)
    jobs = load_philly(args.trace or find_data("pollux/traces/philly.csv"))
    loads = [ld.strip() for ld in args.loads.split(",") if ld.strip()]
    seeds = parse_seeds(args.seeds)
    failed = 0
    if args.check_published:
        for load in loads:
            for k in range(1, 9):
                ours = generate(jobs, jobs_for(load), k)
                theirs = read_csv(published_dir(load) / f"workload-{k}.csv")
                same = sum(a == b for a, b in zip(ours, theirs))
                ok = same == len(theirs) == len(ours)
                failed += not ok
                print(f"load {load} seed {k}: {same}/{len(theirs)} rows equal to published workload-{k}.csv")
    for load in loads:
        made = [generate(jobs, jobs_for(load), s) for s in seeds]
        if args.out is not None:
            for s, rows in zip(seeds, made):
                write_csv(rows, args.out / f"workloads-{load}" / f"workload-{s}.csv")
        if args.summary:
            published = [read_csv(p) for p in sorted(published_dir(load).glob("workload-*.csv"))]
            print(f"\nload {load}")
            print_summary("  published (artifact seeds 1-8)", summary(published))
            print_summary(f"  generated (seeds {args.seeds})", summary(made))
    if args.out is not None:
        print(f"wrote {len(loads)} x {len(seeds)} workloads under {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
