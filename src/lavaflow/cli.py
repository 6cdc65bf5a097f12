"""The ``lavaflow`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="lavaflow: gang scheduling, queues and elastic training — on Kubernetes or a simulated cluster.",
)
err = Console(stderr=True)


class Invalid(Exception):
    """Bad input: printed as one line per problem, exit code 2."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def _fmt_time(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _load(files: list[Path], config: Path | None):
    from .api.loader import InputError, load_files
    from .scheduler.framework.conf import SchedulerConfError, load_scheduler_conf
    from .sim.inputs import prepare

    try:
        sim_input = prepare(load_files([str(f) for f in files]))
    except InputError as exc:
        raise Invalid(exc.problems) from None
    conf = None
    if config is not None:
        try:
            text = config.read_text(encoding="utf-8")
        except OSError as exc:
            raise Invalid([f"{config}: cannot read file ({exc.strerror or exc})"]) from None
        try:
            conf = load_scheduler_conf(text)
        except SchedulerConfError as exc:
            raise Invalid([f"{config}: {p + ': ' if p else ''}{m}" for p, m in exc.problems]) from None
    return sim_input, conf


def _run(files, config, scheduler, seed, until, default_duration, show_progress: bool):
    from .sim.engine import Simulation

    sim_input, conf = _load(files, config)
    sim = Simulation(sim_input, scheduler=scheduler, conf=conf, seed=seed, until=until, default_duration=default_duration)
    if not show_progress:
        return sim.run()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn(f"[bold]{scheduler}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs finished · t={task.fields[t]}s"),
        console=err,
        transient=True,
    ) as progress:
        tid = progress.add_task("simulate", total=None, t=0)

        def cb(now: float, done: int, total: int) -> None:
            progress.update(tid, completed=done, total=total or None, t=f"{now:.0f}")

        return sim.run(progress=cb)


def _job_table(result: dict) -> Table:
    t = Table(title=f"scheduler: {result['scheduler']}", title_justify="left")
    for col in ("job", "queue", "phase", "submitted", "started", "finished", "waited", "ran"):
        t.add_column(col, justify="right" if col not in ("job", "queue", "phase") else "left")
    for j in result["jobs"]:
        waited = None if j["startTime"] is None else j["startTime"] - j["submitTime"]
        ran = None if j["startTime"] is None or j["finishTime"] is None else j["finishTime"] - j["startTime"]
        t.add_row(
            f"{j['namespace']}/{j['name']}",
            j["queue"],
            j["phase"],
            _fmt_time(j["submitTime"]),
            _fmt_time(j["startTime"]),
            _fmt_time(j["finishTime"]),
            _fmt_time(waited),
            _fmt_time(ran),
        )
    return t


SUMMARY_ROWS = (
    ("completed", "completed", str),
    ("failed", "failed", str),
    ("stuck", "stuck", str),
    ("makespan (s)", "makespan", _fmt_time),
    ("mean JCT (s)", "jctMean", _fmt_time),
    ("p50 JCT (s)", "jctP50", _fmt_time),
    ("p95 JCT (s)", "jctP95", _fmt_time),
    ("mean wait (s)", "waitMean", _fmt_time),
    ("p50 wait (s)", "waitP50", _fmt_time),
    ("p95 wait (s)", "waitP95", _fmt_time),
    ("mean CPU allocated", "cpuAllocationMean", _fmt_pct),
    ("mean GPU allocated", "gpuAllocationMean", _fmt_pct),
)


def _summary_table(results: list[dict]) -> Table:
    t = Table(title="summary", title_justify="left")
    t.add_column("")
    for r in results:
        t.add_column(r["scheduler"], justify="right")
    for label, key, fmt in SUMMARY_ROWS:
        t.add_row(label, *[fmt(r["summary"].get(key)) if r["summary"].get(key) is not None else "-" for r in results])
    t.add_row("stalled", *["yes" if r["stalled"] else "no" for r in results])
    t.add_row("end time (s)", *[_fmt_time(r["endTime"]) for r in results])
    return t


def _print_table(results: list[dict]) -> None:
    out = Console(width=max(Console().width, 100))
    for r in results:
        out.print(_job_table(r))
    out.print(_summary_table(results))
    for r in results:
        for x in r.get("rejected", []):
            where = f"{x['namespace']}/{x['name']}" if x.get("namespace") else x["name"]
            out.print(f"{r['scheduler']}: {x['kind']} {where} refused at t={_fmt_time(x['time'])}: {x['reason']}",
                      markup=False, highlight=False)
        if r["stuck"]:
            out.print(f"[bold red]{r['scheduler']}: {len(r['stuck'])} job(s) did not finish"
                      f"{' — stalled' if r['stalled'] else ''}:[/bold red]")
            for s in r["stuck"]:
                out.print(f"  {s['namespace']}/{s['name']}: {s['reason']}", markup=False, highlight=False, soft_wrap=True)


@app.command()
def simulate(
    files: Annotated[list[Path], typer.Argument(help="YAML files: nodes (or NodeGroups), queues, jobs, pods…")],
    scheduler: Annotated[str, typer.Option(help="lavaflow or kube-default")] = "lavaflow",
    compare: Annotated[bool, typer.Option("--compare", help="run kube-default and lavaflow side by side")] = False,
    config: Annotated[Optional[Path], typer.Option(help="volcano-scheduler.conf to use")] = None,  # noqa: UP007
    seed: Annotated[int, typer.Option(help="random seed (same seed, same output)")] = 0,
    until: Annotated[Optional[str], typer.Option(help="stop at this simulated time (e.g. 2h)")] = None,  # noqa: UP007
    default_duration: Annotated[str, typer.Option(help="run time of pods without a duration annotation")] = "60s",
    output: Annotated[str, typer.Option(help="table or json")] = "table",
    report: Annotated[Optional[Path], typer.Option(help="write an HTML report here")] = None,  # noqa: UP007
) -> None:
    """Simulate a workload on a simulated cluster and report what happened."""
    from .sim.annotations import parse_duration

    problems = []
    if scheduler not in ("lavaflow", "kube-default"):
        problems.append(f"--scheduler: unknown scheduler {scheduler!r} (choose lavaflow or kube-default)")
    if output not in ("table", "json"):
        problems.append(f"--output: unknown format {output!r} (choose table or json)")
    until_s = dd = None
    try:
        until_s = parse_duration(until) if until is not None else None
    except ValueError as exc:
        problems.append(f"--until: {exc}")
    try:
        dd = parse_duration(default_duration, allow_inf=True)
    except ValueError as exc:
        problems.append(f"--default-duration: {exc}")
    if problems:
        raise Invalid(problems)
    schedulers = ["kube-default", "lavaflow"] if compare else [scheduler]
    tty = sys.stderr.isatty() and output == "table"
    results = [_run(files, config, s, seed, until_s, dd, tty) for s in schedulers]
    if output == "json":
        payload = results[0] if len(results) == 1 else {"results": results}
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        _print_table(results)
    if report is not None:
        from .sim.report import write_report

        write_report(results, report)
        if output == "table":
            err.print(f"report written to {report}")


@app.command()
def version() -> None:
    """Print the version."""
    from . import __version__

    typer.echo(__version__)


def _report_invalid(exc: Invalid) -> None:
    for p in exc.problems:
        err.print(f"error: {p}", markup=False, highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point: usage errors and invalid input exit with 2, never with a traceback."""
    try:
        app()
    except Invalid as exc:
        _report_invalid(exc)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
