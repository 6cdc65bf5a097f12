"""Command line for clusters: the three processes, `install --print`, and vcctl/Voda-style commands.

Registered on the main ``lavaflow`` app by :func:`register`. Heavy imports
(aiohttp, prometheus-client, cryptography) happen inside the commands, so the
simulator's CLI does not need the ``kube`` extra.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

KubeconfigOpt = Annotated[Optional[str], typer.Option("--kubeconfig", "-k", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")]
ContextOpt = Annotated[Optional[str], typer.Option("--context", help="kubeconfig context")]
SchedulerNamesOpt = Annotated[
    Optional[list[str]], typer.Option("--scheduler-name", help="schedulerName(s) that are ours (repeat; default: volcano, lavaflow)")
]


def _die(msg: str, code: int = 1) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _need_kube() -> None:
    try:
        import aiohttp  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        _die("the Kubernetes backend needs the kube extra: pip install 'lavaflow[kube]'")


def _client(kubeconfig: str | None, context: str | None, qps: float = 50.0, burst: int = 100):
    from .client import ConfigError, KubeClient, load_config

    try:
        cfg = load_config(kubeconfig, context)
    except ConfigError as exc:
        _die(str(exc))
    cfg.qps, cfg.burst = qps, burst
    return KubeClient(cfg)


def _logging(verbose: int) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def _duration(text: str) -> float:
    from ..api.admission import parse_duration

    try:
        return float(parse_duration(text))
    except ValueError as exc:
        _die(str(exc), 2)
    return 0.0


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    return stop


def _exit_now() -> None:
    """After a clean shutdown of a long-running process, leave without the interpreter's teardown:
    freeing a large cache object by object takes seconds, and a graceful stop should not. Only when
    this is the process's own command (not when called in-process, e.g. by tests)."""
    if Path(sys.argv[0]).name not in ("lavaflow", "cli.py", "__main__.py") or os.environ.get("LAVAFLOW_SLOW_EXIT"):
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _lease_timing(lease_duration: str, renew_deadline: str, retry_period: str) -> tuple[float, float, float]:
    lease, renew, retry = _duration(lease_duration), _duration(renew_deadline), _duration(retry_period)
    if not 0 < retry < renew < lease:
        _die(
            f"--leader-elect-*: need 0 < retry period ({retry_period}) < renew deadline ({renew_deadline}) < lease duration ({lease_duration})",
            2,
        )
    return lease, renew, retry


def _lock_namespace(value: str | None) -> str:
    return value or os.environ.get("POD_NAMESPACE") or "default"


# ---------------------------------------------------------------------- processes


def scheduler_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    scheduler_conf: Annotated[Optional[Path], typer.Option("--scheduler-conf", help="volcano-scheduler.conf (Volcano's format)")] = None,
    scheduler_name: SchedulerNamesOpt = None,
    schedule_period: Annotated[str, typer.Option("--schedule-period", help="time between scheduling cycles")] = "1s",
    kube_api_qps: Annotated[float, typer.Option("--kube-api-qps", help="client rate limit (requests/s; 0: none)")] = 2000.0,
    kube_api_burst: Annotated[int, typer.Option("--kube-api-burst")] = 2000,
    bind_workers: Annotated[int, typer.Option("--bind-workers", help="concurrent pods/binding calls")] = 64,
    leader_elect: Annotated[bool, typer.Option("--leader-elect/--no-leader-elect", help="run only while holding the Lease")] = True,
    lock_namespace: Annotated[Optional[str], typer.Option("--lock-namespace", help="namespace of the Lease (default: $POD_NAMESPACE)")] = None,
    lock_name: Annotated[str, typer.Option("--lock-name")] = "lavaflow-scheduler",
    lease_duration: Annotated[str, typer.Option("--leader-elect-lease-duration", help="how long a standby waits for a silent leader before taking over")] = "15s",
    renew_deadline: Annotated[str, typer.Option("--leader-elect-renew-deadline", help="a leader stops writing when it could not renew for this long (< lease duration)")] = "10s",
    retry_period: Annotated[str, typer.Option("--leader-elect-retry-period", help="time between lease renewals and acquisition attempts")] = "2s",
    listen_address: Annotated[str, typer.Option("--listen-address")] = "0.0.0.0",
    listen_port: Annotated[int, typer.Option("--listen-port", help="/metrics, /healthz, /readyz")] = 8080,
    events: Annotated[bool, typer.Option("--events/--no-events", help="record Kubernetes Events")] = True,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True)] = 0,
) -> None:
    """Run the batch scheduler against a cluster (kubeconfig or in-cluster)."""
    _need_kube()
    _logging(verbose)
    from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf

    conf = None
    if scheduler_conf is not None:
        try:
            conf = load_scheduler_conf(scheduler_conf.read_text(encoding="utf-8"))
        except OSError as exc:
            _die(f"{scheduler_conf}: {exc.strerror or exc}", 2)
        except SchedulerConfError as exc:
            _die("; ".join(f"{scheduler_conf}: {p + ': ' if p else ''}{m}" for p, m in exc.problems), 2)
    period = _duration(schedule_period)
    names = tuple(scheduler_name or ("volcano", "lavaflow"))
    lease = _lease_timing(lease_duration, renew_deadline, retry_period)

    async def main() -> None:
        from .leader import LeaderElector
        from .scheduler import KubeScheduler, default_identity

        client = _client(kubeconfig, context, kube_api_qps, kube_api_burst)
        identity = default_identity()
        elector = LeaderElector(client, lock_name, _lock_namespace(lock_namespace), identity, *lease) if leader_elect else None
        sched = KubeScheduler(client, conf, names, period, bind_workers, emit_events=events, identity=identity, elector=elector)
        await _run_component(sched, client, listen_address, listen_port)

    asyncio.run(main())
    _exit_now()


