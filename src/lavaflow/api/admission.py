"""Admission: the defaults and checks Volcano's webhooks apply on create/update.

Each ``default_*`` function mutates an object in place, as a mutating webhook
would; each ``validate_*`` function returns a list of :class:`Problem` (empty
when the object is acceptable).  A problem's ``path`` uses the YAML (camelCase)
field names, list indexes in brackets and map keys in brackets, e.g.
``spec.tasks[1].minAvailable`` or ``spec.capability[cpu]``; ``""`` stands for
the object as a whole.  The caller adds the object's kind and name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from . import validation as api
from .core import Pod
from .validation import Problem
from .quantity import format_quantity
from .volcano import (
    JOB_ACTIONS,
    JOB_EVENTS,
    JOB_PLUGINS,
    Job,
    LifecyclePolicy,
    PodGroup,
    Queue,
    TaskSpec,
)

__all__ = [
    "Problem",
    "parse_duration",
    "default_job",
    "validate_job",
    "validate_job_update",
    "default_podgroup",
    "validate_podgroup",
    "default_queue",
    "validate_queue",
    "validate_queue_delete",
    "validate_pod",
    "DEFAULT_QUEUE",
    "ROOT_QUEUE",
    "DEFAULT_MAX_RETRY",
    "JDB_MIN_AVAILABLE",
    "JDB_MAX_UNAVAILABLE",
    "TOPOLOGY_POLICIES",
    "QUEUE_STATES",
]


DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_PREFIX = "default"
OPEN = "Open"
QUEUE_STATES = ("Open", "Closed")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
DEPENDS_ON_ITERATIONS = ("any", "all")
MAX_WEIGHT = 65535
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"

# Plugins that need the svc plugin (headless service + host files).
_NEEDS_SVC = ("tensorflow", "mpi", "pytorch", "ray")
_MPI_DEFAULT_MASTER = "master"

_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253
_LABEL_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")


# --- durations ---------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER = r"(?:\d+\.?\d*|\.\d+)"
_DURATION_PART = re.compile(rf"({_NUMBER})(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_BARE_NUMBER = re.compile(_NUMBER)


def parse_duration(text: str) -> float:
    """Parse a Go-style duration (``"90s"``, ``"1h30m"``, ``"1.5h"``, ``"250ms"``) into seconds.

    Units are ``ns``, ``us`` (or ``µs``), ``ms``, ``s``, ``m`` and ``h``; several
    number+unit parts may be concatenated and an optional leading sign applies
    to the whole.  A bare number (``"30"``, ``"0.5"``) is taken as seconds.
    Raises :class:`ValueError` for anything else.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a duration")
    body = text
    sign = 1.0
    if body[:1] in ("+", "-"):
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if not body:
        raise ValueError(f"{text!r} is not a duration: it has no number")
    if _BARE_NUMBER.fullmatch(body):
        return sign * float(body)
    total = 0.0
    pos = 0
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if m is None:
            raise ValueError(
                f"{text!r} is not a duration: expected a number followed by one of "
                f"ns, us, ms, s, m, h at {body[pos:]!r}"
            )
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


# --- small helpers -------------------------------------------------------------


_label_error = api.label_error
_subdomain_error = api.subdomain_error


def _names(items: Iterable[str], limit: int = 10) -> str:
    items = list(items)
    if not items:
        return "(none)"
    shown = ", ".join(repr(x) for x in items[:limit])
    if len(items) > limit:
        shown += f" and {len(items) - limit} more"
    return shown


def _valid(values: Iterable[str]) -> str:
    return ", ".join(values)


def _qty(resource: str, amount: Decimal) -> str:
    return format_quantity(resource, float(amount))


def _parent_of(q: Queue) -> str:
    """The queue's parent name, treating an unset parent as ``root`` (except for root itself)."""
    if q.spec.parent:
        return q.spec.parent
    return "" if q.name == ROOT_QUEUE else ROOT_QUEUE


def _queue_is_open(q: Queue) -> bool:
    return q.status.state in ("", OPEN)


# --- Job -----------------------------------------------------------------------


