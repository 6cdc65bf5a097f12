"""The ``lavaflow`` command line: the entry point, `lavaflow simulate` (tables, JSON, reports,
--explain) and `lavaflow version`; the cluster commands are added from the sibling modules."""

from __future__ import annotations

import gc
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast

import typer
from rich.console import Console
from rich.table import Table

from .. import jsonout
from ..sim import BATCH_GC_THRESHOLDS  # `simulate` is one batch run that ends with the process
from .forecast import forecast_cmd
from .node_choice import (
    MinimumFeasibleNodesOpt,
    MinimumPercentageOpt,
    NodeChoiceOpt,
    PercentageOpt,
    node_choice_from_options,
)
from .sweep import sweep_cmd
from .tables import fmt_time, print_results_table, summary_table

if TYPE_CHECKING:
    from ..elastic.results import SimResult
    from ..scheduler.framework.conf import SchedulerConfiguration
    from ..scheduler.framework.node_choice import NodeChoice
    from ..sim.engine import Simulation
    from ..sim.inputs import SimInput

_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    # Plain help and usage errors: typer's rich formatting imports rich.markdown, markdown-it,
    # pygments and attrs, which alone cost more start-up time than everything else.
    rich_markup_mode=None,
    help="lavaflow: gang scheduling, queues and elastic training — on Kubernetes or a simulated cluster.",
)
err = Console(stderr=True)


class Invalid(Exception):
    """Bad input: printed as one line per problem, exit code 2."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def _unwritable(path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (None: it can, as far as can be told beforehand)."""
    import os

    if path.is_dir():
        return "is a directory"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"no such directory {str(parent)!r}"
    if path.exists() and not os.access(path, os.W_OK):
        return "not writable"
    if not path.exists() and not os.access(parent, os.W_OK):
        return f"directory {str(parent)!r} is not writable"
    return None


def _use_sia_artifact(path: Path) -> list[str]:
    """Make ``path`` the Sia artifact the traces and the simulator read, and every Pollux-column
    trace a Sia workload (through environment variables, so that every process of the run sees
    them); the problems with it."""
    import os

    from ..elastic import sia

    try:
        sia.tables_dir(path)
    except sia.SiaArtifactError as exc:
        return [f"--sia-artifact: {exc}"]
    os.environ[sia.ENV_VAR] = str(path.resolve())
    os.environ[sia.ALL_TRACES_ENV] = "1"  # every Pollux-column trace of the run is Sia's
    return []


