"""Replays of elastic training workloads for benchmarks and scripts: the same path as
``lavaflow simulate`` (loader, admission, controllers, the scheduler's elastic action, the
simulator's training model), as a function."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api.loader import Loaded, Problems, Source, build_object, load_files
from .traces import DEFAULT_GPUS_PER_NODE, DEFAULT_NODES, job_document, load_traces

if TYPE_CHECKING:  # pragma: no cover
    from ..elastic.results import SimResult


def gpu_cluster(
    types: Mapping[str, int] | None = None, nodes: int = DEFAULT_NODES, gpus_per_node: int = DEFAULT_GPUS_PER_NODE
) -> list[dict[str, Any]]:
    """NodeGroups: ``nodes`` untyped GPU nodes, or ``types`` nodes per GPU type (labelled)."""
    cap = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus_per_node)}
    if not types:
        return [
            {
                "apiVersion": "sim.lavaflow.io/v1alpha1",
                "kind": "NodeGroup",
                "metadata": {"name": "gpu"},
                "spec": {"count": nodes, "capacity": cap},
            }
        ]
    return [
        {
            "apiVersion": "sim.lavaflow.io/v1alpha1",
            "kind": "NodeGroup",
            "metadata": {"name": t},
            "spec": {"count": n, "capacity": cap, "labels": {"lavaflow.io/accelerator": t}},
        }
        for t, n in types.items()
    ]


def _build(docs: Sequence[dict[str, Any]], name: str) -> list[Loaded]:
    problems = Problems()
    out = []
    for i, d in enumerate(docs, start=1):
        src = Source(name, i)
        obj = build_object(src, d, problems)
        if obj is not None:
            out.append(Loaded(obj, src))
    problems.raise_if_any()
    return out


def trace_inputs(
    traces: Sequence[str | Path],
    cluster: Sequence[dict[str, Any]] | None = None,
    yaml_files: Sequence[str | Path] = (),
    adaptive: bool = False,
) -> list[Loaded]:
    """Loaded objects for trace files (+ a cluster given as documents or YAML files); ``adaptive``:
    every Pollux-trace job lets the policy co-adapt its batch size."""
    loaded = load_files([str(p) for p in yaml_files]) if yaml_files else []
    if cluster:
        loaded += _build(cluster, "<cluster>")
    problems = Problems()
    loaded += load_traces(list(traces), loaded, problems, adaptive=adaptive)
    problems.raise_if_any()
    return loaded


def spec_inputs(specs: Sequence[Any], cluster: Sequence[dict[str, Any]]) -> list[Loaded]:
    """Loaded objects for generated trace jobs (:class:`~lavaflow.elastic.job.ElasticJobSpec`)."""
    return _build(list(cluster), "<cluster>") + _build([job_document(s) for s in specs], "<generated trace>")


def replay(
    loaded: list[Loaded],
    policy: str,
    params: Mapping[str, Any] | None = None,
    interval: float | None = None,
    cost: float = 30.0,
    seed: int = 0,
    oracle: bool = False,
    report_period: float = 30.0,
    report_noise: float = 0.0,
    shared_profiles: bool | None = None,
) -> SimResult:
    """Run one policy; returns the :class:`~lavaflow.elastic.results.SimResult`.
    ``shared_profiles`` None: the policy's own choice (elastic.sharedProfiles).
    ``interval`` None: the policy's own scheduling tick (60 s for Tiresias), else 30 s."""
    from ..scheduler.elastic.state import elastic_option
    from ..scheduler.framework.conf import load_scheduler_conf
    from .engine import Simulation
    from .inputs import prepare

    args: dict[str, Any] = {"elastic.policy": policy, "elastic.resizeCost": f"{cost:g}s"}
    if interval is not None:
        args["elastic.resizeInterval"] = f"{interval:g}s"
    if oracle:
        args["elastic.oracle"] = True
    if shared_profiles is not None:
        args["elastic.sharedProfiles"] = shared_profiles
    args.update({f"elastic.policy.{k}": v for k, v in (params or {}).items()})
    conf = load_scheduler_conf()
    opt = elastic_option(conf)
    assert opt is not None  # (Volcano's default configuration with lavaflow's elastic action)
    opt.arguments.update(args)
    t0 = time.perf_counter()
    # prepare() defaults and validates objects in place: give each run its own copies
    sim = Simulation(
        prepare([Loaded(it.obj.model_copy(deep=True), it.source) for it in loaded]),
        conf=conf,
        seed=seed,
        restart_pause=cost,
        report_period=report_period,
        report_noise=report_noise,
    )
    sim.run()
    return sim.training.result(policy, time.perf_counter() - t0)
