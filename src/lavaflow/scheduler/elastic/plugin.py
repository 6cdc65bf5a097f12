"""elastic: elastic training jobs are sized by a policy (Voda's job), not by "whatever fits".

Configured like any plugin, with the ``elastic`` action in ``actions``::

    actions: "enqueue, elastic, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
      - name: conformance
      - name: elastic
        arguments:
          elastic.policy: Lavaflow          # FIFO, SRJF, Tiresias, ElasticFIFO, ... (see docs/elastic.md)
          elastic.resizeInterval: 30s       # at most one reschedule per interval (Voda's rate limit)
          elastic.resizeCost: 30s           # what a start / resize / migration costs a job (policies weigh it)
          elastic.gpuTypeLabel: lavaflow.io/accelerator   # node label naming the GPU type
          elastic.gpuResource: nvidia.com/gpu
          elastic.oracle: false             # true: hand the policy the true speed models (ablation only)
          elastic.sharedProfiles: true      # jobs of one lavaflow.io/profile-group share measurements
                                            # (default: the policy's choice; Pollux, as its artifact: false)

A job is elastic when its PodGroup carries a speed model (annotations, see
:mod:`lavaflow.elastic.spec`) and its GPU pods (the workers, one GPU each) outnumber
``minMember`` less its other pods.  The plugin

* permits such a job at enqueue (the policy shares the GPUs among every submitted elastic job,
  as Voda does; queue capacities do not apply to them);
* marks it invalid for allocate, backfill, preempt and reclaim, so only the ``elastic`` action
  places its pods, with the reason the policy gave ("waiting: ...");
* keeps across sessions, in the cache, what the policy decided (each job's target placement) and
  what Tiresias-like policies need (first start, attained service, last run).

Policies read each job's speed as a scheduler learns it (:mod:`lavaflow.elastic.learned`): fitted
from the measurements the job reports, a placeholder before the first, and no more workers than
twice the most it was measured on (for the elastic policies; rigid ones give the request).  The
true models, which no real scheduler has, reach a policy only with ``elastic.oracle: true``.
Jobs that declare the same ``lavaflow.io/profile-group`` (they train the same model) share what
they measured (:class:`~lavaflow.elastic.learned.ProfileBook`, kept in the cache): a job starts
from its group's measurements and first gradient statistics instead of from nothing.

The state is rebuilt from the cluster after a restart: a job's size is its running workers, its
attained service the last ``lavaflow.io/gpu-seconds`` report; the first reschedule waits one
interval, so a restart does not resize anything by itself.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...elastic import spec as es
from ...elastic.learned import METRICS, LearnedSpeed, ProfileBook, learned_spec, own_report, profile_group
from ...elastic.speed import advance, consolidated_placement, phase_bounds, rate_curve
from ..framework.memo import JobsRecord, Kept, Reuse, state
from ..framework.registry import Plugin, register_plugin
from ..model import JobInfo, TaskInfo
from .state import (
    ALIVE,
    ElasticJob,
    ElasticState,
    FixedProgress,
    JobParts,
    JobState,
    Parsed,
    Signature,
    _Static,
    elastic_setup,
    parse_bool,
    parse_seconds,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..framework.session import Session


@dataclass(slots=True)
class OpenedJobs:
    """What a session's opening found, for the next while its jobs stand or only some of them
    changed: each job's ElasticJob and the kept parts it was built from, in job order; invalid
    annotations by job uid; the uids with a usable speed model."""

    jobs: dict[str, ElasticJob]
    statics: dict[str, _Static]
    invalid: dict[str, str]
    candidates: set[str]


# OpenedJobs, under the session's jobs token and (GPU column, type label).
OPENED: JobsRecord[OpenedJobs] = JobsRecord("elastic.opened")


@register_plugin
class ElasticPlugin(Plugin):
    name = "elastic"

    def __init__(self, arguments: dict[str, Any] | None = None) -> None:
        super().__init__(arguments)
        self.setup = setup = elastic_setup(self.arguments)
        self.policy_name = setup.policy_name
        self.resize_cost = setup.resize_cost
        self.type_label = setup.type_label
        self.gpu_resource = setup.gpu_resource
        self.policy = setup.policy
        self.interval = setup.interval
        self.oracle = setup.oracle
        self.shared_profiles = setup.shared_profiles
        self.jobs: dict[str, ElasticJob] = {}
        self.invalid: dict[str, str] = {}  # job uid -> why its annotations cannot be used
        self.state: ElasticState | None = None
        self.ssn: Session | None = None
        self.gpu_col: int | None = None

    @classmethod
    def check_arguments(cls, arguments: dict[str, Any]) -> list[tuple[str, str]]:
        """Problems with the plugin's arguments, found when the configuration is loaded."""
        from ...elastic.policies import POLICY_NAMES, policy_parameter, resolve_name

        out: list[tuple[str, str]] = []
        name = arguments.get("elastic.policy", "Lavaflow")
        try:
            resolve_name(str(name))
        except KeyError:
            out.append(("elastic.policy", f"unknown policy {name!r} (choose from {', '.join(POLICY_NAMES)})"))
        else:
            for key, value in arguments.items():
                if str(key).startswith("elastic.policy."):
                    try:
                        policy_parameter(str(name), str(key)[len("elastic.policy.") :], value)
                    except ValueError as exc:
                        out.append((str(key), str(exc)))
        for key in ("elastic.resizeInterval", "elastic.resizeCost"):
            if key in arguments:
                try:
                    v = parse_seconds(arguments[key], 0.0)
                except ValueError as exc:
                    out.append((key, str(exc)))
                    continue
                if v < 0:
                    out.append((key, f"must not be negative, got {arguments[key]!r}"))
        for key in ("elastic.gpuTypeLabel", "elastic.gpuResource"):
            if key in arguments and (not isinstance(arguments[key], str) or not arguments[key].strip()):
                out.append((key, "must be a non-empty string"))
        for key in ("elastic.oracle", "elastic.sharedProfiles"):
            if key in arguments:
                try:
                    parse_bool(arguments[key])
                except ValueError as exc:
                    out.append((key, str(exc)))
        known = {
            "elastic.oracle",
            "elastic.sharedProfiles",
            "elastic.policy",
            "elastic.resizeInterval",
            "elastic.resizeCost",
            "elastic.gpuTypeLabel",
            "elastic.gpuResource",
        }
        for key in arguments:
            if key not in known and not str(key).startswith("elastic.policy."):
                out.append(
                    (str(key), f"unknown argument (known: {', '.join(sorted(known))}, elastic.policy.<parameter>)")
                )
        return out

    def _book(self) -> ProfileBook | None:
        """The profile groups' shared measurements, when this configuration shares them."""
        if not self.shared_profiles or self.state is None:
            return None
        return self.state.profiles

    # ------------------------------------------------------------------ session
    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.state = state(ssn.cache, "elastic", ElasticState)
        col = ssn.index.pos.get(self.gpu_resource)
        self.gpu_col = col
        self.jobs = jobs = {}
        modelled: list[str] = []
        static = self.state.static
        label = self.type_label
        now = ssn.now
        found = OPENED.lookup(ssn, (col, label))
        opened = found.value
        if found.how is Reuse.SAME:
            # The same jobs at the same versions as when the last session opened: each one's
            # ElasticJob is the one it used (the per-job checks below would find each kept), reset
            # as below; only the time-dependent parts are worked out.
            assert opened is not None
            self.invalid = dict(opened.invalid)
            statics = opened.statics
            for uid, ej in opened.jobs.items():
                _reset(ej, statics[uid], now)
                jobs[uid] = ej
            self._add_fns(ssn, opened.candidates)
            return
        if found.how is Reuse.SINCE:
            # The same jobs as when the last session opened, some at new versions: only those are
            # looked at again; the others are as in that session (as the case above).
            assert opened is not None
            changed = found.changed
            before, statics, invalid, candidates = opened.jobs, opened.statics, opened.invalid, opened.candidates
            for uid, job in ssn.jobs.items():
                if uid in changed:
                    self._open_job(ssn, uid, job, col, modelled)
                    continue
                # (a job with a speed model is a candidate unless its annotations are invalid)
                if uid in candidates or uid in invalid:
                    modelled.append(uid)
                    was = before.get(uid)
                    if was is not None:
                        _reset(was, statics[uid], now)
                        jobs[uid] = was
                    elif uid in invalid:
                        self.invalid[uid] = invalid[uid]
        else:
            has_model = es.has_speed_model
            book = self._book()
            if OPENED.last(ssn) is None and book is not None:
                self._fill_book(ssn, book)
            for uid, job in ssn.jobs.items():
                pg = job.pg
                if pg is None or (uid not in static and not has_model(pg.metadata.annotations)):
                    continue  # (most jobs of a large cluster: what _open_job would find, without the call)
                self._open_job(ssn, uid, job, col, modelled)
        # Jobs the policy sizes are not touched by allocate/backfill/preempt/reclaim.
        candidates = {uid for uid in modelled if uid not in self.invalid}
        OPENED.put(
            ssn,
            OpenedJobs(dict(jobs), {uid: static[uid] for uid in jobs}, dict(self.invalid), candidates),
            (col, label),
        )
        self._add_fns(ssn, candidates)

    @staticmethod
    def _fill_book(ssn: Session, book: ProfileBook) -> None:
        """A scheduler's first session (a restart, or a forecast's run over a snapshot): every
        report on the cluster goes into the profile book before any job's model is fitted, so that
        a job early in the order does not fit on less than its group has measured (the placeholder
        model, free speed-up) only because its group's running jobs come after it."""
        for job in ssn.jobs.values():
            pg = job.pg
            if pg is None:
                continue
            ann = pg.metadata.annotations
            group = profile_group(ann)
            if group is not None and METRICS in ann:
                book.record(group, own_report(str(ann[METRICS])))

    def _open_job(self, ssn: Session, uid: str, job: JobInfo, col: int | None, modelled: list[str]) -> None:
        """Add ``job``'s ElasticJob to ``self.jobs`` (its last one while it is unchanged), and its
        uid to ``modelled`` when it has a speed model."""
        assert self.state is not None
        pg = job.pg
        if pg is None:
            return
        kept = self.state.static.get(uid)
        if (
            kept is not None
            and kept.job is job
            and kept.version == job.version
            and kept.pg is pg
            and kept.rv == pg.metadata.resource_version
            and kept.col == col
            and kept.label == self.type_label
            and (ej := kept.ej) is not None
            and ej.state is self.state.jobs.get(uid)
        ):
            # The same job, PodGroup version and tasks as when the last session built ``ej``
            # (so the same annotations, with a speed model): reset what actions change on it
            # (a reschedule shows the policy's target as its placement and type for a
            # while), then work out the time-dependent parts.
            _reset(ej, kept, ssn.now)
            modelled.append(uid)
            self.jobs[uid] = ej
            return
        if not es.has_speed_model(pg.metadata.annotations):
            return
        modelled.append(uid)
        made = self._elastic_job(ssn, job, col)
        if made is not None:
            self.jobs[uid] = made

    def _add_fns(self, ssn: Session, candidates: set[str]) -> None:
        """Register the callbacks: ``candidates`` are the jobs with a usable speed model (only read)."""

        def job_valid(job: JobInfo) -> tuple[bool, str]:
            ej = self.jobs.get(job.uid)
            if ej is None and job.uid in candidates:
                return False, f"waiting for the elastic policy {self.policy.name} (its pods are being created)"
            if ej is not None:
                # Asked every session for each job the policy sizes: the answer is kept on the job
                # while what it says stands.
                key = (ej.current, ej.max_workers, ej.state.reason, self.policy.name)
                known = ej.valid
                if known is not None and known.key == key:
                    return known.value
                if ej.current:
                    answer = (
                        False,
                        f"sized by the elastic policy {self.policy.name} ({ej.current} of {ej.max_workers} workers)",
                    )
                else:
                    answer = (False, ej.state.reason or f"waiting for the elastic policy {self.policy.name}")
                ej.valid = Kept(key, answer)
                return answer
            return True, ""

        def enqueueable(job: JobInfo) -> int:
            return 1 if job.uid in candidates else 0

        ssn.add_job_valid_fn(self.name, job_valid)
        ssn.add_job_enqueueable_fn(self.name, enqueueable)

    # ------------------------------------------------------------------ jobs
    def _elastic_job(self, ssn: Session, job: JobInfo, col: int | None) -> ElasticJob | None:
        pg = job.pg
        if pg is None or col is None or not job.tasks:
            return None
        assert self.state is not None and self.ssn is not None  # set when the session opened
        ann = pg.metadata.annotations  # with a speed model (on_session_open asks only for those)
        # What only changes with the PodGroup or the job's tasks is kept between sessions, under
        # ``sig``.  The job's version moves with every change of its tasks' number or statuses
        # (and with a new PodGroup): while it stands (same JobInfo, PodGroup and arguments), the
        # signature is the one last checked and need not be built again.
        rv = pg.metadata.resource_version
        kept = self.state.static.get(job.uid)
        if (
            kept is not None
            and kept.job is job
            and kept.version == job.version
            and kept.pg is pg
            and kept.rv == rv
            and kept.col == col
            and kept.label == self.type_label
        ):
            hit = kept.parts  # (the job the last session built from them is reused when opening)
        else:
            # The parts follow from the PodGroup's annotations (parsed), minMember and owner (the
            # job's name), and from the job's tasks: the same TaskInfo objects with the same
            # statuses on the same nodes give the same parts.  Most PodGroup updates only write
            # its status (a new resourceVersion, the same annotations): the parts stand.
            if (
                kept is not None
                and kept.job is job
                and kept.tasks_version == job.tasks_version
                and kept.sig.pg == id(pg)
                and kept.sig.owners == id(pg.metadata.owner_references)
                and kept.sig.min_available == job.min_available
                and kept.sig.col == col
                and kept.sig.label == self.type_label
            ):
                # No task came, went or changed status or node since (a PodGroup write): the
                # same signature, without walking the tasks.
                sig = kept.sig
                ids = sig.task_ids
            else:
                tasks = job.tasks.values()
                ids = tuple(map(id, tasks))
                sig = Signature(
                    id(pg),
                    id(pg.metadata.owner_references),
                    job.min_available,
                    ids,
                    tuple([(t.status, t.node) for t in tasks]),
                    col,
                    self.type_label,
                )
            same_ann = kept is not None and kept.pg is pg and (kept.rv == rv or kept.ann == ann)
            if kept is not None and same_ann and kept.sig == sig:
                hit = kept.parts
                kept.job, kept.version, kept.rv, kept.tasks_version = job, job.version, rv, job.tasks_version
            else:
                # The annotations' parts, parsed again only when they changed (or for a new PodGroup).
                if kept is not None and same_ann:
                    sp, kn, prog, rng = kept.parsed
                    ann_seen = kept.ann
                elif kept is not None and all(kept.ann.get(k) == ann.get(k) for k in _MODEL_KEYS):
                    # Only the progress report changed (what the training job writes as it runs):
                    # the speed model, knobs and worker range stand.
                    sp, kn, _, rng = kept.parsed
                    if not self.oracle and kept.ann.get(METRICS) != ann.get(METRICS):
                        sp = learned_spec(ann, self._book())  # a new measurement: the learned model moves
                    try:
                        prog = es.progress(ann, parse_time=_time_parser)
                    except es.SpecError:
                        prog = None
                    ann_seen = dict(ann)
                else:
                    try:
                        sp = es.speed_spec(ann) if self.oracle else learned_spec(ann, self._book())
                        kn = es.knobs(ann)
                    except es.SpecError as exc:
                        self.invalid[job.uid] = f"{exc.field}: {exc.message}"
                        return None
                    try:
                        prog = es.progress(ann, parse_time=_time_parser)
                    except es.SpecError:
                        prog = None  # a bad progress report is ignored: the job is still the policy's
                    rng = es.workers_range(ann)
                    ann_seen = dict(ann)  # a copy: compared with the annotations of later versions
                # The job's GPU workers (by index), other tasks and GPUs per worker: the same while
                # its tasks are the same TaskInfo objects (kept alive here, so ids are not reused).
                if kept is not None and kept.ids == ids and kept.col == col:
                    split = kept.split
                else:
                    split = _split_tasks(job, col)
                if (
                    kept is not None
                    and kept.sig == sig
                    and kept.parsed.speed is sp
                    and kept.parsed.knobs is kn
                    and kept.parsed.workers == rng
                ):
                    # The same tasks and model: only the progress report is new.
                    parts: JobParts | None = kept.parts._replace(progress=prog)
                else:
                    parts = self._task_parts(job, sp, kn, prog, rng, split)
                if parts is None:
                    return None
                hit = parts
                self.state.static[job.uid] = _Static(
                    sig,
                    job,
                    job.version,
                    pg,
                    rv,
                    ann_seen,
                    col,
                    self.type_label,
                    Parsed(sp, kn, prog, rng),
                    ids,
                    split,
                    job.tasks_version,
                    parts,
                )
        sp, kn, prog, workers, others, gpw, lo, hi, placement, gtype, pinned, name, shape, n, requested = hit
        st = self.state.jobs.get(job.uid)
        if st is None:
            st = JobState(seen_at=ssn.now, wait_since=ssn.now)
            self.state.jobs[job.uid] = st
            if placement:  # adopted from the cluster (a restarted scheduler)
                st.target = dict(placement)
                st.target_type = gtype
                from ..cache import timestamp

                starts = [
                    timestamp(t.pod.status.start_time)
                    for t in workers
                    if t.status in ALIVE and t.pod is not None and t.pod.status.start_time is not None
                ]
                st.first_start = st.run_start = min(starts, default=ssn.now)
        left, attained = _progress(hit, n, ssn.now)
        ej = ElasticJob(
            info=job,
            name=name,
            speed=sp,
            min_workers=lo,
            max_workers=hi,
            requested=requested,
            priority=kn.priority,
            pinned=pinned,
            workers=workers,
            others=others,
            gpus_per_worker=gpw,
            placement=dict(placement),
            gpu_type=gtype,
            attained=attained,
            state=st,
            current=n,
        )
        _set_progress(ej, hit, left, attained, ssn.now)
        kept = self.state.static.get(job.uid)
        if kept is not None and kept.parts is hit:
            kept.ej = ej
        return ej

    def _task_parts(
        self,
        job: JobInfo,
        sp: Any,
        kn: Any,
        prog: Any,
        rng: tuple[int, int] | None,
        split: tuple[list[TaskInfo], list[TaskInfo], float],
    ) -> JobParts | None:
        """The parts of an elastic job that follow from its tasks (and annotations), or None
        when it is not (yet) the policy's: no GPU task, or its pods are still being created."""
        assert self.ssn is not None
        workers, others, gpw = split
        if not workers:
            return None
        # minMember covering every pod makes a rigid job (min = max): the policy still sizes it.
        if rng is not None:
            lo, hi = rng
            if len(workers) < hi and not any(t.status in ALIVE for t in workers):
                return None  # its pods are still being created
            hi = max(min(hi, len(workers)), lo)
        else:
            lo = max(1, job.min_available - len(others))
            hi = len(workers)
        if isinstance(sp.speed, LearnedSpeed) and self.policy.elastic:
            # Pollux's rule: no more than twice the most the job has been measured on
            hi = max(min(hi, sp.speed.max_allowed), min(lo, hi))
        placement: dict[str, int] = {}
        gtype = None
        names = self.ssn.nodes.names
        for t in workers:
            if t.status in ALIVE and t.node >= 0:
                node = names[t.node]
                placement[node] = placement.get(node, 0) + 1
                gtype = gtype or self.node_type(t.node)
        pinned = None
        pod = workers[0].pod
        if pod is not None:
            sel = pod.spec.node_selector or {}
            v = sel.get(self.type_label) or next((sel[k] for k in es.DEFAULT_GPU_TYPE_LABELS if sel.get(k)), None)
            pinned = str(v).lower() if v else None
        requested = min(max(kn.requested if kn.requested is not None else hi, lo), hi)
        return JobParts(
            sp,
            kn,
            prog,
            workers,
            others,
            gpw or 1.0,  # GPUs per worker as the policy reads it
            min(lo, hi),  # minimum workers
            hi,
            placement,
            gtype,
            pinned,
            _job_name(job),
            _shape(placement),
            sum(placement.values()),
            requested,
        )

    def node_type(self, i: int) -> str:
        """The GPU type of node ``i`` (its label), cached until a node's labels change."""
        assert self.state is not None and self.ssn is not None  # set when the session opened
        nodes = self.ssn.nodes
        memo = self.state.node_types
        if memo.get("version") != (nodes.version, self.type_label):
            memo.clear()
            memo["version"] = (nodes.version, self.type_label)
        t = memo.get(i)
        if t is None:
            labels = nodes.labels[i]
            v = labels.get(self.type_label) or next(
                (labels[k] for k in es.DEFAULT_GPU_TYPE_LABELS if labels.get(k)), None
            )
            t = memo[i] = str(v).lower() if v else "default"
        return t

    def curves(self, ej: ElasticJob, types: list[str], gpus_per_node: int) -> dict[str, tuple[float, ...]]:
        """Rates per worker count and type; for a job whose rate depends on its progress (an
        adaptive batch re-chosen per training phase), those of the phase it is in now — its
        observed progress, which non-clairvoyant policies may read."""
        assert self.state is not None  # set when the session opened
        phase = _phase(ej)
        out = {}
        for ty in types:
            if ej.pinned is not None and ty != ej.pinned:
                continue
            speed = ej.speed.speed
            key = (id(speed), ty, ej.max_workers, gpus_per_node, phase)
            hit = self.state.curves.get(key)
            if hit is None or hit.key is not speed:  # (an id is reused once its object is gone)
                if len(self.state.curves) >= _CURVES_KEPT:
                    self.state.curves.clear()  # learned models come and go with the jobs' reports
                hit = self.state.curves[key] = Kept(speed, rate_curve(speed, ty, ej.max_workers, gpus_per_node, phase))
            out[ty] = hit.value
        return out

    def rate_for(self, ej: ElasticJob, gpu_type: str, n: int, gpus_per_node: int) -> float:
        """The rate of ``ej`` on ``n`` consolidated workers of ``gpu_type`` (any n), from the same
        speed model and training phase as :meth:`curves`."""
        if n <= 0:
            return 0.0
        assert self.state is not None  # set when the session opened
        phase = _phase(ej)
        speed = ej.speed.speed
        # Asked for every job in every round of a fair-share policy (Pollux): kept as the curves are.
        key = (id(speed), gpu_type, n, gpus_per_node, phase)
        hit = self.state.rates_for.get(key)
        if hit is not None and hit.key is speed:  # (an id is reused once its object is gone)
            return hit.value
        pl = consolidated_placement(n, gpus_per_node)
        rate = float(speed.rate(pl, gpu_type)) if phase is None else float(speed.rate(pl, gpu_type, phase=phase))
        if len(self.state.rates_for) >= _CURVES_KEPT:
            self.state.rates_for.clear()
        self.state.rates_for[key] = Kept(speed, rate)
        return rate


