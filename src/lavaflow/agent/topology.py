"""Where this training process stands: its rank, how many replicas and nodes the job runs on.

Read from what launchers put in the environment (first match wins):

==================  ===========================================  ==============================
                    torchrun (torch.distributed.run)             Horovod / Open MPI
==================  ===========================================  ==============================
rank                ``RANK``                                     ``HOROVOD_RANK``,
                                                                 ``OMPI_COMM_WORLD_RANK``
replicas            ``WORLD_SIZE``                               ``HOROVOD_SIZE``,
                                                                 ``OMPI_COMM_WORLD_SIZE``
local rank / size   ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE``        ``HOROVOD_LOCAL_RANK`` /
                                                                 ``HOROVOD_LOCAL_SIZE``,
                                                                 ``OMPI_COMM_WORLD_LOCAL_*``
nodes               ``GROUP_WORLD_SIZE`` (one per agent: a pod)  ``HOROVOD_CROSS_SIZE``
==================  ===========================================  ==============================

``LAVAFLOW_NUM_NODES`` overrides the node count (several pods of a job may share a Kubernetes
node; the PyTorch helper counts distinct ``NODE_NAME`` values instead), ``LAVAFLOW_GPU_TYPE``
names the accelerator (the value of the node label the scheduler reads, e.g. ``v100``).
Without any launcher variable the process is a single replica on one node.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_GPU_TYPE = "default"


@dataclass(frozen=True)
class Topology:
    """One process's place in the job: ``replicas`` data-parallel processes on ``nodes`` nodes."""

    rank: int = 0
    replicas: int = 1
    local_rank: int = 0
    local_replicas: int = 1
    nodes: int = 1
    gpu_type: str = DEFAULT_GPU_TYPE

    def __post_init__(self) -> None:
        if self.replicas < 1 or not 0 <= self.rank < self.replicas:
            raise ValueError(f"rank {self.rank} of {self.replicas} replicas")
        if not 1 <= self.nodes <= self.replicas:
            raise ValueError(f"{self.nodes} nodes for {self.replicas} replicas")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Topology:
        env = os.environ if environ is None else environ
        rank = _first(env, "RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK") or 0
        replicas = _first(env, "WORLD_SIZE", "HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE") or 1
        local_rank = _first(env, "LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK") or 0
        local = _first(env, "LOCAL_WORLD_SIZE", "HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")
        nodes = _first(env, "LAVAFLOW_NUM_NODES", "GROUP_WORLD_SIZE", "HOROVOD_CROSS_SIZE")
        if nodes is None:
            nodes = -(-replicas // local) if local else 1
        replicas = max(replicas, 1)
        return cls(
            rank=min(max(rank, 0), replicas - 1),
            replicas=replicas,
            local_rank=max(local_rank, 0),
            local_replicas=max(local or replicas // max(nodes, 1), 1),
            nodes=min(max(nodes, 1), replicas),
            gpu_type=(env.get("LAVAFLOW_GPU_TYPE") or DEFAULT_GPU_TYPE).strip().lower() or DEFAULT_GPU_TYPE,
        )


def _first(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        raw = env.get(name)
        if raw is not None and raw.strip():
            try:
                return int(raw.strip())
            except ValueError:
                continue
    return None
