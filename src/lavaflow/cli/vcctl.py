"""vcctl-style commands on a cluster: `lavaflow job ...` and `lavaflow queue ...`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..api.volcano import JobAction
from .common import ContextOpt, KubeconfigOpt, die, read_yaml_documents, run_on_cluster
from .tables import describe_job, format_jobs, format_queues

if TYPE_CHECKING:
    from ..kube.client import KubeClient


def _command(action: str, target: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = target["metadata"]
    ref = {
        "apiVersion": target["apiVersion"],
        "kind": target["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": f"{meta['name']}-{action.lower()}-",
            "namespace": namespace,
            "ownerReferences": [ref],
        },
        "action": action,
        "target": ref,
    }


def _requests(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            die(f"{part!r}: expected name=quantity (e.g. cpu=1000m,memory=100Mi)", 2)
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# ---------------------------------------------------------------------- job


job_app = typer.Typer(no_args_is_help=True, help="Volcano Jobs on a cluster (vcctl job).")


@job_app.command("run")
def job_run(
    name: Annotated[str, typer.Option("--name", "-N")] = "test",
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    image: Annotated[str, typer.Option("--image", "-i")] = "busybox",
    min_available: Annotated[int, typer.Option("--min", "-m")] = 1,
    replicas: Annotated[int, typer.Option("--replicas", "-r")] = 1,
    requests: Annotated[str, typer.Option("--requests", "-R")] = "cpu=1000m,memory=100Mi",
    limits: Annotated[str, typer.Option("--limits", "-L")] = "cpu=1000m,memory=100Mi",
    scheduler: Annotated[str, typer.Option("--scheduler", "-S")] = "volcano",
    filename: Annotated[
        Optional[Path], typer.Option("--filename", "-f", help="create the job from this YAML instead")
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Run a job."""
    if filename is not None:
        docs = read_yaml_documents(filename)
    else:
        docs = [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "minAvailable": min_available,
                    "schedulerName": scheduler,
                    "tasks": [
                        {
                            "name": name,
                            "replicas": replicas,
                            "template": {
                                "metadata": {"name": name},
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": name,
                                            "image": image,
                                            "imagePullPolicy": "IfNotPresent",
                                            "resources": {"requests": _requests(requests), "limits": _requests(limits)},
                                        }
                                    ],
                                },
                            },
                        }
                    ],
                },
            }
        ]

    async def go(client: KubeClient) -> None:
        from ..kube.ops import create_manifest

        for d in docs:
            made = await create_manifest(client, d, namespace)
            typer.echo(f"run job {made['metadata']['name']} successfully")

    run_on_cluster(go, kubeconfig, context)


