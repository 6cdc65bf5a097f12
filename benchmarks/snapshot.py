"""Byte-identical output before and after a change: the refactor check (issue 37).

Runs a fixed set of `lavaflow simulate --output json` commands, whole processes, and keeps a
SHA-256 of each output:

- every example under examples/ that the simulator takes, under lavaflow and under kube-default;
- Pollux workloads 1, 3 and 7 (load 1.0) under a spread of elastic policies: rigid, elastic,
  Voda's two Tiresias variants, Pollux and Goodput with adaptive batches, and one oracle run;
- the end-to-end benchmark's shapes, small: a gang burst and sparse arrivals (10-pod and 1-pod Jobs),
  their inputs written by benchmarks/e2e_simulate.py's own code.

    python benchmarks/snapshot.py --base main            # this tree against main, side by side
    python benchmarks/snapshot.py --write before.json    # record this tree's outputs
    python benchmarks/snapshot.py --check before.json    # compare this tree with a record

``--base REF`` checks out REF in a temporary git worktree and runs the same cases there
(``PYTHONPATH`` at its src/), so a refactor is compared with what it started from in one command.
A difference is listed per case, with both digests and sizes; ``--keep DIR`` keeps the outputs to diff.
Exit status: 0 identical, 1 some case differs or failed. Needs LAVAFLOW_DATA (or ../shared/data) for
the Pollux traces; cases whose inputs are missing are skipped and said so.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# examples that need something the machine may not have
NEEDS = {"gpu-cluster-sia.yaml": "LAVAFLOW_SIA_ARTIFACT"}
POLICIES = [
    ("FIFO", []),
    ("ElasticTiresias", []),
    ("Tiresias-Voda", []),
    ("Pollux", ["--adaptive-batch"]),
    ("Goodput", ["--adaptive-batch"]),
    ("Lavaflow", []),
]


def _data_dir() -> Path | None:
    for d in (os.environ.get("LAVAFLOW_DATA"), ROOT.parent / "shared" / "data"):
        if d and (Path(d) / "pollux" / "workloads").is_dir():
            return Path(d)
    return None


def _e2e_inputs(work: Path) -> list[tuple[str, list[str]]]:
    """The burst and arrival shapes of benchmarks/e2e_simulate.py, small, written by its own code."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import e2e_simulate as e2e

    out = []
    for name, nodes, pods, per_job, span, until in (
        ("e2e-burst", 200, 2000, 10, None, "60"),
        ("e2e-arrival", 100, 1000, 10, 7200.0, None),
        ("e2e-arrival-1pod", 100, 500, 1, 7200.0, None),
    ):
        f = work / f"{name}.yaml"
        f.write_text(e2e.workload(nodes, pods, per_job, span, seed=0))
        out.append((name, [str(f)] + (["--until", until] if until else [])))
    return out


