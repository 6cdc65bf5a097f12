"""Workload traces (Pollux, Philly, Gavel CSV) as elastic Volcano Jobs.

Each trace row becomes the Volcano Job a user would have submitted for it: one ``worker`` task
with one GPU per pod, ``replicas`` = the job's maximum workers and ``minAvailable`` its minimum,
``lavaflow.io/requested-workers`` what it asked for (what a rigid policy gives), its speed model
and work as ``lavaflow.io/*`` annotations, and ``sim.lavaflow.io/submit-at`` its arrival.  The
jobs then go through the same loader, admission, controllers and scheduler as any YAML.  A
trace brings no cluster: unless the other input files declare Nodes or NodeGroups, the
simulator uses the Pollux testbed, 16 nodes of 4 GPUs.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api.loader import Loaded, Problems, Source, build_object
from ..elastic import spec as es

if TYPE_CHECKING:  # pragma: no cover
    from ..elastic.job import ElasticJobSpec
    from .inputs import Item

#: A trace job's own restart pause (training.RESTART_PAUSE, not imported: it brings the simulator).
RESTART_PAUSE = "sim.lavaflow.io/restart-pause"
DEFAULT_NODES = 16
DEFAULT_GPUS_PER_NODE = 4
_BAD = re.compile(r"[^a-z0-9-]+")


def is_trace(path: str | Path) -> bool:
    return Path(path).suffix.lower() == ".csv"


def dns_name(name: str) -> str:
    out = _BAD.sub("-", name.strip().lower()).strip("-")
    return (out or "job")[:63].rstrip("-")


def default_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": "gpu"},
        "spec": {
            "count": DEFAULT_NODES,
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(DEFAULT_GPUS_PER_NODE)},
        },
    }


def job_document(spec: ElasticJobSpec, namespace: str = "default") -> dict[str, Any]:
    """The Volcano Job for one trace job (an :class:`~lavaflow.elastic.job.ElasticJobSpec`)."""
    from ..elastic.speed import GavelJobSpeed, PolluxJobSpeed

    ann: dict[str, str] = {"sim.lavaflow.io/submit-at": f"{spec.submit_time!r}s"}
    sp = spec.speed
    if spec.extra.get("annotations"):  # the speed model as annotations (e.g. a measured speed-up)
        ann.update(spec.extra["annotations"])
    elif isinstance(sp, PolluxJobSpeed):
        ann[es.APPLICATION] = sp.app
        ann[es.PROFILE_GROUP] = sp.app  # the trace names each job's model: jobs of one model share
        ann[es.BATCH_SIZE] = str(sp.batch_size)
        if getattr(sp, "adaptive", False):
            ann[es.ADAPTIVE] = "true"
            if getattr(sp, "max_batch_size", None):
                ann[es.MAX_BATCH] = str(sp.max_batch_size)
        ann[es.WORK] = repr(float(spec.work))
        restore = getattr(sp, "restore_delay", None)
        if restore is not None:  # a Sia job: its tables, its checkpoint-restore delay
            ann[es.SPEED_TABLES] = "sia"
            ann[RESTART_PAUSE] = f"{restore:g}s"
    elif isinstance(sp, GavelJobSpeed):
        ann[es.GAVEL_MODEL] = sp.model
        ann[es.PROFILE_GROUP] = sp.model
        ann[es.WORK] = repr(float(spec.work))
    else:  # pragma: no cover - trace readers only make the two above
        raise ValueError(f"trace job {spec.name}: speed model {type(sp).__name__} cannot be expressed as annotations")
    ann[es.REQUESTED] = str(spec.requested)
    if spec.priority:
        ann[es.JOB_PRIORITY] = str(spec.priority)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "trainer",
                "image": "lavaflow/trace-job",
                "resources": {
                    "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"},
                    "limits": {"nvidia.com/gpu": "1"},
                },
            }
        ],
    }
    if spec.gpu_type:
        pod_spec["nodeSelector"] = {"lavaflow.io/accelerator": spec.gpu_type}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": dns_name(spec.name),
            "namespace": namespace,
            "annotations": ann,
            "labels": {"lavaflow.io/trace-job": dns_name(spec.name)},
        },
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": spec.min_workers,
            "tasks": [{"name": "worker", "replicas": spec.max_workers, "template": {"spec": pod_spec}}],
        },
    }


def cluster_gpus(loaded: list[Loaded]) -> int:
    total = 0.0
    for it in loaded:
        kind = type(it.obj).__name__
        if kind == "Node":
            total += sum(float(v) for k, v in it.obj.allocatable.items() if es.is_gpu(k))
        elif kind == "NodeGroup":
            total += it.obj.spec.count * sum(float(v) for k, v in it.obj.spec.capacity.items() if es.is_gpu(k))
    return int(total)


def default_cluster_for(loaded: list[Loaded], problems: Problems) -> list[Loaded]:
    """The Pollux testbed as loaded objects when ``loaded`` declares no Node or NodeGroup, else []."""
    if any(type(it.obj).__name__ in ("Node", "NodeGroup") for it in loaded):
        return []
    src = Source("<default cluster: 16 nodes x 4 GPUs>", 1)
    obj = build_object(src, default_cluster(), problems)
    return [] if obj is None else [Loaded(obj, src)]


def load_traces(
    paths: list[str | Path], loaded: list[Loaded], problems: Problems, adaptive: bool = False
) -> list[Loaded]:
    """Trace files as loaded Volcano Jobs (plus the default cluster when ``loaded`` has no nodes),
    all at once. :class:`TraceFeed` streams the same objects."""
    out = default_cluster_for(loaded, problems)
    gpus = cluster_gpus(loaded + out) or None
    names: set[str] = set()
    for index, p in enumerate(paths):
        trace = _TraceFile(str(p), index, gpus, adaptive)
        built = Problems()  # a file's objects count only once all its rows were read
        jobs = [trace.job(spec, ordinal, names, built) for ordinal, spec, _ in trace.rows(problems)]
        if not trace.ok:
            continue
        if not trace.count:
            problems.add(str(p), "", "", "no jobs in this trace")
        problems.lines += built.lines
        sia_problems(trace, loaded + out, problems)
        out += [job for job in jobs if job is not None]
    return out


def cluster_gpu_types(loaded: Sequence[Loaded | Item]) -> set[str | None]:
    """The GPU types of the GPU nodes in ``loaded`` (Loaded objects or prepared Items: their
    lavaflow.io/accelerator label; None for GPU nodes without one)."""
    out: set[str | None] = set()
    for it in loaded:
        kind = type(it.obj).__name__
        if kind == "Node":
            caps, labels = it.obj.allocatable, it.obj.metadata.labels
        elif kind == "NodeGroup":
            caps, labels = it.obj.spec.capacity, it.obj.spec.labels
        else:
            continue
        if any(es.is_gpu(k) and float(v) > 0 for k, v in caps.items()):
            labels = labels or {}
            out.add(next((str(labels[k]).lower() for k in es.DEFAULT_GPU_TYPE_LABELS if labels.get(k)), None))
    return out


def sia_problems(trace: _TraceFile, loaded: list[Loaded], problems: Problems) -> None:
    """A Sia workload's jobs run by the tables of the GPU types they meet: every type of the
    cluster must be one Sia measured, with a table for every application of the trace."""
    if trace.format != "sia" or not trace.ok:
        return
    from ..elastic import sia

    root = sia.configured_root() or ""
    for gtype in sorted(cluster_gpu_types(loaded), key=lambda t: t or ""):
        try:
            suffix = sia.suffix_of(gtype)
        except sia.SiaArtifactError as exc:
            problems.add(trace.path, "", "", f"a Sia workload on this cluster: {exc}")
            continue
        for app in sorted(trace.applications):
            missing = sia.missing_tables(root, app, suffix)
            if missing:
                what = f"GPU type {gtype}" if gtype else f"nodes without a GPU type (run as {suffix})"
                problems.add(
                    trace.path,
                    "",
                    "",
                    f"{app} on {what} needs Sia's {', '.join(str(m) for m in missing)}: not found",
                )


# --------------------------------------------------------------------------------------------
# Streaming: jobs created as the simulated clock reaches them
# --------------------------------------------------------------------------------------------

#: Rows built and admitted together (prepare() has a fixed cost per call).
STREAM_BATCH = 64
#: Traces of at most this many jobs keep the objects their check made instead of reading them again.
KEEP_CHECKED = 2048
#: Kinds of the other inputs that admission checks a trace job against — a Volcano Job of the same
#: name (a later one is an update), a pod named like one of its pods, a Command naming it. Beside
#: any of them the traces are read whole (load_traces), so that these checks see every job.
_MEETS_TRACE_JOBS = frozenset({"Job", "Pod", "StatefulSet", "Command"})
#: Objects of the other inputs that admission reads when it checks a trace job (its queue; a
#: globalDefault PriorityClass): a copy of each is prepared beside every batch.
_CONTEXT_KINDS = frozenset({"Queue", "PriorityClass"})


class TraceFeed:
    """The jobs of trace files in arrival order, made only as they are needed.

    :meth:`open` checks every row before anything runs: each is read, built and admitted exactly
    as :func:`load_traces` and :func:`~lavaflow.sim.inputs.prepare` do it, a batch of rows at a
    time, and dropped, so that a bad row anywhere refuses the input (file, line and column or
    field; exit code 2) before the simulation starts. What the check keeps grows with the rows, not
    with their objects, and only where needed: the arrival order and row positions of a file whose
    rows are not in time order, the jobs renamed because their names met, and for a small trace
    (``KEEP_CHECKED`` jobs) the checked objects themselves. Iterating the feed reads the files
    again and yields each job's prepared :class:`~lavaflow.sim.inputs.Item` in the order prepare()
    sorts an input (time, then file, then row); the simulator takes the next one when its clock
    reaches the one before.
    """

    ranked = False  # its jobs come after the items at their time (see Simulation.run)

    def __init__(self, files: list[_TraceFile], context: list[Loaded]) -> None:
        self.files = files
        self.context = context  # raw objects admission reads beside a trace job (a copy per batch)
        self.count = 0  # jobs
        self.resource_names: set[str] = set()  # resources the jobs' pods request or limit
        self.problems: list[str] = []  # admission's (reported with those of the other inputs)
        self.warnings: list[str] = []
        self.renamed: dict[tuple[int, int], str] = {}  # (file, ordinal) -> its name, when not its own

    @classmethod
    def open(
        cls, paths: list[str | Path], loaded: list[Loaded], problems: Problems, adaptive: bool = False
    ) -> TraceFeed | None:
        """Check the trace files read beside ``loaded`` (the other inputs, with the default cluster
        when they need it) and return their feed; None when they must be read whole instead
        (:func:`load_traces`): beside inputs admission checks trace jobs against, or when two trace
        jobs end up with one name. The reader's and the builder's problems are added to
        ``problems``; admission's are kept in :attr:`problems`."""
        if any(type(it.obj).__name__ in _MEETS_TRACE_JOBS for it in loaded):
            return None
        context = [it for it in loaded if type(it.obj).__name__ in _CONTEXT_KINDS]
        gpus = cluster_gpus(loaded) or None
        feed = cls([_TraceFile(str(p), index, gpus, adaptive) for index, p in enumerate(paths)], context)
        found = Problems()
        names: set[str] = set()
        for trace in feed.files:
            built = Problems()
            times = array("d")
            batch: list[tuple[int, Loaded]] = []

            for ordinal, spec, start in trace.rows(found, where=True):
                job = trace.job(spec, ordinal, names, built)
                if job is not None and job.obj.name != dns_name(spec.name):
                    feed.renamed[(trace.index, ordinal)] = job.obj.name
                trace.starts.append(start)
                trace.lines.append(_line_of(spec, ordinal))
                times.append(math.nan)
                if job is not None:
                    batch.append((ordinal, job))
                if len(batch) >= STREAM_BATCH:
                    feed._check(trace, batch, times)
                    batch = []
            if not trace.ok:
                continue
            feed._check(trace, batch, times)
            if not trace.count:
                found.add(trace.path, "", "", "no jobs in this trace")
            found.lines += built.lines
            sia_problems(trace, loaded, found)
            trace.settle(times)
            feed.count += trace.count
        if len(names) < feed.count:
            return None  # a renamed job took a name already given: admission must see both
        if feed.count > KEEP_CHECKED:
            for trace in feed.files:
                trace.checked = None
        problems.lines += found.lines
        return feed

    def _check(self, trace: _TraceFile, batch: list[tuple[int, Loaded]], times: array[float]) -> None:
        """Admit built jobs as prepare() does; record their times; keep them while the traces are small."""
        if not batch:
            return
        ordinal_of = {id(job.obj): ordinal for ordinal, job in batch}
        items = self._prepare([job for _, job in batch], self.problems, self.warnings)
        for item in items:
            times[ordinal_of[id(item.obj)]] = item.submit_at
            for task in item.obj.spec.tasks:
                spec = task.template.spec
                for c in (*spec.containers, *spec.init_containers):
                    self.resource_names.update(c.resources.requests)
                    self.resource_names.update(c.resources.limits)
        if trace.checked is not None and sum(len(t.checked or ()) for t in self.files) <= KEEP_CHECKED:
            trace.checked.extend((ordinal_of[id(item.obj)], item) for item in items)
        else:
            trace.checked = None

    def _prepare(self, jobs: list[Loaded], problems: list[str], warnings: list[str]) -> list[Item]:
        """prepare() of ``jobs`` beside copies of the context objects: the jobs' Items (admission's
        defaults applied) in the order prepare() sorts them; its problems and warnings are added to
        ``problems`` and ``warnings``."""
        from ..api.loader import InputError
        from .inputs import prepare

        context = [Loaded(it.obj.model_copy(deep=True), it.source) for it in self.context]
        ours = {id(job.obj) for job in jobs}
        try:
            prepared = prepare([*context, *jobs])
        except InputError as exc:
            problems.extend(exc.problems)
            return []
        warnings.extend(w for w in prepared.warnings if w not in warnings)
        return [it for it in prepared.items if id(it.obj) in ours]

    def __iter__(self) -> Iterator[Item]:
        """Every job's prepared Item in arrival order: by time, and at one time by file and row."""
        return heapq.merge(*(self._items(trace) for trace in self.files), key=lambda it: it.submit_at)

    def _items(self, trace: _TraceFile) -> Iterator[Item]:
        if trace.checked is not None:
            yield from (item for _, item in trace.checked)
            return
        if not trace.count:
            return
        problems = Problems()
        batch: list[Loaded] = []
        for ordinal, spec in trace.in_order():
            job = trace.job(spec, ordinal, None, problems, self.renamed.get((trace.index, ordinal)))
            if job is not None:
                batch.append(job)
            if len(batch) >= STREAM_BATCH:
                yield from self._again(trace, batch, problems)
                batch = []
        yield from self._again(trace, batch, problems)

    def _again(self, trace: _TraceFile, batch: list[Loaded], problems: Problems) -> list[Item]:
        found: list[str] = []
        items = self._prepare(batch, found, []) if batch else []
        if problems.lines or found:  # every row passed the check: only a change of the file does this
            raise RuntimeError(f"{trace.path} changed while it was replayed: {'; '.join(problems.lines + found)}")
        return items


