"""The three long-running processes: `lavaflow scheduler`, `lavaflow controller`, `lavaflow webhook`.

Heavy imports (aiohttp, prometheus-client, cryptography) happen inside the commands, so the
simulator's CLI does not need the ``kube`` extra."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .common import (
    ContextOpt,
    KubeconfigOpt,
    SchedulerNamesOpt,
    die,
    duration_option,
    lease_timing,
    make_client,
    namespace_of_lease,
    need_kube,
    setup_logging,
    stop_event,
)
from .node_choice import (
    MinimumFeasibleNodesOpt,
    MinimumPercentageOpt,
    NodeChoiceOpt,
    PercentageOpt,
    node_choice_from_options,
)
from .quick_exit import exit_now

if TYPE_CHECKING:
    from ..kube.client import KubeClient
    from ..kube.controller_process import KubeControllers
    from ..kube.scheduler_process import KubeScheduler

PROTOBUF = "application/vnd.kubernetes.protobuf"  # (kube-scheduler's flag of the same name and values)
JSON_TYPE = "application/json"


def scheduler_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    scheduler_conf: Annotated[
        Optional[Path], typer.Option("--scheduler-conf", help="volcano-scheduler.conf (Volcano's format)")
    ] = None,
    scheduler_name: SchedulerNamesOpt = None,
    schedule_period: Annotated[str, typer.Option("--schedule-period", help="time between scheduling cycles")] = "1s",
    kube_api_qps: Annotated[
        float, typer.Option("--kube-api-qps", help="client rate limit (requests/s; 0: none)")
    ] = 2000.0,
    kube_api_burst: Annotated[int, typer.Option("--kube-api-burst")] = 2000,
    kube_api_content_type: Annotated[
        str,
        typer.Option(
            "--kube-api-content-type",
            help="how bound pods are read at start: application/vnd.kubernetes.protobuf (where the server "
            "sends it) or application/json",
        ),
    ] = PROTOBUF,
    bind_workers: Annotated[int, typer.Option("--bind-workers", help="concurrent pods/binding calls")] = 64,
    leader_elect: Annotated[
        bool, typer.Option("--leader-elect/--no-leader-elect", help="run only while holding the Lease")
    ] = True,
    lock_namespace: Annotated[
        Optional[str], typer.Option("--lock-namespace", help="namespace of the Lease (default: $POD_NAMESPACE)")
    ] = None,
    lock_name: Annotated[str, typer.Option("--lock-name")] = "lavaflow-scheduler",
    lease_duration: Annotated[
        str,
        typer.Option(
            "--leader-elect-lease-duration", help="how long a standby waits for a silent leader before taking over"
        ),
    ] = "15s",
    renew_deadline: Annotated[
        str,
        typer.Option(
            "--leader-elect-renew-deadline",
            help="a leader stops writing when it could not renew for this long (< lease duration)",
        ),
    ] = "10s",
    retry_period: Annotated[
        str, typer.Option("--leader-elect-retry-period", help="time between lease renewals and acquisition attempts")
    ] = "2s",
    listen_address: Annotated[str, typer.Option("--listen-address")] = "0.0.0.0",
    listen_port: Annotated[int, typer.Option("--listen-port", help="/metrics, /healthz, /readyz")] = 8080,
    events: Annotated[bool, typer.Option("--events/--no-events", help="record Kubernetes Events")] = True,
    node_choice: NodeChoiceOpt = None,
    minimum_feasible_nodes: MinimumFeasibleNodesOpt = None,
    minimum_percentage_nodes_to_find: MinimumPercentageOpt = None,
    percentage_nodes_to_find: PercentageOpt = None,
    node_choice_seed: Annotated[
        int,
        typer.Option(
            "--node-choice-seed",
            help="volcano node choice: seed of the random choice between nodes of equal score (Volcano's is unseeded)",
        ),
    ] = 0,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True)] = 0,
) -> None:
    """Run the batch scheduler against a cluster (kubeconfig or in-cluster)."""
    choice, problems = node_choice_from_options(
        node_choice,
        minimum_feasible_nodes,
        minimum_percentage_nodes_to_find,
        percentage_nodes_to_find,
        node_choice_seed,
    )
    if problems:
        die("; ".join(problems), 2)
    need_kube()
    setup_logging(verbose)
    from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf

    conf = None
    if scheduler_conf is not None:
        try:
            conf = load_scheduler_conf(scheduler_conf.read_text(encoding="utf-8"))
        except OSError as exc:
            die(f"{scheduler_conf}: {exc.strerror or exc}", 2)
        except UnicodeDecodeError as exc:
            die(f"{scheduler_conf}: not UTF-8 text (byte {exc.start}: {exc.reason})", 2)
        except SchedulerConfError as exc:
            die("; ".join(f"{scheduler_conf}: {p + ': ' if p else ''}{m}" for p, m in exc.problems), 2)
    period = duration_option(schedule_period)
    names = tuple(scheduler_name or ("volcano", "lavaflow"))
    lease = lease_timing(lease_duration, renew_deadline, retry_period)
    if kube_api_content_type not in (PROTOBUF, JSON_TYPE):
        die(f"--kube-api-content-type: {kube_api_content_type!r} is neither {PROTOBUF} nor {JSON_TYPE}", 2)

    async def main() -> None:
        from ..kube.leader import LeaderElector
        from ..kube.scheduler_process import KubeScheduler, default_identity

        client = make_client(kubeconfig, context, kube_api_qps, kube_api_burst)
        identity = default_identity()
        elector = (
            LeaderElector(client, lock_name, namespace_of_lease(lock_namespace), identity, *lease)
            if leader_elect
            else None
        )
        sched = KubeScheduler(
            client,
            conf,
            names,
            period,
            bind_workers,
            emit_events=events,
            identity=identity,
            elector=elector,
            pause_gc_while_syncing=True,
            protobuf_pods=kube_api_content_type == PROTOBUF,
            node_choice=choice,
        )
        await _run_component(sched, client, listen_address, listen_port)

    asyncio.run(main())
    exit_now()


async def _run_component(
    component: KubeScheduler | KubeControllers, client: KubeClient, listen_address: str, listen_port: int
) -> None:
    """Serve /metrics, /healthz and /readyz, run until SIGTERM/SIGINT, then shut down gracefully.
    A leader that lost its Lease says so in one line and stops the same way (exit code 0): its
    Deployment restarts it, as a standby, while another replica leads."""
    from ..kube.leader import LostLeadership
    from ..kube.metrics import serve_health

    stop = stop_event()
    health = await serve_health(
        component.metrics.registry, listen_address, listen_port, lambda: component.healthy, lambda: component.ready
    )
    run = asyncio.ensure_future(component.run(stop))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            # Stop asked: a cycle in progress gets a moment to end; one that does not (a long
            # session at scale) is abandoned, its thread dies with the process.
            await asyncio.wait({run}, timeout=0.5)
            if not run.done():
                run.cancel()
                await asyncio.wait({run}, timeout=0.2)
        if run.done() and not run.cancelled() and run.exception() is not None:
            exc = run.exception()
            if not isinstance(exc, LostLeadership):
                raise exc  # type: ignore[misc]
            logging.getLogger("lavaflow.kube").warning("%s; stepping down: exiting", exc)
    finally:
        stopping.cancel()
        await component.shutdown()
        await health.cleanup()
        await client.close()


def controller_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    scheduler_name: SchedulerNamesOpt = None,
    kube_api_qps: Annotated[float, typer.Option("--kube-api-qps")] = 50.0,
    kube_api_burst: Annotated[int, typer.Option("--kube-api-burst")] = 100,
    leader_elect: Annotated[bool, typer.Option("--leader-elect/--no-leader-elect")] = True,
    lock_namespace: Annotated[Optional[str], typer.Option("--lock-namespace")] = None,
    lock_name: Annotated[str, typer.Option("--lock-name")] = "lavaflow-controller",
    max_requeue: Annotated[int, typer.Option("--max-requeue-num")] = 15,
    concurrent_syncs: Annotated[
        int,
        typer.Option(
            "--concurrent-syncs",
            min=1,
            help="objects (Jobs, queues, ...) whose writes may be under way at once; each Job's pods go in "
            "slow-start batches (1, 2, 4, ...), all inside --kube-api-qps/--kube-api-burst",
        ),
    ] = 64,
    listen_address: Annotated[str, typer.Option("--listen-address")] = "0.0.0.0",
    listen_port: Annotated[int, typer.Option("--listen-port")] = 8081,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True)] = 0,
) -> None:
    """Run the Job, PodGroup and Queue controllers (and the others lavaflow has) against a cluster."""
    need_kube()
    setup_logging(verbose)
    names = tuple(scheduler_name or ("volcano", "lavaflow"))

    async def main() -> None:
        from ..kube.controller_process import KubeControllers
        from ..kube.leader import LeaderElector
        from ..kube.scheduler_process import default_identity

        client = make_client(kubeconfig, context, kube_api_qps, kube_api_burst)
        elector = (
            LeaderElector(client, lock_name, namespace_of_lease(lock_namespace), default_identity())
            if leader_elect
            else None
        )
        ctrl = KubeControllers(
            client, names, elector=elector, max_requeue=max_requeue, concurrent_syncs=concurrent_syncs
        )
        await _run_component(ctrl, client, listen_address, listen_port)

    asyncio.run(main())
    exit_now()


def webhook_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    scheduler_name: SchedulerNamesOpt = None,
    port: Annotated[int, typer.Option("--port")] = 8443,
    listen_address: Annotated[str, typer.Option("--listen-address")] = "0.0.0.0",
    cert_file: Annotated[
        Optional[str], typer.Option("--cert-file", help="TLS certificate (e.g. from cert-manager)")
    ] = None,
    key_file: Annotated[Optional[str], typer.Option("--key-file")] = None,
    cert_dir: Annotated[
        str, typer.Option("--cert-dir", help="where a generated self-signed certificate goes")
    ] = "/tmp/lavaflow-webhook-certs",
    service: Annotated[
        str, typer.Option("--service", help="the webhook's Service (for the generated certificate)")
    ] = "lavaflow-webhook",
    namespace: Annotated[Optional[str], typer.Option("--namespace")] = None,
    patch_ca_bundle: Annotated[
        Optional[list[str]],
        typer.Option("--patch-ca-bundle", help="webhook configuration(s) to write the generated CA into"),
    ] = None,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True)] = 0,
) -> None:
    """Serve Volcano's admission webhooks (lavaflow.api.admission) over TLS."""
    need_kube()
    setup_logging(verbose)
    names = tuple(scheduler_name or ("volcano", "lavaflow"))
    ns = namespace_of_lease(namespace)

    async def main() -> None:
        from ..kube.store import KubeStore
        from ..kube.webhook import WebhookServer, patch_ca_bundle as patch_ca, self_signed

        client = make_client(kubeconfig, context)
        store = KubeStore(client)
        for kind in ("Queue", "PodGroup", "Namespace"):
            store.inform(kind)
        await store.start()
        cf, kf = cert_file, key_file
        if not (cf and kf):
            cf, kf, ca = self_signed(service, ns, cert_dir)
            if patch_ca_bundle:
                await patch_ca(client, patch_ca_bundle, ca)
        server = WebhookServer(store, names)
        runner = await server.serve(listen_address, port, cf, kf)
        stop = stop_event()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
            await store.stop()
            await client.close()

    asyncio.run(main())