def _phase(ej: ElasticJob) -> int | None:
    """The training phase ``ej`` is in by its observed progress (None: its rate does not depend on it)."""
    sp = ej.speed.speed
    return sp.phase_of(max(ej.speed.work - ej.remaining, 0.0)) if phase_bounds(sp) else None


_BY_INDEX = operator.attrgetter("index", "uid")
_CURVES_KEPT = 20_000
# The annotations the speed model, knobs and worker range are read from (not the progress report).
_MODEL_KEYS = (*es.STATIC_KEYS, es.WORKERS)


def _progress(parts: JobParts, n: int, now: float) -> tuple[float | None, float]:
    """(remaining work, attained GPU-seconds) of an elastic job at ``now``, from its last progress
    report, extrapolated with the speed model while ``n`` workers run it. The remaining work is
    None when it is extrapolated: ``_left_after`` gives it, when a reschedule reads it."""
    sp, prog = parts.speed, parts.progress
    done = 0.0
    attained = 0.0
    if prog is not None:
        done = prog.fraction * sp.work
        attained = prog.gpu_seconds
        if prog.time is not None and n and now > prog.time and getattr(sp.speed, "observed", True):
            return None, attained + n * parts.gpus_per_worker * (now - prog.time)
    left = sp.work - done
    return (0.0 if left < 0.0 else left), attained  # max(left, 0.0)


