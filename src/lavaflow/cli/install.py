"""`lavaflow install`: the CRDs and the manifests of the three processes."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .common import die


def install_cmd(
    print_: Annotated[bool, typer.Option("--print", help="print the plain manifests (CRDs first) to stdout")] = False,
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "lavaflow-system",
    image: Annotated[Optional[str], typer.Option("--image")] = None,
    crds_only: Annotated[bool, typer.Option("--crds-only")] = False,
    no_webhook: Annotated[bool, typer.Option("--no-webhook")] = False,
) -> None:
    """Installation manifests: `lavaflow install --print | kubectl apply --server-side -f -`."""
    from ..kube.manifests import IMAGE, crds, dump_all, install_manifests

    if not print_:
        die("only --print is supported: pipe it into `kubectl apply --server-side -f -` (or use charts/lavaflow)", 2)
    docs = list(crds().values()) if crds_only else install_manifests(namespace, image or IMAGE, webhook=not no_webhook)
    sys.stdout.write(dump_all(docs))
