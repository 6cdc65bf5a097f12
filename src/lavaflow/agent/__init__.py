"""lavaflow's training agent: a small library a training script uses to report its speed and
progress to the scheduler, checkpoint when it is resized, and resume at its new size.

The core (this package but :mod:`lavaflow.agent.torch`) needs nothing beyond the standard
library and imports nothing else of lavaflow: it can be copied into a training image on its own.
:mod:`lavaflow.agent.torch` adds PyTorch helpers (model and optimizer state, a sampler that
resumes mid-epoch at any number of replicas, gradient statistics of a DDP model).
See docs/training-agent.md.

    from lavaflow.agent import Agent

    agent = Agent(batch_size=64, epochs=10, samples_per_epoch=len(data))
    agent.track("model", get=lambda: params, load=params.update)
    agent.restore()
    for epoch in agent.remaining_epochs():
        for batch in batches(data, start=agent.epoch_offset):
            loss = train_step(params, batch)
            agent.step_done(loss=loss)      # reports, checkpoints; exits after SIGTERM
    agent.close()
"""

from .checkpoint import Checkpoint
from .core import AGENT_FILE, RESTART_EXIT_CODE, Agent, Collective
from .gradients import GradientNoise
from .report import GPU_SECONDS, METRICS, PROGRESS, PROGRESS_TIME
from .sinks import FileSink, KubeSink, MemorySink, NullSink, Reporter, Sink, sink_from_env
from .topology import Topology

__all__ = [
    "AGENT_FILE",
    "GPU_SECONDS",
    "METRICS",
    "PROGRESS",
    "PROGRESS_TIME",
    "RESTART_EXIT_CODE",
    "Agent",
    "Checkpoint",
    "Collective",
    "FileSink",
    "GradientNoise",
    "KubeSink",
    "MemorySink",
    "NullSink",
    "Reporter",
    "Sink",
    "Topology",
    "sink_from_env",
]
