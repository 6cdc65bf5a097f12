"""Speed models from Sia's measurements (SOSP'23 artifact, ``github.com/siasosp23/artifacts``).

Sia's simulator extends Pollux's with one measurement table per GPU type: for every application
``sia-simulator/traces/<app>/placements-<suffix>.csv`` (step and sync time per placement and
per-replica batch) and ``scalability-<suffix>.csv`` (coarser, for large placements), beside the
same ``validation-<batch>.csv`` gradient statistics as Pollux's.  The suffixes are the machines it
profiled: ``aws`` (T4, g4dn.12xlarge), ``rtx`` (RTX 2080 Ti), ``dgx-ext`` (A100, DGX) and ``quad``
(Quadro RTX 6000).  Nodes name their GPU type with the ``lavaflow.io/accelerator`` label; the
values read here are :data:`GPU_TYPES` (the suffixes themselves are accepted too).

The artifact has no licence: lavaflow ships none of it.  Its location is given at run time
(``lavaflow simulate --sia-artifact DIR`` or ``$LAVAFLOW_SIA_ARTIFACT``): a copy of the
repository, or its ``sia-simulator`` directory.

A job of a Sia trace is a :class:`SiaJobSpeed`: Pollux's model of the job (its work from the
gradient statistics, its rate from a step time, with or without batch co-adaptation) with the
step times of the GPU type it runs on, slowed by the artifact's per-application calibration to
its real runs, and its checkpoint-restore delay per start, resize or migration.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .speed import PolluxApp, PolluxJobSpeed

ENV_VAR = "LAVAFLOW_SIA_ARTIFACT"
#: Set ("1") by ``--sia-artifact``: every Pollux-column CSV of the run is a Sia workload. Without
#: it only those in a ``sia-simulator`` directory are (so that an exported ENV_VAR never turns a
#: Pollux trace into a Sia one unasked).
ALL_TRACES_ENV = "LAVAFLOW_SIA_ALL_TRACES"

#: The applications of Sia's workloads (its GPT pipeline-parallel model is left out).
SIA_APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

#: ``lavaflow.io/accelerator`` value -> the artifact's file suffix for that GPU type.
GPU_TYPES = {"t4": "aws", "rtx": "rtx", "a100": "dgx-ext", "quad": "quad"}
_SUFFIXES = frozenset(GPU_TYPES.values())

#: GPU type of nodes without the label: the one Sia's simulator calibrates to.
REFERENCE_SUFFIX = "rtx"

#: Seconds a job pauses to checkpoint and restore per start, resize or migration, by application
#: (the artifact's values; other applications: DEFAULT_RESTORE_DELAY).
RESTORE_DELAY = {"bert": 120.0, "cifar10": 50.0, "deepspeech2": 25.0, "imagenet": 250.0, "ncf": 15.0, "yolov3": 80.0}
DEFAULT_RESTORE_DELAY = 30.0

#: The artifact's calibration: simulated progress divided by this per application (its real runs
#: were this much slower than its tables predict).
SLOWDOWN = {"bert": 1.2, "cifar10": 1.8, "deepspeech2": 1.2, "imagenet": 1.2, "ncf": 1.5, "yolov3": 1.2}

#: Per-replica batch limits below the largest measured, by (application, suffix).
_MAX_LOCAL_BSZ = {("deepspeech2", "rtx"): 57}

_HOW = f"give --sia-artifact DIR or set {ENV_VAR} to a copy of github.com/siasosp23/artifacts"


class SiaArtifactError(ValueError):
    """Sia's material is not where it was said to be, or a table is missing: the message names
    the path and what is missing."""


def configured_root() -> str | None:
    """The artifact location from the environment (``--sia-artifact`` sets it), or None."""
    raw = os.environ.get(ENV_VAR, "").strip()
    return raw or None


def in_sia_tree(path: str | Path) -> bool:
    """Whether a trace lies in a ``sia-simulator`` directory, as the artifact ships its workloads."""
    return "sia-simulator" in Path(path).resolve().parts


def is_sia_trace(path: str | Path) -> bool:
    """Whether a Pollux-column CSV is to be read as a Sia workload."""
    return os.environ.get(ALL_TRACES_ENV, "") == "1" or in_sia_tree(path)


def tables_dir(root: str | Path) -> Path:
    """The ``traces`` directory of the artifact at ``root`` (the repository or its
    ``sia-simulator`` directory); SiaArtifactError when neither layout is there."""
    r = Path(root)
    for d in (r / "sia-simulator" / "traces", r / "traces"):
        if d.is_dir():
            return d
    if not r.is_dir():
        raise SiaArtifactError(f"Sia artifact {str(r)!r}: no such directory ({_HOW})")
    raise SiaArtifactError(
        f"Sia artifact {str(r)!r}: no sia-simulator/traces directory in it (expected a copy of "
        "github.com/siasosp23/artifacts or its sia-simulator directory)"
    )


def suffix_of(gpu_type: str | None) -> str:
    """The artifact's file suffix of a GPU type (None, '' or 'default': the reference type)."""
    t = (gpu_type or "").strip().lower()
    if t in ("", "default"):
        return REFERENCE_SUFFIX
    if t in GPU_TYPES:
        return GPU_TYPES[t]
    if t in _SUFFIXES:
        return t
    known = ", ".join(f"{k} ({v})" for k, v in GPU_TYPES.items())
    raise SiaArtifactError(f"GPU type {gpu_type!r} has no Sia measurements (known: {known})")


