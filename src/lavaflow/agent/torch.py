"""PyTorch helpers for lavaflow's training agent (``torch`` is imported when they are used).

* :func:`init_distributed` joins the process group torchrun describes in the environment;
* :func:`make_agent` builds an :class:`~lavaflow.agent.Agent` whose replicas agree through
  ``torch.distributed`` (a stop at the same step everywhere; nobody leaves before rank 0 has
  written the checkpoint) and whose topology counts nodes by ``NODE_NAME`` (several pods of a
  job may share a node);
* :func:`track` puts a model's, optimizer's (and LR scheduler's, gradient scaler's) state in
  the agent's checkpoints, written by rank 0 with ``torch.save`` and loaded on every rank;
* :class:`ElasticBatchSampler` gives this replica its part of every global batch still to come
  in the current epoch: the order of samples depends on the epoch only, so a job stopped in the
  middle of an epoch on 4 replicas continues on 2 with the next unseen sample;
* :class:`GradientStats` measures a DDP model's gradient statistics (``gradSqr``, ``gradVar``
  for adaptive batch sizes) and the time the step waits for gradient synchronisation.

    agent = make_agent(batch_size=256, epochs=10, samples_per_epoch=len(ds))
    model = DDP(net)
    track(agent, model, optimizer)
    agent.restore()
    sampler = ElasticBatchSampler(len(ds), agent)
    loader = DataLoader(ds, batch_sampler=sampler)
    for epoch in agent.remaining_epochs():
        for x, y in loader:
            ...
            agent.step_done(loss=loss.item())
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

from .core import Agent, Collective
from .topology import Topology

if TYPE_CHECKING:  # pragma: no cover
    import torch


def init_distributed(backend: str | None = None) -> tuple[int, int]:
    """Join the process group the environment describes (torchrun's ``MASTER_ADDR``, ``RANK``,
    ``WORLD_SIZE``, ...) unless already in one; ``(rank, world size)``.  One process with no
    launcher stays alone (no group)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    import torch

    dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
    return dist.get_rank(), dist.get_world_size()


def _distributed() -> bool:
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)


def _device() -> torch.device:
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class TorchCollective(Collective):
    """Agreement through ``torch.distributed`` (the default process group)."""

    def any(self, flag: bool) -> bool:
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=_device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def barrier(self) -> None:
        self.any(False)  # an all-reduce every replica must join (works on every backend)


def topology(environ: Mapping[str, str] | None = None) -> Topology:
    """This process's topology: rank and replicas from the process group, nodes the distinct
    ``NODE_NAME`` values of the replicas (the host name where it is unset; the downward API's
    ``spec.nodeName`` gives it) unless ``LAVAFLOW_NUM_NODES`` says."""
    env = os.environ if environ is None else environ
    base = Topology.from_env(env)
    if not _distributed():
        return base
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    nodes = base.nodes
    if not (env.get("LAVAFLOW_NUM_NODES") or "").strip():
        names: list[Any] = [None] * world
        dist.all_gather_object(names, env.get("NODE_NAME") or socket.gethostname())
        nodes = len(set(names))
    local = max(base.local_replicas, 1) if base.replicas == world else max(world // max(nodes, 1), 1)
    return Topology(rank, world, base.local_rank, local, min(max(nodes, 1), world), base.gpu_type)


def make_agent(**kwargs: Any) -> Agent:
    """An :class:`Agent` for this process group (``kwargs`` as for :class:`Agent`)."""
    kwargs.setdefault("topology", topology(kwargs.get("environ")))
    if _distributed():
        kwargs.setdefault("collective", TorchCollective())
    return Agent(**kwargs)


def _unwrap(model: Any) -> Any:
    return getattr(model, "module", model)


def track(
    agent: Agent,
    model: Any,
    optimizer: Any = None,
    lr_scheduler: Any = None,
    scaler: Any = None,
    name: str = "model.pt",
) -> None:
    """Checkpoint the state of ``model`` (a DDP model's inner module), ``optimizer``,
    ``lr_scheduler`` and ``scaler`` as the part ``name`` (``torch.save``; tensors are loaded on
    the CPU, then copied into the objects wherever they live)."""
    import torch

    objs = {"model": _unwrap(model), "optimizer": optimizer, "lr_scheduler": lr_scheduler, "scaler": scaler}
    objs = {k: v for k, v in objs.items() if v is not None}

    def get() -> dict[str, Any]:
        return {k: v.state_dict() for k, v in objs.items()}

    def load(state: dict[str, Any]) -> None:
        for k, v in objs.items():
            if k in state:
                v.load_state_dict(state[k])

    def dump(state: Any, fh: BinaryIO) -> None:
        torch.save(state, fh)

    def read(fh: BinaryIO) -> Any:
        return torch.load(fh, map_location="cpu", weights_only=True)

    agent.track(name, get, load, dump, read)


def restore(agent: Agent) -> bool:
    """:meth:`Agent.restore` on every replica, checked: every replica must have read the same
    step (the checkpoint directory must be shared by all of them)."""
    found = agent.restore()
    if _distributed():
        import torch.distributed as dist

        steps: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(steps, agent.step)
        if len(set(steps)) > 1:
            raise RuntimeError(
                f"replicas resumed at different steps {steps}: LAVAFLOW_CHECKPOINT_DIR must be shared by every replica"
            )
    return found


class ElasticBatchSampler:
    """This replica's share of each global batch still to train in the agent's current epoch.

    The epoch's order is a permutation seeded by ``seed`` and the epoch (or the natural order
    without ``shuffle``); the global batches are consecutive runs of ``batch_size`` (the agent's
    batch) samples in it, starting at the agent's ``epoch_offset``; replica ``r`` of ``R`` gets
    the ``r``-th of ``R`` near-equal slices of each.  Use as a DataLoader's ``batch_sampler``,
    iterated once per epoch (as :meth:`Agent.remaining_epochs` runs them)."""

    def __init__(
        self,
        dataset_len: int,
        agent: Agent,
        *,
        batch_size: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.n = dataset_len
        self.agent = agent
        self.batch_size = batch_size or agent.batch.batch_size or 1
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last

    def order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.n))
        import torch

        g = torch.Generator()
        g.manual_seed(self.seed * 1_000_003 + epoch)
        return [int(i) for i in torch.randperm(self.n, generator=g)]

    def _starts(self) -> range:
        offset = self.agent.epoch_offset
        end = self.n - self.batch_size + 1 if self.drop_last else self.n
        return range(offset, max(end, offset), self.batch_size)

    def __len__(self) -> int:
        return len(self._starts())

    def __iter__(self) -> Iterator[list[int]]:
        t = self.agent.topology
        order = self.order(self.agent.epoch)
        for start in self._starts():
            batch = order[start : start + self.batch_size]
            per, extra = divmod(len(batch), t.replicas)
            lo = t.rank * per + min(t.rank, extra)
            yield batch[lo : lo + per + (1 if t.rank < extra else 0)]


