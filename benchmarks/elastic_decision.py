"""One policy decision at scale: 2,048 GPUs of three types, 1,000 active jobs (issue 33).

Sia's Heterogeneous cluster scaled 32x (192 nodes x 4 T4, 96 x 8 RTX, 64 x 8 A100 = 2,048 GPUs, as
its paper scales it for Figure 9) and 1,000 synthetic jobs: per job a 1-GPU rate on each type (T4 1,
RTX 1.2-2.5x, A100 1.5-5x), a speed-up curve ``n / (1 + a (n - 1))`` with ``a`` in [0.01, 0.3], at
most 1-64 workers (as learned bounds would allow), 60 % of them running on some type and size with
0-5 restarts, submitted over the last 8 hours. Each policy is built as the scheduler builds it
(``make_policy(name, learned=True)``) and called as the elastic action calls it (node sizes per
type); the time is the policy call alone, the median of ``--repeat`` calls, on one core.

Usage: python benchmarks/elastic_decision.py [--jobs 1000] [--scale 32] [--repeat 3]
           [--policies Goodput,Sia,Sia@1,Gavel,Pollux-Fix] [--seed 0]
``Sia@S`` runs Sia with a time limit of S seconds on the ILP (the artifact sets none; HiGHS returns
the best solution found); ``NAME:k=v;k2=v2`` passes policy parameters (JSON values), e.g.
``Goodput:type_moves=true``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time

from lavaflow.elastic.policies import JobView, check_allocation, make_policy

TYPES = {"t4": (6, 4), "rtx": (3, 8), "a100": (2, 8)}  # Sia's Heterogeneous: nodes, GPUs per node


def cluster(scale: int) -> tuple[dict[str, int], dict[str, int]]:
    cap = {t: n * scale * g for t, (n, g) in TYPES.items()}
    return cap, {t: g for t, (_n, g) in TYPES.items()}


def jobs(count: int, cap: dict[str, int], now: float, seed: int) -> list[JobView]:
    rnd = random.Random(seed)
    out = []
    free = dict(cap)
    for i in range(count):
        factor = {"t4": 1.0, "rtx": rnd.uniform(1.2, 2.5), "a100": rnd.uniform(1.5, 5.0)}
        base = rnd.uniform(0.5, 2.0)
        a = rnd.uniform(0.01, 0.3)
        hi = rnd.choice([1, 2, 4, 8, 8, 16, 16, 32, 64])
        curves = {
            t: tuple([0.0] + [base * f * n / (1 + a * (n - 1)) for n in range(1, hi + 1)]) for t, f in factor.items()
        }
        cur_t, cur_n = None, 0
        if rnd.random() < 0.6:
            t = rnd.choice(list(cap))
            n = min(rnd.choice([1, 2, 4, 8]), hi)
            if free[t] >= n:
                free[t] -= n
                cur_t, cur_n = t, n

        def rate_fn(t: str, n: int, base=base, f=factor, a=a) -> float:
            return base * f[t] * n / (1 + a * (n - 1)) if n > 0 else 0.0

        submit = now - rnd.uniform(60, 8 * 3600)
        out.append(
            JobView(
                name=f"{rnd.choice(['cifar10', 'bert', 'imagenet', 'yolov3', 'deepspeech2'])}-{i}",
                submit_time=submit,
                min_workers=1,
                max_workers=hi,
                requested=min(rnd.choice([1, 2, 4, 8]), hi),
                rates=curves,
                remaining_work=1e6,
                current_workers=cur_n,
                current_type=cur_t,
                restarts=rnd.randint(0, 5) if cur_n else 0,
                attained_service=rnd.uniform(0, now - submit) * max(cur_n, 1),
                done_work=rnd.uniform(0, 5e4),
                rate_fn=rate_fn,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--scale", type=int, default=32, help="copies of Sia's 64-GPU cluster (32: 2,048 GPUs)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policies", default="Goodput,Sia,Sia@1,Gavel,Pollux-Fix")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cap, sizes = cluster(args.scale)
    now = 8 * 3600.0
    views = jobs(args.jobs, cap, now, args.seed)
    print(
        f"# {platform.node()} nproc {os.cpu_count()} python {platform.python_version()} load {os.getloadavg()[0]:.2f}; "
        f"{sum(cap.values())} GPUs {cap}, {len(views)} jobs ({sum(1 for v in views if v.current_workers)} running)"
    )
    for spec in args.policies.split(","):
        head, _, extra = spec.strip().partition(":")
        name, _, limit = head.partition("@")
        params: dict = {"time_limit": float(limit)} if limit else {}
        for kv in filter(None, extra.split(";")):
            k, _, v = kv.partition("=")
            params[k] = json.loads(v)
        pol = make_policy(name, learned=True, resize_cost=30.0, **params)
        times, cpu = [], []
        out: dict = {}
        for _ in range(max(args.repeat, 1)):
            t0, c0 = time.perf_counter(), time.process_time()
            out = pol(views, cap, now, node_sizes=sizes)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        check_allocation(views, cap, out)
        used = sum(a.workers for a in out.values())
        print(
            f"{spec:12s} median {statistics.median(times):7.3f} s wall, {statistics.median(cpu):7.3f} s CPU "
            f"(min {min(times):.3f}, max {max(times):.3f}); {len(out)} jobs placed, {used} GPUs",
            flush=True,
        )


if __name__ == "__main__":
    main()