@job_app.command("list")
def job_list(
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces")] = False,
    queue: Annotated[Optional[str], typer.Option("--queue", "-q")] = None,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", "-S")] = None,
    selector: Annotated[Optional[str], typer.Option("--selector", help="substring of the job name")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """List jobs."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import list_objects

        jobs = await list_objects(client, "Job", None if all_namespaces else namespace)
        jobs = [
            j
            for j in jobs
            if (queue is None or (j.get("spec") or {}).get("queue", "default") == queue)
            and (scheduler is None or (j.get("spec") or {}).get("schedulerName") == scheduler)
            and (selector is None or selector in j["metadata"]["name"])
        ]
        typer.echo(format_jobs(jobs, all_namespaces), nl=False)

    run_on_cluster(go, kubeconfig, context)


@job_app.command("view")
def job_view(
    name: Annotated[str, typer.Option("--name", "-N")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Show a job's details."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import get_object

        j = await get_object(client, "Job", name, namespace)
        if j is None:
            die(f"job {namespace}/{name} not found")
        typer.echo(describe_job(j), nl=False)

    run_on_cluster(go, kubeconfig, context)


def _job_command(action: str, verb: str) -> Callable[..., None]:
    def cmd(
        name: Annotated[str, typer.Option("--name", "-N")],
        namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
        kubeconfig: KubeconfigOpt = None,
        context: ContextOpt = None,
    ) -> None:
        async def go(client: KubeClient) -> None:
            from ..kube.ops import create_manifest, get_object

            j = await get_object(client, "Job", name, namespace)
            if j is None:
                die(f"job {namespace}/{name} not found")
            await create_manifest(client, _command(action, j, namespace))
            typer.echo(f"{verb} job {name} successfully")

        run_on_cluster(go, kubeconfig, context)

    cmd.__doc__ = f"{verb.capitalize()} a job (a {action} Command)."
    return cmd


job_app.command("suspend")(_job_command(JobAction.ABORT_JOB, "suspend"))
job_app.command("resume")(_job_command(JobAction.RESUME_JOB, "resume"))


@job_app.command("delete")
def job_delete(
    name: Annotated[str, typer.Option("--name", "-N")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Delete a job."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import delete_object

        if not await delete_object(client, "Job", name, namespace):
            die(f"job {namespace}/{name} not found")
        typer.echo(f"delete job {name} successfully")

    run_on_cluster(go, kubeconfig, context)


# ---------------------------------------------------------------------- queue


queue_app = typer.Typer(no_args_is_help=True, help="Queues on a cluster (vcctl queue).")


@queue_app.command("create")
def queue_create(
    name: Annotated[str, typer.Option("--name", "-n")] = "test",
    weight: Annotated[int, typer.Option("--weight", "-w")] = 1,
    state: Annotated[str, typer.Option("--state", "-S")] = "Open",
    parent: Annotated[Optional[str], typer.Option("--parent", "-p")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Create a queue."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import create_manifest

        spec: dict[str, Any] = {"weight": weight}
        if parent:
            spec["parent"] = parent
        q = await create_manifest(
            client,
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec},
        )
        if state.lower() == "closed":
            await create_manifest(client, _command("CloseQueue", q, "default"))
        typer.echo(f"create queue {name} successfully")

    run_on_cluster(go, kubeconfig, context)


@queue_app.command("list")
def queue_list(kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """List queues."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import list_objects

        queues = await list_objects(client, "Queue")
        if not queues:
            typer.echo("No resources found")
            return
        typer.echo(format_queues(queues, await list_objects(client, "PodGroup")), nl=False)

    run_on_cluster(go, kubeconfig, context)


@queue_app.command("get")
def queue_get(
    name: Annotated[str, typer.Option("--name", "-n")], kubeconfig: KubeconfigOpt = None, context: ContextOpt = None
) -> None:
    """Show one queue."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import get_object, list_objects

        q = await get_object(client, "Queue", name)
        if q is None:
            die(f"queue {name} not found")
        typer.echo(format_queues([q], await list_objects(client, "PodGroup")), nl=False)

    run_on_cluster(go, kubeconfig, context)


@queue_app.command("operate")
def queue_operate(
    name: Annotated[str, typer.Option("--name", "-n")],
    action: Annotated[str, typer.Option("--action", "-a", help="open, close or update")],
    weight: Annotated[Optional[int], typer.Option("--weight", "-w")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Open, close or update (weight) a queue."""
    act = action.lower()
    if act not in ("open", "close", "update"):
        die(f"action {action!r} is not supported; use open, close or update", 2)
    if act == "update" and (weight is None or weight <= 0):
        die("update needs --weight greater than 0", 2)

    async def go(client: KubeClient) -> None:
        from ..kube.client import MERGE_PATCH
        from ..kube.ops import create_manifest, get_object

        q = await get_object(client, "Queue", name)
        if q is None:
            die(f"queue {name} not found")
        if act == "update":
            await client.request(
                "PATCH",
                f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}",
                body={"spec": {"weight": weight}},
                content_type=MERGE_PATCH,
            )
        else:
            await create_manifest(client, _command("OpenQueue" if act == "open" else "CloseQueue", q, "default"))
        typer.echo(f"{act} queue {name} successfully")

    run_on_cluster(go, kubeconfig, context)


@queue_app.command("delete")
def queue_delete(
    name: Annotated[str, typer.Option("--name", "-n")], kubeconfig: KubeconfigOpt = None, context: ContextOpt = None
) -> None:
    """Delete a queue."""

    async def go(client: KubeClient) -> None:
        from ..kube.ops import delete_object

        if not await delete_object(client, "Queue", name):
            die(f"queue {name} not found")
        typer.echo(f"delete queue {name} successfully")

    run_on_cluster(go, kubeconfig, context)