def read_text(path: Path) -> str:
    """A text file's contents; :class:`Invalid` naming the file when it cannot be read as UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise Invalid([f"{path}: cannot read file ({exc.strerror or exc})"]) from None
    except UnicodeDecodeError as exc:
        raise Invalid([f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})"]) from None


def _load(
    files: list[Path], config: Path | None, skip_unsupported: bool = False, adaptive: bool = False
) -> tuple[SimInput, SchedulerConfiguration | None]:
    from ..api.loader import InputError, Problems, load_files
    from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf
    from ..sim.documents import load_documents
    from ..sim.inputs import prepare
    from ..sim.traces import TraceFeed, default_cluster_for, is_trace, load_traces

    skipped: list[str] = []
    feed = None
    later: list[str] = []  # the trace jobs' admission problems, told with the other inputs'
    traces: list[str | Path] = [str(f) for f in files if is_trace(f)]
    held = None if traces else load_documents([str(f) for f in files], skip_unsupported)
    try:
        if held is not None:  # many Volcano Jobs, held until their time (sim/documents.py)
            sim_input, skipped = held
            loaded = []
        else:
            loaded = load_files([str(f) for f in files if not is_trace(f)], skip_unsupported, skipped)
        if traces:
            # Trace jobs are checked now and made as the simulated clock reaches them (a feed),
            # unless other inputs are checked against them: then they are loaded whole.
            problems = Problems()
            loaded += default_cluster_for(loaded, problems)
            feed = TraceFeed.open(traces, loaded, problems, adaptive=adaptive)
            if feed is None:
                loaded += load_traces(traces, loaded, problems, adaptive=adaptive)
            problems.raise_if_any()
            later = feed.problems if feed is not None else []
        if held is None:
            sim_input = prepare(loaded)
    except InputError as exc:
        raise Invalid(exc.problems + later) from None
    if later:
        raise Invalid(later)
    if feed is not None:
        sim_input.stream = feed
        sim_input.warnings += feed.warnings
    sim_input.warnings[:0] = skipped
    conf: SchedulerConfiguration | None = None
    if config is not None:
        text = read_text(config)
        try:
            conf = load_scheduler_conf(text)
        except SchedulerConfError as exc:
            raise Invalid([f"{config}: {p + ': ' if p else ''}{m}" for p, m in exc.problems]) from None
    elif sim_input.conf_text is not None:
        conf = load_scheduler_conf(sim_input.conf_text)
    return sim_input, conf


def _elastic_conf(
    conf: SchedulerConfiguration | None,
    policy: str | None,
    interval: str | None,
    cost: str | None,
    oracle: bool = False,
    shared_profiles: bool | None = None,
    params: Mapping[str, Any] | None = None,
) -> SchedulerConfiguration:
    """The configuration with the elastic plugin's policy / interval / cost / oracle / profile
    sharing / policy parameters (``elastic.policy.<name>``) overridden."""
    from ..scheduler.elastic.state import elastic_option
    from ..scheduler.framework.conf import load_scheduler_conf

    conf = conf if conf is not None else load_scheduler_conf()
    if policy is None and interval is None and cost is None and not oracle and shared_profiles is None and not params:
        return conf
    conf = conf.model_copy(deep=True)
    opt = elastic_option(conf)
    if opt is None:
        flag = (
            "--policy"
            if policy is not None
            else "--resize-interval"
            if interval is not None
            else "--resize-cost"
            if cost is not None
            else "--oracle"
            if oracle
            else "--shared-profiles"
            if shared_profiles
            else "--no-shared-profiles"
            if shared_profiles is not None
            else "params"
        )
        raise Invalid(
            [
                f"{flag}: the scheduler configuration does not enable elastic scheduling "
                "(add 'elastic' to actions and '- name: elastic' to a tier)"
            ]
        )
    for key, value in (("elastic.policy", policy), ("elastic.resizeInterval", interval), ("elastic.resizeCost", cost)):
        if value is not None:
            opt.arguments[key] = value
    if oracle:
        opt.arguments["elastic.oracle"] = True
    if shared_profiles is not None:
        opt.arguments["elastic.sharedProfiles"] = shared_profiles
    for key, value in (params or {}).items():
        opt.arguments[f"elastic.policy.{key}"] = value
    return conf


def _run(
    files: list[Path],
    config: Path | None,
    scheduler: str,
    seed: int,
    until: float | None,
    default_duration: float,
    show_progress: bool,
    policy: str | None = None,
    interval: str | None = None,
    cost: str | None = None,
    skip_unsupported: bool = False,
    adaptive: bool = False,
    oracle: bool = False,
    report_period: float = 30.0,
    report_noise: float = 0.0,
    node_choice: NodeChoice | None = None,
    shared_profiles: bool | None = None,
    params: Mapping[str, Any] | None = None,
    cluster_state: bool = False,
) -> tuple[dict[str, Any], SimResult | None]:
    import time as _time

    from ..sim.engine import Simulation

    sim_input, conf = _load(files, config, skip_unsupported, adaptive)
    if scheduler == "lavaflow":
        conf = _elastic_conf(conf, policy, interval, cost, oracle, shared_profiles, params)
    pause = 30.0
    if cost is not None:
        from ..api.sim_annotations import parse_duration

        pause = parse_duration(cost)
    t0 = _time.perf_counter()
    sim = Simulation(
        sim_input,
        scheduler=scheduler,
        conf=conf,
        seed=seed,
        until=until,
        default_duration=default_duration,
        restart_pause=pause,
        conf_origin=str(config) if config is not None else None,
        report_period=report_period,
        report_noise=report_noise,
        node_choice=node_choice,
    )
    label = scheduler if policy is None else f"{scheduler} ({policy})"
    if not show_progress:
        result = sim.run()
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(
            TextColumn(f"[bold]{label}[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs finished · simulated {task.fields[t]} · {task.fields[rate]} events/s"),
            console=err,
            transient=True,
        ) as progress:
            tid = progress.add_task("simulate", total=None, t="0:00:00", rate="-")
            window = [_time.perf_counter(), 0]  # wall time and events at the last rate shown

            def cb(now: float, done: int, total: int, events: int) -> None:
                fields: dict[str, Any] = {"t": _clock(now)}
                wall = _time.perf_counter()
                if wall - window[0] >= 0.5:  # events per second of wall time, over the last half second or more
                    fields["rate"] = f"{(events - window[1]) / (wall - window[0]):,.0f}"
                    window[0], window[1] = wall, events
                progress.update(tid, completed=done, total=total or None, **fields)

            result = sim.run(progress=cb)
    elastic: SimResult | None = None
    if sim.training.jobs:
        elastic = sim.training.result(sim.elastic_policy_name() or "-", _time.perf_counter() - t0)
        result["elastic"] = _elastic_json(elastic, sim)
        if policy is not None:
            result["scheduler"] = label
    if cluster_state:  # the dashboard's key, asked for, and last
        from ..sim.results import cluster_of

        result["cluster"] = cluster_of(sim)
    return result, elastic


def _clock(seconds: float) -> str:
    """Simulated seconds as h:mm:ss (days first past 24 h)."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    return f"{days}d {h}:{m:02d}:{sec:02d}" if days else f"{h}:{m:02d}:{sec:02d}"


