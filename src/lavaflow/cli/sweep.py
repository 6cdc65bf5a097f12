"""`lavaflow sweep SPEC.yaml`: a grid (or list) of simulations, on a local process pool or a Ray
cluster, each run kept in the output folder under its key so that a sweep resumes where it
stopped; then one tidy table (CSV, and Parquet when pyarrow is there) and an HTML report.

Every run goes through `lavaflow simulate`'s own path (``main._run``). Its files travel with it
by content, so a Ray worker on another machine needs lavaflow installed and nothing else.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Optional, cast

import typer

# the figures of a run, in the table's order: the simulation's summary, then the elastic one's
SUMMARY_FIGURES = (
    ("jobs", "jobs"),
    ("completed", "completed"),
    ("failed", "failed"),
    ("stuck", "stuck"),
    ("makespan", "makespan"),
    ("jctMean", "jct_mean"),
    ("jctP50", "jct_p50"),
    ("jctP95", "jct_p95"),
    ("waitMean", "wait_mean"),
    ("waitP50", "wait_p50"),
    ("waitP95", "wait_p95"),
    ("cpuAllocationMean", "cpu_allocation_mean"),
    ("gpuAllocationMean", "gpu_allocation_mean"),
)
ELASTIC_FIGURES = (
    "avg_jct",
    "p50_jct",
    "p99_jct",
    "makespan",
    "gpu_utilization",
    "resizes",
    "halts",
    "migrations",
    "reschedules",
    "gpu_hours_per_job",
    "gpus",
    "clairvoyant",
    "oracle",
    "shared_profiles",
)
FIGURES = [name for _, name in SUMMARY_FIGURES] + ["stalled", "end_time"] + [f"elastic_{n}" for n in ELASTIC_FIGURES]
AXES_FIRST = ("input", "load", "cluster", "config", "policy")


def _figures(result: dict[str, Any], elastic: Any) -> dict[str, Any]:
    s = result.get("summary", {})
    out: dict[str, Any] = {name: s.get(k) for k, name in SUMMARY_FIGURES}
    out["stalled"] = bool(result.get("stalled"))
    out["end_time"] = result.get("endTime")
    if elastic is not None:
        es = elastic.summary()
        out.update({f"elastic_{n}": es.get(n) for n in ELASTIC_FIGURES})
    return out


_gc_set = False


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    """One run, in whatever process it lands in: its files are written to a temporary folder under
    their own names, simulated through `lavaflow simulate`'s path, and summed up as a record. It
    never raises for a run that fails: the record says ``failed`` and why."""
    import tempfile
    import traceback

    from .. import __version__
    from ..api.sim_annotations import parse_duration
    from .main import Invalid, _run

    global _gc_set
    if not _gc_set:
        import gc

        from ..sim import BATCH_GC_THRESHOLDS

        gc.set_threshold(*BATCH_GC_THRESHOLDS)  # as `lavaflow simulate` sets it
        _gc_set = True
    c0, w0 = time.process_time(), time.perf_counter()
    record: dict[str, Any] = {"key": task["key"], "axes": task["axes"], "lavaflow": __version__}
    with tempfile.TemporaryDirectory(prefix="lavaflow-sweep-") as tmp:
        names: dict[str, str] = {}
        paths = []
        for i, (name, data) in enumerate(task["files"]):
            p = Path(tmp, str(i), Path(name).name)
            p.parent.mkdir()
            p.write_bytes(data)
            names[str(p)] = name
            paths.append(p)
        config = None
        if task["config"] is not None:
            name, data = task["config"]
            config = Path(tmp, "config", Path(name).name)
            config.parent.mkdir()
            config.write_bytes(data)
            names[str(config)] = name
        st = task["settings"]
        try:
            until = parse_duration(st["until"]) if st["until"] is not None else None
            result, elastic = _run(
                paths,
                config,
                "lavaflow",
                task["seed"],
                until,
                parse_duration(st["default_duration"], allow_inf=True),
                False,
                task["policy"],
                st["resize_interval"],
                st["resize_cost"],
                False,
                bool(st["adaptive_batch"]),
                bool(st["oracle"]),
                parse_duration(st["report_period"]),
                float(st["report_noise"]),
                None,
                st["shared_profiles"],
                task["params"],
            )
            record["status"] = "ok"
            record["figures"] = _figures(result, elastic)
            record["warnings"] = list(dict.fromkeys(result.get("warnings", [])))
        except Invalid as exc:
            record["status"] = "failed"
            record["error"] = _unmask("; ".join(exc.problems), names)
        except Exception as exc:  # a run that breaks is recorded, the sweep goes on
            record["status"] = "failed"
            record["error"] = _unmask(f"{type(exc).__name__}: {exc}", names)
            record["traceback"] = _unmask(traceback.format_exc(), names)
    record["cpu_seconds"] = time.process_time() - c0
    record["wall_seconds"] = time.perf_counter() - w0
    record["host"] = os.uname().nodename
    record["pid"] = os.getpid()
    return record


def _unmask(text: str, names: dict[str, str]) -> str:
    """Temporary file names in a message put back as the sweep names them."""
    for tmp, name in names.items():
        text = text.replace(tmp, name)
    return text


# ---------------------------------------------------------------------------- where runs run


def _failed(task: dict[str, Any], error: str) -> dict[str, Any]:
    from .. import __version__

    return {
        "key": task["key"],
        "axes": task["axes"],
        "lavaflow": __version__,
        "status": "failed",
        "error": error,
        "cpu_seconds": None,
        "wall_seconds": None,
    }


def local_records(
    tasks: list[dict[str, Any]], jobs: int, fn: Callable[[dict[str, Any]], dict[str, Any]] = run_one
) -> Iterator[dict[str, Any]]:
    """Records as runs finish on a pool of ``jobs`` processes (in this process when 1). When a
    worker dies (out of memory, killed), the runs the pool had in flight are run again one by one,
    each in a process of its own: the one that kills its process again is recorded as failed, the
    others give their results, and the pool starts again for the rest."""
    if jobs <= 1:
        for t in tasks:
            yield fn(t)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    # workers forked from a clean server process, not from this one (whose progress bar has a thread)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lavaflow.cli.sweep"])
    pending = list(reversed(tasks))
    suspects: list[dict[str, Any]] = []
    while pending or suspects:
        if suspects:
            t = suspects.pop()
            with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as alone:
                try:
                    yield alone.submit(fn, t).result()
                except BrokenProcessPool:
                    yield _failed(t, "the worker process died running it (out of memory, or killed)")
                except Exception as exc:
                    yield _failed(t, f"{type(exc).__name__}: {exc}")
            continue
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
            running: dict[Any, dict[str, Any]] = {}
            try:
                while pending or running:
                    # a few runs queued per worker: results stream back, an interrupt leaves little behind
                    while pending and len(running) < 2 * jobs:
                        t = pending.pop()
                        running[ex.submit(fn, t)] = t
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                        suspects = list(reversed(running.values()))
                        break
                    for fut in done:
                        t = running.pop(fut)
                        try:
                            yield fut.result()
                        except Exception as exc:
                            yield _failed(t, f"{type(exc).__name__}: {exc}")
            finally:
                for fut in running:
                    fut.cancel()


def _unreachable(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing can answer at a Ray cluster's ``host:port`` (or ``ray://host:port``), or None.
    Ray itself retries an address that does not answer for a long while before it gives up; a
    wrong address is told at once instead. Other forms (``local``) are left to Ray."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({exc.strerror or type(exc).__name__})"


def ray_records(tasks: list[dict[str, Any]], address: str, jobs: int | None) -> Iterator[dict[str, Any]]:
    """Records as runs finish, each run a Ray task (one CPU). ``address``: ``auto`` (the Ray
    instance already started in this process, else the cluster RAY_ADDRESS or a running local
    instance names, else a new local instance of ``jobs`` CPUs), or a cluster's address."""
    try:
        import ray
    except ImportError:
        from .main import Invalid

        raise Invalid(["--ray: Ray is not installed (pip install 'lavaflow[ray]')"]) from None
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False}
        from .main import Invalid

        if address != "auto":
            problem = _unreachable(address)
            if problem is not None:
                raise Invalid([f"--ray: {address}: {problem}"])
            kw["address"] = address
        elif jobs is not None and not os.environ.get("RAY_ADDRESS"):
            kw["num_cpus"] = jobs

        try:
            try:
                ray.init(**kw)
            except ValueError:  # a running local instance was found: its CPUs are what they are
                if "num_cpus" not in kw:
                    raise
                del kw["num_cpus"]
                ray.init(**kw)
        except Exception as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise Invalid([f"--ray: {address}: cannot start or reach Ray ({why})"]) from None
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=1)(run_one)
        refs = {remote.remote(t): t for t in tasks}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                t = refs.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # the task or its worker died: recorded, the sweep goes on
                    yield _failed(t, f"Ray: {type(exc).__name__}: {str(exc).strip().splitlines()[-1]}")
    finally:
        if started:
            ray.shutdown()