def default_job(job: Job, scheduler_name: str = "volcano") -> None:
    """Fill in what Volcano's Job mutating webhook fills in (in place)."""
    spec = job.spec
    if not spec.queue:
        spec.queue = DEFAULT_QUEUE
    if not spec.scheduler_name:
        spec.scheduler_name = scheduler_name
    if spec.max_retry == 0:
        spec.max_retry = DEFAULT_MAX_RETRY
    for i, task in enumerate(spec.tasks):
        if not task.name:
            task.name = f"{DEFAULT_TASK_PREFIX}{i}"
        if task.min_available is None:
            pp = task.partition_policy
            if pp is not None:
                task.min_available = pp.min_partitions * pp.partition_size
            else:
                task.min_available = task.replicas
        if task.max_retry == 0:
            task.max_retry = DEFAULT_MAX_RETRY
        pod_spec = task.template.spec
        if not pod_spec.scheduler_name:
            pod_spec.scheduler_name = spec.scheduler_name
        if not pod_spec.priority_class_name and spec.priority_class_name:
            pod_spec.priority_class_name = spec.priority_class_name
    if spec.min_available == 0:
        spec.min_available = sum(
            t.min_available if t.min_available is not None else t.replicas for t in spec.tasks
        )
    plugins = spec.plugins
    if any(name in plugins for name in _NEEDS_SVC) and "svc" not in plugins:
        plugins["svc"] = []
    if "mpi" in plugins and "ssh" not in plugins:
        plugins["ssh"] = []


def _mpi_master_name(args: list[str]) -> str:
    master = _MPI_DEFAULT_MASTER
    for i, arg in enumerate(args):
        for prefix in ("--master=", "-master="):
            if arg.startswith(prefix):
                master = arg[len(prefix) :]
        if arg in ("--master", "-master") and i + 1 < len(args):
            master = args[i + 1]
    return master


def _check_policies(policies: list[LifecyclePolicy], base: str, out: list[Problem]) -> None:
    """Rules for one level of lifecycle policies (the job's, or one task's)."""
    seen_events: dict[str, int] = {}
    seen_codes: dict[int, int] = {}
    valid_events = _valid(JOB_EVENTS)
    valid_actions = _valid(JOB_ACTIONS)
    for i, pol in enumerate(policies):
        path = f"{base}[{i}]"
        events: list[tuple[str, str]] = []
        if pol.event:
            events.append((pol.event, f"{path}.event"))
        events.extend((ev, f"{path}.events[{j}]") for j, ev in enumerate(pol.events))
        has_code = pol.exit_code is not None

        if events and has_code:
            out.append(
                Problem(
                    path,
                    f"This policy sets both an event ({events[0][0]!r}) and exitCode {pol.exit_code}; "
                    "a policy must react to events or to an exit code, so split it into two policies.",
                )
            )
        elif not events and not has_code:
            out.append(
                Problem(
                    path,
                    "This policy names nothing to react to; set event/events "
                    f"(one of {valid_events}) or a non-zero exitCode.",
                )
            )

        for ev, ev_path in events:
            if ev not in JOB_EVENTS:
                out.append(Problem(ev_path, f"Unknown event {ev!r}; valid events are: {valid_events}."))
                continue
            first = seen_events.get(ev)
            if first is None:
                seen_events[ev] = i
            elif first == i:
                out.append(Problem(ev_path, f"Event {ev!r} is listed twice in this policy; list it once."))
            else:
                out.append(
                    Problem(
                        ev_path,
                        f"Event {ev!r} is already handled by {base}[{first}]; "
                        "each event may appear in only one policy.",
                    )
                )

        if has_code:
            code = pol.exit_code
            if code == 0:
                out.append(
                    Problem(
                        f"{path}.exitCode",
                        "exitCode 0 means success and cannot trigger a policy; use a non-zero exit code.",
                    )
                )
            elif code in seen_codes:
                out.append(
                    Problem(
                        f"{path}.exitCode",
                        f"exitCode {code} is already handled by {base}[{seen_codes[code]}]; "
                        "each exit code may appear in only one policy.",
                    )
                )
            else:
                seen_codes[code] = i

        if not pol.action:
            out.append(Problem(f"{path}.action", f"This policy has no action; set one of: {valid_actions}."))
        elif pol.action not in JOB_ACTIONS:
            out.append(
                Problem(f"{path}.action", f"Unknown action {pol.action!r}; valid actions are: {valid_actions}.")
            )

        if pol.timeout is not None:
            try:
                seconds = parse_duration(pol.timeout)
            except ValueError:
                out.append(
                    Problem(
                        f"{path}.timeout",
                        f"timeout {pol.timeout!r} is not a valid duration; write it like '30s', '5m' or '1h30m'.",
                    )
                )
            else:
                if seconds < 0:
                    out.append(
                        Problem(f"{path}.timeout", f"timeout {pol.timeout!r} is negative; use zero or a positive duration.")
                    )

    if "*" in seen_events and (len(policies) > 1 or len(seen_events) > 1):
        out.append(
            Problem(
                base,
                f"The '*' event (in {base}[{seen_events['*']}]) matches every event, so it must be the only "
                f"policy here, but {len(policies)} policies and {len(seen_events)} events are given; "
                "remove the other policies or the '*' one.",
            )
        )