def cases(work: Path) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(name, simulate arguments) of every case, and what was skipped with why."""
    todo: list[tuple[str, list[str]]] = []
    skipped: list[str] = []
    for f in sorted((ROOT / "examples").glob("*.yaml")):
        need = NEEDS.get(f.name)
        if need and not os.environ.get(need):
            skipped.append(f"{f.name}: needs ${need}")
            continue
        todo.append((f"example/{f.stem}", [str(f)]))
        todo.append((f"example/{f.stem}/kube-default", [str(f), "--scheduler", "kube-default"]))
    data = _data_dir()
    if data is None:
        skipped.append("Pollux workloads: no LAVAFLOW_DATA")
    else:
        for w in (1, 3, 7):
            trace = data / "pollux" / "workloads" / f"workload-{w}.csv"
            for policy, extra in POLICIES:
                todo.append((f"pollux/{w}/{policy}{''.join(extra)}", [str(trace), "--policy", policy, *extra]))
        trace = data / "pollux" / "workloads" / "workload-3.csv"
        todo.append(
            (
                "pollux/3/Goodput--adaptive-batch--oracle",
                [str(trace), "--policy", "Goodput", "--adaptive-batch", "--oracle"],
            )
        )
    todo += _e2e_inputs(work)
    return todo, skipped


def _run(src: Path, name: str, args: list[str], keep: Path | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0")
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "lavaflow.cli", "simulate", *args, "--output", "json"],
        env=env,
        capture_output=True,
        cwd=ROOT,
    )
    out = {"case": name, "exit": p.returncode, "seconds": round(time.perf_counter() - t0, 2)}
    out["sha256"] = hashlib.sha256(p.stdout).hexdigest()
    out["bytes"] = len(p.stdout)
    if p.returncode not in (0, 1):  # 1: some job failed or stuck, as the simulation says
        out["error"] = p.stderr.decode(errors="replace")[-500:]
    if keep is not None:
        dest = keep / src.parent.name / (name.replace("/", "__") + ".json")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(p.stdout)
    return out


def run_all(src: Path, todo: list[tuple[str, list[str]]], jobs: int, keep: Path | None, label: str) -> dict[str, dict]:
    got: dict[str, dict] = {}
    with cf.ThreadPoolExecutor(jobs) as pool:
        futs = {pool.submit(_run, src, n, a, keep): n for n, a in todo}
        for i, fut in enumerate(cf.as_completed(futs), 1):
            r = fut.result()
            got[r["case"]] = r
            print(
                f"[{label} {i}/{len(todo)}] {r['case']}: exit {r['exit']}, {r['seconds']} s",
                file=sys.stderr,
                flush=True,
            )
    return got


def compare(a: dict[str, dict], b: dict[str, dict], names: tuple[str, str]) -> int:
    bad = 0
    for case in sorted(set(a) | set(b)):
        x, y = a.get(case), b.get(case)
        if x is None or y is None:
            print(f"MISSING {case}: only in {names[0] if y is None else names[1]}")
            bad += 1
        elif "error" in x or "error" in y:
            print(f"FAILED  {case}: {x.get('error') or y.get('error')}")
            bad += 1
        elif (x["sha256"], x["exit"]) != (y["sha256"], y["exit"]):
            print(
                f"DIFFERS {case}: {names[0]} {x['sha256'][:12]} ({x['bytes']} B, exit {x['exit']}), "
                f"{names[1]} {y['sha256'][:12]} ({y['bytes']} B, exit {y['exit']})"
            )
            bad += 1
    print(f"{len(set(a) | set(b)) - bad} of {len(set(a) | set(b))} cases identical" + (f"; {bad} not" if bad else ""))
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--base", help="a git ref: run its tree beside this one and compare")
    g.add_argument("--write", type=Path, help="record this tree's digests in this file")
    g.add_argument("--check", type=Path, help="compare this tree with a recorded file")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="commands at once")
    ap.add_argument("--keep", type=Path, default=None, help="keep every output under this directory")
    ap.add_argument("--only", default=None, help="only cases whose name contains this text")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lavaflow-snapshot-") as tmp:
        work = Path(tmp)
        todo, skipped = cases(work)
        if args.only:
            todo = [c for c in todo if args.only in c[0]]
        for s in skipped:
            print(f"skipped: {s}")
        here = ROOT / "src"
        if args.write:
            got = run_all(here, todo, args.jobs, args.keep, "this tree")
            args.write.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
            print(f"wrote {len(got)} digests to {args.write}")
            return
        if args.check:
            names = {n for n, _ in todo}
            before = {k: v for k, v in json.loads(args.check.read_text()).items() if k in names}
            sys.exit(
                compare(before, run_all(here, todo, args.jobs, args.keep, "this tree"), (str(args.check), "this tree"))
            )
        base = work / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base], cwd=ROOT, check=True, capture_output=True
        )
        try:
            a = run_all(base / "src", todo, args.jobs, args.keep, args.base)
            b = run_all(here, todo, args.jobs, args.keep, "this tree")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
        sys.exit(compare(a, b, (args.base, "this tree")))


if __name__ == "__main__":
    main()
