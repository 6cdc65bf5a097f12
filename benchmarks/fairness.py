"""Fairness: do busy queues converge to their deserved shares?

Four queues with weights 1, 2, 3, 4 share a cluster; every queue always has more
work than its share. The script simulates the workload with lavaflow's default
configuration and prints, per queue, the time-averaged CPU allocation in the
steady state against its deserved share, the largest relative deviation, and
Jain's fairness index over allocation/deserved.

    python benchmarks/fairness.py [--nodes 16] [--jobs-per-queue 80] [--report fairness.html]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from lavaflow.api.loader import load_text
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

WEIGHTS = {"team-a": 1, "team-b": 2, "team-c": 3, "team-d": 4}


def workload(nodes: int, cpu: int, jobs_per_queue: int, seed: int) -> str:
    rng = random.Random(seed)
    docs = [
        f"""apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {{name: node}}
spec: {{count: {nodes}, capacity: {{cpu: "{cpu}", memory: {cpu * 4}Gi}}}}"""
    ]
    for q, w in WEIGHTS.items():
        docs.append(
            f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {q}}}
spec: {{weight: {w}}}"""
        )
    for q in WEIGHTS:
        for i in range(jobs_per_queue):
            pods = rng.choice([1, 2, 4])
            duration = rng.randint(60, 180)
            docs.append(
                f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {q}-{i}, namespace: {q}}}
spec:
  queue: {q}
  tasks:
  - name: work
    replicas: {pods}
    template:
      metadata: {{annotations: {{sim.lavaflow.io/duration: "{duration}"}}}}
      spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 2Gi}}}}}}]}}"""
            )
    return "\n---\n".join(docs) + "\n"


def steady_state(result: dict, start: float, end: float) -> dict[str, tuple[float, float]]:
    """Time-averaged (allocated, deserved) CPU per queue over [start, end)."""
    tl = result["timeline"]
    acc = {q: [0.0, 0.0] for q in WEIGHTS}
    total = 0.0
    for a, b in zip(tl, tl[1:] + [{"time": result["endTime"]}]):
        t0, t1 = max(a["time"], start), min(b["time"], end)
        if t1 <= t0:
            continue
        dt = t1 - t0
        total += dt
        for q in WEIGHTS:
            acc[q][0] += dt * a.get("queues", {}).get(q, {}).get("cpu", 0.0)
            acc[q][1] += dt * a.get("deserved", {}).get(q, {}).get("cpu", 0.0)
    return {q: (v[0] / total, v[1] / total) for q, v in acc.items()} if total else {}


def jain(xs: list[float]) -> float:
    xs = np.asarray(xs, dtype=float)
    return float(xs.sum() ** 2 / (len(xs) * (xs**2).sum())) if len(xs) and (xs**2).sum() > 0 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--cpu", type=int, default=8)
    ap.add_argument("--jobs-per-queue", type=int, default=80)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--report", default=None, help="write the HTML report (allocation per queue over time)")
    args = ap.parse_args()
    text = workload(args.nodes, args.cpu, args.jobs_per_queue, args.seed)
    t0 = time.perf_counter()
    result = Simulation(prepare(load_text(text, "fairness.yaml")), seed=args.seed).run()
    wall = time.perf_counter() - t0
    # Steady state: from the first time every queue has work running until the first queue runs dry.
    tl = result["timeline"]
    start = next((p["time"] for p in tl if all(p.get("queues", {}).get(q) for q in WEIGHTS)), 0.0)
    last_busy = [max((j["finishTime"] or 0) for j in result["jobs"] if j["queue"] == q) for q in WEIGHTS]
    end = min(last_busy) * 0.8
    shares = steady_state(result, start + 60, end)
    print(
        f"cluster: {args.nodes} nodes x {args.cpu} cpu; {4 * args.jobs_per_queue} jobs; simulated {result['endTime']:.0f}s in {wall:.1f}s wall"
    )
    print(f"steady state: t={start + 60:.0f}s .. {end:.0f}s")
    print(f"{'queue':8} {'weight':>6} {'allocated':>10} {'deserved':>9} {'deviation':>9}")
    ratios = []
    worst = 0.0
    for q, w in WEIGHTS.items():
        alloc, des = shares[q]
        dev = abs(alloc - des) / des if des else float("inf")
        worst = max(worst, dev)
        ratios.append(alloc / des if des else 0.0)
        print(f"{q:8} {w:>6} {alloc:>10.2f} {des:>9.2f} {100 * dev:>8.1f}%")
    print(f"max deviation from deserved: {100 * worst:.1f}% (target <= 10%)")
    print(f"Jain's index over allocated/deserved: {jain(ratios):.4f} (1 = perfectly fair)")
    if args.report:
        from lavaflow.report.simulation import write_report

        write_report([result], args.report, title="lavaflow fairness benchmark")
        print(f"report: {args.report}")


if __name__ == "__main__":
    main()