def _elastic_json(res: SimResult, sim: Simulation) -> dict[str, Any]:
    s = res.summary()
    s.pop("wall_seconds", None)
    return {
        "summary": s,
        "jobs": [
            {
                "name": j.name,
                "application": j.application,
                "submit": j.submit,
                "start": j.start,
                "finish": j.finish,
                "jct": j.jct,
                "resizes": j.resizes,
                "halts": j.halts,
                "migrations": j.migrations,
                "gpuSeconds": j.gpu_seconds,
                "workers": [[t, n, ty] for t, n, ty in j.history],
            }
            for j in res.jobs
        ],
    }


@_app.command()
def simulate(
    files: Annotated[
        Optional[list[Path]], typer.Argument(help="YAML files: nodes (or NodeGroups), queues, jobs, pods…")
    ] = None,  # noqa: UP007
    scheduler: Annotated[str, typer.Option(help="lavaflow or kube-default")] = "lavaflow",
    compare: Annotated[bool, typer.Option("--compare", help="run kube-default and lavaflow side by side")] = False,
    config: Annotated[Optional[Path], typer.Option(help="volcano-scheduler.conf to use")] = None,  # noqa: UP007
    seed: Annotated[int, typer.Option(help="random seed (same seed, same output)")] = 0,
    until: Annotated[Optional[str], typer.Option(help="stop at this simulated time (e.g. 2h)")] = None,  # noqa: UP007
    default_duration: Annotated[str, typer.Option(help="run time of pods without a duration annotation")] = "60s",
    output: Annotated[str, typer.Option(help="table or json")] = "table",
    report: Annotated[Optional[Path], typer.Option(help="write an HTML report here")] = None,  # noqa: UP007
    explain: Annotated[
        Optional[str],
        typer.Option(
            help="NAMESPACE/NAME: print the decision history of one job (Volcano Job, PodGroup, Deployment, ReplicaSet, StatefulSet, batch Job or pod)"
        ),
    ] = None,  # noqa: UP007
    skip_unsupported: Annotated[
        bool,
        typer.Option(
            "--skip-unsupported",
            help="leave out documents of kinds lavaflow does not simulate (listed as warnings) instead of refusing the input",
        ),
    ] = False,
    policy: Annotated[
        Optional[str],
        typer.Option(help="elastic policy for training jobs (elastic.policy): Lavaflow, ElasticSRJF, Tiresias, ..."),
    ] = None,  # noqa: UP007
    compare_policies: Annotated[
        Optional[str], typer.Option(help="run once per elastic policy (comma-separated) and compare them")
    ] = None,  # noqa: UP007
    resize_interval: Annotated[
        Optional[str], typer.Option(help="elastic.resizeInterval: at most one reschedule per interval (default 30s)")
    ] = None,  # noqa: UP007
    resize_cost: Annotated[
        Optional[str],
        typer.Option(
            help="pause of a training job per start/resize/migration, also the policy's elastic.resizeCost (default 30s)"
        ),
    ] = None,  # noqa: UP007
    adaptive_batch: Annotated[
        bool,
        typer.Option(
            "--adaptive-batch",
            help="Pollux traces: every job may co-adapt its batch size (Pollux's goodput model) and run on 1 GPU up to what its largest batch allows",
        ),
    ] = False,
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle",
            help="hand elastic policies the simulator's true speed models (elastic.oracle; ablation only: no real scheduler has them)",
        ),
    ] = False,
    report_period: Annotated[
        str, typer.Option(help="training jobs report their measured speed after this much training (default 30s)")
    ] = "30s",
    report_noise: Annotated[
        float,
        typer.Option(help="relative noise (log-normal sigma) of the speeds training jobs report; seeded by --seed"),
    ] = 0.0,
    node_choice: NodeChoiceOpt = None,
    minimum_feasible_nodes: MinimumFeasibleNodesOpt = None,
    minimum_percentage_nodes_to_find: MinimumPercentageOpt = None,
    percentage_nodes_to_find: PercentageOpt = None,
    shared_profiles: Annotated[
        Optional[bool],  # noqa: UP007
        typer.Option(
            "--shared-profiles/--no-shared-profiles",
            help="jobs of one lavaflow.io/profile-group (a trace's model) learn from each other's measurements "
            "(elastic.sharedProfiles; default: the policy's choice, off for Pollux as its artifact runs it)",
        ),
    ] = None,
    workload: Annotated[Optional[Path], typer.Option(hidden=True, help="deprecated: give the trace as a FILE")] = None,  # noqa: UP007
    sia_artifact: Annotated[
        Optional[Path],  # noqa: UP007
        typer.Option(
            "--sia-artifact",
            metavar="DIR",
            help="a copy of Sia's artifact (github.com/siasosp23/artifacts): Pollux-format CSV traces (Sia's "
            "workloads) run by its tables per GPU type (default: $LAVAFLOW_SIA_ARTIFACT)",
        ),
    ] = None,
    cluster_state: Annotated[
        bool,
        typer.Option(
            "--cluster-state",
            help="with --output json: add a 'cluster' key (nodes, queue limits, pod requests, last training "
            "reports) for `lavaflow dashboard --from`",
        ),
    ] = False,
) -> None:
    """Simulate a workload on a simulated cluster and report what happened."""
    from ..api.sim_annotations import parse_duration

    files = list(files or []) + ([workload] if workload is not None else [])
    if not files:
        raise Invalid(["simulate: give input files (YAML objects, or Pollux / Philly / Gavel CSV traces)"])

    problems = []
    if scheduler not in ("lavaflow", "kube-default"):
        problems.append(f"--scheduler: unknown scheduler {scheduler!r} (choose lavaflow or kube-default)")
    if output not in ("table", "json"):
        problems.append(f"--output: unknown format {output!r} (choose table or json)")
    if report is not None and not _report_available():
        problems.append(
            "--report: HTML reports need matplotlib, which is not installed (pip install 'lavaflow[report]')"
        )
    elif report is not None:
        why = _unwritable(report)
        if why:
            problems.append(f"--report: {report}: {why}")  # (checked before the run, not after it)
    until_s: float | None = None
    dd = 0.0  # (or a problem, raised before it is used)
    try:
        until_s = parse_duration(until) if until is not None else None
    except ValueError as exc:
        problems.append(f"--until: {exc}")
    try:
        dd = parse_duration(default_duration, allow_inf=True)
    except ValueError as exc:
        problems.append(f"--default-duration: {exc}")
    for flag, value in (("--resize-interval", resize_interval), ("--resize-cost", resize_cost)):
        if value is not None:
            try:
                parse_duration(value)
            except ValueError as exc:
                problems.append(f"{flag}: {exc}")
    period_s = 30.0
    try:
        period_s = parse_duration(report_period)
        if not period_s > 0:
            problems.append(f"--report-period: must be longer than 0s, got {report_period!r}")
    except ValueError as exc:
        problems.append(f"--report-period: {exc}")
    choice, choice_problems = node_choice_from_options(
        node_choice, minimum_feasible_nodes, minimum_percentage_nodes_to_find, percentage_nodes_to_find, seed
    )
    problems += choice_problems
    if explain is not None and not explain.strip(" /"):
        problems.append(f"--explain: name a job, as NAMESPACE/NAME or NAME; got {explain!r}")
    if not (report_noise >= 0 and report_noise < 10):
        problems.append(f"--report-noise: must be between 0 and 10 (a log-normal sigma), got {report_noise!r}")
    policies: list[str | None] = [policy]
    if compare_policies is not None or policy is not None:
        from ..elastic.policies import POLICY_NAMES, resolve_name

        raw = (
            [p for p in (compare_policies or "").split(",") if p.strip()]
            if compare_policies is not None
            else [cast(str, policy)]  # (policy is given when compare_policies is not)
        )
        flag = "--compare-policies" if compare_policies is not None else "--policy"
        policies = []
        for p in raw:
            try:
                policies.append(resolve_name(p))
            except KeyError:
                problems.append(f"{flag}: unknown policy {p.strip()!r} (choose from {', '.join(POLICY_NAMES)})")
        if not raw:
            problems.append("--compare-policies: name at least one policy")
        if compare and compare_policies is not None:
            problems.append("--compare and --compare-policies cannot be combined")
    from ..sim.traces import is_trace

    if adaptive_batch and not any(is_trace(f) for f in files):
        problems.append("--adaptive-batch: applies to Pollux trace inputs (CSV files); none was given")
    if sia_artifact is not None:
        problems += _use_sia_artifact(sia_artifact)
    if problems:
        raise Invalid(problems)
    schedulers = ["kube-default", "lavaflow"] if compare else [scheduler]
    tty = sys.stderr.isatty() and output == "table"
    runs = []
    for s in schedulers:
        for pol in policies if s == "lavaflow" else [None]:
            runs.append(
                _run(
                    files,
                    config,
                    s,
                    seed,
                    until_s,
                    dd,
                    tty,
                    pol,
                    resize_interval,
                    resize_cost,
                    skip_unsupported,
                    adaptive_batch,
                    oracle,
                    period_s,
                    report_noise,
                    choice,
                    shared_profiles,
                    cluster_state=cluster_state,
                )
            )
    results = [r for r, _ in runs]
    elastic = [e for _, e in runs if e is not None]
    for w in dict.fromkeys(w for r in results for w in r.get("warnings", [])):
        err.print(f"warning: {w}", markup=False, highlight=False, soft_wrap=True)
    if explain is not None:
        problems = [p for r in results for p in [_explain_problem(r, explain)] if p]
        if len(problems) == len(results):
            raise Invalid([problems[0]])
    if output == "json":
        payload = results[0] if len(results) == 1 else {"results": results}
        sys.stdout.write(jsonout.dumps(payload) + "\n")
    else:
        if compare_policies is None:
            print_results_table(results)
        else:
            out = Console(width=max(Console().width, 100))
            out.print(summary_table(results))
        if elastic:
            from ..elastic.compare import format_table

            out = Console(width=max(Console().width, 100))
            out.print(
                "[bold]elastic training jobs[/bold] (reads work: the policy reads jobs' remaining work, clairvoyant; "
                "oracle: the policy was handed the true speed models, which no real scheduler has; "
                "shares: jobs of one model learned from each other's reports)"
            )
            out.print(format_table(elastic), markup=False, highlight=False)
    if explain is not None and output == "table":
        for r in results:
            _print_explanation(r, explain)
    if report is not None:
        try:
            if elastic and compare_policies is not None:
                from ..report.elastic import write_report as write_elastic_report

                write_elastic_report(elastic, report)
            else:
                from ..report.simulation import write_report

                write_report(results, report)
        except OSError as exc:
            raise Invalid([f"--report: {report}: cannot write ({exc.strerror or exc})"]) from None
        if output == "table":
            err.print(f"report written to {report}")
    from .quick_exit import exit_now

    # Everything is written: leave without the interpreter freeing the run's objects one by one
    # (~0.25 s after a 160-job trace replay, more after larger runs).
    exit_now()


