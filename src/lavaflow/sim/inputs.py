"""Turn loaded objects into a validated simulation input.

NodeGroups expand into Nodes, the simulator's annotations are checked, and
Volcano's admission (defaulting and validation) runs over Jobs, PodGroups and
Queues. Any problem refuses the whole input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..api import admission
from ..api.core import ConfigMap, Node, Pod
from ..api.loader import Loaded, Problems, Source
from ..api.volcano import Command, Job, JobFlow, JobTemplate, PodGroup, Queue
from ..controllers.jobflow import validate_jobflow
from ..api.topology import HyperNode, Numatopology, validate_hypernode, validate_numatopology
from ..api.workloads import NodeGroup
from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf
from . import annotations as ann

CONF_KEY = "volcano-scheduler.conf"


@dataclass
class Item:
    obj: Any
    source: Source
    submit_at: float = 0.0
    delete_at: float | None = None
    update: bool = False  # a later document for an object defined earlier (a user's update)


@dataclass
class SimInput:
    items: list[Item] = field(default_factory=list)
    conf_text: str | None = None
    conf_source: str | None = None


def _what(obj) -> str:
    return f"{obj.kind}/{obj.name}"


def expand_node_group(ng: NodeGroup) -> list[Node]:
    nodes = []
    for i in range(ng.spec.count):
        name = f"{ng.name}-{i}"
        labels = dict(ng.spec.labels)
        labels.setdefault("kubernetes.io/hostname", name)
        node = Node.model_validate(
            {
                "metadata": {"name": name, "labels": labels, "annotations": dict(ng.metadata.annotations)},
                "spec": {"taints": [t.model_dump(by_alias=True, exclude_none=True) for t in ng.spec.taints]},
            }
        )
        node.status.allocatable = dict(ng.spec.capacity)
        node.status.capacity = dict(ng.spec.capacity)
        nodes.append(node)
    return nodes


def numa_topology(node_name: str, cpus: int, layout) -> Numatopology:
    """The Numatopology the resource exporter would report for a node of ``layout``."""
    per = cpus // layout.nodes
    return Numatopology.model_validate(
        {
            "metadata": {"name": node_name},
            "spec": {
                "policies": {"CPUManagerPolicy": layout.cpu_manager_policy, "TopologyManagerPolicy": layout.topology_manager_policy},
                "numares": {"cpu": {"allocatable": f"0-{cpus - 1}" if cpus else "", "capacity": cpus}},
                "cpuDetail": {str(c): {"numa": c // per, "socket": c // per, "core": c} for c in range(cpus)},
            },
        }
    )


def _time_annotation(problems: Problems, src: Source, obj, key: str, allow_inf: bool = False) -> float | None:
    raw = obj.metadata.annotations.get(key)
    if raw is None:
        return None
    try:
        return ann.parse_duration(raw, allow_inf=allow_inf)
    except ValueError as exc:
        problems.add(src, _what(obj), f"metadata.annotations[{key}]", str(exc))
        return None


def _check_pod_annotations(problems: Problems, src: Source, what: str, prefix: str, annotations: dict[str, str]) -> None:
    if ann.DURATION in annotations:
        try:
            ann.parse_duration(annotations[ann.DURATION], allow_inf=True)
        except ValueError as exc:
            problems.add(src, what, f"{prefix}.annotations[{ann.DURATION}]", str(exc))
    if ann.EXIT_CODE in annotations:
        try:
            code = int(annotations[ann.EXIT_CODE])
            if not 0 <= code <= 255:
                raise ValueError
        except ValueError:
            problems.add(src, what, f"{prefix}.annotations[{ann.EXIT_CODE}]", f"{annotations[ann.EXIT_CODE]!r} is not an exit code (0-255)")
    if ann.DELETE_AT in annotations and prefix != "metadata":
        try:
            ann.parse_duration(annotations[ann.DELETE_AT], allow_inf=True)
        except ValueError as exc:
            problems.add(src, what, f"{prefix}.annotations[{ann.DELETE_AT}]", str(exc))
    if ann.SPAWN_DELAY in annotations:
        try:
            ann.parse_duration(annotations[ann.SPAWN_DELAY])
        except ValueError as exc:
            problems.add(src, what, f"{prefix}.annotations[{ann.SPAWN_DELAY}]", str(exc))


COMMAND_TARGETS = {
    "Job": ("AbortJob", "ResumeJob", "RestartJob", "TerminateJob", "CompleteJob"),
    "Queue": ("OpenQueue", "CloseQueue"),
}


def validate_command(cmd: Command, declared: set[tuple[str, str]]) -> list[admission.Problem]:
    """bus.volcano.sh Commands: a known action for the target's kind, and a target defined in the input."""
    target = cmd.target if isinstance(cmd.target, dict) else None
    if not target or not target.get("name") or target.get("kind") not in COMMAND_TARGETS:
        return [admission.Problem("target", "must name a Job or a Queue (target.kind and target.name)")]
    kind = target["kind"]
    out: list[admission.Problem] = []
    if cmd.action not in COMMAND_TARGETS[kind]:
        out.append(
            admission.Problem("action", f"{cmd.action!r} is not an action for a {kind} (use one of {', '.join(COMMAND_TARGETS[kind])})")
        )
    key = target["name"] if kind == "Queue" else f"{cmd.namespace}/{target['name']}"
    if (kind, key) not in declared:
        out.append(admission.Problem("target.name", f"no {kind} {target['name']!r} in the input"))
    return out