async def _run_component(component, client, listen_address: str, listen_port: int) -> None:
    """Serve /metrics, /healthz and /readyz, run until SIGTERM/SIGINT, then shut down gracefully."""
    from .metrics import serve_health

    stop = _stop_event()
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
            raise run.exception()  # type: ignore[misc]
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
    listen_address: Annotated[str, typer.Option("--listen-address")] = "0.0.0.0",
    listen_port: Annotated[int, typer.Option("--listen-port")] = 8081,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True)] = 0,
) -> None:
    """Run the Job, PodGroup and Queue controllers (and the others lavaflow has) against a cluster."""
    _need_kube()
    _logging(verbose)
    names = tuple(scheduler_name or ("volcano", "lavaflow"))

    async def main() -> None:
        from .controller import KubeControllers
        from .leader import LeaderElector
        from .scheduler import default_identity

        client = _client(kubeconfig, context, kube_api_qps, kube_api_burst)
        elector = LeaderElector(client, lock_name, _lock_namespace(lock_namespace), default_identity()) if leader_elect else None
        ctrl = KubeControllers(client, names, elector=elector, max_requeue=max_requeue)
        await _run_component(ctrl, client, listen_address, listen_port)

    asyncio.run(main())
    _exit_now()


def webhook_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    scheduler_name: SchedulerNamesOpt = None,
    port: Annotated[int, typer.Option("--port")] = 8443,
    listen_address: Annotated[str, typer.Option("--listen-address")] = "0.0.0.0",
    cert_file: Annotated[Optional[str], typer.Option("--cert-file", help="TLS certificate (e.g. from cert-manager)")] = None,
    key_file: Annotated[Optional[str], typer.Option("--key-file")] = None,
    cert_dir: Annotated[str, typer.Option("--cert-dir", help="where a generated self-signed certificate goes")] = "/tmp/lavaflow-webhook-certs",
    service: Annotated[str, typer.Option("--service", help="the webhook's Service (for the generated certificate)")] = "lavaflow-webhook",
    namespace: Annotated[Optional[str], typer.Option("--namespace")] = None,
    patch_ca_bundle: Annotated[
        Optional[list[str]], typer.Option("--patch-ca-bundle", help="webhook configuration(s) to write the generated CA into")
    ] = None,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True)] = 0,
) -> None:
    """Serve Volcano's admission webhooks (lavaflow.api.admission) over TLS."""
    _need_kube()
    _logging(verbose)
    names = tuple(scheduler_name or ("volcano", "lavaflow"))
    ns = _lock_namespace(namespace)

    async def main() -> None:
        from .store import KubeStore
        from .webhook import WebhookServer, patch_ca_bundle as patch_ca, self_signed

        client = _client(kubeconfig, context)
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
        stop = _stop_event()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
            await store.stop()
            await client.close()

    asyncio.run(main())