def _report_available() -> bool:
    from ..report import available

    return available()


def _find_job(result: dict[str, Any], target: str) -> tuple[dict[str, Any] | None, str | None]:
    """The job record and its PodGroup key for NAMESPACE/NAME (a Volcano Job or a PodGroup)."""
    ns, _, name = target.rpartition("/")
    ns = ns or "default"
    job = next((j for j in result["jobs"] if j["namespace"] == ns and j["name"] == name), None)
    if job is None:
        # A Deployment, ReplicaSet, StatefulSet or batch Job: the PodGroup made for it.
        job = next(
            (j for j in result["jobs"] if j["namespace"] == ns and j.get("owner", "").split("/", 1)[-1] == name), None
        )
    if job is None:
        # A pod: the job it belongs to.
        pod = next((p for p in result["pods"] if p["namespace"] == ns and p["name"] == name and p["job"]), None)
        if pod is not None:
            job = next((j for j in result["jobs"] if j["namespace"] == ns and j["name"] == pod["job"]), None)
    if job is None:
        return None, None
    if job.get("kind") == "PodGroup":
        return job, f"{ns}/{name}"
    pg = next((g for g in result["podGroups"] if g["namespace"] == ns and g["name"].startswith(name + "-")), None)
    return job, (f"{ns}/{pg['name']}" if pg else None)