def _expand(loaded: list[Loaded], problems: Problems) -> list[Item]:
    items: list[Item] = []
    for lo in loaded:
        obj, src = lo.obj, lo.source
        if isinstance(obj, NodeGroup):
            if obj.spec.count < 0:
                problems.add(src, _what(obj), "spec.count", "must be ≥ 0")
                continue
            if not obj.spec.capacity:
                problems.add(src, _what(obj), "spec.capacity", "is required (the allocatable resources of each node)")
            nodes = expand_node_group(obj)
            items.extend(Item(node, src) for node in nodes)
            if obj.spec.numa is not None:
                cpu = obj.spec.capacity.get("cpu")
                if cpu is None or cpu != int(cpu) or int(cpu) % obj.spec.numa.nodes:
                    problems.add(src, _what(obj), "spec.numa.nodes",
                                 f"capacity cpu ({cpu}) must be a whole number of CPUs divisible by the NUMA nodes ({obj.spec.numa.nodes})")
                    continue
                items.extend(Item(numa_topology(node.name, int(cpu), obj.spec.numa), src) for node in nodes)
            continue
        items.append(Item(obj, src))
    return items


def _times(items: list[Item], problems: Problems) -> None:
    for it in items:
        it.submit_at = _time_annotation(problems, it.source, it.obj, ann.SUBMIT_AT) or 0.0
        delete = _time_annotation(problems, it.source, it.obj, ann.DELETE_AT, allow_inf=True)
        it.delete_at = None if delete is None or math.isinf(delete) else delete
        if it.delete_at is not None and it.delete_at < it.submit_at:
            problems.add(it.source, _what(it.obj), f"metadata.annotations[{ann.DELETE_AT}]", "is before submit-at")
        if isinstance(it.obj, Node):
            for key in (ann.FAIL_AT, ann.RECOVER_AT):
                _time_annotation(problems, it.source, it.obj, key)


def _duplicates(items: list[Item], problems: Problems) -> None:
    """A later document for the same Job (later submit-at) is an update; other repeats are errors."""
    seen: dict[tuple[str, str], Item] = {}
    for it in items:
        if not it.obj.metadata.name:
            continue
        k = (type(it.obj).__name__, it.obj.key)
        first = seen.get(k)
        if first is None:
            seen[k] = it
        elif isinstance(it.obj, Job) and it.submit_at > first.submit_at:
            it.update = True
        else:
            hint = " (a later version of a Job needs a later sim.lavaflow.io/submit-at)" if isinstance(it.obj, Job) else ""
            problems.add(it.source, _what(it.obj), "metadata.name", f"duplicates the {it.obj.kind} defined at {first.source}{hint}")


