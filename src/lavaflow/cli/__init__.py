"""The ``lavaflow`` command line, one module per group of commands.

- :mod:`.main` — the entry point, `simulate` and `version`;
- :mod:`.processes` — `scheduler`, `controller`, `webhook` (the processes that run on a cluster);
- :mod:`.install` — `install` (CRDs and manifests);
- :mod:`.vcctl` — vcctl-style `job` and `queue` commands;
- :mod:`.train` — Voda-style `train` commands;
- :mod:`.tables` — the tables all of them print;
- :mod:`.common` — what the cluster commands share (kubeconfig, client, signals, errors).

Only :mod:`.main` is imported at start-up; the cluster commands are added when one is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .main import main

if TYPE_CHECKING:
    import typer


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `lavaflow.cli.app`: the app with every command
        from .main import _with_kube_commands

        return _with_kube_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main"]