def _explain_problem(result: dict[str, Any], target: str) -> str | None:
    job, _ = _find_job(result, target)
    if job is None:
        known = ", ".join(
            f"{j['namespace']}/{j.get('owner', j['name']).split('/', 1)[-1]}" for j in result["jobs"][:10]
        )
        return f"--explain: no job {target!r} in the simulation (jobs: {known or 'none'})"
    return None


def _print_explanation(result: dict[str, Any], target: str) -> None:
    out = Console(width=max(Console().width, 100))
    job, pg_key = _find_job(result, target)
    if job is None:
        return
    owner = f" ({job['owner']})" if job.get("owner") else ""
    out.print(f"[bold]{result['scheduler']}: why {job['namespace']}/{job['name']}{owner} did what it did[/bold]")
    rows: list[tuple[float, str, str]] = []
    for h in job.get("phaseHistory", []):
        rows.append((h["time"], "phase", f"job is {h['phase']}"))
    if job.get("kind") == "PodGroup":
        rows.append((job["submitTime"], "submit", "PodGroup created"))
    for d in result.get("decisions", {}).get(pg_key or "", []):
        span = "" if d["until"] == d["time"] else f" (repeated until t={fmt_time(d['until'])})"
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
        t.add_row(fmt_time(time), what, detail)
    out.print(t)
    stuck = next((s for s in result["stuck"] if s["namespace"] == job["namespace"] and s["name"] == job["name"]), None)
    if stuck:
        out.print(f"still waiting: {stuck['reason']}", markup=False, highlight=False)


