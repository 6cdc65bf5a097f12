"""Elastic data-parallel training with PyTorch DDP and lavaflow's training agent (CPU, gloo).

Run by torchrun, which forms the group again whenever workers join or leave:

    torchrun --nnodes=1:4 --nproc-per-node=1 --max-restarts=100 \\
        --rdzv-backend=c10d --rdzv-endpoint=$MASTER:29400 --rdzv-id=$JOB \\
        examples/agent/train_ddp.py --epochs 20

with ``LAVAFLOW_CHECKPOINT_DIR`` on storage every worker shares.  At every size the model trains
on the same global batch (``--batch-size``, split over the workers) in the same order of
samples, so a resize changes the speed, not the result: after SIGTERM (a worker is removed, or
torchrun restarts the workers for a new size) all workers stop at the same step, rank 0 writes a
checkpoint, and the next group resumes from it.  Rank 0 reports the step time per configuration
to the scheduler (``LAVAFLOW_REPORT_FILE``, or the Kubernetes API: see docs/training-agent.md).

Prints one JSON object a line (rank 0): ``start``, ``log`` every ``--log-every`` steps, ``done``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

from lavaflow.agent.torch import ElasticBatchSampler, GradientStats, init_distributed, make_agent, restore, track


def make_data(n: int, features: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=64, help="global batch, split over the workers")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step (to watch a resize)")
    ap.add_argument(
        "--compute-seconds",
        type=float,
        default=0.0,
        help="simulated accelerator time of the whole global batch: each worker sleeps its share of it "
        "(local batch / global batch) per step, so that more workers step faster, as on GPUs",
    )
    ap.add_argument("--log-every", type=int, default=16)
    ap.add_argument("--grad-stats", action="store_true", help="measure gradient statistics (gradSqr, gradVar)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rank, world = init_distributed("gloo")
    torch.manual_seed(args.seed)  # the same initial model on every worker
    data = make_data(args.samples, args.features, args.seed)
    net = nn.Sequential(nn.Linear(args.features, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    agent = make_agent(batch_size=args.batch_size, epochs=args.epochs, samples_per_epoch=args.samples)
    track(agent, net, optimizer)
    resumed = restore(agent)  # before DDP wraps the model: DDP starts from rank 0's parameters
    model = DistributedDataParallel(net) if world > 1 else net
    if args.grad_stats:
        GradientStats(agent, model)
    sampler = ElasticBatchSampler(len(data), agent, seed=args.seed)
    loader = DataLoader(data, batch_sampler=sampler)
    loss_fn = nn.MSELoss()

    def full_loss() -> float:
        with torch.no_grad():
            x, y = data.tensors
            return float(loss_fn(net(x), y))

    def say(event: str, **kw: object) -> None:
        if rank == 0:
            row = {"event": event, "time": round(time.time(), 3), "step": agent.step, "epoch": agent.epoch}
            row.update(replicas=world, **kw)
            print(json.dumps(row), flush=True)

    say("start", resumed=resumed, loss=full_loss())
    with agent:
        for _epoch in agent.remaining_epochs():
            for x, y in loader:
                optimizer.zero_grad()
                # the mean over the global batch: each worker's mean weighted by its share
                loss = loss_fn(model(x), y) * (len(x) * world / args.batch_size)
                if args.compute_seconds:
                    time.sleep(args.compute_seconds * len(x) / args.batch_size)
                loss.backward()
                optimizer.step()
                if args.step_seconds:
                    time.sleep(args.step_seconds)
                agent.step_done(loss=loss.item())  # exits here after SIGTERM
                if agent.step % args.log_every == 0:
                    say("log", loss=full_loss())
    say("done", loss=full_loss())
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