def prepare(loaded: list[Loaded], scheduler_name: str = "volcano") -> SimInput:
    """Validate and default the loaded objects; raise InputError on any problem."""
    problems = Problems()
    out = SimInput()
    items = _expand(loaded, problems)
    _times(items, problems)
    _duplicates(items, problems)
    items.sort(key=lambda it: it.submit_at)  # stable: input order within a time; updates after their job
    # Queues first: jobs are validated against them.
    queues: dict[str, Queue] = {}
    for q in (Queue.model_validate({"metadata": {"name": n}}) for n in ("root", "default")):
        admission.default_queue(q)
        queues[q.name] = q
    for it in items:
        if isinstance(it.obj, Queue):
            admission.default_queue(it.obj)
            queues[it.obj.name] = it.obj
    pods_by_key = {it.obj.key for it in items if isinstance(it.obj, Pod)}
    declared = {("Queue", name) for name in queues} | {("Job", it.obj.key) for it in items if isinstance(it.obj, Job)}
    latest_job: dict[str, Job] = {}
    for it in items:
        obj, src = it.obj, it.source
        found: list[admission.Problem] = []
        if isinstance(obj, Queue):
            found = admission.validate_queue(obj, queues)
        elif isinstance(obj, Job):
            admission.default_job(obj, scheduler_name)
            if it.update:
                found = admission.validate_job_update(latest_job[obj.key], obj)
            else:
                found = admission.validate_job(obj, queues)
            latest_job[obj.key] = obj
            for ti, task in enumerate(obj.spec.tasks):
                _check_pod_annotations(problems, src, _what(obj), f"spec.tasks[{ti}].template.metadata", task.template.metadata.annotations)
        elif isinstance(obj, JobTemplate):
            as_job = Job.model_validate(
                {"metadata": {"name": obj.name, "namespace": obj.namespace}, "spec": obj.spec.model_dump(by_alias=True, exclude_none=True, mode="json")}
            )
            admission.default_job(as_job, scheduler_name)
            found = admission.validate_job(as_job, queues)
        elif isinstance(obj, JobFlow):
            found = validate_jobflow(obj)
        elif isinstance(obj, Command):
            found = validate_command(obj, declared)
        elif isinstance(obj, PodGroup):
            admission.default_podgroup(obj)
            found = admission.validate_podgroup(obj, queues)
        elif isinstance(obj, Pod):
            found = admission.validate_pod(obj)
            _check_pod_annotations(problems, src, _what(obj), "metadata", obj.metadata.annotations)
            parent = obj.metadata.annotations.get(ann.SPAWNED_BY)
            if parent is not None and f"{obj.namespace}/{parent}" not in pods_by_key:
                problems.add(src, _what(obj), f"metadata.annotations[{ann.SPAWNED_BY}]", f"no pod {parent!r} in namespace {obj.namespace}")
            if parent == obj.name:
                problems.add(src, _what(obj), f"metadata.annotations[{ann.SPAWNED_BY}]", "a pod cannot spawn itself")
        elif isinstance(obj, ConfigMap) and CONF_KEY in obj.data:
            try:
                load_scheduler_conf(obj.data[CONF_KEY])
            except SchedulerConfError as exc:
                for path, msg in exc.problems:
                    problems.add(src, _what(obj), f"data[{CONF_KEY}]" + (f".{path}" if path else ""), msg)
            out.conf_text = obj.data[CONF_KEY]
            out.conf_source = str(src)
        elif isinstance(obj, HyperNode):
            found = [admission.Problem(path, msg) for path, msg in validate_hypernode(obj)]
        elif isinstance(obj, Numatopology):
            found = [admission.Problem(path, msg) for path, msg in validate_numatopology(obj)]
        elif hasattr(getattr(obj, "spec", None), "template"):
            _check_pod_annotations(problems, src, _what(obj), "spec.template.metadata", obj.spec.template.metadata.annotations)
        for p in found:
            problems.add(src, _what(obj), p.path, p.message)
    problems.raise_if_any()
    out.items = items
    return out
