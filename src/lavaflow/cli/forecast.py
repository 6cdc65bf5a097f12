"""`lavaflow forecast`: when each pending job will start, and each job end — on a cluster (a
snapshot of it now) or on a simulation (its state at ``--at T``), simulated forward with the same
core and configuration (docs/forecast.md)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from .options import ContextOpt, KubeconfigOpt

if TYPE_CHECKING:
    from ..forecast import Forecast
    from ..scheduler.framework.conf import SchedulerConfiguration
    from ..store import MemoryStore


def _invalid(problems: list[str]) -> Exception:
    from .main import Invalid

    return Invalid(problems)


def _conf_file(config: Path | None) -> SchedulerConfiguration | None:
    if config is None:
        return None
    from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf
    from .main import read_text

    try:
        return load_scheduler_conf(read_text(config))
    except SchedulerConfError as exc:
        raise _invalid([f"{config}: {p + ': ' if p else ''}{m}" for p, m in exc.problems]) from None


def _simulated(
    files: list[Path], config: Path | None, at: float, seed: int, default_duration: float, policy: str | None
) -> tuple[MemoryStore, SchedulerConfiguration, float]:
    """A simulation of ``files`` run to ``at``: (its store, its configuration, its clock)."""
    from ..sim.engine import Simulation
    from .main import _elastic_conf, _load

    sim_input, conf = _load(files, config)
    if policy is not None:
        conf = _elastic_conf(conf, policy, None, None)
    sim = Simulation(sim_input, conf=conf, seed=seed, until=at, default_duration=default_duration)
    sim.run()
    return sim.store, sim.scheduler.conf, sim.now


def _live(kubeconfig: str | None, context: str | None) -> tuple[dict[str, list[Any]], float]:
    """A snapshot of the cluster and the wall-clock time it was taken at."""
    import asyncio
    import time

    from .common import need_kube

    need_kube()
    from ..forecast.snapshot import cluster_snapshot
    from ..kube.client import ApiError, ConfigError, KubeClient, load_config

    try:
        cfg = load_config(kubeconfig, context)
    except ConfigError as exc:
        raise _invalid([f"--kubeconfig: {exc}"]) from None

    async def go() -> dict[str, list[Any]]:
        client = KubeClient(cfg)
        try:
            return await cluster_snapshot(client)
        finally:
            await client.close()

    try:
        objects = asyncio.run(go())
    except ApiError as exc:
        typer.echo(f"error: {exc.message or exc}", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"error: cannot reach the cluster ({exc})", err=True)
        raise typer.Exit(1) from None
    return objects, time.time()


def _fmt(t: float | None, now: float, wall: bool) -> str:
    if t is None:
        return "-"
    if wall:
        from datetime import UTC, datetime

        rel = t - now
        return f"{datetime.fromtimestamp(t, UTC).strftime('%H:%M:%S')} ({'+' if rel >= 0 else ''}{_span(rel)})"
    from .tables import fmt_time

    return fmt_time(t)


def _span(seconds: float) -> str:
    from .tables import _age

    return ("-" if seconds < 0 else "") + _age(abs(seconds))


def _with_range(point: float | None, lo: float | None, hi: float | None, now: float, wall: bool) -> str:
    text = _fmt(point, now, wall)
    if point is None or (lo == point and hi == point):
        return text
    return f"{text} [{_fmt(lo, now, wall)} – {_fmt(hi, now, wall)}]"


def _json(fc: Forecast) -> dict[str, Any]:
    jobs = []
    for key, j in fc.jobs.items():
        ns, name = key.split("/", 1)
        jobs.append(
            {
                "namespace": ns,
                "name": name,
                "queue": fc.queues.get(key),
                "running": j.running,
                "source": j.source,
                "detail": fc.details.get(key),
                "start": j.start,
                "startLow": j.start_low,
                "startHigh": j.start_high,
                "finish": j.finish,
                "finishLow": j.finish_low,
                "finishHigh": j.finish_high,
                "reason": j.reason,
            }
        )
    return {"now": fc.now, "seed": fc.seed, "runs": fc.runs, "jobs": jobs}


def _table(fc: Forecast, wall: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Console(width=max(Console().width, 120))
    clock = "UTC (from now)" if wall else "simulated s"
    t = Table(
        title=f"forecast at {_fmt(fc.now, fc.now, wall)} ({fc.runs} forward run(s); ranges p10–p90)",
        title_justify="left",
    )
    t.add_column("job", no_wrap=True)
    for col in ("queue", "state", f"start, {clock}", f"finish, {clock}", "source", "note"):
        t.add_column(col, overflow="fold")
    order = sorted(
        fc.jobs.items(), key=lambda kv: (kv[1].running, kv[1].start if kv[1].start is not None else math.inf)
    )
    for key, j in order:
        t.add_row(
            key,
            fc.queues.get(key, ""),
            "running" if j.running else "pending",
            _with_range(j.start, j.start_low, j.start_high, fc.now, wall),
            _with_range(j.finish, j.finish_low, j.finish_high, fc.now, wall),
            j.source,
            j.reason or fc.details.get(key, ""),
        )
    out.print(t)
    if not fc.jobs:
        out.print("no unfinished jobs")


def _seconds(problems: list[str], flag: str, text: str, allow_inf: bool = False) -> float:
    """A duration option in seconds; its problem added to ``problems`` (0 then)."""
    from ..api.sim_annotations import parse_duration

    try:
        return parse_duration(text, allow_inf=allow_inf)
    except ValueError as exc:
        problems.append(f"{flag}: {exc}")
        return 0.0


def forecast_cmd(
    files: Annotated[
        Optional[list[Path]],  # noqa: UP007
        typer.Argument(help="simulation input (as for simulate); without it, the cluster of --kubeconfig"),
    ] = None,
    at: Annotated[
        Optional[str],  # noqa: UP007
        typer.Option("--at", help="simulation input: the simulated time of the snapshot (e.g. 90s, 2h)"),
    ] = None,
    config: Annotated[
        Optional[Path],  # noqa: UP007
        typer.Option(help="volcano-scheduler.conf the scheduler runs (default: the input's, else Volcano's default)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the sampled run times (same seed, same forecast)")] = 0,
    samples: Annotated[int, typer.Option(help="forward runs with sampled run times, for the ranges")] = 8,
    default_duration: Annotated[
        str, typer.Option(help="simulation input: run time of pods without a duration annotation (the truth)")
    ] = "60s",
    policy: Annotated[
        Optional[str],  # noqa: UP007
        typer.Option(help="simulation input: the elastic policy (elastic.policy), as for simulate --policy"),
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json")] = "table",
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Forecast when each pending job starts and each job finishes."""
    from .. import jsonout
    from ..forecast import forecast

    files = list(files or [])
    problems: list[str] = []
    if output not in ("table", "json"):
        problems.append(f"--output: unknown format {output!r} (choose table or json)")
    if not 0 <= samples <= 1000:
        problems.append(f"--samples: must be between 0 and 1000, got {samples}")
    if files:
        if at is None:
            problems.append("--at: give the simulated time of the snapshot (e.g. --at 10m)")
        if kubeconfig is not None or context is not None:
            problems.append("--kubeconfig/--context: forecast either a simulation input or a cluster, not both")
    elif at is not None or policy is not None:
        problems.append(f"{'--at' if at is not None else '--policy'}: applies to a simulation input; give its files")
    if policy is not None:
        from ..elastic.policies import POLICY_NAMES, resolve_name

        try:
            policy = resolve_name(policy)
        except KeyError:
            problems.append(f"--policy: unknown policy {policy.strip()!r} (choose from {', '.join(POLICY_NAMES)})")
    at_s = _seconds(problems, "--at", at) if at is not None else 0.0
    dd = _seconds(problems, "--default-duration", default_duration, allow_inf=True)
    if problems:
        raise _invalid(problems)
    objects: MemoryStore | dict[str, list[Any]]
    conf: SchedulerConfiguration | None
    if files:
        objects, conf, now = _simulated(files, config, at_s, seed, dd, policy)
    else:
        conf = _conf_file(config)
        objects, now = _live(kubeconfig, context)
    fc = forecast(objects, conf, now, seed=seed, samples=samples)
    if output == "json":
        sys.stdout.write(jsonout.dumps(_json(fc)) + "\n")
    else:
        _table(fc, wall=not files)
