"""What running a sweep on Ray costs against the local process pool (issue 39).

Runs one study twice through `lavaflow sweep`'s own code: on the local pool (``--jobs W``), then as
Ray tasks on a local Ray instance of W CPUs started here; checks both give the same table, and
prints per run: its CPU time (inside the task), the wall time of each path per run, and each path's
overhead: the CPU it spent beyond the runs' own (the pool's processes and pickling; Ray's driver,
raylet, GCS and workers, Ray's start-up reported apart), per run, as a % of a run's CPU.

Usage: python benchmarks/sweep_overhead.py [--policies Pollux,Tiresias] [--workloads 1,2] [--loads 1.0]
           [--seeds 2] [--workers 2] [--noise 0.05] [--repeat 2] [--keep DIR]

The full study of issue 39 is examples/sweeps/pollux-study.yaml (13 policy rows x 8 workloads x
4 loads x 5 seeds = 2,080 replays, hours of CPU per path). Too long to pair pass by pass on a shared
machine, it runs one path at a time, resumable, each invocation's CPU kept in a ledger:

    python benchmarks/sweep_overhead.py --spec examples/sweeps/pollux-study.yaml --keep DIR --only local
    python benchmarks/sweep_overhead.py --spec examples/sweeps/pollux-study.yaml --keep DIR --only ray
    python benchmarks/sweep_overhead.py --keep DIR --summary

A path runs one input file at a time (a chunk: 260 runs of the study); `--until HH:MM` (UTC) starts
no chunk that would end after that time. An interrupted path is run again with the same command: the
sweep skips its finished runs, and the ledger (DIR/ledger-PATH.jsonl, one line per chunk) counts, per
chunk, the runs it ran, their CPU and the CPU of the whole process tree, so the overhead per run sums
over chunks and invocations (Ray's start-up, once per invocation, on its first chunk's line, apart).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and every process below it, from /proc: each live
    process's own and that of the children it has reaped (a process pool's workers are children of
    its fork server, which outlives them, so our own rusage never sees them)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parent[int(d)] = int(fields[1])
        cpu[int(d)] = sum(int(f) for f in fields[11:15]) / TICK  # utime, stime, cutime, cstime
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier += kids
    return sum(cpu.get(p, 0.0) for p in tree)


def _runs_cpu(out: Path) -> list[float]:
    import json

    return [json.loads(p.read_text())["cpu_seconds"] for p in sorted((out / "runs").glob("*.json"))]


def _run_files(out: Path) -> set[str]:
    return {p.name for p in (out / "runs").glob("*.json")} if (out / "runs").is_dir() else set()


def _chunks(spec: Path, base: Path) -> list[Path]:
    """The study cut by input file: one sweep file per input, each with the study's other axes (the
    runs' keys do not depend on the file that names them, so a chunk's runs are the study's)."""
    import yaml

    from lavaflow.cli.sweep_spec import expand, read_spec

    runs, _warnings, _contents = expand(read_spec(spec), spec)
    names = list(dict.fromkeys(r.axes["input"] for r in runs))
    doc = yaml.safe_load(spec.read_text())
    folder = base / "chunks"
    folder.mkdir(exist_ok=True)
    out = []
    for i, name in enumerate(names):
        part = dict(doc, name=f"{doc.get('name', 'study')}-part{i + 1}", inputs=[name])
        path = folder / f"part{i + 1}.yaml"
        path.write_text(yaml.safe_dump(part, sort_keys=False))
        out.append(path)
    return out


