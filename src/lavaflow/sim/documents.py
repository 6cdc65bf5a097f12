"""Many Volcano Jobs in YAML, each held compactly until the simulated clock reaches it.

A validated Job is about 14 KB of Python objects; 100,000 one-pod Jobs loaded whole took 1.4 GB
before the first session (issue 35, item 24). :func:`load_documents` reads YAML inputs as
:func:`~lavaflow.api.loader.load_files` and :func:`~lavaflow.sim.inputs.prepare` do, with one
difference: each Volcano Job is kept as its document, marshalled (a few hundred bytes), and is
built, checked and admitted in batches before anything runs, exactly as prepare() checks it, then
dropped. The :class:`DocumentFeed` builds each one again (and admission's defaults again) when the
simulation reaches its submit time, and lets go of the document.

Only inputs where this changes nothing take this way: the other objects are of kinds that no check
of a Job reads beyond its queue and PriorityClass (copies of which are prepared beside every
batch, as for a trace's jobs), every Job has a name of its own and pods whose names no other Job's
pods have. Any problem, warning it cannot place, or other input is left to the whole load, which
then reports or runs it as it always did (so a refused input is told the same way, naming file,
document, object and field).
"""

from __future__ import annotations

import marshal
import math
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..api import admission, yamlio
from ..api.kinds import LOADABLE
from ..api.loader import OLDER_VERSIONS, InputError, Loaded, Problems, Source, build_one, list_items
from ..api.mpijob import is_mpijob
from ..api.volcano import Job
from .inputs import Item, SimInput, _server_fields, prepare

#: Fewer Volcano Jobs than this: the input is loaded whole (the feed saves nothing worth its checks).
FEED_MIN = 1000
#: No Volcano Job document is shorter than this (bytes): smaller inputs are not read twice to learn
#: that they have too few.
JOB_BYTES = 100
#: Jobs checked (built and admitted) together.
BATCH = 64
#: Kinds the rest of such an input may have: nothing prepare() checks of a Job reads them, but for
#: queues and PriorityClasses, copied beside each batch (:data:`CONTEXT_KINDS`).
OTHER_KINDS = frozenset({"NodeGroup", "Node", "Queue", "PriorityClass", "ConfigMap", "ResourceQuota"})
CONTEXT_KINDS = frozenset({"Queue", "PriorityClass"})
_JOB_VERSIONS = frozenset(api for (api, kind), cls in LOADABLE.items() if cls is Job)
_SPEED_TABLES = "lavaflow.io/speed-tables"  # Sia's tables are checked against the cluster's nodes


def _is_job(doc: Any) -> bool:
    return isinstance(doc, dict) and (
        (doc.get("kind") == "Job" and doc.get("apiVersion") in _JOB_VERSIONS) or is_mpijob(doc)
    )


class DocumentFeed:
    """The held Volcano Jobs of a YAML input, in the order prepare() sorts an input (submit time,
    then place in the input), each with its rank among all the input's submissions (the Items
    prepare() keeps get theirs): the simulator submits both in that order. Iterated once; each
    document is let go of as its Job is made."""

    ranked = True

    def __init__(self, files: list[str]) -> None:
        self.files = files
        self.count = 0
        self.resource_names: set[str] = set()
        self.problems: list[str] = []  # none: an input with any is loaded whole
        self.warnings: list[str] = []
        # Columns, in arrival order once sorted
        self.submit_at = array("d")
        self.delete_at = array("d")  # nan: none
        self.origin = array("q")
        self.rank = array("q")
        self.file = array("i")
        self.document = array("q")
        self.docs: list[bytes | None] = []
        self._used = False
        self._ctx = admission.Context(scheduler_name="volcano")

    def __iter__(self) -> Iterator[Item]:
        if self._used:
            raise RuntimeError("a DocumentFeed is read once")
        self._used = True
        mutate = admission.RULES["Job"].mutate
        assert mutate is not None
        for i in range(self.count):
            doc, self.docs[i] = self.docs[i], None
            assert doc is not None
            src = Source(self.files[self.file[i]], self.document[i])
            problems = Problems()
            obj = build_one(src, marshal.loads(doc), problems, False, None)
            if obj is None:  # it was built before the run: only a change of Python could do this
                raise RuntimeError(f"{src}: a Volcano Job checked before the run failed to build: {problems.lines}")
            delete = self.delete_at[i]
            item = Item(
                obj,
                src,
                self.submit_at[i],
                None if math.isnan(delete) else delete,
                origin=self.origin[i],
                rank=self.rank[i],
            )
            _server_fields([item])
            mutate(obj, self._ctx)
            yield item