def install_cmd(
    print_: Annotated[bool, typer.Option("--print", help="print the plain manifests (CRDs first) to stdout")] = False,
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "lavaflow-system",
    image: Annotated[Optional[str], typer.Option("--image")] = None,
    crds_only: Annotated[bool, typer.Option("--crds-only")] = False,
    no_webhook: Annotated[bool, typer.Option("--no-webhook")] = False,
) -> None:
    """Installation manifests: `lavaflow install --print | kubectl apply --server-side -f -`."""
    from .manifests import IMAGE, crds, dump_all, install_manifests

    if not print_:
        _die("only --print is supported: pipe it into `kubectl apply --server-side -f -` (or use charts/lavaflow)", 2)
    docs = list(crds().values()) if crds_only else install_manifests(namespace, image or IMAGE, webhook=not no_webhook)
    sys.stdout.write(dump_all(docs))


# ---------------------------------------------------------------------- vcctl-style helpers


def _run(coro_fn, kubeconfig, context):
    _need_kube()

    async def main():
        client = _client(kubeconfig, context)
        try:
            return await coro_fn(client)
        finally:
            await client.close()

    from .client import ApiError

    try:
        return asyncio.run(main())
    except ApiError as exc:
        _die(exc.message or str(exc))


def _command(action: str, target: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = target["metadata"]
    ref = {"apiVersion": target["apiVersion"], "kind": target["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True}
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{meta['name']}-{action.lower()}-", "namespace": namespace, "ownerReferences": [ref]},
        "action": action,
        "target": ref,
    }


def _created(obj: dict[str, Any]) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp") or ""
    return ts[:10]


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d"


def _ts(value: Any) -> float | None:
    from .codec import parse_time

    t = parse_time(value)
    return t if isinstance(t, float) else None


def format_jobs(jobs: list[dict[str, Any]], all_namespaces: bool = False) -> str:
    """vcctl's `job list` table."""
    if not jobs:
        return "No resources found\n"
    name_w = max(len("Name"), *(len(j["metadata"]["name"]) for j in jobs)) + 3
    ns_w = max(len("Namespace"), *(len(j["metadata"].get("namespace", "")) for j in jobs)) + 3
    fmt = f"%-{name_w}s%-15s%-12s%-12s%-12s%-6s%-10s%-10s%-12s%-10s%-12s%-10s"
    head = ("Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running", "Succeeded", "Failed", "Unknown", "RetryCount")
    lines = [((f"%-{ns_w}s" % "Namespace") if all_namespaces else "") + fmt % head]
    for j in jobs:
        st = j.get("status") or {}
        spec = j.get("spec") or {}
        row = (
            j["metadata"]["name"],
            _created(j),
            (st.get("state") or {}).get("phase", ""),
            (j["metadata"].get("labels") or {}).get("volcano.sh/job-type", "Batch"),
            sum(int(t.get("replicas", 0)) for t in spec.get("tasks") or []),
            st.get("minAvailable", 0),
            st.get("pending", 0),
            st.get("running", 0),
            st.get("succeeded", 0),
            st.get("failed", 0),
            st.get("unknown", 0),
            st.get("retryCount", 0),
        )
        lines.append(((f"%-{ns_w}s" % j["metadata"].get("namespace", "")) if all_namespaces else "") + fmt % row)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def format_queues(queues: list[dict[str, Any]], podgroups: list[dict[str, Any]]) -> str:
    """vcctl's `queue list` table (PodGroup counts computed here, as vcctl does)."""
    fmt = "%-25s%-8s%-8s%-8s%-8s%-8s%-8s%-8s%-8s"
    lines = [fmt % ("Name", "Weight", "State", "Parent", "Inqueue", "Pending", "Running", "Unknown", "Completed")]
    for q in sorted(queues, key=lambda q: q["metadata"]["name"]):
        name = q["metadata"]["name"]
        counts = {"Inqueue": 0, "Pending": 0, "Running": 0, "Unknown": 0, "Completed": 0}
        for pg in podgroups:
            if ((pg.get("spec") or {}).get("queue") or "default") == name:
                ph = (pg.get("status") or {}).get("phase") or "Pending"
                if ph in counts:
                    counts[ph] += 1
        spec = q.get("spec") or {}
        parent = spec.get("parent") or ("" if name == "root" else "root")
        lines.append(
            fmt
            % (
                name,
                spec.get("weight", 1),
                (q.get("status") or {}).get("state", ""),
                parent,
                counts["Inqueue"],
                counts["Pending"],
                counts["Running"],
                counts["Unknown"],
                counts["Completed"],
            )
        )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def describe_job(j: dict[str, Any]) -> str:
    """A `kubectl describe`-like view (vcctl job view)."""
    meta, spec, st = j["metadata"], j.get("spec") or {}, j.get("status") or {}
    out = [
        f"Name:         {meta['name']}",
        f"Namespace:    {meta.get('namespace', '')}",
        f"Labels:       {', '.join(f'{k}={v}' for k, v in (meta.get('labels') or {}).items()) or '<none>'}",
        f"Annotations:  {', '.join(f'{k}={v}' for k, v in (meta.get('annotations') or {}).items()) or '<none>'}",
        f"API Version:  {j.get('apiVersion')}",
        f"Kind:         {j.get('kind')}",
        "Metadata:",
        f"  Creation Timestamp:  {meta.get('creationTimestamp', '')}",
        f"  UID:                 {meta.get('uid', '')}",
        "Spec:",
        f"  Min Available:     {spec.get('minAvailable', 0)}",
        f"  Queue:             {spec.get('queue', 'default')}",
        f"  Scheduler Name:    {spec.get('schedulerName', '')}",
        f"  Max Retry:         {spec.get('maxRetry', 3)}",
        "  Tasks:",
    ]
    for t in spec.get("tasks") or []:
        out.append(f"    Name:           {t.get('name', '')}")
        out.append(f"    Replicas:       {t.get('replicas', 0)}")
        out.append(f"    Min Available:  {t.get('minAvailable', t.get('replicas', 0))}")
        for c in ((t.get("template") or {}).get("spec") or {}).get("containers") or []:
            req = (c.get("resources") or {}).get("requests") or {}
            out.append(f"      Container:  {c.get('name', '')}  Image: {c.get('image', '')}  Requests: {req or '<none>'}")
    state = st.get("state") or {}
    out += [
        "Status:",
        "  State:",
        f"    Phase:                 {state.get('phase', '')}",
        f"    Reason:                {state.get('reason', '') or ''}",
        f"    Message:               {state.get('message', '') or ''}",
        f"    Last Transition Time:  {state.get('lastTransitionTime', '')}",
        f"  Min Available:  {st.get('minAvailable', 0)}",
        f"  Pending:        {st.get('pending', 0)}",
        f"  Running:        {st.get('running', 0)}",
        f"  Succeeded:      {st.get('succeeded', 0)}",
        f"  Failed:         {st.get('failed', 0)}",
        f"  Unknown:        {st.get('unknown', 0)}",
        f"  Retry Count:    {st.get('retryCount', 0)}",
        f"  Version:        {st.get('version', 0)}",
    ]
    return "\n".join(out) + "\n"


def format_train_jobs(jobs: list[dict[str, Any]], pods: list[dict[str, Any]], now: float | None = None) -> str:
    """Voda's `get jobs`: NAME STATUS WORKERS SCHEDULER WAITING RUNNING TOTAL (times as durations).

    WORKERS counts the running GPU workers; for an elastic job its range follows in brackets."""
    import time as _time

    now = now or _time.time()
    rows = [("NAME", "STATUS", "WORKERS", "SCHEDULER", "WAITING", "RUNNING", "TOTAL")]
    by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in pods:
        labels = p["metadata"].get("labels") or {}
        if "volcano.sh/job-name" in labels:
            by_job.setdefault((p["metadata"].get("namespace", ""), labels["volcano.sh/job-name"]), []).append(p)
    for j in sorted(jobs, key=lambda j: j["metadata"]["name"]):
        meta, st = j["metadata"], j.get("status") or {}
        phase = (st.get("state") or {}).get("phase", "") or "Pending"
        mine = by_job.get((meta.get("namespace", ""), meta["name"]), [])
        gpu_pods = [p for p in mine if _gpu_pod(p)] or mine
        workers = sum(1 for p in gpu_pods if (p.get("status") or {}).get("phase") == "Running")
        rng = _elastic_range(j)
        created = _ts(meta.get("creationTimestamp")) or now
        starts = [t for t in (_ts((p.get("status") or {}).get("startTime")) for p in mine) if t is not None]
        first = min(starts) if starts else None
        finished = phase in ("Completed", "Failed", "Terminated", "Aborted")
        end = (_ts((st.get("state") or {}).get("lastTransitionTime")) or now) if finished else now
        waiting = (first if first is not None else end) - created
        running = (end - first) if first is not None else 0.0
        rows.append(
            (
                meta["name"],
                phase,
                f"{workers} ({rng})" if rng else str(workers),
                (j.get("spec") or {}).get("schedulerName", ""),
                _age(waiting),
                _age(running),
                _age(end - created),
            )
        )
    widths = [max(len(r[i]) for r in rows) + 3 for i in range(len(rows[0]))]
    return "\n".join("".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def _gpu_pod(pod: dict[str, Any]) -> bool:
    for c in ((pod.get("spec") or {}).get("containers") or []):
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if any(str(k).endswith("/gpu") for k in (res.get(part) or {})):
                return True
    return False


def _elastic_range(job: dict[str, Any]) -> str:
    """"min-max" workers of an elastic Volcano Job, "" for others."""
    from ..api.volcano import Job
    from ..elastic.spec import job_shape

    try:
        shape = job_shape(Job.model_validate(job))
    except Exception:  # noqa: BLE001 - a job the models cannot read is shown without a range
        return ""
    return "" if shape is None else f"{shape[0]}-{shape[1]}"


def _requests(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            _die(f"{part!r}: expected name=quantity (e.g. cpu=1000m,memory=100Mi)", 2)
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
    filename: Annotated[Optional[Path], typer.Option("--filename", "-f", help="create the job from this YAML instead")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Run a job."""
    import yaml

    if filename is not None:
        docs = [d for d in yaml.safe_load_all(filename.read_text(encoding="utf-8")) if d]
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

    async def go(client):
        from .ops import create_manifest

        for d in docs:
            made = await create_manifest(client, d, namespace)
            typer.echo(f"run job {made['metadata']['name']} successfully")

    _run(go, kubeconfig, context)


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

    async def go(client):
        from .ops import list_objects

        jobs = await list_objects(client, "Job", None if all_namespaces else namespace)
        jobs = [
            j
            for j in jobs
            if (queue is None or (j.get("spec") or {}).get("queue", "default") == queue)
            and (scheduler is None or (j.get("spec") or {}).get("schedulerName") == scheduler)
            and (selector is None or selector in j["metadata"]["name"])
        ]
        typer.echo(format_jobs(jobs, all_namespaces), nl=False)

    _run(go, kubeconfig, context)


@job_app.command("view")
def job_view(
    name: Annotated[str, typer.Option("--name", "-N")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Show a job's details."""

    async def go(client):
        from .ops import get_object

        j = await get_object(client, "Job", name, namespace)
        if j is None:
            _die(f"job {namespace}/{name} not found")
        typer.echo(describe_job(j), nl=False)

    _run(go, kubeconfig, context)


def _job_command(action: str, verb: str):
    def cmd(
        name: Annotated[str, typer.Option("--name", "-N")],
        namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
        kubeconfig: KubeconfigOpt = None,
        context: ContextOpt = None,
    ) -> None:
        async def go(client):
            from .ops import create_manifest, get_object

            j = await get_object(client, "Job", name, namespace)
            if j is None:
                _die(f"job {namespace}/{name} not found")
            await create_manifest(client, _command(action, j, namespace))
            typer.echo(f"{verb} job {name} successfully")

        _run(go, kubeconfig, context)

    cmd.__doc__ = f"{verb.capitalize()} a job (a {action} Command)."
    return cmd


job_app.command("suspend")(_job_command("AbortJob", "suspend"))
job_app.command("resume")(_job_command("ResumeJob", "resume"))


@job_app.command("delete")
def job_delete(
    name: Annotated[str, typer.Option("--name", "-N")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Delete a job."""

    async def go(client):
        from .ops import delete_object

        if not await delete_object(client, "Job", name, namespace):
            _die(f"job {namespace}/{name} not found")
        typer.echo(f"delete job {name} successfully")

    _run(go, kubeconfig, context)


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

    async def go(client):
        from .ops import create_manifest

        spec: dict[str, Any] = {"weight": weight}
        if parent:
            spec["parent"] = parent
        q = await create_manifest(
            client, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        )
        if state.lower() == "closed":
            await create_manifest(client, _command("CloseQueue", q, "default"))
        typer.echo(f"create queue {name} successfully")

    _run(go, kubeconfig, context)


@queue_app.command("list")
def queue_list(kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """List queues."""

    async def go(client):
        from .ops import list_objects

        queues = await list_objects(client, "Queue")
        if not queues:
            typer.echo("No resources found")
            return
        typer.echo(format_queues(queues, await list_objects(client, "PodGroup")), nl=False)

    _run(go, kubeconfig, context)


@queue_app.command("get")
def queue_get(name: Annotated[str, typer.Option("--name", "-n")], kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Show one queue."""

    async def go(client):
        from .ops import get_object, list_objects

        q = await get_object(client, "Queue", name)
        if q is None:
            _die(f"queue {name} not found")
        typer.echo(format_queues([q], await list_objects(client, "PodGroup")), nl=False)

    _run(go, kubeconfig, context)


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
        _die(f"action {action!r} is not supported; use open, close or update", 2)
    if act == "update" and (weight is None or weight <= 0):
        _die("update needs --weight greater than 0", 2)

    async def go(client):
        from .client import MERGE_PATCH
        from .ops import create_manifest, get_object

        q = await get_object(client, "Queue", name)
        if q is None:
            _die(f"queue {name} not found")
        if act == "update":
            await client.request(
                "PATCH", f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}", body={"spec": {"weight": weight}}, content_type=MERGE_PATCH
            )
        else:
            await create_manifest(client, _command("OpenQueue" if act == "open" else "CloseQueue", q, "default"))
        typer.echo(f"{act} queue {name} successfully")

    _run(go, kubeconfig, context)


@queue_app.command("delete")
def queue_delete(name: Annotated[str, typer.Option("--name", "-n")], kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Delete a queue."""

    async def go(client):
        from .ops import delete_object

        if not await delete_object(client, "Queue", name):
            _die(f"queue {name} not found")
        typer.echo(f"delete queue {name} successfully")

    _run(go, kubeconfig, context)


# ---------------------------------------------------------------------- train (Voda)


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
    import yaml

    from ..api.mpijob import MPIJobError, is_mpijob, to_volcano_job

    try:
        raw = [d for d in yaml.safe_load_all(filename.read_text(encoding="utf-8")) if d]
    except OSError as exc:
        _die(f"{filename}: {exc.strerror or exc}", 2)
    except yaml.YAMLError as exc:
        _die(f"{filename}: not valid YAML ({getattr(exc, 'problem', None) or exc})", 2)
    docs = []
    for i, d in enumerate(raw, start=1):
        if is_mpijob(d):
            try:
                d = to_volcano_job(d)
            except MPIJobError as exc:
                name = ((d.get("metadata") or {}).get("name")) or "?"
                _die(f"{filename}: document {i}: MPIJob/{name}: {exc.path}: {exc.message}", 2)
        docs.append(d)

    async def go(client):
        from .ops import create_manifest

        for d in docs:
            made = await create_manifest(client, d, namespace)
            typer.echo(f"{made.get('kind', 'object').lower()}/{made['metadata']['name']} created")

    _run(go, kubeconfig, context)


@train_app.command("get")
def train_get(
    what: Annotated[str, typer.Argument(help="jobs")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """`get jobs`: NAME STATUS WORKERS SCHEDULER WAITING RUNNING TOTAL."""
    if what not in ("jobs", "job"):
        _die(f"unknown resource {what!r}; use: jobs", 2)

    async def go(client):
        from .ops import list_objects

        jobs = await list_objects(client, "Job", namespace)
        pods = await list_objects(client, "Pod", namespace, label_selector="volcano.sh/job-name")
        typer.echo(format_train_jobs(jobs, pods), nl=False)

    _run(go, kubeconfig, context)


@train_app.command("delete")
def train_delete(
    names: Annotated[list[str], typer.Argument(help="job names")],
    namespace: Annotated[str, typer.Option("--namespace", "-n")] = "default",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Delete training jobs."""

    async def go(client):
        from .ops import delete_object

        missing = []
        for n in names:
            if await delete_object(client, "Job", n, namespace):
                typer.echo(f"job {n} deleted")
            else:
                missing.append(n)
        if missing:
            _die(f"not found: {', '.join(missing)}")

    _run(go, kubeconfig, context)


def register(app: typer.Typer) -> None:
    """Add the cluster commands to the main `lavaflow` app."""
    app.command("scheduler")(scheduler_cmd)
    app.command("controller")(controller_cmd)
    app.command("webhook")(webhook_cmd)
    app.command("install")(install_cmd)
    app.add_typer(job_app, name="job")
    app.add_typer(queue_app, name="queue")
    app.add_typer(train_app, name="train")


__all__ = ["register", "format_jobs", "format_queues", "format_train_jobs", "describe_job", "_dt"]
