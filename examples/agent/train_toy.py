"""A toy training script that uses lavaflow's training agent, in plain Python (no framework).

Linear regression by mini-batch SGD on a synthetic data set.  The process plays a data-parallel
job of ``WORLD_SIZE`` replicas by itself: each global batch is split into that many shards whose
gradients are averaged (what an all-reduce does), and a step takes less time on more replicas
(``--step-seconds`` × (0.25 + 0.75 / replicas)), so the speed the agent measures depends on the
size.  The model, the optimiser and the position in the data do not depend on it: stopped by
SIGTERM at one size and started again at another, it continues where it stopped.

    LAVAFLOW_CHECKPOINT_DIR=/tmp/ckpt LAVAFLOW_REPORT_FILE=/tmp/report.json WORLD_SIZE=4 \\
        python examples/agent/train_toy.py --epochs 5

It prints one JSON object a line: ``start`` (step, epoch, replicas, whether it resumed), ``log``
every ``--log-every`` steps (the loss over the whole data set) and ``done``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from lavaflow.agent import Agent

FEATURES = 8


def make_data(n: int, seed: int) -> tuple[list[list[float]], list[float]]:
    rng = random.Random(seed)
    w_true = [rng.uniform(-2, 2) for _ in range(FEATURES)]
    xs = [[rng.gauss(0, 1) for _ in range(FEATURES)] for _ in range(n)]
    ys = [sum(w * x for w, x in zip(w_true, row)) + 0.5 + rng.gauss(0, 0.1) for row in xs]
    return xs, ys


def grad(params: dict, xs, ys, idx: list[int]) -> tuple[list[float], float, float]:
    """(dL/dw, dL/db, loss) of the mean squared error over the samples ``idx``."""
    w, b = params["w"], params["b"]
    gw, gb, loss = [0.0] * FEATURES, 0.0, 0.0
    for i in idx:
        err = sum(wj * xj for wj, xj in zip(w, xs[i])) + b - ys[i]
        loss += err * err
        for j in range(FEATURES):
            gw[j] += 2 * err * xs[i][j]
        gb += 2 * err
    n = max(len(idx), 1)
    return [g / n for g in gw], gb / n, loss / n


def full_loss(params: dict, xs, ys) -> float:
    return grad(params, xs, ys, list(range(len(xs))))[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--step-seconds", type=float, default=0.005)
    ap.add_argument("--log-every", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    xs, ys = make_data(args.samples, args.seed)
    params = {"w": [0.0] * FEATURES, "b": 0.0}
    agent = Agent(batch_size=args.batch_size, epochs=args.epochs, samples_per_epoch=args.samples)
    agent.track("model", get=lambda: params, load=params.update)
    resumed = agent.restore()
    replicas = agent.topology.replicas
    emit = {"step": agent.step, "epoch": agent.epoch, "replicas": replicas, "resumed": resumed}
    print(json.dumps({"event": "start", **emit, "loss": full_loss(params, xs, ys)}), flush=True)

    with agent:
        for epoch in agent.remaining_epochs():
            order = list(range(args.samples))
            random.Random(args.seed * 100_003 + epoch).shuffle(order)  # the same at every size
            while agent.epoch_offset < args.samples:
                batch = order[agent.epoch_offset : agent.epoch_offset + args.batch_size]
                shards = [batch[r::replicas] for r in range(replicas)]
                parts = [grad(params, xs, ys, s) for s in shards if s]
                # the all-reduce: the gradient of the whole batch, whatever the split
                weights = [len(s) / len(batch) for s in shards if s]
                gw = [sum(wt * p[0][j] for wt, p in zip(weights, parts)) for j in range(FEATURES)]
                gb = sum(wt * p[1] for wt, p in zip(weights, parts))
                loss = sum(wt * p[2] for wt, p in zip(weights, parts))
                params["w"] = [w - args.lr * g for w, g in zip(params["w"], gw)]
                params["b"] -= args.lr * gb
                time.sleep(args.step_seconds * (0.25 + 0.75 / replicas))
                agent.step_done(samples=len(batch), loss=loss)  # exits here after SIGTERM
                if agent.step % args.log_every == 0:
                    row = {"step": agent.step, "epoch": agent.epoch, "replicas": replicas}
                    print(json.dumps({"event": "log", **row, "loss": full_loss(params, xs, ys)}), flush=True)
    final = {"step": agent.step, "epoch": agent.epoch, "loss": full_loss(params, xs, ys)}
    print(json.dumps({"event": "done", **final}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