def _left_after(parts: JobParts, seconds: float) -> float:
    """The remaining work ``seconds`` after the job's progress report, running on its placement:
    extrapolated with the speed model, phase by phase where the rate depends on progress."""
    sp, prog = parts.speed, parts.progress
    assert prog is not None  # (only asked for a job with a report: see _progress)
    done = advance(sp.speed, parts.shape, parts.gpu_type, prog.fraction * sp.work, seconds, sp.work)
    left = sp.work - done
    return 0.0 if left < 0.0 else left


def _set_progress(ej: ElasticJob, parts: JobParts, left: float | None, attained: float, now: float) -> None:
    """Give ``ej`` what ``_progress`` found: its remaining work, or how to work it out."""
    ej.attained = attained
    ej.left = left
    if left is None:
        assert parts.progress is not None and parts.progress.time is not None
        ej.left_at = functools.partial(_left_after, parts, now - parts.progress.time)
    else:
        ej.left_at = None


def _reset(ej: ElasticJob, kept: _Static, now: float) -> None:
    """Ready an ElasticJob kept from an earlier session for this one: what actions change on it
    (a reschedule shows the policy's target as its placement and type for a while) as its parts
    give it, and the parts that depend on the time."""
    parts = kept.parts
    n = parts.alive
    ej.placement = parts.placement  # (never changed in place: ElasticJob.set_placement replaces it)
    ej.gpu_type = parts.gpu_type
    ej.current = n
    ej.placement_seen = None
    left, attained = _progress_kept(kept, parts, n, now)
    _set_progress(ej, parts, left, attained, now)