_app.command("sweep")(sweep_cmd)


@_app.command()
def version() -> None:
    """Print the version."""
    from .. import __version__

    typer.echo(__version__)


def _report_invalid(exc: Invalid) -> None:
    for p in exc.problems:
        err.print(f"error: {p}", markup=False, highlight=False, soft_wrap=True)


# Cluster commands (scheduler, controller, webhook, install, dashboard, job, queue, train) live in
# processes.py, install.py, dashboard.py, vcctl.py and train.py; importing them (asyncio, aiohttp, the Kubernetes client) and building their
# typer commands costs more than a simulation's start-up, so `lavaflow simulate` and
# `lavaflow version` run without them and everything else adds them first.
LOCAL_COMMANDS = ("simulate", "sweep", "forecast", "version")
_kube_registered = False
_forecast_registered = False


def _with_forecast() -> None:
    """Add `forecast` where the help lists it, between `sweep` and `version`. Only the runs that
    may need it add it: typer builds every registered command's options on each run, and
    `forecast`'s cost 2 % of `lavaflow version` and of a small simulation's start-up. (Its
    module is light: the cluster's client is imported only for a cluster.)"""
    global _forecast_registered
    if not _forecast_registered:
        _app.command("forecast")(forecast_cmd)
        commands = _app.registered_commands
        commands.insert(next(i for i, c in enumerate(commands) if c.callback is version), commands.pop())
        _forecast_registered = True


def _with_kube_commands() -> typer.Typer:
    global _kube_registered
    _with_forecast()
    if not _kube_registered:
        from .dashboard import dashboard_cmd
        from .install import install_cmd
        from .processes import controller_cmd, scheduler_cmd, webhook_cmd
        from .train import train_app
        from .vcctl import job_app, queue_app

        _app.command("scheduler")(scheduler_cmd)
        _app.command("controller")(controller_cmd)
        _app.command("webhook")(webhook_cmd)
        _app.command("install")(install_cmd)
        _app.command("dashboard")(dashboard_cmd)
        _app.add_typer(job_app, name="job")
        _app.add_typer(queue_app, name="queue")
        _app.add_typer(train_app, name="train")
        _kube_registered = True
    return _app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `lavaflow.cli.app`: the app with every command
        return _with_kube_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point: usage errors and invalid input exit with 2, never with a traceback."""
    if len(sys.argv) < 2 or sys.argv[1] not in LOCAL_COMMANDS:
        _with_kube_commands()
    elif sys.argv[1] == "forecast":
        _with_forecast()
    elif sys.argv[1] == "simulate":
        gc.set_threshold(*BATCH_GC_THRESHOLDS)
    try:
        _app()
    except Invalid as exc:
        _report_invalid(exc)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