class _Fallback(Exception):
    """The input is to be loaded whole."""


def load_documents(paths: list[str | Path], skip_unsupported: bool = False) -> tuple[SimInput, list[str]] | None:
    """The input of YAML files ``paths`` with its Volcano Jobs held in a :class:`DocumentFeed`
    (``SimInput.stream``), and the lines said of documents skipped or read as a current version;
    None when the input is to be loaded whole (see the module's docstring)."""
    try:
        if sum(Path(p).stat().st_size for p in paths) < FEED_MIN * JOB_BYTES:
            return None
        return _load(paths, skip_unsupported)
    except (_Fallback, OSError):
        return None


def _load(paths: list[str | Path], skip_unsupported: bool) -> tuple[SimInput, list[str]]:
    feed = DocumentFeed([str(p) for p in paths])
    skipped: list[str] = []
    others: list[Loaded] = []
    other_origin: list[int] = []
    held: list[tuple[int, int, int, bytes]] = []  # (origin, file, document, marshalled document)
    problems = Problems()
    origin = 0
    for index, p in enumerate(paths):
        try:
            text = Path(p).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise _Fallback from None
        try:
            for number, doc in enumerate(yamlio.load_all(text), start=1):
                if doc is None:
                    continue
                src = Source(str(p), number)
                for obj_doc in list_items(doc):
                    if _is_job(obj_doc):
                        try:
                            held.append((origin, index, number, marshal.dumps(obj_doc)))
                        except ValueError:  # a value marshal does not keep (a timestamp): whole
                            raise _Fallback from None
                        if (str(obj_doc.get("apiVersion")), str(obj_doc.get("kind"))) in OLDER_VERSIONS:
                            skipped.extend(_version_note(src, obj_doc))
                        origin += 1
                        continue
                    obj = build_one(src, obj_doc, problems, skip_unsupported, skipped)
                    if problems.lines:
                        raise _Fallback
                    if obj is None:
                        continue
                    if type(obj).__name__ not in OTHER_KINDS:
                        raise _Fallback
                    others.append(Loaded(obj, src))
                    other_origin.append(origin)
                    origin += 1
        except yamlio.YamlError:
            raise _Fallback from None
    if len(held) < FEED_MIN:
        raise _Fallback
    try:
        sim_input = prepare(others)
    except InputError:
        raise _Fallback from None
    if sim_input.warnings:
        raise _Fallback  # (none of these kinds gives one; placing them among the Jobs' is not done)
    for it in sim_input.items:
        it.origin = other_origin[it.origin]
    context = [lo for lo in others if type(lo.obj).__name__ in CONTEXT_KINDS]
    _check(feed, held, context)
    _rank(feed, sim_input.items)
    sim_input.stream = feed
    sim_input.warnings += feed.warnings
    return sim_input, skipped


def _version_note(src: Source, doc: dict[str, Any]) -> list[str]:
    """What build_one() says of a Job read as the current version of its kind."""
    noted: list[str] = []
    problems = Problems()
    build_one(src, doc, problems, False, noted)
    if problems.lines:
        raise _Fallback  # the whole load tells its problem
    return noted


