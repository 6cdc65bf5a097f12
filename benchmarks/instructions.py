"""Instructions of whole lavaflow processes, this tree against another: the speed half of the
refactor check (issue 37; `snapshot.py` is the output half).

CPU seconds are not comparable on a shared machine; instructions counted by valgrind's cachegrind
(no cache simulation) nearly are: two runs of one tree differ by up to about 0.7 % here. Five
cases, as docs/benchmarks.md's issue 37 tables: two `lavaflow simulate` runs of
benchmarks/e2e_simulate.py's shapes (a burst: 500 nodes, 500 Jobs x 10 pods, `--until 60`; an
arrival: 200 nodes, 200 Jobs x 10 pods over 2 h), a Pollux replay (workload 3, ElasticTiresias),
`benchmarks/placement.py --nodes 300 --pods 3000` and `lavaflow version` (start-up). Four
replays of Pollux workload 7 (issue 31's ≤ 5 s target: pollux7-ElasticTiresias,
pollux7-Tiresias-Voda, pollux7-Goodput-AB, pollux7-Pollux-AB, the last two with
--adaptive-batch) run only when --only names them: several minutes each under valgrind.

    python benchmarks/instructions.py --base 3acfc9e        # this tree against a commit
    python benchmarks/instructions.py --only burst,arrival  # some cases, this tree only

``--base REF`` checks out REF in a temporary git worktree (its src/ on PYTHONPATH; the case
scripts are this tree's). Each tree's bytecode is compiled first, so neither pays compiling.
Needs valgrind; the Pollux case needs LAVAFLOW_DATA (or ../shared/data) and is skipped without it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


# (name, policy, extra arguments) of the Pollux workload-7 replays run only when --only names them
EXTRA_POLLUX = [
    ("pollux7-ElasticTiresias", "ElasticTiresias", []),
    ("pollux7-Tiresias-Voda", "Tiresias-Voda", []),
    ("pollux7-Goodput-AB", "Goodput", ["--adaptive-batch"]),
    ("pollux7-Pollux-AB", "Pollux", ["--adaptive-batch"]),
]


def cases(work: Path) -> list[tuple[str, list[str]]]:
    """(name, python arguments) of each case."""
    import e2e_simulate as e2e
    from snapshot import _data_dir

    burst, arrival = work / "burst.yaml", work / "arrival.yaml"
    burst.write_text(e2e.workload(500, 5000, 10, None, seed=0))
    arrival.write_text(e2e.workload(200, 2000, 10, 7200.0, seed=0))
    sim = ["-m", "lavaflow.cli", "simulate"]
    out = [
        ("burst", [*sim, str(burst), "--until", "60", "--output", "json"]),
        ("arrival", [*sim, str(arrival), "--output", "json"]),
    ]
    data = _data_dir()
    if data is not None:
        trace = data / "pollux" / "workloads" / "workload-3.csv"
        out.append(("pollux3-ElasticTiresias", [*sim, str(trace), "--policy", "ElasticTiresias", "--output", "json"]))
        # Only when named in --only (minutes each under valgrind): issue 31's ≤ 5 s replays.
        seven = data / "pollux" / "workloads" / "workload-7.csv"
        for name, policy, extra in EXTRA_POLLUX:
            out.append((name, [*sim, str(seven), "--policy", policy, *extra, "--output", "json"]))
    else:
        print("# pollux cases skipped: no LAVAFLOW_DATA", flush=True)
    out.append(("placement", [str(ROOT / "benchmarks" / "placement.py"), "--nodes", "300", "--pods", "3000"]))
    out.append(("version", ["-m", "lavaflow.cli", "version"]))
    return out


def count(src: Path, args: list[str]) -> int:
    """Instructions (cachegrind's "I refs") of one python process with ``src`` on its path."""
    # One OpenBLAS thread: its idle workers spin under valgrind by as much as valgrind's thread
    # scheduling lets them (19 M to 116 M instructions in three runs of one case, up to 1.5 %).
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            *args,
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    m = re.search(r"I\s+refs:\s+([\d,]+)", p.stderr)
    if p.returncode != 0 or m is None:
        why = [line for line in p.stderr.splitlines() if line and not line.startswith("==")][-1:]
        raise Failed(f"exit {p.returncode}: {' | '.join(why)}")
    return int(m.group(1).replace(",", ""))


class Failed(Exception):
    """A case that did not run to its end under one tree (a case script newer than the tree)."""


def _warm(src: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "lavaflow")], env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=None, help="a git ref to compare with (a temporary worktree)")
    ap.add_argument("--only", default=None, help="comma-separated case names")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="instructions-") as tmp:
        work = Path(tmp)
        todo = cases(work)
        if args.only:
            keep = set(args.only.split(","))
            todo = [c for c in todo if c[0] in keep]
        else:
            extra = {name for name, _, _ in EXTRA_POLLUX}
            todo = [c for c in todo if c[0] not in extra]
        trees = [("this tree", ROOT / "src")]
        if args.base:
            wt = work / "base"
            subprocess.run(["git", "worktree", "add", "--detach", str(wt), args.base], cwd=ROOT, check=True)
            trees.insert(0, (args.base, wt / "src"))
        try:
            for _, src in trees:
                _warm(src)
            print(
                f"{'case':<26}" + "".join(f"{label:>18}" for label, _ in trees) + ("      change" if args.base else "")
            )
            for name, cmd in todo:
                try:
                    counts = [count(src, cmd) for _, src in trees]
                except Failed as exc:
                    print(f"{name:<26} failed: {exc}", flush=True)
                    continue
                line = f"{name:<26}" + "".join(f"{c / 1e9:>17.3f}G" for c in counts)
                if args.base:
                    line += f"  {100 * (counts[1] - counts[0]) / counts[0]:+9.2f} %"
                print(line, flush=True)
        finally:
            if args.base:
                subprocess.run(["git", "worktree", "remove", "--force", str(work / "base")], cwd=ROOT, check=False)


if __name__ == "__main__":
    main()
