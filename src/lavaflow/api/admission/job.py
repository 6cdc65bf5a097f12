"""Volcano's Job rules: the mutating webhook's defaults, the create checks and the update checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import validation as api
from ..validation import Problem
from ..volcano import JOB_ACTIONS, JOB_EVENTS, JOB_PLUGINS, Job, JobEvent, LifecyclePolicy, Queue, TaskSpec
from .common import (
    DEFAULT_MAX_RETRY,
    DEFAULT_QUEUE,
    DEFAULT_TASK_PREFIX,
    DEPENDS_ON_ITERATIONS,
    ROOT_QUEUE,
    TOPOLOGY_POLICIES,
    one_of,
    parent_of,
    queue_is_open,
    quoted_names,
)
from .durations import parse_duration

# Plugins that need the svc plugin (headless service + host files).
_NEEDS_SVC = ("tensorflow", "mpi", "pytorch", "ray")
_MPI_DEFAULT_MASTER = "master"
_LABEL_MAX = 63

_label_error = api.label_error
_subdomain_error = api.subdomain_error


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
        spec.min_available = sum(t.min_available if t.min_available is not None else t.replicas for t in spec.tasks)
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
    valid_events = one_of(JOB_EVENTS)
    valid_actions = one_of(JOB_ACTIONS)
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

        if pol.exit_code is not None:  # (has_code)
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
            out.append(Problem(f"{path}.action", f"Unknown action {pol.action!r}; valid actions are: {valid_actions}."))

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
                        Problem(
                            f"{path}.timeout", f"timeout {pol.timeout!r} is negative; use zero or a positive duration."
                        )
                    )

    if JobEvent.ANY in seen_events and (len(policies) > 1 or len(seen_events) > 1):
        out.append(
            Problem(
                base,
                f"The '*' event (in {base}[{seen_events[JobEvent.ANY]}]) matches every event, so it must be the only "
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
                    f"Unknown iteration {t.depends_on.iteration!r}; valid values are: {one_of(DEPENDS_ON_ITERATIONS)}.",
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
                        f"the tasks are: {quoted_names(index)}.",
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
        out.append(
            Problem(path, f"Queue {name!r} does not exist; existing queues are: {quoted_names(sorted(queues))}.")
        )
        return
    if name == ROOT_QUEUE:
        out.append(Problem(path, "Jobs cannot be submitted to the root queue; choose a leaf queue such as 'default'."))
        return
    if not queue_is_open(q):
        out.append(
            Problem(
                path,
                f"Queue {name!r} is {q.status.state}; jobs can only be submitted to an Open queue.",
            )
        )
    children = sorted(n for n, x in queues.items() if n != name and parent_of(x) == name)
    if children:
        out.append(
            Problem(
                path,
                f"Queue {name!r} has child queues ({quoted_names(children)}); jobs can only be submitted to leaf queues.",
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
    from ...elastic.spec import validate as validate_elastic

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
                    f"Unknown topologyPolicy {task.topology_policy!r}; valid values are: {one_of(TOPOLOGY_POLICIES)}.",
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
                Problem(
                    f"spec.plugins[{name}]", f"Unknown job plugin {name!r}; valid plugins are: {one_of(JOB_PLUGINS)}."
                )
            )
    if "mpi" in spec.plugins:
        master = _mpi_master_name(spec.plugins["mpi"] or [])
        if master not in seen_names:
            out.append(
                Problem(
                    "spec.plugins[mpi]",
                    f"The mpi plugin needs a master task named {master!r}, but the tasks are: {quoted_names(seen_names)}; "
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
                out.append(
                    Problem(f"{base}.minAvailable", f"minAvailable is {t.min_available}; it must not be negative.")
                )
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
                    Problem(
                        f"{base}.{key}",
                        f"{key} of task {nt.name!r} cannot be changed after the job is created; {_UPDATE_HINT}.",
                    )
                )
    return out