def _progress_kept(kept: _Static, parts: JobParts, n: int, now: float) -> tuple[float | None, float]:
    """``_progress(parts, n, now)``, kept in ``kept`` while it does not depend on ``now``."""
    prog = parts.progress
    if n and prog is not None and prog.time is not None:
        return _progress(parts, n, now)
    fixed = kept.fixed
    if fixed is not None and fixed.parts is parts:
        return fixed.remaining, fixed.attained
    remaining, attained = _progress(parts, n, now)
    assert remaining is not None  # (not extrapolated without workers or a report's time)
    kept.fixed = FixedProgress(parts, remaining, attained)
    return remaining, attained


def _split_tasks(job: JobInfo, col: int) -> tuple[list[TaskInfo], list[TaskInfo], float]:
    """(GPU workers sorted by index, the other tasks, GPUs per worker) of a job."""
    workers = []
    others = []
    gpw = 0.0
    for t in job.tasks.values():
        g = float(t.resreq[col]) if col < len(t.resreq) else 0.0
        if g > 0:
            workers.append(t)
            gpw = max(gpw, g)
        else:
            others.append(t)
    workers.sort(key=_BY_INDEX)
    return workers, others, gpw


# The plugin is built anew every session: its arguments are parsed once per distinct set.
def _shape(placement: dict[str, int]) -> tuple[int, ...]:
    return tuple(sorted((v for v in placement.values() if v > 0), reverse=True))


def _job_name(job: JobInfo) -> str:
    pg = job.pg
    for ref in pg.metadata.owner_references if pg is not None else []:
        if getattr(ref, "kind", "") == "Job":
            return f"{job.namespace}/{ref.name}"
    return job.uid


def _time_parser(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        from ..cache import timestamp

        return timestamp(raw)
