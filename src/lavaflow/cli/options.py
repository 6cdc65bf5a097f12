"""Options several commands share, in a module light enough for the commands that load at start
(``simulate``, ``sweep``, ``forecast``): typer only, no asyncio or Kubernetes client."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

KubeconfigOpt = Annotated[
    Optional[str],
    typer.Option("--kubeconfig", "-k", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"),
]
ContextOpt = Annotated[Optional[str], typer.Option("--context", help="kubeconfig context")]
SchedulerNamesOpt = Annotated[
    Optional[list[str]],
    typer.Option("--scheduler-name", help="schedulerName(s) that are ours (repeat; default: volcano, lavaflow)"),
]
