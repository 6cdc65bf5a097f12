"""Node choice: Volcano's node sampling beside lavaflow's default (issue 40).

Writes a YAML input of ``--nodes`` nodes (one NodeGroup, 32 cpu / 128 Gi / 110 pods each, the
fake nodes of benchmarks/kube_throughput.py) and ``--pods`` bare pods (100m cpu / 128 Mi each,
``schedulerName: volcano``: each gets its own PodGroup, as on a cluster), and Volcano's shipped
volcano-scheduler.conf (``VOLCANO_SHIPPED_CONF``). Then runs
``lavaflow simulate FILE --config CONF --output json --until 10s`` in a subprocess once per node
choice and prints, for each: the distinct nodes the pods were placed on, the most pods on one
node, the pods placed, and the child process's CPU time (user + system; whole command).

    python benchmarks/node_choice.py --nodes 1000,5000 --pods 5000 [--choices lavaflow,volcano] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from lavaflow.scheduler.framework.conf import VOLCANO_SHIPPED_CONF

REPO = Path(__file__).resolve().parent.parent


def workload(nodes: int, pods: int) -> str:
    out = [
        "apiVersion: sim.lavaflow.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: node}\n"
        f'spec: {{count: {nodes}, capacity: {{cpu: "32", memory: 128Gi, pods: "110"}}}}\n'
    ]
    for i in range(pods):
        out.append(
            f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i:05d}}}\nspec: {{schedulerName: volcano, "
            "containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}\n"
        )
    return "---\n".join(out)


def run(path: Path, conf: Path, choice: str) -> dict:
    cmd = [sys.executable, "-m", "lavaflow.cli", "simulate", str(path), "--config", str(conf)]
    cmd += ["--output", "json", "--until", "10s", "--node-choice", choice]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    result = json.loads(proc.stdout)
    per_node = Counter(p["node"] for p in result["pods"] if p.get("node"))
    return {
        "choice": choice,
        "placed": sum(per_node.values()),
        "distinct_nodes": len(per_node),
        "max_per_node": max(per_node.values(), default=0),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
        "wall_s": round(wall, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1000,5000")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--choices", default="lavaflow,volcano")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "volcano-scheduler.conf"
        conf.write_text(VOLCANO_SHIPPED_CONF)
        for nodes in (int(n) for n in args.nodes.split(",")):
            path = Path(tmp) / f"pods-{nodes}.yaml"
            path.write_text(workload(nodes, args.pods))
            for choice in args.choices.split(","):
                row = {"nodes": nodes, "pods": args.pods, **run(path, conf, choice)}
                rows.append(row)
                print(
                    f"{nodes:>6} nodes {args.pods:>6} pods  {choice:<9} distinct nodes {row['distinct_nodes']:>5}  "
                    f"max/node {row['max_per_node']:>3}  placed {row['placed']:>6}  CPU {row['cpu_s']:>6.2f} s  "
                    f"wall {row['wall_s']:>6.2f} s",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