def table_files(root: str | Path, app: str, suffix: str) -> list[Path]:
    """The files one application's model on one GPU type reads."""
    d = tables_dir(root) / app
    return [d / f"placements-{suffix}.csv", d / f"scalability-{suffix}.csv"]


def missing_tables(root: str | Path, app: str, suffix: str) -> list[Path]:
    """Which of :func:`table_files` (and the validation files) are absent."""
    files = table_files(root, app, suffix)
    out = [p for p in files if not p.is_file()]
    if not any(files[0].parent.glob("validation-*.csv")):
        out.append(files[0].parent / "validation-<batch>.csv")
    return out


@cache
def sia_app(root: str, app: str, suffix: str) -> PolluxApp:
    """One application's measurements on one GPU type (kept for the process's life)."""
    if app not in SIA_APPS:
        raise SiaArtifactError(f"unknown application {app!r} (Sia's: {', '.join(SIA_APPS)})")
    missing = missing_tables(root, app, suffix)
    if missing:
        raise SiaArtifactError(
            f"Sia artifact {root!r}: {app} on {suffix} needs {', '.join(str(p) for p in missing)}, not found"
        )
    limit = _MAX_LOCAL_BSZ.get((app, suffix))
    return PolluxApp(app, tables_dir(root) / app, suffix=suffix, max_local_bsz={app: limit} if limit else {})


def restore_delay(app: str) -> float:
    return RESTORE_DELAY.get(app, DEFAULT_RESTORE_DELAY)


@dataclass
class SiaJobSpeed(PolluxJobSpeed):
    """A job of a Sia trace: :class:`PolluxJobSpeed` with the step times measured on each GPU type
    (``root``: the artifact).  Work and statistical efficiency come from the gradient statistics,
    the same files for every type, so work units are the same on every type."""

    root: str = ""

    @property
    def model(self) -> PolluxApp:
        return sia_app(self.root, self.app, REFERENCE_SUFFIX)

    def model_for(self, gpu_type: str | None) -> PolluxApp:
        return sia_app(self.root, self.app, suffix_of(gpu_type))

    def _model_key(self, gpu_type: str | None = None) -> Any:
        return ("sia", self.root, self.app, suffix_of(gpu_type))

    def _factor(self, gpu_type: str | None) -> float:
        return 1.0 / SLOWDOWN.get(self.app, 1.0)

    @property
    def restore_delay(self) -> float:
        """Seconds of checkpoint and restore per start, resize or migration."""
        return restore_delay(self.app)
