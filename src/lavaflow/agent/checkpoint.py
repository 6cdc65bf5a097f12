"""Checkpoints on disk, written so that a process killed at any moment leaves either the new
checkpoint whole or none of it.

A checkpoint is a directory ``ckpt-<step>`` (the global step, twelve digits) under the
checkpoint directory, holding one file per saved part (``agent.json``, the user's state, a
model).  It is written as ``.tmp-...`` beside it, every file flushed to disk, then renamed: a
rename within one file system is atomic, so readers see the old checkpoint or the new one.
The newest ``keep`` checkpoints are kept.  The directory must be shared by every pod of the job
that may write or read it (a PersistentVolumeClaim, a hostPath on a one-node cluster).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("lavaflow.agent")

_NAME = re.compile(r"^ckpt-(\d{12,})$")
_TMP = ".tmp-"
_STALE = 600.0  # seconds after which another writer's temporary directory is taken as abandoned

Part = bytes | Callable[[BinaryIO], None]


class Checkpoint:
    """The checkpoints of one job in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep

    def path(self, step: int) -> Path:
        return self.directory / f"ckpt-{step:012d}"

    def steps(self) -> list[int]:
        """The steps of the checkpoints present, oldest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := _NAME.match(n)))

    def latest(self) -> Path | None:
        steps = self.steps()
        return self.path(steps[-1]) if steps else None

    def save(self, step: int, parts: Mapping[str, Part]) -> Path:
        """Write ``parts`` (file name → bytes, or a function writing to a binary file) as the
        checkpoint of ``step``; a checkpoint of that step already present is kept as it is (the
        state at one step is one state)."""
        final = self.path(step)
        if final.is_dir():
            return final
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f"{_TMP}{step:012d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            for name, part in parts.items():
                if "/" in name or name.startswith("."):
                    raise ValueError(f"checkpoint part {name!r}: a plain file name is expected")
                with open(tmp / name, "wb") as fh:
                    if isinstance(part, bytes):
                        fh.write(part)
                    else:
                        part(fh)
                    fh.flush()
                    os.fsync(fh.fileno())
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(self.directory)
        self._prune(step)
        return final

    def _prune(self, newest: int) -> None:
        for old in self.steps()[: -self.keep]:
            if old != newest:
                shutil.rmtree(self.path(old), ignore_errors=True)
        now = time.time()
        for name in os.listdir(self.directory):
            if name.startswith(_TMP):
                p = self.directory / name
                try:
                    if now - p.stat().st_mtime > _STALE:
                        shutil.rmtree(p, ignore_errors=True)
                except FileNotFoundError:
                    pass


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
