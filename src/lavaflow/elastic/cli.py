"""``lavaflow simulate --workload FILE``: trace replay of elastic GPU jobs, one or several policies.

The top-level CLI (lavaflow/cli.py) owns the command; it delegates here when ``--workload`` is
given.  Bad input raises ``lavaflow.cli.Invalid`` (one line per problem, exit code 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .compare import format_table, run_policies, to_json
from .placement import Node
from .policies import POLICY_NAMES, resolve_name
from .sim import Cluster
from .workload import WorkloadError, parse_gpu_types, read_workload

# Help texts for the typer options the top-level command declares.
OPTION_HELP = {
    "workload": "trace to replay: Pollux CSV (name,time,application,num_replicas,batch_size), Philly CSV, "
    "Gavel CSV (name,time,model,num_replicas,duration) or YAML (Voda MPIJobs / elastic Volcano Jobs)",
    "policy": f"allocation policy: {', '.join(POLICY_NAMES)}",
    "compare_policies": "comma-separated policies to run and compare in one table",
    "nodes": "number of GPU nodes (with --gpus-per-node)",
    "gpus_per_node": "GPUs per node",
    "cluster": "YAML with Node / NodeGroup objects (GPU capacity, lavaflow.io/accelerator label)",
    "gpu_types": "nodes per GPU type, e.g. k80:4,p100:4,v100:4 (each with --gpus-per-node GPUs)",
    "resize_interval": "minimum time between reschedules (Voda's rate limit; default 30s, or the policy's own tick: 60s for Tiresias)",
    "resize_cost": "pause of a job on each start, resize or migration (checkpoint + restart)",
}


def _invalid(problems: list[str]):
    from ..cli import Invalid

    return Invalid(problems)


def run_workload(
    workload: Path,
    policy: str | None = None,
    compare_policies: str | None = None,
    nodes: int = 16,
    gpus_per_node: int = 4,
    cluster: Path | None = None,
    gpu_types: str | None = None,
    resize_interval: str | None = None,
    resize_cost: str = "30s",
    report: Path | None = None,
    output: str = "table",
    out=None,
) -> list:
    """Run the replay and print the table / JSON.  Returns the SimResults."""
    from ..sim.annotations import parse_duration

    out = out or sys.stdout
    problems: list[str] = []
    names: list[str] = []
    raw = [p for p in (compare_policies or "").split(",") if p.strip()] or [policy or "Lavaflow"]
    opt = "--compare-policies" if compare_policies else "--policy"
    for p in raw:
        try:
            names.append(resolve_name(p))
        except KeyError:
            problems.append(f"{opt}: unknown policy {p.strip()!r} (choose from {', '.join(POLICY_NAMES)})")
    if output not in ("table", "json"):
        problems.append(f"--output: unknown format {output!r} (choose table or json)")
    interval: float | None = None
    cost = 0.0
    try:
        interval = parse_duration(resize_interval) if resize_interval is not None else None
    except ValueError as exc:
        problems.append(f"--resize-interval: {exc}")
    try:
        cost = parse_duration(resize_cost)
    except ValueError as exc:
        problems.append(f"--resize-cost: {exc}")
    if nodes < 1:
        problems.append(f"--nodes: must be >= 1, got {nodes}")
    if gpus_per_node < 1:
        problems.append(f"--gpus-per-node: must be >= 1, got {gpus_per_node}")
    cl: Cluster | None = None
    node_events: list = []
    if cluster is not None and gpu_types is not None:
        problems.append("--cluster and --gpu-types are exclusive")
    elif cluster is not None:
        try:
            from .k8s import read_k8s_cluster

            nds, node_events = read_k8s_cluster(cluster)
            if not nds:
                problems.append(f"{cluster}: no Node or NodeGroup with {'nvidia.com/gpu'} capacity")
            cl = Cluster(list(nds))
        except WorkloadError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"{cluster}: {exc.strerror or exc}")
    elif gpu_types is not None:
        try:
            cl = Cluster.typed(parse_gpu_types(gpu_types), max(gpus_per_node, 1))
        except ValueError as exc:
            problems.append(f"--gpu-types: {exc}")
    else:
        cl = Cluster.homogeneous(max(nodes, 1), max(gpus_per_node, 1))
    if problems:
        raise _invalid(problems)
    assert cl is not None
    jobs = []
    try:
        jobs = read_workload(workload, max_gpus=cl.total_gpus)
        if workload.suffix.lower() in (".yaml", ".yml") and cluster is None and gpu_types is None:
            from .k8s import read_k8s_cluster

            nds, evs = read_k8s_cluster(workload)
            if nds:
                cl = Cluster(list(nds))
                node_events = evs
    except WorkloadError as exc:
        raise _invalid([str(exc)]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid([f"{workload}: {getattr(exc, 'strerror', None) or exc}"]) from None
    if not jobs:
        raise _invalid([f"{workload}: no jobs"])
    types = set(cl.capacity)
    bad = [f"{j.source}: job {j.name} asks for GPU type {j.gpu_type!r}, cluster has {', '.join(sorted(types))}"
           for j in jobs if j.gpu_type is not None and j.gpu_type not in types]
    if bad:
        raise _invalid(bad[:20])
    results = run_policies(jobs, cl, names, resched_interval=interval, resize_cost=cost, node_events=node_events)
    if output == "json":
        out.write(json.dumps(to_json(results), indent=2, default=str) + "\n")
    else:
        gtxt = ", ".join(f"{t}: {n}" for t, n in sorted(cl.capacity.items()))
        faults = f" ({len(node_events)} node failures/recoveries)" if node_events else ""
        out.write(f"{len(jobs)} jobs from {workload}; {len(cl.nodes)} nodes{faults}, GPUs {gtxt}; "
                  f"resize interval {'policy default' if interval is None else f'{interval:g}s'}, resize cost {cost:g}s\n")
        out.write(format_table(results) + "\n")
    if report is not None:
        from .report import write_report

        write_report(results, report, title=f"lavaflow elastic simulation: {workload.name}")
        if output == "table":
            sys.stderr.write(f"report written to {report}\n")
    return results


__all__ = ["OPTION_HELP", "run_workload", "Node"]
