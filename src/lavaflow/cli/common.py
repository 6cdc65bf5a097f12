"""What the cluster commands share: kubeconfig options, the client, logging, durations, signals
and exiting with a one-line error."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from .options import (
    ContextOpt as ContextOpt,  # (re-exported)
    KubeconfigOpt as KubeconfigOpt,
    SchedulerNamesOpt as SchedulerNamesOpt,
)

if TYPE_CHECKING:
    from ..kube.client import KubeClient

T = TypeVar("T")


def die(msg: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def read_yaml_documents(filename: Path) -> list[Any]:
    """The non-empty YAML documents of a file, or a one-line error and exit code 2."""
    from ..api import yamlio

    try:
        return [d for d in yamlio.load_all(filename.read_text(encoding="utf-8")) if d]
    except OSError as exc:
        die(f"{filename}: {exc.strerror or exc}", 2)
    except UnicodeDecodeError:
        die(f"{filename}: not UTF-8 text", 2)
    except yamlio.YamlError as exc:
        die(f"{filename}: {exc.where()}not valid YAML ({exc.message})", 2)
    return []  # (not reached: die raises)


def need_kube() -> None:
    try:
        import aiohttp  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        die("the Kubernetes backend needs the kube extra: pip install 'lavaflow[kube]'")


def make_client(kubeconfig: str | None, context: str | None, qps: float = 50.0, burst: int = 100) -> KubeClient:
    from ..kube.client import ConfigError, KubeClient, load_config

    try:
        cfg = load_config(kubeconfig, context)
    except ConfigError as exc:
        die(str(exc))
    cfg.qps, cfg.burst = qps, burst
    return KubeClient(cfg)


def setup_logging(verbose: int) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def duration_option(text: str) -> float:
    from ..api.admission import parse_duration

    try:
        return float(parse_duration(text))
    except ValueError as exc:
        die(str(exc), 2)
    return 0.0


def stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    return stop


def lease_timing(lease_duration: str, renew_deadline: str, retry_period: str) -> tuple[float, float, float]:
    lease, renew, retry = (
        duration_option(lease_duration),
        duration_option(renew_deadline),
        duration_option(retry_period),
    )
    if not 0 < retry < renew < lease:
        die(
            f"--leader-elect-*: need 0 < retry period ({retry_period}) < renew deadline ({renew_deadline}) < lease duration ({lease_duration})",
            2,
        )
    return lease, renew, retry


def namespace_of_lease(value: str | None) -> str:
    return value or os.environ.get("POD_NAMESPACE") or "default"


def run_on_cluster(coro_fn: Callable[[KubeClient], Awaitable[T]], kubeconfig: str | None, context: str | None) -> T:
    need_kube()

    async def main() -> T:
        client = make_client(kubeconfig, context)
        try:
            return await coro_fn(client)
        finally:
            await client.close()

    from ..kube.client import ApiError

    try:
        return asyncio.run(main())
    except ApiError as exc:
        die(exc.message or str(exc))