def _one_path(args, spec: Path, base: Path) -> None:
    """Run one path of the study (``--only``), resuming, one input file at a time (``--until``: no
    new chunk once the estimate says it would end after that time); append what each chunk cost to
    the ledger. Ray is started once per invocation, its start-up on the first chunk's line."""
    import json
    import signal

    import ray

    from lavaflow.cli.sweep import sweep

    def _stop(_sig, _frame):  # a SIGTERM (a session's end) stops the sweep as Ctrl-C does, ledger written
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    out = base / args.only
    quiet = lambda _line: None  # noqa: E731
    sweep(spec, base / "warm", dry_run=True, echo=quiet)  # imports and file reads out of the measurement
    deadline = None
    if args.until:
        hh, mm = (int(x) for x in args.until.split(":"))
        now = time.gmtime()
        deadline = time.time() + ((hh * 60 + mm) - (now.tm_hour * 60 + now.tm_min)) * 60 - now.tm_sec
    me = os.getpid()
    start: dict = {}
    # Ray starts its workers at nice 15 (its worker_niceness), behind anything else on the machine;
    # the pool's workers run at 0: the same priority for both paths.
    os.environ.setdefault("RAY_worker_niceness", "0")
    if args.only == "ray":
        c0, w0 = _tree_cpu(me), time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
        c1, w1 = _tree_cpu(me), time.perf_counter()
        time.sleep(3.0)
        c2, w2 = _tree_cpu(me), time.perf_counter()
        start = {"start_cpu": c1 - c0, "start_wall": w1 - w0, "idle_rate": (c2 - c1) / (w2 - w1)}
    last_wall = None
    try:
        for part in _chunks(spec, base) + [spec]:  # the whole study last: its table (nothing left to run)
            if part != spec and deadline is not None and time.time() + (last_wall or 0.0) > deadline:
                print(f"--until {args.until}: stopping before {part.name}; run the same command to go on")
                break
            before = _run_files(out)
            entry: dict = {
                "path": args.only,
                "chunk": part.name,
                "loadavg_before": os.getloadavg()[0],
                "nice": os.nice(0),
                "workers": args.workers,
                **start,
            }
            start = {}
            c0, w0 = _tree_cpu(me), time.perf_counter()
            code = None
            try:
                code = sweep(
                    part, out, jobs=args.workers, ray="auto" if args.only == "ray" else None, report=False, echo=print
                )
            finally:
                c3, w3 = _tree_cpu(me), time.perf_counter()
                new = sorted(_run_files(out) - before)
                runs_cpu = [json.loads((out / "runs" / n).read_text()).get("cpu_seconds") or 0.0 for n in new]
                entry.update(
                    exit=code,
                    runs=len(new),
                    runs_cpu=sum(runs_cpu),
                    tree_cpu=c3 - c0,
                    wall=w3 - w0,
                    loadavg_after=os.getloadavg()[0],
                    ended=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                )
                with open(base / f"ledger-{args.only}.jsonl", "a") as f:
                    f.write(json.dumps(entry) + "\n")
                print(json.dumps(entry), flush=True)
            if code == 130:  # interrupted (Ctrl-C, SIGTERM): the sweep kept what finished
                break
            if entry["runs"]:
                last_wall = entry["wall"]
    finally:
        if args.only == "ray":
            ray.shutdown()