# ---------------------------------------------------------------------------- the output folder


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # a run's record appears whole or not at all


def read_record(runs_dir: Path, key: str) -> dict[str, Any] | None:
    try:
        return cast("dict[str, Any]", json.loads((runs_dir / f"{key}.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def table_rows(records: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The tidy table: one row per run (sorted by key) with its key, status, axes and every summary
    figure, then its error. Timings are left out: the table depends on the sweep alone."""
    from .sweep_spec import SETTING_DEFAULTS

    axis_cols: list[str] = []
    for r in records:
        for a in r["axes"]:
            if a not in axis_cols:
                axis_cols.append(a)
    axis_cols = [a for a in AXES_FIRST if a in axis_cols] + sorted(
        (a for a in axis_cols if a not in AXES_FIRST and a != "seed"), key=lambda a: (not a.startswith("param."), a)
    )
    axis_cols.append("seed")
    seen_figs = {f for r in records for f in (r.get("figures") or {})}
    fig_cols = [f for f in FIGURES if f in seen_figs]
    header = ["key", "status", *axis_cols, *fig_cols, "error"]
    rows = []
    for r in sorted(records, key=lambda r: r["key"]):
        row = {"key": r["key"], "status": r["status"]}
        # a setting some runs vary and this one left alone has its default
        row.update({a: r["axes"].get(a, SETTING_DEFAULTS.get(a)) for a in axis_cols})
        figs = r.get("figures") or {}
        row.update({f: figs.get(f) for f in fig_cols})
        row["error"] = r.get("error")
        rows.append(row)
    return header, rows


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_tables(header: list[str], rows: list[dict[str, Any]], out: Path) -> list[str]:
    """results.csv, and results.parquet when pyarrow can be imported; returns notes to print."""
    import csv

    tmp = out / "results.csv.tmp"
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow([_cell(row[c]) for c in header])
    os.replace(tmp, out / "results.csv")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return ["pyarrow is not installed: results.parquet not written (pip install pyarrow); results.csv has it all"]
    cols = {c: [row[c] for row in rows] for c in header}
    for c, vals in cols.items():  # a column mixing types (e.g. a param of int and str values) as text
        kinds = {type(v) for v in vals if v is not None}
        if len(kinds) > 1 and kinds != {int, float}:
            cols[c] = [None if v is None else str(v) for v in vals]
        elif kinds == {int, float}:
            cols[c] = [None if v is None else float(v) for v in vals]
    pq.write_table(pa.table(cols), out / "results.parquet")
    return []


# ---------------------------------------------------------------------------- progress


class _Progress:
    """A rich progress bar on stderr when it is a terminal (runs done, failed, ETA); else one line
    per finished run, for logs."""

    def __init__(self, total: int, skipped: int) -> None:
        from .main import err

        self.err = err
        self.total, self.done, self.failed = total, 0, 0
        self.bar = None
        if sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("[bold]sweep[/bold]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("runs · [red]{task.fields[failed]} failed[/red] · elapsed"),
                TimeElapsedColumn(),
                TextColumn("· ETA"),
                TimeRemainingColumn(),
                console=err,
                transient=False,
            )
            self.bar.start()
            self.tid = self.bar.add_task("sweep", total=total, failed=0)

    def update(self, rec: dict[str, Any]) -> None:
        self.done += 1
        ok = rec["status"] == "ok"
        self.failed += not ok
        what = " ".join(f"{k}={v}" for k, v in rec["axes"].items() if v is not None)
        if not ok:
            self.err.print(
                f"run {rec['key']} failed ({what}): {rec.get('error')}", markup=False, highlight=False, soft_wrap=True
            )
        if self.bar is not None:
            self.bar.update(self.tid, completed=self.done, failed=self.failed)
        elif ok:
            cpu = rec.get("cpu_seconds")
            self.err.print(
                f"[{self.done}/{self.total}] ok {rec['key']} ({what}){f' {cpu:.1f}s CPU' if cpu else ''}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------------------- the command


def sweep(
    spec_path: Path,
    output_dir: Path | None = None,
    jobs: int | None = None,
    ray: str | None = None,
    report: bool = True,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
) -> int:
    """Run a sweep; returns the exit code (0: every run ok, 1: some failed)."""
    from .. import __version__
    from .main import Invalid, _unwritable, err
    from .sweep_spec import SpecError, expand, read_spec

    problems = []
    if jobs is not None and jobs < 1:
        problems.append(f"--jobs: at least 1, got {jobs}")
    if ray is not None and not ray.strip():
        problems.append("--ray: give auto or a cluster's address (ray://HOST:10001, HOST:6379)")
    elif ray is not None and not dry_run:
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            problems.append("--ray: Ray is not installed (pip install 'lavaflow[ray]')")
    out = output_dir if output_dir is not None else Path(f"{spec_path.stem}-sweep")
    if out.exists() and not out.is_dir():
        problems.append(f"--output-dir: {out}: is not a directory")
    elif not out.exists():
        why = _unwritable(out)
        if why and why != "is a directory":
            problems.append(f"--output-dir: {out}: {why}")
    if problems:
        raise Invalid(problems)
    try:
        spec = read_spec(spec_path)
        runs, warnings, contents = expand(spec, spec_path)
    except SpecError as exc:
        raise Invalid(exc.problems) from None
    for w in warnings:
        err.print(f"warning: {w}", markup=False, highlight=False, soft_wrap=True)
    runs_dir = out / "runs"
    done = {}
    for r in runs:
        rec = read_record(runs_dir, r.key)
        if rec is not None and rec.get("status") == "ok":
            done[r.key] = rec
    todo = [r for r in runs if r.key not in done]
    n = jobs or os.cpu_count() or 1
    where = f"Ray ({ray})" if ray is not None else "this process" if n == 1 else f"{n} local processes"
    err.print(
        f"sweep {spec.name or spec_path.stem}: {len(runs)} runs, {len(done)} already done, {len(todo)} to run"
        + (f" on {where}" if todo else "")
        + f"; results in {out}/",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if dry_run:
        for r in runs:
            what = " ".join(f"{k}={v}" for k, v in r.axes.items() if v is not None)
            echo(f"{r.key}  {'done' if r.key in done else 'todo'}  {what}")
        return 0
    runs_dir.mkdir(parents=True, exist_ok=True)
    if spec_path.resolve() != (out / "sweep.yaml").resolve():
        (out / "sweep.yaml").write_bytes(spec_path.read_bytes())  # what produced these results
    records = dict(done)
    progress = _Progress(len(todo), len(done))
    t0 = time.perf_counter()
    interrupted = False
    try:
        if todo:
            tasks = [r.task(contents) for r in todo]
            stream = (
                ray_records(tasks, ray, jobs) if ray is not None else local_records(tasks, jobs or os.cpu_count() or 1)
            )
            for rec in stream:
                if rec.get("lavaflow") != __version__ and rec["status"] == "ok":
                    # a Ray worker with another lavaflow: its figures would be filed under this one's key
                    rec["status"] = "failed"
                    rec["error"] = f"the worker runs lavaflow {rec.get('lavaflow')}, this sweep {__version__}"
                    rec.pop("figures", None)
                _write_json(runs_dir / f"{rec['key']}.json", rec)
                records[rec["key"]] = rec
                progress.update(rec)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.close()
    if interrupted:
        err.print(
            f"interrupted: {len(records)} of {len(runs)} runs are kept in {runs_dir}/; run the same command to resume",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 130
    header, rows = table_rows(list(records.values()))
    for note in write_tables(header, rows, out):
        err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    wrote = [str(out / "results.csv")] + ([str(out / "results.parquet")] if (out / "results.parquet").exists() else [])
    if report:
        from ..report import available

        if available():
            from ..report.sweep import write_report

            write_report(rows, header, out / "report.html", title=f"lavaflow sweep: {spec.name or spec_path.stem}")
            wrote.append(str(out / "report.html"))
        else:
            err.print("note: the HTML report needs matplotlib (pip install 'lavaflow[report]')", markup=False)
    failed = [r for r in rows if r["status"] != "ok"]
    cpu = sum(rec.get("cpu_seconds") or 0 for k, rec in records.items() if k not in done)
    err.print(
        f"{len(runs)} runs: {len(todo)} ran ({len(todo) - len(failed)} ok, {len(failed)} failed), "
        f"{len(done)} skipped (done before); "
        f"{time.perf_counter() - t0:.1f}s wall, {cpu:.1f}s CPU in the runs; wrote {', '.join(wrote)}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 1 if failed else 0


def sweep_cmd(
    spec: Annotated[Path, typer.Argument(help="the sweep file (YAML; see docs/sweeps.md)")],
    output_dir: Annotated[
        Optional[Path],  # noqa: UP007
        typer.Option("--output-dir", "-o", help="where runs, results.csv and report.html go (default: SPEC-sweep/)"),
    ] = None,
    jobs: Annotated[
        Optional[int],  # noqa: UP007
        typer.Option(
            "--jobs",
            "-j",
            help="local processes (default: the CPU count); with --ray auto, a new local Ray instance's CPUs",
        ),
    ] = None,
    ray: Annotated[
        Optional[str],  # noqa: UP007
        typer.Option(
            help="run each simulation as a Ray task: auto (a running or new local instance) or a cluster address"
        ),
    ] = None,
    report: Annotated[bool, typer.Option("--report/--no-report", help="write report.html")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list the runs and which are done; run nothing")] = False,
) -> None:
    """Run a grid of simulations (inputs × loads × clusters × configurations × policies × parameters
    × seeds), resumable; write a tidy table and an HTML report."""
    code = sweep(spec, output_dir, jobs, ray, report, dry_run, echo=typer.echo)
    raise typer.Exit(code)
