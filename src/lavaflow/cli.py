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
    files: Annotated[Optional[list[Path]], typer.Argument(help="YAML files: nodes (or NodeGroups), queues, jobs, pods…")] = None,  # noqa: UP007
    scheduler: Annotated[str, typer.Option(help="lavaflow or kube-default")] = "lavaflow",
    compare: Annotated[bool, typer.Option("--compare", help="run kube-default and lavaflow side by side")] = False,
    config: Annotated[Optional[Path], typer.Option(help="volcano-scheduler.conf to use")] = None,  # noqa: UP007
    seed: Annotated[int, typer.Option(help="random seed (same seed, same output)")] = 0,
    until: Annotated[Optional[str], typer.Option(help="stop at this simulated time (e.g. 2h)")] = None,  # noqa: UP007
    default_duration: Annotated[str, typer.Option(help="run time of pods without a duration annotation")] = "60s",
    output: Annotated[str, typer.Option(help="table or json")] = "table",
    report: Annotated[Optional[Path], typer.Option(help="write an HTML report here")] = None,  # noqa: UP007
    explain: Annotated[Optional[str], typer.Option(help="NAMESPACE/JOB: print the decision history of one job")] = None,  # noqa: UP007
    workload: Annotated[Optional[Path], typer.Option(help="elastic GPU trace (Pollux/Philly/Gavel CSV, MPIJob/Volcano YAML) to replay")] = None,  # noqa: UP007
    policy: Annotated[Optional[str], typer.Option(help="with --workload: allocation policy (default Lavaflow)")] = None,  # noqa: UP007
    compare_policies: Annotated[Optional[str], typer.Option(help="with --workload: comma-separated policies to compare")] = None,  # noqa: UP007
    nodes: Annotated[int, typer.Option(help="with --workload: GPU nodes")] = 16,
    gpus_per_node: Annotated[int, typer.Option(help="with --workload: GPUs per node")] = 4,
    cluster: Annotated[Optional[Path], typer.Option(help="with --workload: YAML with Node/NodeGroup objects")] = None,  # noqa: UP007
    gpu_types: Annotated[Optional[str], typer.Option(help="with --workload: nodes per GPU type, e.g. k80:4,p100:4,v100:4")] = None,  # noqa: UP007
    resize_interval: Annotated[Optional[str], typer.Option(help="with --workload: minimum time between reschedules (default 30s; Tiresias: its own 60s tick)")] = None,  # noqa: UP007
    resize_cost: Annotated[str, typer.Option(help="with --workload: pause per start/resize/migration")] = "30s",
) -> None:
    """Simulate a workload on a simulated cluster and report what happened."""
    from .sim.annotations import parse_duration

    if workload is not None:
        from .elastic.cli import run_workload

        if files:
            raise Invalid(["--workload replays a trace: give no YAML files with it"])
        run_workload(workload, policy, compare_policies, nodes, gpus_per_node, cluster, gpu_types,
                     resize_interval, resize_cost, report, output)
        return
    if not files:
        raise Invalid(["simulate: give YAML files, or --workload FILE"])

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
    if explain is not None:
        problems = [p for r in results for p in [_explain_problem(r, explain)] if p]
        if len(problems) == len(results):
            raise Invalid([problems[0]])
    if output == "json":
        payload = results[0] if len(results) == 1 else {"results": results}
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        _print_table(results)
    if explain is not None and output == "table":
        for r in results:
            _print_explanation(r, explain)
    if report is not None:
        from .sim.report import write_report

        write_report(results, report)
        if output == "table":
            err.print(f"report written to {report}")


def _find_job(result: dict, target: str) -> tuple[dict | None, str | None]:
    """The job record and its PodGroup key for NAMESPACE/NAME (a Volcano Job or a PodGroup)."""
    ns, _, name = target.rpartition("/")
    ns = ns or "default"
    job = next((j for j in result["jobs"] if j["namespace"] == ns and j["name"] == name), None)
    if job is None:
        return None, None
    if job.get("kind") == "PodGroup":
        return job, f"{ns}/{name}"
    pg = next((g for g in result["podGroups"] if g["namespace"] == ns and g["name"].startswith(name + "-")), None)
    return job, (f"{ns}/{pg['name']}" if pg else None)


def _explain_problem(result: dict, target: str) -> str | None:
    job, _ = _find_job(result, target)
    if job is None:
        known = ", ".join(f"{j['namespace']}/{j['name']}" for j in result["jobs"][:10])
        return f"--explain: no job {target!r} in the simulation (jobs: {known or 'none'})"
    return None


def _print_explanation(result: dict, target: str) -> None:
    out = Console(width=max(Console().width, 100))
    job, pg_key = _find_job(result, target)
    if job is None:
        return
    out.print(f"[bold]{result['scheduler']}: why {job['namespace']}/{job['name']} did what it did[/bold]")
    rows: list[tuple[float, str, str]] = []
    for h in job.get("phaseHistory", []):
        rows.append((h["time"], "phase", f"job is {h['phase']}"))
    if job.get("kind") == "PodGroup":
        rows.append((job["submitTime"], "submit", "PodGroup created"))
    for d in result.get("decisions", {}).get(pg_key or "", []):
        span = "" if d["until"] == d["time"] else f" (repeated until t={_fmt_time(d['until'])})"
        rows.append((d["time"], d["action"], d["message"] + span))
    for p in result["pods"]:
        if p["job"] in (job["name"], (pg_key or "/").split("/", 1)[1]) and p["namespace"] == job["namespace"]:
            if p["startTime"] is not None:
                rows.append((p["startTime"], "pod", f"{p['name']} started on {p['node']}"))
            if p["finishTime"] is not None:
                why = f" ({p['reason']})" if p.get("reason") else ""
                rows.append((p["finishTime"], "pod", f"{p['name']} {p['phase'].lower()}{why}"))
    t = Table(show_header=True, header_style="bold")
    t.add_column("time", justify="right")
    t.add_column("what")
    t.add_column("detail", overflow="fold")
    for time, what, detail in sorted(rows, key=lambda r: (r[0], r[1] != "phase")):
        t.add_row(_fmt_time(time), what, detail)
    out.print(t)
    stuck = next((s for s in result["stuck"] if s["namespace"] == job["namespace"] and s["name"] == job["name"]), None)
    if stuck:
        out.print(f"still waiting: {stuck['reason']}", markup=False, highlight=False)


@app.command()
def version() -> None:
    """Print the version."""
    from . import __version__

    typer.echo(__version__)


def _report_invalid(exc: Invalid) -> None:
    for p in exc.problems:
        err.print(f"error: {p}", markup=False, highlight=False, soft_wrap=True)


# Cluster commands (scheduler, controller, webhook, install, job, queue, train): lavaflow.kube.cli.
from .kube.cli import register as _register_kube  # noqa: E402

_register_kube(app)


def main() -> None:
    """Entry point: usage errors and invalid input exit with 2, never with a traceback."""
    try:
        app()
    except Invalid as exc:
        _report_invalid(exc)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
