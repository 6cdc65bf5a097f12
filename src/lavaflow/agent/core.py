"""The training agent: measures, reports, checkpoints and stops a training loop cleanly.

A training loop tells the agent when each optimiser step is done (:meth:`Agent.step_done`);
everything else happens at those step boundaries:

* the time between two boundaries is a step time, kept per configuration (GPU type, nodes,
  replicas, local batch, accumulation steps) after a few warm-up steps;
* rank 0 builds a report (:mod:`.report`) at most once per report period and hands it to a
  background thread (:class:`.sinks.Reporter`): the loop never waits for the API;
* rank 0 writes a checkpoint every checkpoint period (by default the report period);
* after SIGTERM (the pod is being removed, or torchrun is restarting its workers for a new
  size) the replicas agree to stop at the same boundary, rank 0 writes a checkpoint there and
  every process exits — 0 where the signal was received, :attr:`Agent.restart_exit_code` (75)
  where it was not (a surviving worker under torchrun: a non-zero exit makes torchrun form the
  group again at its new size).  A resize therefore costs at most the step that was running.

The state the agent keeps (global step, samples consumed, epoch and offset into it, GPU-seconds,
measurements, gradient statistics) does not depend on the number of replicas, so a job resumes
at any size from its latest checkpoint (:meth:`Agent.restore`).  The user's own state goes in
the same checkpoint through :meth:`Agent.track`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

from . import report as rp
from .checkpoint import Checkpoint
from .gradients import GradientNoise
from .sinks import Reporter, Sink, sink_from_env
from .topology import Topology

log = logging.getLogger("lavaflow.agent")

AGENT_FILE = "agent.json"
STATE_VERSION = 1
RESTART_EXIT_CODE = 75  # EX_TEMPFAIL: "try again" (at the new size)


class Collective:
    """How the replicas agree.  The default is a single process's: nothing to agree with."""

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any replica (every replica calls this at the same step)."""
        return flag

    def barrier(self) -> None:
        """Return once every replica has called it."""


@dataclass
class _Tracked:
    get: Callable[[], Any]
    load: Callable[[Any], None] | None
    dump: Callable[[Any, BinaryIO], None]
    read: Callable[[BinaryIO], Any]


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return float(raw)
    except ValueError:
        log.warning("lavaflow agent: %s=%r is not a number; using %s", name, raw, default)
        return default


class Agent:
    """A training process's agent (see the module docstring).

    The batch: ``batch_size`` is the global batch of one optimiser step (over all replicas and
    accumulation steps); ``local_batch_size`` the micro-batch of one replica (default
    ``ceil(batch_size / replicas / (accum_steps + 1))``).  How much training (for the progress
    fraction): ``total_steps`` optimiser steps, or ``epochs`` of ``samples_per_epoch`` samples
    (or of ``steps_per_epoch`` steps).

    ``speed_format``: ``"rates"`` (default) reports work units per second per configuration —
    epochs per second when the training is given in epochs (a job declaring
    ``lavaflow.io/speedup`` + ``epoch-time`` + ``epochs``), else steps per second;
    ``"profile"`` reports Pollux's step-time profile (a job with ``lavaflow.io/application``, or
    adaptive batches).  ``init_batch_size``, ``max_batch_size`` and ``local_bsz_bounds`` are
    stated in the report for adaptive-batch jobs.

    Environment (an argument given wins): ``LAVAFLOW_CHECKPOINT_DIR`` (no checkpoints without
    it), ``LAVAFLOW_REPORT_PERIOD`` (seconds, 30), ``LAVAFLOW_CHECKPOINT_PERIOD`` (seconds, the
    report period; 0: only on SIGTERM), ``LAVAFLOW_SPEED_FORMAT``, the sink's variables
    (:func:`.sinks.sink_from_env`) and the topology's (:mod:`.topology`).
    """

    def __init__(
        self,
        *,
        batch_size: int,
        local_batch_size: int | None = None,
        accum_steps: int = 0,
        total_steps: int | None = None,
        epochs: int | None = None,
        samples_per_epoch: int | None = None,
        steps_per_epoch: int | None = None,
        speed_format: str | None = None,
        init_batch_size: int | None = None,
        max_batch_size: int | None = None,
        local_bsz_bounds: tuple[int, int] | None = None,
        gpus_per_replica: float = 1.0,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        keep_checkpoints: int = 2,
        report_period: float | None = None,
        checkpoint_period: float | None = None,
        warmup_steps: int = 3,
        first_report_steps: int = 5,
        sink: Sink | None = None,
        topology: Topology | None = None,
        collective: Collective | None = None,
        handle_signals: bool = True,
        exit_on_stop: bool = True,
        exit_code: int = 0,
        restart_exit_code: int = RESTART_EXIT_CODE,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        env = os.environ if environ is None else environ
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if epochs is not None and total_steps is not None:
            raise ValueError("give total_steps or epochs, not both")
        self.topology = topology or Topology.from_env(env)
        self.total_steps = total_steps
        self.epochs = epochs
        self.samples_per_epoch = samples_per_epoch
        self.steps_per_epoch = steps_per_epoch
        fmt = (speed_format or env.get("LAVAFLOW_SPEED_FORMAT") or rp.RATES).strip().lower()
        if fmt not in rp.SPEED_FORMATS:
            raise ValueError(f"speed format {fmt!r}: expected one of {', '.join(rp.SPEED_FORMATS)}")
        self.speed_format = fmt
        self.batch = rp.BatchInfo(batch_size, init_batch_size, max_batch_size, local_bsz_bounds)
        self.accum_steps = accum_steps
        self._local_bsz = local_batch_size
        self.gpus_per_replica = gpus_per_replica
        self.report_period = (
            report_period if report_period is not None else _env_float(env, "LAVAFLOW_REPORT_PERIOD", 30.0)
        )
        self.checkpoint_period = (
            checkpoint_period
            if checkpoint_period is not None
            else _env_float(env, "LAVAFLOW_CHECKPOINT_PERIOD", self.report_period)
        )
        self.warmup_steps = warmup_steps
        self.first_report_steps = first_report_steps
        ckpt_dir = checkpoint_dir if checkpoint_dir is not None else env.get("LAVAFLOW_CHECKPOINT_DIR")
        self.checkpoint = Checkpoint(ckpt_dir, keep_checkpoints) if ckpt_dir else None
        if self.checkpoint is None:
            log.warning("lavaflow agent: no checkpoint directory (LAVAFLOW_CHECKPOINT_DIR): a resize restarts training")
        self.collective = collective or Collective()
        self.exit_on_stop = exit_on_stop
        self.exit_code = exit_code
        self.restart_exit_code = restart_exit_code
        self._clock = clock
        self._wall = wall_clock
        self.is_reporter = self.topology.rank == 0
        self.reporter: Reporter | None = None
        if self.is_reporter:
            chosen = sink if sink is not None else sink_from_env(env)
            if chosen is None:
                log.info("lavaflow agent: no report sink configured; reports are not sent")
            else:
                self.reporter = Reporter(chosen)

        # -- the state kept in checkpoints (independent of the number of replicas) --
        self.step = 0  # optimiser steps done
        self.samples = 0  # samples consumed, all replicas together
        self.epoch = 0
        self.epoch_offset = 0  # samples consumed in the current epoch
        self.epoch_steps = 0  # steps done in the current epoch
        self.gpu_seconds = 0.0
        self.measurements = rp.Measurements()
        self.grad = GradientNoise()
        self.last_loss: float | None = None

        # -- this process only --
        self._tracked: dict[str, _Tracked] = {}
        self._step_hooks: list[Callable[[], None]] = []
        self._sync_time = 0.0
        self._started = clock()
        self._t_last: float | None = None  # the previous boundary (None: the next step is not timed)
        self._config_steps = 0  # steps since the configuration last changed (warm-up)
        self._measured = 0  # steps measured by this process
        self._last_report: float | None = None
        self._last_checkpoint = clock()
        self._gpu_since = clock()
        self.signalled = False  # a stop signal reached this process
        self.stopped = False  # the agent stopped training (checkpoint written)
        self._stop_requested = False
        self._old_handlers: dict[int, Any] = {}
        if handle_signals:
            self.install_signal_handlers()

    # ------------------------------------------------------------------ configuration
    @property
    def local_batch_size(self) -> int:
        if self._local_bsz is not None:
            return self._local_bsz
        b = self.batch.batch_size or 1
        return max(-(-b // (self.topology.replicas * (self.accum_steps + 1))), 1)

    def set_batch_size(self, batch_size: int, local_batch_size: int | None = None, accum_steps: int = 0) -> None:
        """The job now trains at another batch (adaptive batch sizes): a new configuration."""
        self.batch.batch_size = batch_size
        self._local_bsz = local_batch_size
        self.accum_steps = accum_steps
        self._reconfigured()

    def set_topology(self, topology: Topology) -> None:
        """The job runs on another set of replicas without a restart (Horovod elastic)."""
        self._account_gpu_time()
        self.topology = topology
        self._reconfigured()

    def _reconfigured(self) -> None:
        self._config_steps = 0
        self._t_last = None

    def add_sync_time(self, seconds: float) -> None:
        """Time the current step spent synchronising gradients (not overlapped with compute)."""
        self._sync_time += seconds

    def add_step_hook(self, hook: Callable[[], None]) -> None:
        """``hook()`` runs at every step boundary, on every replica, before the agent's own work
        (the PyTorch helper gathers its gradient statistics there)."""
        self._step_hooks.append(hook)

    def track(
        self,
        name: str,
        get: Callable[[], Any],
        load: Callable[[Any], None] | None = None,
        dump: Callable[[Any, BinaryIO], None] = pickle.dump,
        read: Callable[[BinaryIO], Any] = pickle.load,
    ) -> None:
        """Save ``get()`` as the checkpoint part ``name`` (with ``dump``, pickle by default) and
        hand what is read back (``read``) to ``load`` on :meth:`restore`."""
        if name == AGENT_FILE or "/" in name or name.startswith("."):
            raise ValueError(f"checkpoint part name {name!r} is not allowed")
        self._tracked[name] = _Tracked(get, load, dump, read)

    # ------------------------------------------------------------------ signals
    def install_signal_handlers(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.warning("lavaflow agent: not in the main thread, no signal handler installed")
            return
        for sig in signals:
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def restore_signal_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signalled = True
        self._stop_requested = True

    def request_stop(self) -> None:
        """Stop at the next step boundary, as after SIGTERM."""
        self._stop_requested = True

    @property
    def should_stop(self) -> bool:
        """Whether this process was asked to stop (the replicas agree at the next boundary)."""
        return self._stop_requested

    # ------------------------------------------------------------------ progress
    @property
    def finished(self) -> bool:
        if self.total_steps is not None:
            return self.step >= self.total_steps
        if self.epochs is not None:
            return self.epoch >= self.epochs
        return False

    @property
    def progress(self) -> float | None:
        """The fraction of the training done, when its length is known."""
        if self.total_steps:
            return min(self.step / self.total_steps, 1.0)
        if self.epochs:
            if self.samples_per_epoch:
                part = self.epoch_offset / self.samples_per_epoch
            elif self.steps_per_epoch:
                part = self.epoch_steps / self.steps_per_epoch
            else:
                part = 0.0
            return min((self.epoch + min(part, 1.0)) / self.epochs, 1.0)
        return None

    def _work(self, samples: int) -> float:
        """Work units of one step (for ``rates``): epochs when the training is given in epochs
        (and their length is known), else steps."""
        if self.epochs is not None:
            if self.samples_per_epoch:
                return samples / self.samples_per_epoch
            if self.steps_per_epoch:
                return 1.0 / self.steps_per_epoch
        return 1.0

    def epoch_done(self) -> None:
        """The current epoch is over (the time until the next step is not measured: evaluation,
        data loader start-up)."""
        self.epoch += 1
        self.epoch_offset = 0
        self.epoch_steps = 0
        self._t_last = None

    def remaining_epochs(self) -> Iterator[int]:
        """The epochs still to train (from the restored one), each closed with :meth:`epoch_done`
        once the loop body has run: ``for epoch in agent.remaining_epochs(): ...``."""
        if self.epochs is None:
            raise ValueError("remaining_epochs needs epochs")
        while self.epoch < self.epochs:
            yield self.epoch
            self.epoch_done()

    def pause(self) -> _Pause:
        """``with agent.pause(): evaluate()`` — the time inside is not part of a step."""
        return _Pause(self)

    # ------------------------------------------------------------------ the step boundary
    def step_done(self, samples: int | None = None, loss: float | None = None) -> bool:
        """One optimiser step is done (``samples`` consumed over all replicas, the global batch
        by default).  Returns whether training stops here: then a checkpoint has been written
        and, with ``exit_on_stop`` (the default), the process exits instead of returning."""
        now = self._clock()
        for hook in self._step_hooks:
            hook()
        n = int(samples) if samples is not None else int(self.batch.batch_size or 0)
        self.step += 1
        self.samples += n
        self.epoch_offset += n
        self.epoch_steps += 1
        if loss is not None and math.isfinite(float(loss)):
            self.last_loss = float(loss)
        self._config_steps += 1
        if self._t_last is not None and self._config_steps > self.warmup_steps:
            t = self.topology
            key = (t.gpu_type, t.nodes, t.replicas, self.local_batch_size, self.accum_steps)
            self.measurements.add(key, now - self._t_last, self._sync_time, self._work(n))
            self._measured += 1
        self._sync_time = 0.0

        if self.collective.any(self._stop_requested):
            self._stop()
            if self.exit_on_stop:
                self.exit()
            return True
        if self.is_reporter:
            if self.checkpoint_period > 0 and now - self._last_checkpoint >= self.checkpoint_period:
                self.save()
            if self._report_due(now):
                self.report()
        self._t_last = self._clock()
        return False

    def _report_due(self, now: float) -> bool:
        if self.reporter is None:
            return False
        if self._last_report is None:
            return self._measured >= self.first_report_steps or now - self._started >= self.report_period
        return now - self._last_report >= self.report_period

    # ------------------------------------------------------------------ reports
    def _account_gpu_time(self) -> None:
        now = self._clock()
        self.gpu_seconds += (now - self._gpu_since) * self.topology.replicas * self.gpus_per_replica
        self._gpu_since = now

    def annotations(self) -> dict[str, str]:
        """The report as it would be sent now."""
        self._account_gpu_time()
        metrics = rp.metrics_json(self.measurements, self.speed_format, self.batch, self.grad.value)
        return rp.report_annotations(metrics, self.progress, self._wall(), self.gpu_seconds)

    def report(self) -> None:
        """Hand the report to the sender thread now (rank 0; returns at once)."""
        if self.reporter is None:
            return
        self.reporter.submit(self.annotations())
        self._last_report = self._clock()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The agent's own part of a checkpoint."""
        self._account_gpu_time()
        return {
            "version": STATE_VERSION,
            "step": self.step,
            "samples": self.samples,
            "epoch": self.epoch,
            "epochOffset": self.epoch_offset,
            "epochSteps": self.epoch_steps,
            "gpuSeconds": self.gpu_seconds,
            "measurements": self.measurements.to_json(),
            "grad": self.grad.state(),
            "batchSize": self.batch.batch_size,
            "lastLoss": self.last_loss,
            "savedAt": self._wall(),
            "replicas": self.topology.replicas,  # for people reading it; not used on restore
        }

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        if int(d.get("version", 0)) != STATE_VERSION:
            raise ValueError(f"checkpoint state version {d.get('version')!r}, expected {STATE_VERSION}")
        self.step = int(d["step"])
        self.samples = int(d["samples"])
        self.epoch = int(d["epoch"])
        self.epoch_offset = int(d["epochOffset"])
        self.epoch_steps = int(d.get("epochSteps", 0))
        self.gpu_seconds = float(d["gpuSeconds"])
        self.measurements = rp.Measurements.from_json(d.get("measurements") or {})
        self.grad.load(d.get("grad") or [0.0, 0.0, 0.0, 0])
        self.last_loss = d.get("lastLoss")
        self._gpu_since = self._clock()

    def save(self) -> Path | None:
        """Write a checkpoint now (rank 0 only; others return None)."""
        self._last_checkpoint = self._clock()
        if self.checkpoint is None or not self.is_reporter:
            return None
        parts: dict[str, Any] = {}
        for name, tr in self._tracked.items():
            value = tr.get()
            parts[name] = lambda fh, v=value, dump=tr.dump: dump(v, fh)
        parts[AGENT_FILE] = json.dumps(self.state_dict(), separators=(",", ":")).encode()
        t0 = self._clock()
        path = self.checkpoint.save(self.step, parts)
        log.info("lavaflow agent: checkpoint at step %d (%.2fs): %s", self.step, self._clock() - t0, path)
        self._last_checkpoint = self._clock()
        return path

    def restore(self) -> bool:
        """Load the latest checkpoint, if any: the agent's counters and every tracked part
        (handed to its ``load``).  Whether one was found."""
        if self.checkpoint is None:
            return False
        path = self.checkpoint.latest()
        if path is None or not (path / AGENT_FILE).is_file():
            return False
        self.load_state_dict(json.loads((path / AGENT_FILE).read_text(encoding="utf-8")))
        for name, tr in self._tracked.items():
            f = path / name
            if not f.is_file():
                log.warning("lavaflow agent: checkpoint %s has no part %r", path, name)
                continue
            with open(f, "rb") as fh:
                value = tr.read(fh)
            if tr.load is not None:
                tr.load(value)
        self._last_checkpoint = self._clock()
        log.info("lavaflow agent: resumed from %s (step %d, epoch %d)", path, self.step, self.epoch)
        return True

    def load_part(self, name: str, read: Callable[[BinaryIO], Any] = pickle.load) -> Any:
        """A part of the latest checkpoint read with ``read`` (None when absent)."""
        path = self.checkpoint.latest() if self.checkpoint is not None else None
        if path is None or not (path / name).is_file():
            return None
        with open(path / name, "rb") as fh:
            return read(fh)

    # ------------------------------------------------------------------ stopping
    def _stop(self) -> None:
        self.save()
        self.collective.barrier()  # nobody leaves before rank 0 has written the checkpoint
        self.stopped = True
        if self.is_reporter:
            self.report()
        log.info("lavaflow agent: stopped at step %d (%s)", self.step, "signal" if self.signalled else "peers")

    @property
    def stop_exit_code(self) -> int:
        """0 (``exit_code``) where the stop signal was received or the job is one process;
        ``restart_exit_code`` where peers asked to stop (see the module docstring)."""
        return self.exit_code if self.signalled or self.topology.replicas == 1 else self.restart_exit_code

    def exit(self) -> None:
        """Leave the process after a stop: flush the last report (2 s at most), then exit with
        :attr:`stop_exit_code`."""
        code = self.stop_exit_code if self.stopped else 0
        self.close()
        raise SystemExit(code)

    def close(self, timeout: float = 2.0) -> None:
        """The end of training (or of this process): a last report (progress 1 when training is
        finished), sent within ``timeout`` seconds."""
        if self.finished and not self.stopped and self.checkpoint is not None and self.is_reporter:
            latest = self.checkpoint.steps()
            if not latest or latest[-1] != self.step:
                self.save()  # a worker started again after the end finds nothing left to do
        if self.reporter is not None:
            if not self.stopped:
                self.report()
            self.reporter.close(timeout)
            self.reporter = None
        self.restore_signal_handlers()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Pause:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        self.agent._t_last = None