def _summary(base: Path) -> None:
    import json

    rows = {}
    for which in ("local", "ray"):
        led = base / f"ledger-{which}.jsonl"
        if not led.exists():
            print(f"{which}: no ledger")
            continue
        every = [json.loads(line) for line in led.read_text().splitlines() if line.strip()]
        # An interrupted invocation (exit None or 130: stopped by a signal) ran runs whose tables
        # count, but its pool workers may have died unreaped, their CPU unseen: its overhead is not
        # counted.
        es = [e for e in every if e.get("exit") not in (None, 130)]
        cut = [e for e in every if e.get("exit") in (None, 130)]
        if cut:
            print(
                f"{which}: {len(cut)} interrupted invocation(s), {sum(e['runs'] for e in cut)} runs: "
                "in the table, not in the overhead"
            )
        n = sum(e["runs"] for e in es)
        if not n:
            print(f"{which}: no runs")
            continue
        runs_cpu, tree, wall = (sum(e[k] for e in es) for k in ("runs_cpu", "tree_cpu", "wall"))
        total = len(_run_files(base / which))
        over = (tree - runs_cpu) / n
        rows[which] = (n, runs_cpu / n, over, wall, es)
        start = sum(e.get("start_cpu", 0.0) for e in es)
        idle = ", ".join(f"{e['idle_rate']:.3f}" for e in es if "idle_rate" in e)
        loads = ", ".join(f"{e['loadavg_before']:.1f}->{e['loadavg_after']:.1f}" for e in es)
        print(
            f"{which}: {len(es)} ledger line(s), {n} runs measured ({total} in the folder), CPU per run inside the task "
            f"{runs_cpu / n:.2f} s, wall {wall / 3600:.2f} h ({wall / n:.2f} s per run), overhead per run "
            f"{over:.3f} s = {100 * over / (runs_cpu / n):.2f} % of a run's CPU"
            + (
                f"; Ray start-up {start:.1f} s CPU in all ({100 * (over + start / n) / (runs_cpu / n):.2f} % with it); "
                f"idle {idle} CPU-s/s"
                if which == "ray"
                else ""
            )
        )
        print(f"  loadavg per ledger line: {loads}; nice {sorted({e['nice'] for e in es})}")
    tables = [base / w / "results.csv" for w in ("local", "ray")]
    counts = [len(_run_files(base / w)) for w in ("local", "ray")]
    if counts[0] != counts[1]:
        print(f"tables not compared: {counts[0]} runs kept on the pool path, {counts[1]} on Ray (a path not finished)")
    elif all(t.exists() for t in tables):
        same = tables[0].read_bytes() == tables[1].read_bytes()
        print(f"tables identical (local vs Ray, byte for byte): {'yes' if same else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=None, help="a sweep file to run instead of the one built from the options below")
    ap.add_argument("--only", choices=("local", "ray"), default=None, help="run one path, resuming in --keep DIR")
    ap.add_argument("--summary", action="store_true", help="print the figures of the --only runs kept in --keep DIR")
    ap.add_argument("--policies", default="Pollux,Tiresias")
    ap.add_argument("--workloads", default="1,2", help="Pollux workload numbers")
    ap.add_argument("--loads", default="1.0", help="Pollux load variants")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="local processes, and the local Ray instance's CPUs")
    ap.add_argument("--noise", type=float, default=0.05, help="report noise, so that seeds differ")
    ap.add_argument("--repeat", type=int, default=2, help="passes, alternating which path goes first")
    ap.add_argument("--until", default=None, help="with --only: start no chunk that would end after HH:MM UTC")
    ap.add_argument("--keep", default=None, help="keep the sweep folders here (default: a temporary folder)")
    args = ap.parse_args()
    if args.only or args.summary:
        if not args.keep:
            ap.error("--only and --summary need --keep DIR")
        base = Path(args.keep)
        base.mkdir(parents=True, exist_ok=True)
        if args.summary:
            _summary(base)
            return
        if not args.spec:
            ap.error("--only needs --spec")
        spec = base / "study.yaml"
        if not spec.exists():
            spec.write_text(Path(args.spec).read_text())
        _one_path(args, spec, base)
        return

    import ray

    from lavaflow.cli.sweep import sweep

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sweep-overhead-"))
    base.mkdir(parents=True, exist_ok=True)
    spec = base / "study.yaml"
    spec.write_text(
        "name: sweep-overhead\n"
        f"inputs: [{', '.join(f'pollux/workloads/workload-{w.strip()}.csv' for w in args.workloads.split(','))}]\n"
        f"loads: [{args.loads}]\n"
        f"policies: [{args.policies}]\n"
        f"seeds: {args.seeds}\n"
        f"settings: {{report_noise: {args.noise}}}\n"
    )
    print(
        f"# {args.policies} x workloads {args.workloads} x loads {args.loads} x {args.seeds} seeds; "
        f"{args.workers} workers; python {sys.version.split()[0]}, ray {ray.__version__}, nproc {os.cpu_count()}, "
        f"loadavg {os.getloadavg()[0]:.2f} before",
        flush=True,
    )
    quiet = lambda _line: None  # noqa: E731
    sweep(spec, base / "warm", dry_run=True, echo=quiet)  # imports and file reads out of the measurement
    me = os.getpid()

    def local_pass(out: Path) -> dict:
        c0, w0 = _tree_cpu(me), time.perf_counter()
        assert sweep(spec, out, jobs=args.workers, report=False, echo=quiet) == 0
        wall, cpu = time.perf_counter() - w0, _tree_cpu(me) - c0
        runs = _runs_cpu(out)
        return {"wall": wall, "runs": runs, "over": (cpu - sum(runs)) / len(runs)}

    os.environ.setdefault("RAY_worker_niceness", "0")  # as the pool's workers (see _one_path)

    def ray_pass(out: Path) -> dict:
        c0, w0 = _tree_cpu(me), time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
        c1, w1 = _tree_cpu(me), time.perf_counter()
        try:
            time.sleep(3.0)  # what the Ray processes take doing nothing
            c2, w2 = _tree_cpu(me), time.perf_counter()
            assert sweep(spec, out, ray="auto", report=False, echo=quiet) == 0
            c3, w3 = _tree_cpu(me), time.perf_counter()
        finally:
            ray.shutdown()
        runs = _runs_cpu(out)
        return {
            "wall": w3 - w2,
            "runs": runs,
            "over": (c3 - c2 - sum(runs)) / len(runs),
            "start_wall": w1 - w0,
            "start_cpu": c1 - c0,
            "idle_rate": (c2 - c1) / (w2 - w1),
        }

    tables = []
    for rep in range(args.repeat):
        order = ["local", "ray"] if rep % 2 == 0 else ["ray", "local"]
        got = {}
        for which in order:
            out = base / f"{which}-{rep}"
            got[which] = local_pass(out) if which == "local" else ray_pass(out)
            tables.append((out / "results.csv").read_bytes())
        loc, ray_ = got["local"], got["ray"]
        n = len(loc["runs"])
        run_cpu = sum(loc["runs"]) / n
        ray_cpu = sum(ray_["runs"]) / n
        print(f"pass {rep + 1} ({' then '.join(order)}), {n} runs, loadavg {os.getloadavg()[0]:.2f}:")
        print(f"  CPU per run (inside the task): local pool {run_cpu:.2f} s, Ray {ray_cpu:.2f} s")
        print(
            f"  wall: local pool {loc['wall']:.1f} s ({loc['wall'] / n:.2f} s per run); Ray {ray_['wall']:.1f} s "
            f"({ray_['wall'] / n:.2f} s per run); Ray start-up {ray_['start_wall']:.1f} s wall, "
            f"{ray_['start_cpu']:.1f} s CPU; Ray idle {ray_['idle_rate']:.3f} CPU-s/s"
        )
        print(
            f"  overhead per run, CPU beyond the runs' own: local pool {loc['over']:.3f} s "
            f"({100 * loc['over'] / run_cpu:.1f} % of a run); Ray {ray_['over']:.3f} s "
            f"({100 * ray_['over'] / ray_cpu:.1f} % of a run; {100 * (ray_['over'] + ray_['start_cpu'] / n) / ray_cpu:.1f} % "
            "with Ray's start-up spread over the runs)"
        )
        extra = (ray_["wall"] - loc["wall"]) * args.workers / n
        print(
            f"  Ray's extra wall per run against the pool (x {args.workers} workers): {extra:+.3f} s "
            f"({100 * extra / run_cpu:+.1f} % of a run's CPU; noisy on a shared machine)"
        )
    print(f"identical tables in every pass: {'yes' if len(set(tables)) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