class _TraceFile:
    """One trace file: its format, its rows as trace jobs, and what the check learned of them."""

    def __init__(self, path: str, index: int, gpus: int | None, adaptive: bool) -> None:
        self.path = path
        self.index = index  # among the trace files: at one time, the earlier file's jobs come first
        self.gpus = gpus
        self.adaptive = adaptive
        self.format = ""
        self.header: list[str] | None = None
        self.stamp: tuple[int, int] | None = None  # size and modification time when checked
        self.count = 0  # jobs
        self.applications: set[str] = set()  # of its jobs
        self.ok = False  # every row was read (see rows)
        self.starts: list[int] = []  # where each job's row begins (a text file position)
        self.lines = array("q")  # each job's line
        self.order: list[int] | None = None  # ordinals in arrival order; None: the file's order
        self.checked: list[tuple[int, Item]] | None = []  # the checked Items, while the traces are small

    def rows(self, problems: Problems, where: bool = False) -> Iterator[tuple[int, ElasticJobSpec, int]]:
        """``(ordinal, spec, start)`` for every job of the file, in file order (``start``: where its
        row begins, with ``where``). When the file is not a trace lavaflow reads or one of its rows
        is bad, the problem is added and the rows end there (at the first bad row, as the readers
        of whole traces do), with :attr:`ok` False."""
        from ..elastic.trace_readers import WorkloadError, detect_format, workload_format

        self.count = 0
        self.ok = False
        try:
            if self.adaptive and detect_format(Path(self.path)) != "pollux":
                problems.add(
                    self.path,
                    "",
                    "",
                    "--adaptive-batch needs a Pollux trace (its applications' gradient statistics decide the batch); "
                    f"this is a {detect_format(Path(self.path))} trace",
                )
                return
            self.format = workload_format(self.path)
            st = os.stat(self.path)
            self.stamp = (st.st_size, st.st_mtime_ns)
            for ordinal, spec, start in self._specs(check_names=True, where=where):
                self.applications.add(spec.application)
                yield ordinal, spec, start
                self.count += 1
        except WorkloadError as exc:
            problems.lines.append(str(exc))  # names file, line and column
            return
        except (OSError, UnicodeDecodeError) as exc:
            problems.add(self.path, "", "", f"cannot read file ({getattr(exc, 'strerror', None) or exc})")
            return
        self.ok = True

    def _specs(self, check_names: bool = False, where: bool = False) -> Iterator[tuple[int, ElasticJobSpec, int]]:
        from ..elastic.trace_readers import csv_rows, read_philly_csv

        spec: ElasticJobSpec | None
        if self.format == "philly":
            for ordinal, spec in enumerate(read_philly_csv(self.path, max_gpus=self.gpus)):
                yield ordinal, spec, 0
            return
        columns, row_job = _row_reader(self.format)
        seen: set[str] | None = set() if check_names else None  # (the names of a whole file)
        with open(self.path, newline="", encoding="utf-8-sig") as fh:
            self.header, reader = csv_rows(iter(fh.readline, ""), self.path, columns)
            ordinal = 0
            while True:
                start = fh.tell() if where else 0
                row = next(reader, None)
                if row is None:
                    return
                spec = row_job(self.path, reader.line_num, row, self.header, self.gpus, self.adaptive, seen)
                if spec is not None:
                    yield ordinal, spec, start
                    ordinal += 1

    def settle(self, times: array[float]) -> None:
        """After the check: keep the arrival order and row positions only when they are not the file's."""
        ordered = all(a <= b for a, b in zip(times, itertools.islice(times, 1, None)))
        self.order = None if ordered else sorted(range(len(times)), key=times.__getitem__)  # stable
        if ordered or self.format == "philly":  # (a Philly trace is read whole by its reader)
            self.starts = []
            self.lines = array("q")
        if self.order is not None and self.checked is not None:
            at = {ordinal: i for i, (ordinal, _) in enumerate(self.checked)}
            self.checked = [self.checked[at[ordinal]] for ordinal in self.order if ordinal in at]

    def in_order(self) -> Iterator[tuple[int, ElasticJobSpec]]:
        """``(ordinal, spec)`` of every job in arrival order, read again."""
        spec: ElasticJobSpec | None
        st = os.stat(self.path)
        if (st.st_size, st.st_mtime_ns) != self.stamp:
            raise RuntimeError(f"{self.path} changed while it was replayed (its size or time is not as checked)")
        if self.order is None:
            for ordinal, spec, _ in self._specs():
                yield ordinal, spec
            return
        if self.format == "philly":
            specs = [spec for _, spec, _ in self._specs()]
            for ordinal in self.order:
                yield ordinal, specs[ordinal]
            return
        from ..elastic.trace_readers import csv_rows

        columns, row_job = _row_reader(self.format)
        with open(self.path, newline="", encoding="utf-8-sig") as fh:
            for ordinal in self.order:
                fh.seek(self.starts[ordinal])
                _, reader = csv_rows(iter(fh.readline, ""), self.path, columns, self.header)
                spec = row_job(self.path, self.lines[ordinal], next(reader), self.header, self.gpus, self.adaptive)
                if spec is None:  # pragma: no cover - the check found a job on this row
                    raise RuntimeError(f"{self.path} changed while it was replayed (line {self.lines[ordinal]})")
                yield ordinal, spec

    def job(
        self,
        spec: ElasticJobSpec,
        ordinal: int,
        names: set[str] | None,
        problems: Problems,
        name: str | None = None,
    ) -> Loaded | None:
        """The loaded Volcano Job of a trace job, or None (with its problems). Its name is ``name``,
        else its own made a DNS label — unless ``names`` (the names given so far, which it joins)
        holds that: then ``-<ordinal + 1>`` (its place in its file) is appended."""
        doc = job_document(spec)
        if name is None:
            name = doc["metadata"]["name"]
            if names is not None:
                if name in names:
                    name = dns_name(f"{name}-{ordinal + 1}")
                names.add(name)
        doc["metadata"]["name"] = name
        src = Source(self.path, _line_of(spec, ordinal), unit="line")
        obj = build_object(src, doc, problems)
        return None if obj is None else Loaded(obj, src)


def _row_reader(fmt: str) -> tuple[tuple[str, ...], Callable[..., ElasticJobSpec | None]]:
    """The columns a CSV trace of format ``fmt`` needs, and its reader of one row."""
    from ..elastic import trace_readers as tr

    if fmt == "pollux":
        return tr.POLLUX_COLUMNS, tr.pollux_row
    if fmt == "sia":
        return tr.POLLUX_COLUMNS, tr.sia_row
    return tr.GAVEL_COLUMNS, lambda p, line, row, header, gpus, adaptive, seen=None: tr.gavel_row(
        p, line, row, header, gpus
    )


def _line_of(spec: ElasticJobSpec, ordinal: int) -> int:
    """A job's line in its file (its place among the file's jobs when its reader gives none)."""
    tail = spec.source.rsplit(":", 1)[-1] if spec.source else ""
    return int(tail) if tail.isdigit() else ordinal + 1
