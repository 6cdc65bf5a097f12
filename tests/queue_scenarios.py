"""Builders of the queue scenarios the simulator runs (tests/scheduler/test_queues.py, and the
capacity, sla and network-topology plugins' tests): a ``volcano-scheduler.conf`` ConfigMap with preempt
and reclaim, PriorityClasses, Queues, Volcano Jobs, and readers of a run's result."""

from __future__ import annotations

import json

ACTIONS = "enqueue, allocate, backfill, reclaim, preempt"


def conf(
    queue_plugin: str = "proportion",
    tier1: tuple = (),
    queue_args: dict | None = None,
    overcommit_factor: float | None = None,
    actions: str = ACTIONS,
) -> str:
    """A scheduler ConfigMap: tiers (priority, gang, conformance, *tier1) / (overcommit, drf, predicates, queue plugin, nodeorder)."""
    lines = [f'actions: "{actions}"', "tiers:", "- plugins:"]
    for p in ("priority", "gang", "conformance", *tier1):
        name, args = (p, None) if isinstance(p, str) else p
        lines.append(f"  - name: {name}")
        if args:
            lines.append(f"    arguments: {json.dumps(args)}")
    lines += ["- plugins:", "  - name: overcommit"]
    if overcommit_factor is not None:
        lines.append(f"    arguments: {{overcommit-factor: {overcommit_factor}}}")
    for p in ("drf", "predicates", queue_plugin, "nodeorder"):
        lines.append(f"  - name: {p}")
        if p == queue_plugin:
            for k, v in (queue_args or {}).items():
                lines.append(f"    {k}: {json.dumps(v)}")
    doc = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
        "data": {"volcano-scheduler.conf": "\n".join(lines) + "\n"},
    }
    return "---\n" + json.dumps(doc) + "\n"


def priority_class(name: str, value: int) -> str:
    return (
        "---\n"
        + json.dumps(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        )
        + "\n"
    )


PRIORITIES = priority_class("low", 10) + priority_class("mid", 100) + priority_class("high", 1000)


def queue(name: str, weight: int = 1, **spec) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": weight, **spec},
            }
        )
        + "\n"
    )


def job(
    name: str,
    replicas: int,
    cpu: str = "1",
    min_available: int | None = None,
    queue: str | None = None,
    prio: str | None = None,
    at: float | None = None,
    duration: str | float = "inf",
    namespace: str | None = None,
    annotations: dict | None = None,
    node_selector: dict | None = None,
) -> str:
    pod: dict = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_selector:
        pod["nodeSelector"] = node_selector
    spec: dict = {
        "schedulerName": "volcano",
        "minAvailable": replicas if min_available is None else min_available,
        "tasks": [
            {
                "name": "t",
                "replicas": replicas,
                "template": {"metadata": {"annotations": {"sim.lavaflow.io/duration": str(duration)}}, "spec": pod},
            }
        ],
    }
    if queue:
        spec["queue"] = queue
    if prio:
        spec["priorityClassName"] = prio
    ann = dict(annotations or {})
    if at is not None:
        ann["sim.lavaflow.io/submit-at"] = str(at)
    meta: dict = {"name": name, "annotations": ann}
    if namespace:
        meta["namespace"] = namespace
    return (
        "---\n"
        + json.dumps({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": spec})
        + "\n"
    )


def evicted(result: dict) -> list[str]:
    return sorted(p["name"] for p in result["pods"] if p["phase"] == "Deleted" and p.get("reason") == "Evicted")


def job_of(result: dict, name: str) -> dict:
    return next(j for j in result["jobs"] if j["name"] == name)


def stuck_reason(result: dict, name: str) -> str:
    return next(s["reason"] for s in result["stuck"] if s["name"] == name)


def decisions_of(result: dict, name: str) -> list[dict]:
    return next(v for k, v in result["decisions"].items() if k.split("/", 1)[1].startswith(name + "-"))


def last_queues(result: dict) -> dict[str, float]:
    return {q: v.get("cpu", 0.0) for q, v in result["timeline"][-1]["queues"].items()}
