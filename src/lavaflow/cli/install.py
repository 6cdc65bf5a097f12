"""`lavaflow install`: the CRDs and the manifests of the three processes."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any, Optional

import typer

from .common import ContextOpt, KubeconfigOpt, die


def install_cmd(
    print_: Annotated[bool, typer.Option("--print", help="print the plain manifests (CRDs first) to stdout")] = False,
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "lavaflow-system",
    image: Annotated[Optional[str], typer.Option("--image")] = None,
    crds_only: Annotated[bool, typer.Option("--crds-only")] = False,
    no_webhook: Annotated[bool, typer.Option("--no-webhook")] = False,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Install lavaflow on the cluster (server-side apply), leaving CRDs of the same names that are
    not lavaflow's (Volcano's) as they are; with --print, print the manifests instead
    (`lavaflow install --print | kubectl apply --server-side -f -`), and with --print and
    --kubeconfig or --context, without the CRDs the cluster has from elsewhere."""
    from ..kube.manifests import IMAGE, crds, dump_all, install_manifests

    wanted = list(crds().values())
    others = [] if crds_only else install_manifests(namespace, image or IMAGE, with_crds=False, webhook=not no_webhook)
    if print_ and kubeconfig is None and context is None:
        sys.stdout.write(dump_all(wanted + others))
        return
    kept = _on_cluster(kubeconfig, context, wanted, None if print_ else others)
    if print_:
        sys.stdout.write(dump_all(kept + others))


def _on_cluster(
    kubeconfig: str | None, context: str | None, wanted: list[dict[str, Any]], apply: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Look up each of lavaflow's CRDs (``wanted``) on the cluster and say what was found (on stderr
    when printing, i.e. ``apply`` is None); else apply those not left as they are, then ``apply``,
    a line each. The CRDs not left as they are; one error line on any problem."""
    from .common import need_kube

    need_kube()
    from ..kube.client import ApiError, ConfigError, KubeClient, load_config
    from ..kube.install import InstallError, find_crds, install

    try:
        cfg = load_config(kubeconfig, context)
    except ConfigError as exc:
        die(str(exc), 2)

    async def main() -> list[dict[str, Any]]:
        client = KubeClient(cfg)
        try:
            found = await find_crds(client, wanted)
            if apply is None:
                for f in found:
                    typer.echo(f.line("printed", "left out"), err=True)
            else:
                async for line in install(client, found, apply):
                    typer.echo(line)
            return [f.want for f in found if not f.left]
        finally:
            await client.close()

    try:
        return asyncio.run(main())
    except InstallError as exc:
        die(str(exc), 2)
    except ApiError as exc:
        die(f"the API server refused {exc.method} {exc.path}: HTTP {exc.status} {exc.reason}: {exc.message}")
    except OSError as exc:  # (aiohttp's connection errors are OSErrors)
        die(f"cannot reach the API server at {cfg.server}: {exc}")
    return []
