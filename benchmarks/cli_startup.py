"""Start-up time of the `lavaflow` command line.

Runs each command N times in a fresh interpreter and prints the median wall time and the median
CPU time (user + system of the child). On a shared machine the wall time includes waiting for a
core; the CPU time is what the command itself costs.
Usage: python benchmarks/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["simulate", "--help"],
    ["version"],
    ["--help"],
    ["queue", "--help"],
]


def measure(args: list[str], runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "lavaflow.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            env=os.environ,
        )
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    print(f"{'command':28} {'wall (s)':>9} {'cpu (s)':>8}")
    for args in COMMANDS:
        wall, cpu = measure(args, a.runs)
        print(f"{'lavaflow ' + ' '.join(args):28} {wall:9.2f} {cpu:8.2f}")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
