"""Voda-style training-job commands on a cluster: `lavaflow train create|get|delete`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import ContextOpt, KubeconfigOpt, die, read_yaml_documents, run_on_cluster
from .tables import format_train_jobs

if TYPE_CHECKING:
    from ..kube.client import KubeClient

train_app = typer.Typer(no_args_is_help=True, help="Training jobs (Voda's kubectl-voda commands).")


@train_app.command("create")
def train_create(
    filename: Annotated[Path, typer.Option("--filename", "-f")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Create the training job(s) in FILE: Volcano Jobs, or Voda's MPIJobs (created as the elastic
    Volcano Jobs they stand for, see lavaflow.api.mpijob)."""
    from ..api.mpijob import MPIJobError, is_mpijob, to_volcano_job

    raw = read_yaml_documents(filename)
    docs = []
    for i, d in enumerate(raw, start=1):
        if is_mpijob(d):
            try:
                d = to_volcano_job(d)
            except MPIJobError as exc:
                name = ((d.get("metadata") or {}).get("name")) or "?"
                die(f"{filename}: document {i}: MPIJob/{name}: {exc.path}: {exc.message}", 2)
        docs.append(d)

    async def go(client: KubeClient) -> None:
        from ..kube.ops import create_manifest

        for d in docs:
            made = await create_manifest(client, d, namespace)
            typer.echo(f"{made.get('kind', 'object').lower()}/{made['metadata']['name']} created")

    run_on_cluster(go, kubeconfig, context)


@train_app.command("get")
def train_get(
    what: Annotated[str, typer.Argument(help="jobs")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """`get jobs`: NAME STATUS WORKERS SCHEDULER WAITING RUNNING TOTAL RESIZES THROUGHPUT.

    WORKERS: running workers (elastic range); RESIZES: the job's `Resized` Events the API server
    still holds; THROUGHPUT: what the job last reported (`lavaflow.io/metrics`)."""
    if what not in ("jobs", "job"):
        die(f"unknown resource {what!r}; use: jobs", 2)

    async def go(client: KubeClient) -> None:
        from ..kube.client import ApiError
        from ..kube.ops import list_objects

        jobs = await list_objects(client, "Job", namespace)
        pods = await list_objects(client, "Pod", namespace, label_selector="volcano.sh/job-name")
        # Optional parts: a cluster without the PodGroup CRD, or a user who may not list Events,
        # still gets the table (without throughput, or with "?" resizes).
        optional: dict[str, list[dict[str, Any]] | None] = {}
        for kind in ("PodGroup", "Event"):
            try:
                optional[kind] = await list_objects(client, kind, namespace)
            except ApiError:
                optional[kind] = None
        typer.echo(
            format_train_jobs(jobs, pods, podgroups=optional["PodGroup"] or [], events=optional["Event"]), nl=False
        )

    run_on_cluster(go, kubeconfig, context)


@train_app.command("delete")
def train_delete(
    names: Annotated[list[str], typer.Argument(help="job names")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Delete training jobs."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import delete_object

        missing = []
        for n in names:
            if await delete_object(client, "Job", n, namespace):
                typer.echo(f"job {n} deleted")
            else:
                missing.append(n)
        if missing:
            die(f"not found: {', '.join(missing)}")

    run_on_cluster(go, kubeconfig, context)
