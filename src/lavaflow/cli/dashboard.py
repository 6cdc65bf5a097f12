"""`lavaflow dashboard`: the read-only web UI, over a cluster (kubeconfig or in-cluster) or over a
simulation's JSON output (``--from result.json``)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .common import ContextOpt, KubeconfigOpt, die, make_client, need_kube, setup_logging, stop_event

if TYPE_CHECKING:
    from ..scheduler.framework.conf import SchedulerConfiguration

log = logging.getLogger("lavaflow.dashboard")


def need_dashboard() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        die("the dashboard needs the dashboard extra: pip install 'lavaflow[dashboard]'")


def dashboard_cmd(
    source: Annotated[
        Optional[Path],
        typer.Option("--from", help="a simulation's result (`lavaflow simulate --output json`) instead of a cluster"),
    ] = None,
    at: Annotated[
        Optional[str], typer.Option("--at", help="with --from: show the simulation at this simulated time (e.g. 90s)")
    ] = None,
    scheduler: Annotated[
        Optional[str],
        typer.Option("--scheduler", help="with --from a --compare result: the run to show (default: the last)"),
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    scheduler_conf: Annotated[
        Optional[Path],
        typer.Option(
            "--scheduler-conf", help="volcano-scheduler.conf the forecast simulates with (default: Volcano's)"
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on")] = 8080,
    verbose: Annotated[int, typer.Option("-v", count=True, help="log more (-vv: debug)")] = 0,
) -> None:
    """Serve a read-only web UI: queues, jobs (why pending, forecast), nodes, elastic jobs."""
    setup_logging(verbose)
    if not 0 < port < 65536:
        die(f"--port: {port} is not a TCP port (1-65535)", 2)
    if source is None and (at is not None or scheduler is not None):
        die(f"{'--at' if at is not None else '--scheduler'}: applies with --from FILE only", 2)
    need_dashboard()
    if source is not None:
        _serve_result(source, at, scheduler, host, port)
        return
    need_kube()
    import aiohttp

    from ..kube.client import ApiError

    conf = _conf(scheduler_conf)
    _can_listen(host, port)
    try:
        asyncio.run(_serve_cluster(kubeconfig, context, conf, host, port))
    except (aiohttp.ClientError, ApiError, OSError, TimeoutError) as exc:
        die(f"cannot read the cluster: {exc or type(exc).__name__}")


def _can_listen(host: str, port: int) -> None:
    """A one-line error now, rather than the server's once it starts, when ``host:port`` is taken
    or not an address of this machine."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        die(f"--host: {host!r} is not an address to listen on ({exc.strerror or exc})", 2)
        return
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError as exc:
            die(f"--port: cannot listen on {host}:{port} ({exc.strerror or exc})", 2)


def _conf(path: Path | None) -> SchedulerConfiguration:
    from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf

    if path is None:
        return load_scheduler_conf()
    try:
        return load_scheduler_conf(path.read_text(encoding="utf-8"))
    except OSError as exc:
        die(f"--scheduler-conf: {path}: cannot read file ({exc.strerror or exc})", 2)
    except SchedulerConfError as exc:
        die("; ".join(f"{path}: {p + ': ' if p else ''}{m}" for p, m in exc.problems), 2)
    return None


def _serve_result(path: Path, at: str | None, scheduler: str | None, host: str, port: int) -> None:
    from ..api.sim_annotations import parse_duration
    from ..dashboard.app import Dashboard, make_app, server
    from ..dashboard.from_result import ResultError, read_result, state_from_result

    when = None
    if at is not None:
        try:
            when = parse_duration(at)
        except ValueError as exc:
            die(f"--at: {exc}", 2)
    try:
        result = read_result(path, scheduler)
    except ResultError as exc:
        die("\n".join(exc.problems), 2)
    _can_listen(host, port)  # (after the file: its problems come first)
    state = state_from_result(result, str(path), when)
    srv = server(make_app(Dashboard(state)), host, port)
    typer.echo(f"lavaflow dashboard: {path} at http://{host}:{port}/ (Ctrl-C stops)", err=True)
    srv.run()


async def _serve_cluster(
    kubeconfig: str | None, context: str | None, conf: SchedulerConfiguration, host: str, port: int
) -> None:
    from ..dashboard.app import Dashboard, forecast_loop, make_app, server
    from ..dashboard.forecast_column import ForecastColumn
    from ..dashboard.live import LiveState

    client = make_client(kubeconfig, context)
    stop = stop_event()
    live = LiveState(client, client.config.server)
    try:
        await live.start()
        dash = Dashboard(live.state, live=True, forecast=ForecastColumn())
        srv = server(make_app(dash), host, port)
        tasks = [
            asyncio.create_task(dash.broadcast.follow(live.changed, stop)),
            asyncio.create_task(forecast_loop(dash, live.objects, conf, stop)),
            asyncio.create_task(srv.serve()),
        ]
        log.warning("lavaflow dashboard: %s at http://%s:%d/", client.config.server, host, port)
        await stop.wait()
        srv.should_exit = True
        await asyncio.wait(tasks[2:], timeout=5)
        for t in tasks:
            t.cancel()
    finally:
        await live.stop()
        await client.close()