def _check_partition(task: TaskSpec, base: str, out: list[Problem]) -> None:
    pp = task.partition_policy
    if pp is None:
        return
    ppath = f"{base}.partitionPolicy"
    ok = True
    if pp.total_partitions < 1:
        out.append(
            Problem(f"{ppath}.totalPartitions", f"totalPartitions is {pp.total_partitions}; it must be at least 1.")
        )
        ok = False
    if pp.partition_size < 1:
        out.append(Problem(f"{ppath}.partitionSize", f"partitionSize is {pp.partition_size}; it must be at least 1."))
        ok = False
    if pp.min_partitions < 0:
        out.append(Problem(f"{ppath}.minPartitions", f"minPartitions is {pp.min_partitions}; it must not be negative."))
        ok = False
    elif pp.total_partitions >= 1 and pp.min_partitions > pp.total_partitions:
        out.append(
            Problem(
                f"{ppath}.minPartitions",
                f"minPartitions ({pp.min_partitions}) is greater than totalPartitions ({pp.total_partitions}).",
            )
        )
        ok = False
    if not ok:
        return
    want_replicas = pp.total_partitions * pp.partition_size
    if task.replicas != want_replicas:
        out.append(
            Problem(
                f"{base}.replicas",
                f"replicas is {task.replicas}, but partitionPolicy describes {pp.total_partitions} partitions "
                f"of {pp.partition_size} pods; set replicas to {want_replicas}.",
            )
        )
    want_min = pp.min_partitions * pp.partition_size
    if task.min_available is not None and task.min_available != want_min:
        out.append(
            Problem(
                f"{base}.minAvailable",
                f"minAvailable is {task.min_available}, but partitionPolicy asks for at least {pp.min_partitions} "
                f"partitions of {pp.partition_size} pods; set minAvailable to {want_min}.",
            )
        )