class GradientStats:
    """Gradient statistics and synchronisation time of ``model``, handed to ``agent`` at every
    ``every``-th step boundary.

    With a DDP model on several replicas a communication hook (in place of DDP's default
    all-reduce, which it reproduces) takes each bucket's local squared norm before the
    all-reduce and the averaged one after; the local ones are averaged over the replicas at the
    step boundary (one small all-reduce).  One replica compares consecutive steps' gradients
    (``param.grad``) instead.  The time between the last bucket's all-reduce being started and
    the last one finishing is the step's synchronisation time (the part not overlapped with the
    backward pass)."""

    def __init__(self, agent: Agent, model: Any, every: int = 1) -> None:
        self.agent = agent
        self.model = model
        self.every = max(int(every), 1)
        self._locals: list[Any] = []
        self._totals: list[Any] = []
        self._launched: list[float] = []
        self._done: list[float] = []
        self._prev: list[Any] | None = None
        self._hooked = False
        if _distributed() and hasattr(model, "register_comm_hook"):

            def hook(state, bucket):  # type: ignore[no-untyped-def]  # (DDP checks annotations: none)
                return self._hook(state, bucket)

            model.register_comm_hook(None, hook)
            self._hooked = True
        agent.add_step_hook(self._at_boundary)

    def _active(self) -> bool:
        return (self.agent.step + 1) % self.every == 0  # the step now ending is the next one counted

    def _hook(self, state: Any, bucket: Any) -> Any:
        import torch
        import torch.distributed as dist

        buf = bucket.buffer()
        if self._active():
            self._locals.append(buf.detach().pow(2).sum(dtype=torch.float64))
        self._launched.append(time.perf_counter())
        buf.div_(dist.get_world_size())
        fut = dist.all_reduce(buf, async_op=True).get_future()

        def done(f: Any) -> Any:
            out = f.value()[0]
            if self._active():
                self._totals.append(out.detach().pow(2).sum(dtype=torch.float64))
            self._done.append(time.perf_counter())
            return out

        return fut.then(done)

    def _scale(self, replicas_batch: int) -> float:
        b0 = self.agent.batch.init_batch_size or self.agent.batch.batch_size or replicas_batch
        return replicas_batch / max(b0, 1)

    def _at_boundary(self) -> None:
        import torch

        if self._launched and self._done:
            self.agent.add_sync_time(max(max(self._done) - max(self._launched), 0.0))
        self._launched.clear()
        self._done.clear()
        active = self._active()
        if self._hooked:
            self._distributed_stats(active)
        elif active:
            grads = [p.grad.detach().flatten().double() for p in _unwrap(self.model).parameters() if p.grad is not None]
            if grads:
                g = torch.cat(grads)
                if self._prev is not None and self._prev[0].shape == g.shape:
                    prev = self._prev[0]
                    local = float((g.pow(2).sum() + prev.pow(2).sum()) / 2)
                    total = float(((g + prev) / 2).pow(2).sum())
                    self.agent.grad.update(local, total, 2, self._scale(2 * (self.agent.batch.batch_size or 1)))
                self._prev = [g.clone()]

    def _distributed_stats(self, active: bool) -> None:
        import torch
        import torch.distributed as dist

        if not active:
            self._locals.clear()
            self._totals.clear()
            return
        world = dist.get_world_size()
        have = bool(self._locals) and bool(self._totals)
        local = torch.stack(self._locals).sum() if have else torch.zeros((), dtype=torch.float64)
        total = torch.stack(self._totals).sum() if have else torch.zeros((), dtype=torch.float64)
        self._locals.clear()
        self._totals.clear()
        t = torch.stack(
            [local.to(_device()), torch.tensor(1.0 if have else 0.0, dtype=torch.float64, device=_device())]
        )
        dist.all_reduce(t)
        if float(t[1]) == world:  # every replica measured this step
            self.agent.grad.update(
                float(t[0]) / world, float(total), world, self._scale(self.agent.batch.batch_size or 1)
            )