def _check(feed: DocumentFeed, held: list[tuple[int, int, int, bytes]], context: list[Loaded]) -> None:
    """Build and admit every held Job as prepare() does, a batch at a time; record what the run
    needs of each; raise _Fallback at anything the whole load must see."""
    keys: set[int] = set()
    pods: set[int] = set()
    warned: list[tuple[float, int, str]] = []
    times: dict[int, tuple[float, float]] = {}  # origin -> (submit, delete or nan)
    for start in range(0, len(held), BATCH):
        batch = held[start : start + BATCH]
        jobs: list[Loaded] = []
        for _origin, index, number, doc in batch:
            src = Source(feed.files[index], number)
            problems = Problems()
            obj = build_one(src, marshal.loads(doc), problems, False, None)
            if obj is None or problems.lines:
                raise _Fallback
            if _SPEED_TABLES in obj.metadata.annotations:
                raise _Fallback
            key = hash((obj.namespace, obj.name))
            if key in keys:
                raise _Fallback  # an update, or a name given twice (a hash met by chance: the same)
            keys.add(key)
            for task in obj.spec.tasks:
                for i in range(min(task.replicas, 100_000)):
                    name = hash((obj.namespace, f"{obj.name}-{task.name}-{i}"))
                    if name in pods:
                        raise _Fallback
                    pods.add(name)
                for c in (*task.template.spec.containers, *task.template.spec.init_containers):
                    if "ephemeral-storage" in c.resources.requests or "ephemeral-storage" in c.resources.limits:
                        raise _Fallback  # it gives the nodes ephemeral-storage (prepare's kubelet defaults)
                    feed.resource_names.update(c.resources.requests)
                    feed.resource_names.update(c.resources.limits)
            jobs.append(Loaded(obj, src))
        origin_of = {id(lo.obj): origin for lo, (origin, _, _, _) in zip(jobs, batch, strict=True)}
        items, warnings = _prepare(jobs, context)
        for it in items:
            times[origin_of[id(it.obj)]] = (it.submit_at, math.nan if it.delete_at is None else it.delete_at)
        if warnings:  # prepare() tells them in submission order: each Job's own, placed by its time
            for lo in jobs:
                one, said = _prepare([lo], context)
                warned.extend((one[0].submit_at, origin_of[id(lo.obj)], w) for w in said)
    order = sorted(range(len(held)), key=lambda i: (times[held[i][0]][0], held[i][0]))
    for i in order:
        origin, index, number, doc = held[i]
        submit, delete = times[origin]
        feed.submit_at.append(submit)
        feed.delete_at.append(delete)
        feed.origin.append(origin)
        feed.file.append(index)
        feed.document.append(number)
        feed.docs.append(doc)
    feed.count = len(order)
    feed.warnings = [w for _, _, w in sorted(warned, key=lambda x: (x[0], x[1]))]


def _prepare(jobs: list[Loaded], context: list[Loaded]) -> tuple[list[Item], list[str]]:
    """prepare() of ``jobs`` beside copies of ``context``: the jobs' Items and the warnings."""
    copies = [Loaded(lo.obj.model_copy(deep=True), lo.source) for lo in context]
    ours = {id(lo.obj) for lo in jobs}
    try:
        prepared = prepare([*copies, *jobs])
    except InputError:
        raise _Fallback from None
    return [it for it in prepared.items if id(it.obj) in ours], prepared.warnings


def _rank(feed: DocumentFeed, items: list[Item]) -> None:
    """Number the submissions of the Items and of the feed's Jobs in the order prepare() would
    sort them together: by time, then by place in the input."""
    rank = 0
    j = 0
    for i in range(feed.count):
        key = (feed.submit_at[i], feed.origin[i])
        while j < len(items) and (items[j].submit_at, items[j].origin) < key:
            items[j].rank = rank
            rank += 1
            j += 1
        feed.rank.append(rank)
        rank += 1
    for it in items[j:]:
        it.rank = rank
        rank += 1