def _find_cycles(order: list[str], graph: dict[str, list[str]]) -> list[list[str]]:
    """Distinct cycles in a task dependency graph, each as ``[a, b, ..., a]``."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(order, white)
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for start in order:
        if color[start] != white:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        trail: list[str] = [start]
        color[start] = grey
        while stack:
            node, idx = stack[-1]
            deps = graph.get(node, [])
            if idx < len(deps):
                stack[-1] = (node, idx + 1)
                nxt = deps[idx]
                if color[nxt] == white:
                    color[nxt] = grey
                    stack.append((nxt, 0))
                    trail.append(nxt)
                elif color[nxt] == grey:
                    cycle = trail[trail.index(nxt) :] + [nxt]
                    key = frozenset(cycle)
                    if key not in seen:
                        seen.add(key)
                        cycles.append(cycle)
            else:
                color[node] = black
                stack.pop()
                trail.pop()
    return cycles


def _check_depends_on(tasks: list[TaskSpec], out: list[Problem]) -> None:
    index: dict[str, int] = {}
    for i, t in enumerate(tasks):
        index.setdefault(t.name, i)
    graph: dict[str, list[str]] = {}
    any_deps = False
    for i, t in enumerate(tasks):
        if t.depends_on is None:
            continue
        any_deps = True
        path = f"spec.tasks[{i}].dependsOn"
        if t.depends_on.iteration not in DEPENDS_ON_ITERATIONS:
            out.append(
                Problem(
                    f"{path}.iteration",
                    f"Unknown iteration {t.depends_on.iteration!r}; valid values are: {_valid(DEPENDS_ON_ITERATIONS)}.",
                )
            )
        for j, dep in enumerate(t.depends_on.name):
            dep_path = f"{path}.name[{j}]"
            if dep == t.name:
                out.append(Problem(dep_path, f"Task {t.name!r} depends on itself; remove it from its own dependsOn."))
            elif dep not in index:
                out.append(
                    Problem(
                        dep_path,
                        f"Task {t.name!r} depends on {dep!r}, which is not a task of this job; "
                        f"the tasks are: {_names(index)}.",
                    )
                )
            else:
                graph.setdefault(t.name, []).append(dep)
    if not any_deps:
        return
    for cycle in _find_cycles(list(index), graph):
        first = min(index[n] for n in cycle)
        out.append(
            Problem(
                f"spec.tasks[{first}].dependsOn",
                "Tasks depend on each other in a cycle ("
                + " -> ".join(cycle)
                + "); task dependencies must form a directed acyclic graph.",
            )
        )


def _check_job_queue(name: str, queues: Mapping[str, Queue], path: str, out: list[Problem]) -> None:
    q = queues.get(name)
    if q is None:
        out.append(Problem(path, f"Queue {name!r} does not exist; existing queues are: {_names(sorted(queues))}."))
        return
    if name == ROOT_QUEUE:
        out.append(
            Problem(path, "Jobs cannot be submitted to the root queue; choose a leaf queue such as 'default'.")
        )
        return
    if not _queue_is_open(q):
        out.append(
            Problem(
                path,
                f"Queue {name!r} is {q.status.state}; jobs can only be submitted to an Open queue.",
            )
        )
    children = sorted(n for n, x in queues.items() if n != name and _parent_of(x) == name)
    if children:
        out.append(
            Problem(
                path,
                f"Queue {name!r} has child queues ({_names(children)}); jobs can only be submitted to leaf queues.",
            )
        )


def validate_job(job: Job, queues: Mapping[str, Queue] | None = None) -> list[Problem]:
    """Volcano's Job create checks. Run :func:`default_job` first.

    ``queues`` maps queue names to queues; when None the queue checks are skipped.
    """
    out: list[Problem] = []
    spec = job.spec
    meta = job.metadata

    # lavaflow's elastic training annotations (speed model, size knobs, progress reports).
    from ..elastic.spec import validate as validate_elastic

    out += [Problem(path, msg) for path, msg in validate_elastic(job)]

    # Name of the job itself.
    job_name = meta.name
    if job_name:
        why = _subdomain_error(job_name)
        if why:
            out.append(Problem("metadata.name", f"Job name {job_name!r} is not a valid DNS-1123 subdomain: {why}."))
            job_name = ""
    elif meta.generate_name:
        job_name = meta.generate_name + "x" * 5  # the server appends five characters
        if _subdomain_error(job_name):
            job_name = ""

    api.check_namespace(job, out)

    # Job-level numbers.
    api.check_int32(spec.min_available, "spec.minAvailable", out, "minAvailable")
    if spec.min_available < 0:
        out.append(Problem("spec.minAvailable", f"minAvailable is {spec.min_available}; it must not be negative."))
    if spec.max_retry < 0:
        out.append(Problem("spec.maxRetry", f"maxRetry is {spec.max_retry}; it must not be negative."))
    if spec.ttl_seconds_after_finished is not None and spec.ttl_seconds_after_finished < 0:
        out.append(
            Problem(
                "spec.ttlSecondsAfterFinished",
                f"ttlSecondsAfterFinished is {spec.ttl_seconds_after_finished}; it must not be negative.",
            )
        )
    if spec.min_success is not None and spec.min_success < 1:
        out.append(Problem("spec.minSuccess", f"minSuccess is {spec.min_success}; it must be at least 1 when set."))
    if spec.running_estimate is not None:
        try:
            parse_duration(spec.running_estimate)
        except ValueError:
            out.append(
                Problem(
                    "spec.runningEstimate",
                    f"runningEstimate {spec.running_estimate!r} is not a valid duration; write it like '30m' or '2h'.",
                )
            )

    # Tasks.
    if not spec.tasks:
        out.append(Problem("spec.tasks", "The job has no tasks; add at least one entry under spec.tasks."))
    seen_names: dict[str, int] = {}
    total_replicas = 0
    sizes_ok = True  # every task's replicas fits int32 (otherwise the total is not meaningful)
    for i, task in enumerate(spec.tasks):
        base = f"spec.tasks[{i}]"
        name_ok = False
        if not task.name:
            out.append(Problem(f"{base}.name", "The task has no name; give it a DNS-1123 label such as 'worker'."))
        else:
            why = _label_error(task.name)
            if why:
                out.append(Problem(f"{base}.name", f"Task name {task.name!r} is not a valid DNS-1123 label: {why}."))
            else:
                name_ok = True
            if task.name in seen_names:
                out.append(
                    Problem(
                        f"{base}.name",
                        f"Task name {task.name!r} is already used by spec.tasks[{seen_names[task.name]}]; "
                        "task names must be unique within a job.",
                    )
                )
                name_ok = False
            else:
                seen_names[task.name] = i

        if task.replicas < 0:
            out.append(Problem(f"{base}.replicas", f"replicas is {task.replicas}; it must not be negative."))
        elif api.check_int32(task.replicas, f"{base}.replicas", out, "replicas"):
            total_replicas += task.replicas
        else:
            sizes_ok = name_ok = False
        api.check_pod_spec(task.template.spec, f"{base}.template.spec", out)
        if task.min_available is not None:
            if task.min_available < 0:
                out.append(
                    Problem(f"{base}.minAvailable", f"minAvailable is {task.min_available}; it must not be negative.")
                )
            elif task.replicas >= 0 and task.min_available > task.replicas:
                out.append(
                    Problem(
                        f"{base}.minAvailable",
                        f"minAvailable ({task.min_available}) is greater than replicas ({task.replicas}); "
                        f"lower it to at most {task.replicas}.",
                    )
                )
        if task.max_retry < -1:
            out.append(
                Problem(
                    f"{base}.maxRetry",
                    f"maxRetry is {task.max_retry}; use -1 for no limit or a number of retries of 0 or more.",
                )
            )
        if task.topology_policy is not None and task.topology_policy not in TOPOLOGY_POLICIES:
            out.append(
                Problem(
                    f"{base}.topologyPolicy",
                    f"Unknown topologyPolicy {task.topology_policy!r}; valid values are: {_valid(TOPOLOGY_POLICIES)}.",
                )
            )
        _check_policies(task.policies, f"{base}.policies", out)
        _check_partition(task, base, out)

        if name_ok and job_name:
            pod_name = f"{job_name}-{task.name}-{max(task.replicas - 1, 0)}"
            if len(pod_name) > _LABEL_MAX:
                out.append(
                    Problem(
                        f"{base}.name",
                        f"Pods of task {task.name!r} would be named like {pod_name!r} ({len(pod_name)} characters), "
                        f"over the {_LABEL_MAX}-character limit; shorten the job or task name.",
                    )
                )
            elif _label_error(pod_name):
                out.append(
                    Problem(
                        "metadata.name",
                        f"Pods of task {task.name!r} would be named like {pod_name!r}, which is not a valid "
                        "DNS-1123 label; remove the dots from the job name.",
                    )
                )

    if spec.min_available > total_replicas and spec.tasks and sizes_ok:
        out.append(
            Problem(
                "spec.minAvailable",
                f"minAvailable ({spec.min_available}) is greater than the total replicas of all tasks "
                f"({total_replicas}); lower it to at most {total_replicas}.",
            )
        )

    _check_policies(spec.policies, "spec.policies", out)

    # Plugins.
    for name in spec.plugins:
        if name not in JOB_PLUGINS:
            out.append(
                Problem(f"spec.plugins[{name}]", f"Unknown job plugin {name!r}; valid plugins are: {_valid(JOB_PLUGINS)}.")
            )
    if "mpi" in spec.plugins:
        master = _mpi_master_name(spec.plugins["mpi"] or [])
        if master not in seen_names:
            out.append(
                Problem(
                    "spec.plugins[mpi]",
                    f"The mpi plugin needs a master task named {master!r}, but the tasks are: {_names(seen_names)}; "
                    "rename the master task or pass --master=<task name> to the plugin.",
                )
            )

    # Volumes.
    mounts: dict[str, int] = {}
    for i, vol in enumerate(spec.volumes):
        path = f"spec.volumes[{i}]"
        if not vol.mount_path:
            out.append(Problem(f"{path}.mountPath", "The volume has no mountPath; set the path to mount it at."))
        elif vol.mount_path in mounts:
            out.append(
                Problem(
                    f"{path}.mountPath",
                    f"mountPath {vol.mount_path!r} is already used by spec.volumes[{mounts[vol.mount_path]}]; "
                    "each volume needs its own mount path.",
                )
            )
        else:
            mounts[vol.mount_path] = i
        has_name = bool(vol.volume_claim_name)
        has_claim = vol.volume_claim is not None
        if not has_name and not has_claim:
            out.append(
                Problem(
                    path,
                    "The volume needs either volumeClaimName (an existing PVC) or volumeClaim (a PVC to create).",
                )
            )
        elif has_name and has_claim:
            out.append(
                Problem(
                    path,
                    f"The volume sets both volumeClaimName ({vol.volume_claim_name!r}) and volumeClaim; "
                    "keep volumeClaimName to use that existing PVC, or volumeClaim to create a new one.",
                )
            )
        if has_name:
            why = _subdomain_error(vol.volume_claim_name or "")
            if why:
                out.append(
                    Problem(
                        f"{path}.volumeClaimName",
                        f"volumeClaimName {vol.volume_claim_name!r} is not a valid PVC name: {why}.",
                    )
                )

    # Queue.
    if queues is not None:
        _check_job_queue(spec.queue or DEFAULT_QUEUE, queues, "spec.queue", out)

    # Task dependencies.
    _check_depends_on(spec.tasks, out)
    return out


_MUTABLE_JOB_FIELDS = {"min_available", "priority_class_name", "tasks"}
_MUTABLE_TASK_FIELDS = {"replicas", "min_available", "name"}
_UPDATE_HINT = "only minAvailable, priorityClassName, and each task's replicas and minAvailable may change"


def _volumes_for_compare(dumped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The controller fills volumeClaimName for claims it creates; do not count that as a change.
    out = []
    for v in dumped:
        v = dict(v)
        if v.get("volumeClaim") is not None:
            v["volumeClaimName"] = None
        out.append(v)
    return out


def validate_job_update(old: Job, new: Job) -> list[Problem]:
    """Volcano's Job update checks: only a few spec fields are mutable.

    Both jobs should be complete (the new one carrying the old one's defaults);
    every other spec field is compared as dumped.
    """
    out: list[Problem] = []
    ns, os_ = new.spec, old.spec

    total = 0
    for i, t in enumerate(ns.tasks):
        base = f"spec.tasks[{i}]"
        if t.replicas < 0:
            out.append(Problem(f"{base}.replicas", f"replicas is {t.replicas}; it must not be negative."))
        else:
            total += t.replicas
        if t.min_available is not None:
            if t.min_available < 0:
                out.append(Problem(f"{base}.minAvailable", f"minAvailable is {t.min_available}; it must not be negative."))
            elif t.replicas >= 0 and t.min_available > t.replicas:
                out.append(
                    Problem(
                        f"{base}.minAvailable",
                        f"minAvailable ({t.min_available}) is greater than replicas ({t.replicas}); "
                        f"lower it to at most {t.replicas}.",
                    )
                )
    if ns.min_available < 0:
        out.append(Problem("spec.minAvailable", f"minAvailable is {ns.min_available}; it must not be negative."))
    elif ns.min_available > total:
        out.append(
            Problem(
                "spec.minAvailable",
                f"minAvailable ({ns.min_available}) is greater than the total replicas of all tasks ({total}); "
                f"lower it to at most {total}.",
            )
        )

    old_d = os_.model_dump(by_alias=True, mode="json", exclude=_MUTABLE_JOB_FIELDS)
    new_d = ns.model_dump(by_alias=True, mode="json", exclude=_MUTABLE_JOB_FIELDS)
    old_d["volumes"] = _volumes_for_compare(old_d.get("volumes", []))
    new_d["volumes"] = _volumes_for_compare(new_d.get("volumes", []))
    for key in new_d:
        if old_d.get(key) != new_d.get(key):
            out.append(Problem(f"spec.{key}", f"{key} cannot be changed after the job is created; {_UPDATE_HINT}."))

    if len(os_.tasks) != len(ns.tasks):
        out.append(
            Problem(
                "spec.tasks",
                f"Tasks cannot be added or removed after the job is created (it had {len(os_.tasks)}, "
                f"the update has {len(ns.tasks)}).",
            )
        )
        return out
    for i, (ot, nt) in enumerate(zip(os_.tasks, ns.tasks)):
        base = f"spec.tasks[{i}]"
        if ot.name != nt.name:
            out.append(
                Problem(f"{base}.name", f"Task {ot.name!r} cannot be renamed to {nt.name!r} after the job is created.")
            )
        otd = ot.model_dump(by_alias=True, mode="json", exclude=_MUTABLE_TASK_FIELDS)
        ntd = nt.model_dump(by_alias=True, mode="json", exclude=_MUTABLE_TASK_FIELDS)
        for key in ntd:
            if otd.get(key) != ntd.get(key):
                out.append(
                    Problem(f"{base}.{key}", f"{key} of task {nt.name!r} cannot be changed after the job is created; {_UPDATE_HINT}.")
                )
    return out


# --- PodGroup -------------------------------------------------------------------


def default_podgroup(pg: PodGroup, namespace_queue: str | None = None) -> None:
    """Default the queue: the namespace's queue annotation when given, else ``default``.

    As in Volcano, a PodGroup left on the ``default`` queue is moved to the
    namespace's queue (``scheduling.volcano.sh/queue-name`` on the Namespace).
    """
    if namespace_queue and pg.spec.queue in ("", DEFAULT_QUEUE):
        pg.spec.queue = namespace_queue
    elif not pg.spec.queue:
        pg.spec.queue = DEFAULT_QUEUE


def validate_podgroup(pg: PodGroup, queues: Mapping[str, Queue] | None = None) -> list[Problem]:
    out: list[Problem] = []
    api.check_meta(pg, out)
    api.check_int32(pg.spec.min_member, "spec.minMember", out, "minMember")
    if pg.spec.min_resources:
        api.check_resources(pg.spec.min_resources, "spec.minResources", out, "minResources")
    if pg.spec.min_member < 0:
        out.append(Problem("spec.minMember", f"minMember is {pg.spec.min_member}; it must not be negative."))
    for task, n in pg.spec.min_task_member.items():
        if n < 0:
            out.append(
                Problem(f"spec.minTaskMember[{task}]", f"minTaskMember for {task!r} is {n}; it must not be negative.")
            )
    if queues is not None:
        name = pg.spec.queue or DEFAULT_QUEUE
        q = queues.get(name)
        if q is None:
            out.append(
                Problem("spec.queue", f"Queue {name!r} does not exist; existing queues are: {_names(sorted(queues))}.")
            )
        elif not _queue_is_open(q):
            out.append(
                Problem(
                    "spec.queue",
                    f"Queue {name!r} is {q.status.state}; PodGroups can only be submitted to an Open queue.",
                )
            )
    return out


# --- Queue ------------------------------------------------------------------------


def default_queue(q: Queue) -> None:
    spec = q.spec
    if spec.reclaimable is None:
        spec.reclaimable = True
    if spec.weight == 0:
        spec.weight = 1
    if not spec.parent and q.name != ROOT_QUEUE:
        spec.parent = ROOT_QUEUE
    if not q.status.state:
        q.status.state = OPEN


def _check_order(
    lower: Mapping[str, Decimal],
    upper: Mapping[str, Decimal],
    lower_name: str,
    upper_name: str,
    lower_path: str,
    out: list[Problem],
) -> None:
    for res, amount in lower.items():
        if res in upper and amount > upper[res]:
            out.append(
                Problem(
                    f"{lower_path}[{res}]",
                    f"{lower_name} {res} ({_qty(res, amount)}) is more than {upper_name} "
                    f"({_qty(res, upper[res])}); it must be at most that.",
                )
            )


def _sum_over(queues: Iterable[Queue], get) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for x in queues:
        for res, amount in get(x).items():
            total[res] = total.get(res, Decimal(0)) + amount
    return total


def validate_queue(q: Queue, queues: Mapping[str, Queue] | None) -> list[Problem]:
    """Queue create/update checks. ``queues`` holds the other queues (``q`` itself may be in it)."""
    out: list[Problem] = []
    spec = q.spec
    api.check_meta(q, out)
    api.check_resources(spec.capability, "spec.capability", out, "capability")
    api.check_resources(spec.deserved, "spec.deserved", out, "deserved")
    api.check_resources(spec.guarantee.resource, "spec.guarantee.resource", out, "guarantee")
    if not 1 <= spec.weight <= MAX_WEIGHT:
        out.append(Problem("spec.weight", f"weight is {spec.weight}; it must be between 1 and {MAX_WEIGHT}."))
    if q.status.state and q.status.state not in QUEUE_STATES:
        out.append(
            Problem(
                "status.state",
                f"Unknown queue state {q.status.state!r}; valid states are: {_valid(QUEUE_STATES)}.",
            )
        )

    guarantee = spec.guarantee.resource
    _check_order(guarantee, spec.deserved, "guarantee", "deserved", "spec.guarantee.resource", out)
    _check_order(spec.deserved, spec.capability, "deserved", "capability", "spec.deserved", out)
    # guarantee vs capability directly only where deserved does not sit between them.
    unbridged = {r: v for r, v in guarantee.items() if r not in spec.deserved}
    _check_order(unbridged, spec.capability, "guarantee", "capability", "spec.guarantee.resource", out)

    # Hierarchy.
    name = q.name
    parent_name = _parent_of(q)
    if name == ROOT_QUEUE and spec.parent and spec.parent != ROOT_QUEUE:
        out.append(Problem("spec.parent", f"The root queue cannot have a parent (found {spec.parent!r})."))
        return out
    if parent_name == name and name != ROOT_QUEUE:
        out.append(Problem("spec.parent", f"Queue {name!r} cannot be its own parent; choose another queue or 'root'."))
        return out
    if queues is None:
        return out
    others = {n: x for n, x in queues.items() if n != name}
    parent = others.get(parent_name) if parent_name else None
    if not parent_name:
        pass
    elif parent is None:
        if parent_name != ROOT_QUEUE:
            out.append(
                Problem(
                    "spec.parent",
                    f"Parent queue {parent_name!r} does not exist; existing queues are: {_names(sorted(queues))}.",
                )
            )
    else:
        # Walk up from the parent; reaching this queue again means a loop.
        walk, hops = parent_name, 0
        while walk and walk in others and hops <= len(others):
            nxt = _parent_of(others[walk])
            if nxt == name:
                out.append(
                    Problem(
                        "spec.parent",
                        f"Making {parent_name!r} the parent of {name!r} would create a loop of queues; "
                        f"{parent_name!r} already descends from {name!r}.",
                    )
                )
                break
            walk, hops = nxt, hops + 1

        siblings = [x for n, x in others.items() if _parent_of(x) == parent_name]
        family = siblings + [q]
        for label, path, get in (
            ("guarantee", "spec.guarantee.resource", lambda x: x.spec.guarantee.resource),
            ("deserved", "spec.deserved", lambda x: x.spec.deserved),
        ):
            mine = get(q)
            limit = get(parent)
            totals = _sum_over(family, get)
            for res, cap in limit.items():
                if res in mine and totals.get(res, Decimal(0)) > cap:
                    out.append(
                        Problem(
                            f"{path}[{res}]",
                            f"The children of queue {parent_name!r} would together have {label} {res} "
                            f"{_qty(res, totals[res])}, more than the parent's {_qty(res, cap)}; "
                            f"lower this queue's {label} or raise the parent's.",
                        )
                    )
        for res, cap in parent.spec.capability.items():
            mine = spec.capability.get(res)
            if mine is not None and mine > cap:
                out.append(
                    Problem(
                        f"spec.capability[{res}]",
                        f"capability {res} ({_qty(res, mine)}) is more than the capability of parent queue "
                        f"{parent_name!r} ({_qty(res, cap)}); it must be at most that.",
                    )
                )

    # As a parent: the existing children must still fit.
    children = [x for n, x in others.items() if _parent_of(x) == name]
    if children:
        child_names = _names(sorted(x.name for x in children))
        for label, path, get in (
            ("guarantee", "spec.guarantee.resource", lambda x: x.spec.guarantee.resource),
            ("deserved", "spec.deserved", lambda x: x.spec.deserved),
        ):
            totals = _sum_over(children, get)
            for res, cap in get(q).items():
                if res in totals and totals[res] > cap:
                    out.append(
                        Problem(
                            f"{path}[{res}]",
                            f"{label} {res} ({_qty(res, cap)}) is less than the {_qty(res, totals[res])} "
                            f"that child queues {child_names} together have; raise it or lower theirs.",
                        )
                    )
        for res, cap in spec.capability.items():
            over = sorted(x.name for x in children if res in x.spec.capability and x.spec.capability[res] > cap)
            if over:
                out.append(
                    Problem(
                        f"spec.capability[{res}]",
                        f"capability {res} ({_qty(res, cap)}) is below the capability of child queues "
                        f"{_names(over)}; raise it or lower theirs.",
                    )
                )
    return out


def validate_queue_delete(
    name: str, queues: Mapping[str, Queue], podgroups: Iterable[PodGroup]
) -> list[Problem]:
    """Whether queue ``name`` may be deleted, given all queues and all PodGroups."""
    if name in (DEFAULT_QUEUE, ROOT_QUEUE):
        return [Problem("", f"The {name!r} queue is built in and cannot be deleted.")]
    if name not in queues:
        return [Problem("", f"Queue {name!r} does not exist, so it cannot be deleted.")]
    out: list[Problem] = []
    children = sorted(n for n, x in queues.items() if n != name and _parent_of(x) == name)
    if children:
        out.append(
            Problem("", f"Queue {name!r} still has child queues ({_names(children)}); delete or move them first.")
        )
    users = sorted(pg.key for pg in podgroups if (pg.spec.queue or DEFAULT_QUEUE) == name)
    if users:
        out.append(
            Problem(
                "",
                f"Queue {name!r} still holds {len(users)} PodGroup(s) ({_names(users, 5)}); "
                "delete their jobs or wait for them to finish first.",
            )
        )
    return out


# --- Pod --------------------------------------------------------------------------

_POSITIVE_INT = re.compile(r"\d+")
_PERCENT = re.compile(r"(\d+)%")


def _jdb_value_error(value: str) -> str | None:
    if _POSITIVE_INT.fullmatch(value):
        return None if int(value) > 0 else "a count must be a positive integer"
    m = _PERCENT.fullmatch(value)
    if m:
        return None if 1 <= int(m.group(1)) <= 99 else "a percentage must be between 1% and 99%"
    return "it must be a positive integer such as '2' or a percentage from '1%' to '99%'"


def validate_pod(pod: Pod, scheduler_names: Iterable[str] | None = None) -> list[Problem]:
    """kube-apiserver's pod checks (name, namespace, containers, quantities), then the
    disruption-budget annotations.

    When ``scheduler_names`` is given, pods of other schedulers are not checked.
    """
    if scheduler_names is not None and (pod.spec.scheduler_name or "default-scheduler") not in set(scheduler_names):
        return []
    out: list[Problem] = []
    api.check_meta(pod, out)
    api.check_pod_spec(pod.spec, "spec", out)
    ann = pod.metadata.annotations
    present = [k for k in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE) if k in ann]
    for key in present:
        why = _jdb_value_error(ann[key])
        if why:
            out.append(Problem(f"metadata.annotations[{key}]", f"Value {ann[key]!r} for {key} is invalid: {why}."))
    if len(present) == 2:
        out.append(
            Problem(
                "metadata.annotations",
                f"Set only one of {JDB_MIN_AVAILABLE} and {JDB_MAX_UNAVAILABLE}, not both.",
            )
        )
    return out
