"""Turn loaded objects into a validated simulation input.

NodeGroups expand into Nodes, the simulator's annotations are checked, and
Volcano's admission (defaulting and validation) runs over Jobs, PodGroups and
Queues. Any problem refuses the whole input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..api import admission, sim_annotations as ann, validation
from ..api.core import ConfigMap, Node, Pod
from ..api.loader import Loaded, Problems, Source, object_label
from ..api.native_workloads import NodeGroup, NumaLayout
from ..api.quantity import parse_quantity
from ..api.topology import MAX_CPUS, HyperNode, Numatopology
from ..api.volcano import Job, JobTemplate, PriorityClass, Queue
from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf
from . import gang_source

if TYPE_CHECKING:  # pragma: no cover
    from ..api.core import PodSpec
    from .documents import DocumentFeed
    from .gang_source import GangInputCheck
    from .traces import TraceFeed

CONF_KEY = "volcano-scheduler.conf"


@dataclass
class Item:
    obj: Any
    source: Source
    submit_at: float = 0.0
    delete_at: float | None = None
    update: bool = False  # a later document for an object defined earlier (a user's update)
    origin: int = 0  # the loaded object it comes from (its place in the input)
    rank: int = -1  # its place among the input's submissions when a feed holds some of them (sim/documents.py)


@dataclass
class SimInput:
    items: list[Item] = field(default_factory=list)
    conf_text: str | None = None
    conf_source: str | None = None
    conf_origin: str | None = None  # "<file>: document N: ConfigMap/x: data[volcano-scheduler.conf]"
    warnings: list[str] = field(default_factory=list)  # accepted, but partly ignored
    # Jobs made as the simulated clock reaches them (their prepared Items, in arrival order): a
    # trace's, after the items (sim/traces.py), or the input's own Volcano Jobs among them
    # (sim/documents.py).
    stream: TraceFeed | DocumentFeed | None = None


def _check_sia_tables(problems: Problems, src: Source, job: Job, items: list[Item]) -> None:
    """A Job run by Sia's tables (lavaflow.io/speed-tables: sia) needs them for each GPU type it
    may run on among the nodes of ``items`` (none when a trace's jobs are prepared in batches:
    their traces were checked against the cluster)."""
    from ..elastic import sia, spec as es

    annotations = job.metadata.annotations
    if str(annotations.get(es.SPEED_TABLES, "")).strip().lower() != "sia":
        return
    from .traces import cluster_gpu_types

    shape = es.job_shape(job)
    types = cluster_gpu_types(items)
    if shape is not None and shape[3] is not None:
        types = {t for t in types if t == shape[3]}
    app = str(annotations.get(es.APPLICATION, "")).strip()
    field_name = f"metadata.annotations[{es.SPEED_TABLES}]"
    root = sia.configured_root()
    for gtype in sorted(types, key=lambda t: t or ""):
        try:
            suffix = sia.suffix_of(gtype)
            missing = sia.missing_tables(root, app, suffix) if root is not None and app in sia.SIA_APPS else []
        except sia.SiaArtifactError as exc:
            problems.add(src, _what(job), field_name, f"on this cluster: {exc}")
            continue
        if missing:
            problems.add(
                src,
                _what(job),
                field_name,
                f"{app} on GPU type {gtype or suffix} needs Sia's {', '.join(map(str, missing))}",
            )


def _what(obj: Any) -> str:
    return object_label(obj)


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


def numa_topology(node_name: str, cpus: int, layout: NumaLayout) -> Numatopology:
    """The Numatopology the resource exporter would report for a node of ``layout``."""
    per = cpus // layout.nodes
    return Numatopology.model_validate(
        {
            "metadata": {"name": node_name},
            "spec": {
                "policies": {
                    "CPUManagerPolicy": layout.cpu_manager_policy,
                    "TopologyManagerPolicy": layout.topology_manager_policy,
                },
                "numares": {"cpu": {"allocatable": f"0-{cpus - 1}" if cpus else "", "capacity": cpus}},
                "cpuDetail": {str(c): {"numa": c // per, "socket": c // per, "core": c} for c in range(cpus)},
            },
        }
    )


def _time_annotation(problems: Problems, src: Source, obj: Any, key: str, allow_inf: bool = False) -> float | None:
    raw = obj.metadata.annotations.get(key)
    if raw is None:
        return None
    try:
        return ann.parse_duration(raw, allow_inf=allow_inf)
    except ValueError as exc:
        problems.add(src, _what(obj), f"metadata.annotations[{key}]", str(exc))
        return None


def _check_pod_annotations(
    problems: Problems, src: Source, what: str, prefix: str, annotations: dict[str, str]
) -> None:
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
            problems.add(
                src,
                what,
                f"{prefix}.annotations[{ann.EXIT_CODE}]",
                f"{annotations[ann.EXIT_CODE]!r} is not an exit code (0-255)",
            )
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


QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "BatchJob")


def _check_queue_annotations(
    problems: Problems, src: Source, obj: Any, queues: dict[str, Queue], warnings: list[str]
) -> None:
    """Pods name their queue by annotation, and native workloads by their pod template's; the
    PodGroup made for them would be refused by admission (as Volcano's webhook does), so a
    missing queue is refused here. Volcano's podgroup controller reads the queue from the pod
    alone: the annotation on a Deployment's or Job's own metadata is not read, which is said."""
    if isinstance(obj, Pod) and "scheduling.k8s.io/group-name" in obj.metadata.annotations:
        return  # it joins a PodGroup of its own choosing: that PodGroup's queue counts
    places = [("metadata", obj.metadata.annotations)]
    tmpl = getattr(getattr(obj, "spec", None), "template", None)
    if type(obj).__name__ in WORKLOAD_KINDS and tmpl is not None:
        places = [("spec.template.metadata", tmpl.metadata.annotations)]
        on_owner = obj.metadata.annotations.get(QUEUE_ANNOTATION)
        if on_owner is not None and tmpl.metadata.annotations.get(QUEUE_ANNOTATION) is None:
            warnings.append(
                f"{src}: {_what(obj)}: metadata.annotations[{QUEUE_ANNOTATION}]: not read; Volcano takes a "
                f"pod's queue from the pod's own annotation (spec.template.metadata.annotations), so these pods "
                "go to queue 'default'"
            )
    for prefix, anns in places:
        name = anns.get(QUEUE_ANNOTATION)
        if name is not None and name not in queues:
            problems.add(
                src,
                _what(obj),
                f"{prefix}.annotations[{QUEUE_ANNOTATION}]",
                f"Queue {name!r} does not exist; existing queues are: {admission.quoted_names(sorted(queues))}.",
            )


# Labels every kubelet sets on its node (hostname is the node's name).
KUBELET_LABELS = {
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/arch": "amd64",
}
# A kubelet always reports its root disk; nodes declared without it get this much.
DEFAULT_EPHEMERAL_STORAGE = "100Gi"


def _pod_specs_of(obj: Any) -> list[PodSpec]:
    if isinstance(obj, Pod):
        return [obj.spec]
    if isinstance(obj, (Job, JobTemplate)):
        return [t.template.spec for t in obj.spec.tasks]
    tmpl = getattr(getattr(obj, "spec", None), "template", None)
    return [tmpl.spec] if tmpl is not None and hasattr(tmpl, "spec") else []


def _server_fields(items: list[Item]) -> None:
    """Objects saved with ``kubectl get -o yaml`` carry fields the API server sets on create and
    ignores in a request: creationTimestamp (an RFC 3339 string there, a simulated time here)
    and resourceVersion. The simulated store sets them when the object is submitted, as the API
    server would; uid is kept (owner references may name it)."""
    for it in items:
        meta = it.obj.metadata
        meta.creation_timestamp = None
        meta.resource_version = None


def _kubelet_defaults(items: list[Item]) -> None:
    """What a real node has without being told: the kubelet's labels, and ephemeral-storage
    (added only when some pod asks for it, so other inputs keep their resource columns)."""
    wants_storage = any(
        "ephemeral-storage" in c.resources.requests or "ephemeral-storage" in c.resources.limits
        for it in items
        for spec in _pod_specs_of(it.obj)
        for c in list(spec.containers) + list(spec.init_containers)
    )
    for it in items:
        node = it.obj
        if not isinstance(node, Node):
            continue
        labels = node.metadata.labels
        labels.setdefault("kubernetes.io/hostname", node.name)
        for k, v in KUBELET_LABELS.items():
            labels.setdefault(k, v)
        if wants_storage:
            for res in (node.status.allocatable, node.status.capacity):
                if res and "ephemeral-storage" not in res:
                    res["ephemeral-storage"] = parse_quantity(DEFAULT_EPHEMERAL_STORAGE)


def _ignored_in_pod_spec(spec: PodSpec, prefix: str) -> list[str]:
    out = []
    if spec.resource_claims:
        out.append(f"{prefix}.resourceClaims")
    for kind, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for ci, c in enumerate(containers):
            if c.resources.claims:
                out.append(f"{prefix}.{kind}[{ci}].resources.claims")
    return out


def unimplemented_constraints(obj: Any) -> list[str]:
    """Fields of ``obj`` naming what lavaflow does not implement (they are ignored): placement
    constraints (partitionPolicy, DRA resource claims) and Volcano job plugins it does not have.
    (networkTopology and topologyPolicy are the network-topology-aware and numa-aware plugins'.)"""
    out: list[str] = []
    spec: Any = getattr(obj, "spec", None)
    if isinstance(obj, (Job, JobTemplate)):
        from ..controllers.job.plugins import PLUGINS as JOB_PLUGINS

        out.extend(f"spec.plugins[{name}]" for name in spec.plugins if name not in JOB_PLUGINS)
        for ti, task in enumerate(spec.tasks):
            base = f"spec.tasks[{ti}]"
            if task.partition_policy is not None:
                out.append(f"{base}.partitionPolicy")
            out.extend(_ignored_in_pod_spec(task.template.spec, f"{base}.template.spec"))
    elif isinstance(obj, Pod):
        out.extend(_ignored_in_pod_spec(spec, "spec"))
    elif getattr(spec, "template", None) is not None and hasattr(spec.template, "spec"):
        out.extend(_ignored_in_pod_spec(spec.template.spec, "spec.template.spec"))
    return out


#: The simulator refuses more pods per task or workload (or nodes per NodeGroup) than this:
#: it would create them all, one by one, in memory.
SIM_MAX_REPLICAS = 100_000


def _sim_limits(obj: Any) -> list[validation.Problem]:
    """Sizes the API server accepts (int32) but the simulator cannot create in reasonable time and memory."""
    out: list[validation.Problem] = []
    hint = f"the simulator creates at most {SIM_MAX_REPLICAS} pods per task or workload; lower it"
    if isinstance(obj, Job):
        for i, t in enumerate(obj.spec.tasks):
            if SIM_MAX_REPLICAS < t.replicas <= validation.INT32_MAX:
                out.append(admission.Problem(f"spec.tasks[{i}].replicas", f"replicas is {t.replicas}; {hint}."))
        return out
    spec = getattr(obj, "spec", None)
    for field_name in ("replicas", "parallelism"):
        value = getattr(spec, field_name, None)
        if isinstance(value, int) and SIM_MAX_REPLICAS < value <= validation.INT32_MAX:
            out.append(admission.Problem(f"spec.{field_name}", f"{field_name} is {value}; {hint}."))
    return out


def _expand(loaded: list[Loaded], problems: Problems) -> list[Item]:
    items: list[Item] = []
    for origin, lo in enumerate(loaded):
        obj, src = lo.obj, lo.source
        if isinstance(obj, NodeGroup):
            if obj.spec.count < 0:
                problems.add(src, _what(obj), "spec.count", "must be ≥ 0")
                continue
            if obj.spec.count > SIM_MAX_REPLICAS:
                problems.add(
                    src,
                    _what(obj),
                    "spec.count",
                    f"is {obj.spec.count}; the simulator handles at most {SIM_MAX_REPLICAS} nodes per NodeGroup",
                )
                continue
            if not obj.spec.capacity:
                problems.add(src, _what(obj), "spec.capacity", "is required (the allocatable resources of each node)")
            found: list[validation.Problem] = []
            validation.check_meta(obj, found)
            validation.check_resources(obj.spec.capacity, "spec.capacity", found, "capacity")
            validation.check_devices(obj.spec.capacity, "spec.capacity", found)
            for p in found:
                problems.add(src, _what(obj), p.path, p.message)
            if found:
                continue
            nodes = expand_node_group(obj)
            items.extend(Item(node, src, origin=origin) for node in nodes)
            if obj.spec.numa is not None:
                cpu = obj.spec.capacity.get("cpu")
                if cpu is not None and cpu > MAX_CPUS:
                    problems.add(
                        src,
                        _what(obj),
                        "spec.capacity[cpu]",
                        f"is {cpu}; with spec.numa every CPU is modelled, and a node has at most {MAX_CPUS}",
                    )
                    continue
                if cpu is None or cpu != int(cpu) or int(cpu) % obj.spec.numa.nodes:
                    problems.add(
                        src,
                        _what(obj),
                        "spec.numa.nodes",
                        f"capacity cpu ({cpu}) must be a whole number of CPUs divisible by the NUMA nodes ({obj.spec.numa.nodes})",
                    )
                    continue
                items.extend(
                    Item(numa_topology(node.name, int(cpu), obj.spec.numa), src, origin=origin) for node in nodes
                )
            continue
        items.append(Item(obj, src, origin=origin))
    return items


def _times(items: list[Item], problems: Problems) -> None:
    for it in items:
        it.submit_at = _time_annotation(problems, it.source, it.obj, ann.SUBMIT_AT) or 0.0
        delete = _time_annotation(problems, it.source, it.obj, ann.DELETE_AT, allow_inf=True)
        it.delete_at = None if delete is None or math.isinf(delete) else delete
        if it.delete_at is not None and it.delete_at < it.submit_at:
            problems.add(it.source, _what(it.obj), f"metadata.annotations[{ann.DELETE_AT}]", "is before submit-at")
        if isinstance(it.obj, Node):
            fail, recover = (_time_annotation(problems, it.source, it.obj, k) for k in (ann.FAIL_AT, ann.RECOVER_AT))
            if fail is not None and recover is not None and recover <= fail:
                problems.add(
                    it.source, _what(it.obj), f"metadata.annotations[{ann.RECOVER_AT}]", "must be after fail-at"
                )


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
            hint = (
                " (a later version of a Job needs a later sim.lavaflow.io/submit-at)" if isinstance(it.obj, Job) else ""
            )
            problems.add(
                it.source,
                _what(it.obj),
                "metadata.name",
                f"duplicates the {it.obj.kind} defined at {first.source}{hint}",
            )


def _pod_name_collisions(items: list[Item], problems: Problems) -> None:
    """Pods whose names the input fixes -- bare pods, a Volcano Job's <job>-<task>-<index>, a
    StatefulSet's <name>-<ordinal> -- must not meet: Volcano and the StatefulSet controller would
    find the name taken and the pod would never exist. (Deployments', ReplicaSets' and batch Jobs'
    pods are named from a generateName and cannot meet.)"""
    from ..controllers.job import pod_name

    owner_of: dict[str, str] = {}  # namespace/pod name -> what names it
    for it in items:
        obj = it.obj
        if it.update or not obj.metadata.name:
            continue
        if isinstance(obj, Pod):
            names = [(obj.name, "")]
        elif isinstance(obj, Job):
            names = [
                (pod_name(obj, t, i), f" (task {t.name}, index {i})")
                for t in obj.spec.tasks
                for i in range(min(t.replicas, 100_000))
            ]
        elif type(obj).__name__ == "StatefulSet":
            names = [(f"{obj.name}-{i}", f" (ordinal {i})") for i in range(min(obj.spec.replicas or 0, 100_000))]
        else:
            continue
        what = _what(obj)
        for name, detail in names:
            key = f"{obj.namespace}/{name}"
            other = owner_of.get(key)
            if other is None:
                owner_of[key] = f"{what}{detail} at {it.source}"
                continue
            problems.add(
                it.source,
                what,
                "metadata.name",
                f"its pod {name}{detail} would have the name of the pod of {other}; one of them could never "
                "be created: rename one",
            )
            break  # one line per object


def _spawn_cycle(pod: Pod, spawner_of: dict[str, str]) -> list[str]:
    """The circle of spawned-by references that leads back to ``pod`` (names), or []."""
    path = [pod.key]
    key = spawner_of.get(pod.key)
    while key is not None and key not in path:
        path.append(key)
        key = spawner_of.get(key)
    if key != pod.key:
        return []  # no circle, or one that ``pod`` only leads into (reported at its members)
    return [k.split("/", 1)[1] for k in [*path, pod.key]]


# PriorityClasses every cluster has (kube-apiserver creates them)
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")


def _priority_classes(items: list[Item], problems: Problems) -> set[str]:
    """The PriorityClasses the input defines; a second globalDefault is refused, as kube-apiserver's
    Priority admission refuses it."""
    names = set(SYSTEM_PRIORITY_CLASSES)
    default: Item | None = None
    for it in items:
        if isinstance(it.obj, PriorityClass):
            names.add(it.obj.name)
            if it.obj.global_default:
                if default is not None:
                    problems.add(
                        it.source,
                        _what(it.obj),
                        "globalDefault",
                        f"PriorityClass {default.obj.name!r} ({default.source}) is already the global default; "
                        "only one may be",
                    )
                else:
                    default = it
    return names


def _priority_class_problems(obj: Any, known: set[str]) -> list[validation.Problem]:
    """A priorityClassName must name a PriorityClass (kube-apiserver's Priority admission refuses a
    pod naming none; a Job's or workload's pods would be refused as they are created)."""
    out = []
    spec = getattr(obj, "spec", None)
    refs: list[tuple[str, str | None]] = [("spec.priorityClassName", getattr(spec, "priority_class_name", None))]
    if isinstance(obj, Job):
        refs += [
            (f"spec.tasks[{i}].template.spec.priorityClassName", t.template.spec.priority_class_name)
            for i, t in enumerate(obj.spec.tasks)
        ]
    tmpl = getattr(spec, "template", None)
    if tmpl is not None and hasattr(tmpl, "spec"):
        refs.append(("spec.template.spec.priorityClassName", getattr(tmpl.spec, "priority_class_name", None)))
    for path, name in refs:
        if name and name not in known:
            out.append(
                validation.Problem(path, f"no PriorityClass named {name!r} (define one, or leave the field out)")
            )
    return out


def _metadata_problems(obj: Any) -> list[validation.Problem]:
    """kube-apiserver's limits on labels and annotations, of the object and of its pod templates."""
    out: list[validation.Problem] = []
    validation.check_labels_and_annotations(obj.metadata, "metadata", out)
    spec = getattr(obj, "spec", None)
    if isinstance(obj, Job):
        for i, t in enumerate(obj.spec.tasks):
            validation.check_labels_and_annotations(t.template.metadata, f"spec.tasks[{i}].template.metadata", out)
    tmpl = getattr(spec, "template", None)
    if tmpl is not None and hasattr(tmpl, "metadata") and hasattr(tmpl, "spec"):
        validation.check_labels_and_annotations(tmpl.metadata, "spec.template.metadata", out)
    return out


def _gang_object_problems(
    checks: list[GangInputCheck], obj: Any, queues: dict[str, Queue]
) -> list[validation.Problem] | None:
    """The problems of an object of one of the gang APIs' kinds, by that API; None: none's."""
    for check in checks:
        found = check.problems(obj, queues)
        if found is not None:
            return found
    return None


def prepare(loaded: list[Loaded], scheduler_name: str = "volcano") -> SimInput:
    """Validate and default the loaded objects; raise InputError on any problem."""
    problems = Problems()
    out = SimInput()
    items = _expand(loaded, problems)
    _server_fields(items)
    _kubelet_defaults(items)
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
    spawner_of = {
        it.obj.key: f"{it.obj.namespace}/{it.obj.metadata.annotations[ann.SPAWNED_BY]}"
        for it in items
        if isinstance(it.obj, Pod) and ann.SPAWNED_BY in it.obj.metadata.annotations
    }
    declared = {("Queue", name) for name in queues} | {("Job", it.obj.key) for it in items if isinstance(it.obj, Job)}
    templates = {it.obj.key for it in items if isinstance(it.obj, JobTemplate)}
    gang_checks = [api.input_check(items) for api in gang_source.GANG_APIS]  # each gang API's, in order
    latest_job: dict[str, Job] = {}
    priority_classes = _priority_classes(items, problems)
    _pod_name_collisions(items, problems)
    tier_names = {it.obj.spec.tier_name for it in items if isinstance(it.obj, HyperNode) and it.obj.spec.tier_name}
    ctx = admission.Context(queues=queues, scheduler_name=scheduler_name, existing=declared, templates=templates)
    for it in items:
        obj, src = it.obj, it.source
        found: list[admission.Problem] = []
        rules = admission.RULES.get(type(obj).__name__)
        if rules is not None:
            if rules.mutate is not None:
                rules.mutate(obj, ctx)
            found = rules.validate(obj, ctx)  # an update passes every check a create does ...
            if it.update and rules.validate_update is not None:
                # ... and those of an update (what may not change)
                found = list(dict.fromkeys([*found, *rules.validate_update(latest_job[obj.key], obj, ctx)]))
        if isinstance(obj, Job):
            latest_job[obj.key] = obj
            _check_sia_tables(problems, src, obj, items)
            for ti, task in enumerate(obj.spec.tasks):
                _check_pod_annotations(
                    problems, src, _what(obj), f"spec.tasks[{ti}].template.metadata", task.template.metadata.annotations
                )
        elif (own := _gang_object_problems(gang_checks, obj, queues)) is not None:
            found = own  # an object of a gang API (the others are checked by admission, as Volcano's)
        elif isinstance(obj, Pod):
            found = list(found)
            for check in gang_checks:
                found += check.pod_problems(obj)
            _check_pod_annotations(problems, src, _what(obj), "metadata", obj.metadata.annotations)
            parent = obj.metadata.annotations.get(ann.SPAWNED_BY)
            if parent is not None and f"{obj.namespace}/{parent}" not in pods_by_key:
                problems.add(
                    src,
                    _what(obj),
                    f"metadata.annotations[{ann.SPAWNED_BY}]",
                    f"no pod {parent!r} in namespace {obj.namespace}",
                )
            if parent == obj.name:
                problems.add(src, _what(obj), f"metadata.annotations[{ann.SPAWNED_BY}]", "a pod cannot spawn itself")
            elif parent is not None:
                cycle = _spawn_cycle(obj, spawner_of)
                if cycle:
                    problems.add(
                        src,
                        _what(obj),
                        f"metadata.annotations[{ann.SPAWNED_BY}]",
                        f"pods spawn each other in a circle ({' → '.join(cycle)}): none of them would ever start",
                    )
        elif isinstance(obj, ConfigMap) and CONF_KEY in obj.data:
            try:
                load_scheduler_conf(obj.data[CONF_KEY])
            except SchedulerConfError as exc:
                for path, msg in exc.problems:
                    problems.add(src, _what(obj), f"data[{CONF_KEY}]" + (f".{path}" if path else ""), msg)
            out.conf_text = obj.data[CONF_KEY]
            out.conf_source = str(src)
            out.conf_origin = f"{src}: {_what(obj)}: data[{CONF_KEY}]"
        elif rules is None:
            # Kinds no Volcano webhook sees: kube-apiserver's own checks.
            found = validation.validate_object(obj)
            tmpl = getattr(getattr(obj, "spec", None), "template", None)
            if tmpl is not None and hasattr(tmpl, "spec"):  # pods of native workloads naming a gang
                for check in gang_checks:
                    found += check.template_problems(obj, tmpl)
            if hasattr(getattr(obj, "spec", None), "template"):
                _check_pod_annotations(
                    problems, src, _what(obj), "spec.template.metadata", obj.spec.template.metadata.annotations
                )
        if isinstance(obj, Pod) or type(obj).__name__ in WORKLOAD_KINDS:
            _check_queue_annotations(problems, src, obj, queues, out.warnings)
        found = list(found) + _sim_limits(obj)
        found = list(found) + _metadata_problems(obj) + _priority_class_problems(obj, priority_classes)
        for p in found:
            problems.add(src, _what(obj), p.path, p.message)
        topo = getattr(getattr(obj, "spec", None), "network_topology", None)
        if topo is not None and topo.highest_tier_name and topo.highest_tier_name not in tier_names:
            known = ", ".join(repr(t) for t in sorted(tier_names)) or "none"
            out.warnings.append(
                f"{src}: {_what(obj)}: spec.networkTopology.highestTierName {topo.highest_tier_name!r} is the "
                f"tierName of no HyperNode (tierNames: {known}); the job may span every tier"
            )
        ignored = [] if it.update else unimplemented_constraints(obj)
        if ignored:  # once per object, naming every such field
            out.warnings.append(
                f"{src}: {_what(obj)}: {', '.join(ignored)}: not implemented by lavaflow, ignored "
                "(the job is scheduled without it)"
            )
    problems.raise_if_any()
    out.items = items
    return out
