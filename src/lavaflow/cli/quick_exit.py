"""Leaving a command's process without the interpreter's teardown (imports only what it uses, so
that batch commands can call it without loading the cluster-side modules)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path


def own_command() -> bool:
    """Whether this process is the ``lavaflow`` command itself — its console script, or ``python -m
    lavaflow.cli`` — read from the program Python started (``__main__``), which neither another
    program's ``__main__.py`` (``python -m pytest``) nor a caller rewriting ``sys.argv`` changes."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == "lavaflow.cli.__main__":
        return True
    path = getattr(main, "__file__", None)
    return isinstance(path, str) and Path(path).name == "lavaflow"


def exit_now() -> None:
    """After a clean shutdown of a long-running process, or when a batch command (``simulate``) has
    written everything, leave without the interpreter's teardown: freeing a large cache object by
    object takes seconds, and a graceful stop should not. Only when this is the process's own
    command (not when called in-process, e.g. by tests)."""
    if not own_command() or os.environ.get("LAVAFLOW_SLOW_EXIT"):
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
