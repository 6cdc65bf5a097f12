"""Invariants over many random scenarios (issue 15): liveness, capacity, gangs, queues, determinism.

Generates scenarios from seeds (tests/invariants.py: node faults, preempt/reclaim configurations,
hierarchical queues, mixed Volcano Jobs / PodGroups / bare pods / Deployments / batch Jobs, finite
durations), simulates each and checks every invariant; `make test` runs a few hundred of the same
scenarios (tests/sim/test_invariants.py). Prints one line per violation (seed, configuration, problem)
and a summary; exit code 1 if any scenario failed.

    .venv/bin/python benchmarks/invariants.py [--scenarios 10000] [--start 0] [--jobs 2] [--determinism-every 10]
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import invariants  # noqa: E402


def _one(args: tuple[int, bool]) -> tuple[int, str, list[str], float]:
    seed, determinism = args
    sc = invariants.generate(seed)
    t0 = time.perf_counter()
    try:
        problems = invariants.check(sc, determinism=determinism)
    except Exception as exc:  # a crash is a violation too
        problems = [f"exception: {type(exc).__name__}: {exc}"]
    return seed, sc.conf, problems, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument(
        "--determinism-every", type=int, default=10, help="re-run every n-th scenario and compare the JSON (1 = all)"
    )
    a = ap.parse_args()
    seeds = [(s, (s - a.start) % max(a.determinism_every, 1) == 0) for s in range(a.start, a.start + a.scenarios)]
    t0 = time.perf_counter()
    failed = 0
    per_conf: collections.Counter = collections.Counter()
    slowest = (0.0, -1)
    with mp.Pool(a.jobs) as pool:
        for i, (seed, conf, problems, secs) in enumerate(pool.imap_unordered(_one, seeds, chunksize=4), 1):
            per_conf[conf] += 1
            slowest = max(slowest, (secs, seed))
            if problems:
                failed += 1
                for p in problems:
                    print(f"seed {seed} ({conf}): {p}", flush=True)
            if i % 1000 == 0:
                print(
                    f"... {i} scenarios, {failed} failed, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True
                )
    wall = time.perf_counter() - t0
    checked = sum(1 for _, d in seeds if d)
    print(f"scenarios: {a.scenarios} (seeds {a.start}..{a.start + a.scenarios - 1}), failed: {failed}")
    print("configurations: " + ", ".join(f"{k} {v}" for k, v in sorted(per_conf.items())))
    print(
        f"determinism re-runs: {checked}; wall time: {wall:.0f} s with {a.jobs} process(es); "
        f"slowest scenario: seed {slowest[1]} {slowest[0]:.1f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
