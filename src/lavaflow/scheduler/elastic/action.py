"""elastic: size elastic training jobs by policy, then move the cluster towards those sizes.

Each session, with the ``elastic`` plugin configured:

1. **Reschedule, when due.** Arrivals and completions of elastic jobs, a change of the GPUs the
   policy may hand out (nodes added, lost, cordoned, or taken by other pods) and Tiresias
   priority changes ask for a reschedule; it runs at once for capacity changes, otherwise at most
   once per ``elastic.resizeInterval`` (Voda's rate limit; ``ssn.wake_at`` asks the backend for
   the cycle).  The policy (a pure function of the jobs' views and the GPUs per type) gives each
   job a GPU type and a worker count; workers are then placed per type by best-fit consolidation
   mapped onto the current placement with the fewest moves (:mod:`lavaflow.elastic.placement`).
   A job that shrinks keeps its lowest-index workers (scale-in removes the highest indices, as
   the MPI operator does).  The result is each job's *target*: workers per node.
2. **Reconcile, every session.** Workers above a node's target are evicted (highest index first);
   pending workers are bound where the target has room that is idle now; the job's other tasks
   (launcher, master) are placed beside them.  A job that is not yet running is started only as a
   whole gang (its statement is committed only when the job is ready).  Room still held by
   evicted pods is used in a later session, once they are gone.

Every change is recorded for the job ("resized 4 → 2 workers: ..."), becomes a ``Resized``
PodGroup condition and a Kubernetes Event, and is counted.  Evictions made for a resize carry the
reason ``ElasticResize`` so the job controller recreates the pod as pending (no restart, no
PodEvicted policy).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

import numpy as np

from ...elastic import spec as es
from ...elastic.learned import LearnedSpeed
from ..framework.memo import MISS, JobsRecord, Kept
from ..framework.registry import Action, register_action
from ..framework.statement import Statement
from ..model import Eviction, EvictionCause, TaskStatus
from .state import ALIVE, CapacityKept, ElasticJob, ElasticView, GpuNodes, GpuRows, TiresiasMarks

if TYPE_CHECKING:  # pragma: no cover
    from ...elastic.policies import Policy
    from ..framework.session import Session
    from ..model import TaskInfo

EPS = 1e-9
# Every wake the action asks for is worked out again in each session (a due reschedule, the next
# Tiresias queue change, a stuck job's interval, a periodic round), so each session's set replaces
# the last one's: a wake for a crossing that a resize moved asks for no cycle.
WAKE_RULE = "elastic"
# GPUs held by elastic workers per node index, under the jobs' token and (NodeSet version,
# nodes, GPU column): the jobs' placements are those their parts give before a reschedule.
ELASTIC_USED: JobsRecord[dict[int, float]] = JobsRecord("elastic.used")
# The order jobs are reconciled in (creation, then name), under the jobs' token.
RECONCILE_ORDER: JobsRecord[list[ElasticJob]] = JobsRecord("elastic.reconcile_order")
_PLACEMENTS_KEPT = 4096  # place() answers kept (ElasticState.placements)


@register_action
class ElasticAction(Action):
    name = "elastic"

    def execute(self, ssn: Session) -> None:
        plugin = cast("ElasticView | None", ssn.plugins.get("elastic"))
        if plugin is None or plugin.state is None:
            return
        st = plugin.state
        if not plugin.jobs and not st.jobs:
            return  # no elastic training job: nothing to size (most Volcano workloads)
        now = ssn.now
        # What is kept for jobs that left the cache goes (looked for only after a job left it).
        if st.jobs_removed != ssn.cache.jobs_removed:
            st.jobs_removed = ssn.cache.jobs_removed
            for uid in [u for u in st.jobs if u not in ssn.cache.jobs]:
                del st.jobs[uid]
                st.static.pop(uid, None)
        # Time accounting since the last session, and whether a job has been stuck for an interval
        # (read below; nothing in between changes ``stuck_since``), in one pass over the jobs.
        jobs: dict[str, ElasticJob] = {}
        succeeded = TaskStatus.SUCCEEDED
        interval = plugin.interval
        stuck = False
        # (job, most workers measured) of the jobs with learned models: see ``learned`` below
        measured: list[tuple[str, int]] = []
        for uid, ej in plugin.jobs.items():
            if ej.info.counts[succeeded]:
                continue  # a job whose workers started succeeding has finished its work
            jobs[uid] = ej
            speed = ej.speed.speed
            if isinstance(speed, LearnedSpeed):
                measured.append((uid, speed.max_observed))
            js = ej.state
            last = js.seen_at if js.seen_at is not None else now
            if now > last:
                if ej.current:
                    js.running_time += now - last
                else:
                    js.waiting_time += now - last
            js.seen_at = now
            if js.stuck_since is not None and now >= js.stuck_since + interval:
                stuck = True
        if not st.adopted:
            st.adopted = True
            if any(ej.current for ej in jobs.values()):
                st.last_resched = now  # a restarted scheduler keeps sizes for one interval
        capacity, nodes = self._capacity(ssn, plugin, jobs)
        # Nodes joining, leaving or changing their GPUs reschedule at once; usage by other pods
        # only through the rate-limited path (it moves with every bind of theirs).
        fingerprint = self._gpu_nodes(ssn, plugin)
        active = frozenset(jobs)
        force = fingerprint != st.node_version and st.node_version != -1
        dirty = force or active != st.known
        if st.node_version == -1:
            dirty = dirty or bool(active)
        st.node_version = fingerprint
        if plugin.policy.uses_priority_queues:
            nxt, moved_queue = self._priority_change(plugin, jobs, now)
            if moved_queue or nxt <= now + EPS:
                dirty = True
            if math.isfinite(nxt):  # the next change, also after one seen now (issue 31)
                ssn.wake_at(nxt, WAKE_RULE)
        if stuck:
            dirty = True
        # What the jobs' reports taught: a job measured on more workers than before may be given
        # more (learned models allow twice the most measured), so that is news for a policy that
        # sizes jobs or reads their speed; one that does neither (Tiresias, FIFO) decides the same.
        policy = plugin.policy
        learned = frozenset(measured) if policy.elastic or policy.needs_info else frozenset()
        if learned != st.known_learned:
            dirty = True
        periodic = bool(jobs) and getattr(plugin.policy, "periodic", False)
        if periodic:
            dirty = True  # a round every interval, whatever happened (the Pollux artifact's policy)
        # While GPUs stand idle, a round every ``idle_rounds`` seconds even if nothing happened: the
        # jobs' learned models move as they report (an adaptive job's gradient noise grows as it
        # trains, and with it the workers it can use), and a size chosen on early statistics would
        # otherwise stand until the next arrival or completion.
        idle_every = 0.0 if periodic or not jobs else float(getattr(plugin.policy, "idle_rounds", 0.0))
        if idle_every > 0 and not _gpus_idle(capacity, jobs):
            idle_every = 0.0
        if idle_every > 0 and now >= st.last_resched + idle_every - EPS:
            dirty = True
        if dirty:
            due = now if force else max(now, st.last_resched + plugin.interval)
            if not force and getattr(plugin.policy, "aligned_tick", False) and plugin.interval > 0:
                # a periodic tick at multiples of the interval (the Pollux simulator's 60 s rounds)
                due = math.ceil(due / plugin.interval - EPS) * plugin.interval
            st.due = due if st.due is None else min(st.due, due)
        if st.due is not None and st.due <= now + EPS and jobs:
            st.due = None
            self._reschedule(ssn, plugin, jobs, capacity, nodes)
            st.known = active
            st.known_learned = learned
        elif st.due is not None and not jobs:
            st.due = None
            st.known = active
        elif st.due is not None:
            ssn.wake_at(st.due, WAKE_RULE)
        if idle_every > 0 and st.due is None:
            ssn.wake_at(max(st.last_resched + idle_every, now + EPS), WAKE_RULE)
        if periodic and st.due is None:
            # the next round, whether or not anything else asks for a cycle by then
            nxt = st.last_resched + plugin.interval
            if getattr(plugin.policy, "aligned_tick", False) and plugin.interval > 0:
                nxt = math.ceil(nxt / plugin.interval - EPS) * plugin.interval
            ssn.wake_at(max(nxt, now + EPS), WAKE_RULE)
        self._reconcile(ssn, plugin, jobs, capacity)

    # ------------------------------------------------------------------ capacity
    def _capacity(
        self, ssn: Session, plugin: ElasticView, jobs: dict[str, ElasticJob]
    ) -> tuple[dict[str, int], list[tuple[str, int, str]]]:
        """GPUs per type the policy may hand out, and (node, slots, type) per GPU node."""
        col = plugin.gpu_col
        nodes_out: list[tuple[str, int, str]] = []
        cap: dict[str, int] = {}
        if col is None:
            return cap, nodes_out
        ns = ssn.nodes
        n = len(ns)
        if n == 0:
            return cap, nodes_out
        assert plugin.state is not None
        # GPUs held by elastic workers per node index (python floats: the same sums as before).
        # The jobs' placements here are those their parts give (the reschedule comes later), so
        # with the jobs as the last session saw them (ssn.jobs_token) and the same nodes, the same.
        kept_used = ELASTIC_USED.same(ssn, (ns.version, n, col))
        if kept_used is not MISS:
            elastic_used = kept_used
        else:
            elastic_used = {}
            pos = ns.pos
            for ej in plugin.jobs.values():
                g = ej.gpus_per_worker
                for node, k in ej.placement.items():
                    i = pos[node]
                    elastic_used[i] = elastic_used.get(i, 0.0) + k * g
                if ej.info.counts[TaskStatus.RELEASING]:
                    for t in ej.workers:
                        if t.status == TaskStatus.RELEASING and t.node >= 0:
                            elastic_used[t.node] = elastic_used.get(t.node, 0.0) + float(t.resreq[col])
            ELASTIC_USED.put(ssn, elastic_used, (ns.version, n, col))
        # The schedulable GPU nodes, their GPUs, names and types change only with the node set
        # (NodeSet.version): kept under it; only the nodes' usage is read every session.
        key = (ns.version, n, col, plugin.type_label)
        gpu_rows = plugin.state.gpu_rows
        if gpu_rows is None or gpu_rows.key != key:
            alloc = ns.allocatable[:n, col]
            live = np.flatnonzero((alloc > 0) & ns.schedulable[:n]).tolist()
            names = ns.names
            node_type = plugin.node_type
            rows = [(i, a, names[i], node_type(i)) for i, a in zip(live, alloc[live].tolist())]
            gpu_rows = plugin.state.gpu_rows = GpuRows(key, live, rows)
        used = ns.used[gpu_rows.live, col]
        # The same GPU rows, elastic usage and node usage as last time: the same capacity. The
        # elastic usage is worked out again whenever a job changed (a pod bound, started, gone),
        # mostly to the same sums: equal dicts (sums of positive products, never -0.0 or NaN) give
        # the same figures below.
        node_used = used.tobytes()
        kept_cap = plugin.state.capacity
        if (
            kept_cap is not None
            and kept_cap.rows is gpu_rows
            and kept_cap.node_used == node_used
            and (kept_cap.elastic_used is elastic_used or kept_cap.elastic_used == elastic_used)
        ):
            return dict(kept_cap.cap), list(kept_cap.nodes)
        for (i, a, name, ty), u in zip(gpu_rows.rows, used.tolist()):
            other = u - elastic_used.get(i, 0.0)
            slots = int(math.floor(a - other + EPS))
            cap.setdefault(ty, 0)
            if slots <= 0:
                continue
            cap[ty] += slots
            nodes_out.append((name, slots, ty))
        plugin.state.capacity = CapacityKept(gpu_rows, elastic_used, node_used, dict(cap), list(nodes_out))
        return cap, nodes_out

    def _gpu_nodes(self, ssn: Session, plugin: ElasticView) -> GpuNodes:
        """(name, GPUs, type) of every schedulable GPU node, recomputed only when a node changed."""
        assert plugin.state is not None
        col = plugin.gpu_col
        ns = ssn.nodes
        n = len(ns)
        if col is None or n == 0:
            return ()
        kept = plugin.state.gpu_nodes
        if kept is not None and kept.key == (ns.version, col, plugin.type_label):
            return kept.value
        alloc = ns.allocatable[:n, col]
        live = np.flatnonzero((alloc > 0) & ns.schedulable[:n])
        fp = tuple((ns.names[i], float(alloc[i]), plugin.node_type(i)) for i in live.tolist())
        plugin.state.gpu_nodes = Kept((ns.version, col, plugin.type_label), fp)
        return fp

    # ------------------------------------------------------------------ Tiresias
    def _priority_change(self, plugin: ElasticView, jobs: dict[str, ElasticJob], now: float) -> tuple[float, bool]:
        """(when the next Tiresias queue change is due, whether a job changed queue now)."""
        assert plugin.state is not None
        tiresias = plugin.state.tiresias
        if tiresias is None or tiresias.policy is not plugin.policy:
            thresholds, knob = _tiresias_params(plugin.policy)
            # each threshold less its tolerance, as the comparisons below read it
            tiresias = plugin.state.tiresias = TiresiasMarks(
                plugin.policy,
                thresholds,
                knob,
                tuple(th - 1e-6 * max(th, 1.0) for th in thresholds),
            )
        thresholds, knob, marks = tiresias.thresholds, tiresias.knob, tiresias.marks
        best = math.inf
        moved = False
        for ej in jobs.values():
            js = ej.state
            qs = ej.attained - js.queue_offset
            level = 0
            for mark in marks:
                if qs >= mark:
                    level += 1
            if level != js.queue_level:
                # demoted (or back after a promotion): when it crossed, from its current rate
                rate = ej.current * ej.gpus_per_worker
                crossed = thresholds[level - 1] if level > js.queue_level and level else None
                js.queue_entered = now - (qs - crossed) / rate if crossed is not None and rate > 0 else now
                js.queue_level = level
                moved = True
            if ej.current:
                for th, mark in zip(thresholds, marks):
                    if qs < mark:
                        best = min(best, now + (th - qs) / (ej.current * ej.gpus_per_worker))
                        break
            elif knob and math.isfinite(knob) and js.last_run_len > 0 and qs > 0 and js.wait_since is not None:
                due = js.wait_since + knob * js.last_run_len
                if due <= now + EPS:
                    js.queue_offset = ej.attained  # promoted: service counted afresh
                    js.queue_level = 0
                    js.queue_entered = now
                    moved = True
                best = min(best, due)
        return best, moved

    # ------------------------------------------------------------------ reschedule
    def _reschedule(
        self,
        ssn: Session,
        plugin: ElasticView,
        jobs: dict[str, ElasticJob],
        capacity: dict[str, int],
        nodes: list[tuple[str, int, str]],
    ) -> None:
        from ...elastic.placement import Node, place
        from ...elastic.policies import JobView, check_allocation

        st = plugin.state
        assert st is not None
        now = ssn.now
        st.last_resched = now
        kept_nodes = st.placement_nodes

        def node_of(row: tuple[str, int, str]) -> Node:
            nd = kept_nodes.get(row)
            if nd is None:
                nd = kept_nodes[row] = Node(*row)
            return nd

        st.reschedules += 1
        types = sorted(capacity)
        col = plugin.gpu_col
        # GPUs per node of each type (its largest node): rates are of workers packed onto such nodes
        gpn_of: dict[str, int] = {}
        for nm, _, ty in nodes:
            g = int(float(ssn.nodes.allocatable[ssn.nodes.pos[nm], col]))
            gpn_of[ty] = max(gpn_of.get(ty, 1), g)
        gpn = max(gpn_of.values(), default=1)
        uniform = len(set(gpn_of.values())) <= 1
        views = []
        by_name: dict[str, ElasticJob] = {}
        for ej in jobs.values():
            js = ej.state
            by_name[ej.name] = ej
            if js.target and ej.placement != js.target:
                # A change decided earlier is still on its way (binds in flight, pods being
                # recreated): the policy's own decision is the job's size.
                ej.placement_seen = ej.placement
                ej.set_placement(dict(js.target))
                ej.gpu_type = js.target_type
            views.append(
                JobView(
                    name=ej.name,
                    submit_time=ej.info.creation,
                    min_workers=ej.min_workers,
                    max_workers=ej.max_workers,
                    requested=ej.requested,
                    rates=plugin.curves(ej, types, gpn)
                    if uniform
                    else _curves_per_type(plugin, ej, types, gpn_of, gpn),
                    remaining_work=ej.remaining,
                    total_work=ej.speed.work,
                    priority=ej.priority,
                    current_workers=ej.current,
                    current_type=ej.gpu_type if ej.current else None,
                    pinned_type=ej.pinned,
                    first_start=js.first_start,
                    attained_service=ej.attained,
                    queue_service=ej.attained - js.queue_offset,
                    running_time=js.running_time,
                    waiting_time=js.waiting_time,
                    queue_entered=js.queue_entered if js.queue_entered is not None else ej.info.creation,
                    done_work=max(ej.speed.work - ej.remaining, 0.0),
                    restarts=js.restarts,
                    rate_fn=functools.partial(plugin.rate_for, ej, gpus_per_node=gpn)
                    if uniform
                    else functools.partial(_rate_per_type, plugin, ej, gpn_of, gpn),
                )
            )
        result = plugin.policy(views, capacity, now, node_sizes=gpn_of)
        check_allocation(views, capacity, result)
        new_n: dict[str, int] = {}
        new_t: dict[str, str | None] = {}
        for ej in jobs.values():
            a = result.get(ej.name)
            new_n[ej.name] = a.workers if a else 0
            new_t[ej.name] = a.gpu_type if a and a.workers else None
        order = [nm for nm in result if nm in new_n] + [nm for nm in new_n if nm not in result]
        targets: dict[str, dict[str, int]] = {}
        moved: dict[str, int] = {}
        mode = getattr(plugin.policy, "placement", "auto")
        placements = st.placements
        for ty in types:
            # in the policy's order (the artifact's Tiresias places jobs in its queue order)
            reqs = {nm: new_n[nm] for nm in order if new_t[nm] == ty}
            cur: dict[str, dict[str, int]] = {}
            for nm in reqs:
                ej = by_name[nm]
                if ej.current and ej.gpu_type == ty:
                    # (a job that keeps all its workers keeps its placement: the per-node counts of
                    # its alive workers, by index, which is what _keep_lowest would count)
                    cur[nm] = (
                        dict(ej.placement)
                        if ej.placement_seen is not None or reqs[nm] >= ej.current
                        else _keep_lowest(ssn, ej, reqs[nm])
                    )
            if not reqs:
                continue
            # place() is a function of its arguments (in their order): a reschedule that asks for
            # the same sizes on the same free GPUs and placement as an earlier one (a periodic
            # policy's round that changes nothing, sizes going back and forth) gets its answer.
            ty_rows = tuple([row for row in nodes if row[2] == ty])
            key = (ty_rows, tuple([(nm, tuple(c.items())) for nm, c in cur.items()]), tuple(reqs.items()), mode)
            hit = placements.get(key)
            if hit is None:
                if len(placements) >= _PLACEMENTS_KEPT:
                    placements.clear()
                # (Node objects are immutable: the same ones are handed out again for the same row)
                hit = placements[key] = place([node_of(row) for row in ty_rows], cur, reqs, mode)
            pl, mig = hit  # (only read: targets copies the per-node counts)
            targets.update({k: dict(v) for k, v in pl.items()})
            for k, v in mig.items():
                if by_name[k].gpu_type == ty and by_name[k].current:
                    moved[k] = v
        grew = [nm for nm in new_n if new_n[nm] > by_name[nm].current]
        shrank = [nm for nm in new_n if new_n[nm] < by_name[nm].current]
        for nm, ej in by_name.items():
            js = ej.state
            n0, n1 = ej.current, new_n[nm]
            t0, t1 = ej.gpu_type if n0 else None, new_t[nm]
            if ej.placement_seen is not None:  # back to what the cluster holds now, for reconcile
                ej.set_placement(ej.placement_seen)
                ej.placement_seen = None
            js.target = {k: v for k, v in targets.get(nm, {}).items() if v > 0} if n1 else {}
            js.target_type = t1
            js.stuck_since = None
            if n1 == 0:
                if n0:
                    js.halts += 1
                    js.last_run_len = now - (js.run_start if js.run_start is not None else now)
                    js.run_start = None
                    js.wait_since = now
                    why = _why(plugin.policy.name, nm, n0, n1, grew, shrank, capacity)
                    _note(ssn, ej, "Halted", f"halted ({n0} → 0 workers): {why}")
                continue
            if n0 == 0:
                why = _why(plugin.policy.name, nm, n0, n1, grew, shrank, capacity)
                if js.first_start is None:
                    js.first_start = now
                else:
                    js.restarts += 1
                js.run_start = now
                _note(
                    ssn,
                    ej,
                    "Started",
                    f"started with {n1} worker(s){' on ' + t1 if t1 and t1 != 'default' else ''}: {why}",
                )
            elif n0 != n1 or t0 != t1:
                js.resizes += 1
                js.restarts += 1
                why = _why(plugin.policy.name, nm, n0, n1, grew, shrank, capacity)
                kind = "type " + f"{t0} → {t1}, " if t0 != t1 else ""
                _note(
                    ssn,
                    ej,
                    "Resized",
                    f"resized {n0} → {n1} workers{(' (' + kind.rstrip(', ') + ')') if kind else ''}: {why}",
                )
            if moved.get(nm):
                js.migrations += moved[nm]
                if n0 == n1 and t0 == t1:
                    js.restarts += 1
                msg = f"{moved[nm]} worker(s) moved to consolidate the job: {plugin.policy.name}"
                if n0 == n1 and t0 == t1:
                    _note(ssn, ej, "Migrated", msg, count=moved[nm])
                else:
                    ssn.report_resize(ej.info, "Migrated", msg, moved[nm], event=False)

    # ------------------------------------------------------------------ reconcile
    def _reconcile(
        self, ssn: Session, plugin: ElasticView, jobs: dict[str, ElasticJob], capacity: dict[str, int]
    ) -> None:
        names = ssn.nodes.names
        pos = ssn.nodes.pos
        free: int | None = None  # GPUs not allocated to elastic jobs: worked out when first told

        def spare() -> int:
            nonlocal free
            if free is None:
                free = sum(capacity.values()) - sum(ej.current for ej in jobs.values())  # (never changes here)
            return max(free, 0)

        # The order only changes with the jobs (their creation and name): kept under their token.
        order = RECONCILE_ORDER.same(ssn)
        if order is MISS:
            order = RECONCILE_ORDER.put(ssn, sorted(jobs.values(), key=lambda e: (e.info.creation, e.name)))
        for ej in order:
            js = ej.state
            target = js.target
            if ej.placement == target:  # nothing to evict or bind for the workers
                others = ej.others
                if target and not (others and any(t.status == TaskStatus.PENDING for t in others)):
                    js.stuck_since = None
                    js.reason = ""
                    continue
                if not target and not (others and any(t.status in ALIVE for t in others)):
                    js.reason = (
                        js.reason
                        if js.reason.startswith("waiting")
                        else (
                            f"waiting for GPUs: the elastic policy {plugin.policy.name} has not started it "
                            f"(minimum {ej.min_workers} worker(s); {spare()} GPU(s) not allocated to elastic jobs)"
                        )
                    )
                    ej.info.job_fit_errors = js.reason
                    continue
            per_node: dict[str, list[TaskInfo]] = {}
            for t in ej.workers:
                if t.status in ALIVE and t.node >= 0:
                    per_node.setdefault(names[t.node], []).append(t)
            if not target:
                # Halted: every worker and the job's other tasks go.
                evict = Statement(ssn)
                for tasks in per_node.values():
                    for t in sorted(tasks, key=lambda t: (t.index, t.uid), reverse=True):
                        evict.evict(
                            t,
                            Eviction(
                                EvictionCause.RESIZE,
                                f"{es.RESIZE_REASON}: {js.reason or 'resized by the elastic policy'}",
                            ),
                        )
                for t in ej.others:
                    if t.status in ALIVE and t.node >= 0:
                        evict.evict(
                            t,
                            Eviction(
                                EvictionCause.RESIZE,
                                f"{es.RESIZE_REASON}: halted by the elastic policy {plugin.policy.name}",
                            ),
                        )
                if len(evict):
                    evict.commit()
                js.reason = (
                    f"waiting for GPUs: the elastic policy {plugin.policy.name} has not started it "
                    f"(minimum {ej.min_workers} worker(s); {spare()} GPU(s) not allocated to elastic jobs)"
                )
                ej.info.job_fit_errors = js.reason
                continue
            # Workers above their node's target, highest index first: those the evictions below take.
            leaving = [
                t
                for node, tasks in per_node.items()
                for t in sorted(tasks, key=lambda t: (t.index, t.uid), reverse=True)[
                    : max(len(tasks) - target.get(node, 0), 0)
                ]
            ]
            host = next((t for t in leaving if _hosts_rendezvous(t)), None)
            if host is not None:
                # The worker hosting the job's rendezvous (torchrun's c10d store) would leave: the
                # other workers' torchrun would fail with it, and workers bound now would join a
                # group about to lose its store. So the group restarts, as a migration at the
                # minimum does: every worker goes at once, none is bound in this session, and the
                # job starts again where the policy put it.
                evict = Statement(ssn)
                why = f"{js.reason or 'resized by the elastic policy'}; {host.name} hosts its rendezvous: the group restarts"
                for tasks in per_node.values():
                    for t in sorted(tasks, key=lambda t: (t.index, t.uid), reverse=True):
                        evict.evict(t, Eviction(EvictionCause.RESIZE, f"{es.RESIZE_REASON}: {why}"))
                evict.commit()
                if js.stuck_since is None:
                    js.stuck_since = ssn.now
                ssn.wake_at(js.stuck_since + plugin.interval, WAKE_RULE)
                js.reason = ""
                continue
            # 1. bindings: pending workers onto nodes below target, then the other tasks. First, so
            # that the evictions below know what already runs where the job is going (the nodes a
            # job grows onto are never those it leaves, so neither step makes room for the other).
            stmt = Statement(ssn)
            pending = [t for t in ej.workers if t.status == TaskStatus.PENDING]
            short = False
            k = 0
            for node, want in sorted(target.items()):
                i = pos.get(node)
                alive_here = len(per_node.get(node, ()))
                need = want - min(alive_here, want)
                while need > 0 and k < len(pending):
                    task = pending[k]
                    if i is None or not ssn.nodes.fits_idle(i, task.resreq) or not ssn.predicate_mask(task)[i]:
                        break
                    stmt.allocate(task, i)
                    k += 1
                    need -= 1
                if need > 0:
                    short = True
            for t in ej.others:
                if t.status == TaskStatus.PENDING:
                    at, fits = ssn.select_node(t, future=False)
                    if at < 0 or not fits:
                        short = True
                        continue
                    stmt.allocate(t, at)
            bound = 0
            if len(stmt) and ssn.job_ready(ej.info):
                bound = k
                stmt.commit()
            else:
                stmt.discard()
            # 2. evictions: above target on a node. A running job never runs on fewer workers than
            # its minimum (issue 35, item 13): workers that would take it there stay until their
            # replacements run, and go in a later session once the evicted ones are back and bound;
            # when none can go without that (a job at its minimum moving), all go at once -- the
            # checkpoint-restart a migration is -- and the job starts again where the policy put it.
            alive = sum(len(v) for v in per_node.values())
            room = alive + bound - ej.min_workers
            if leaving and alive >= ej.min_workers and room < len(leaving):
                if room > 0:
                    leaving = leaving[:room]
                elif not pending:  # only the leaving workers can come back where it goes: a restart
                    leaving = [t for tasks in per_node.values() for t in tasks]
                else:  # its pending workers wait for room where it goes; nothing leaves before
                    leaving = []
                short = True
            evict = Statement(ssn)
            for t in leaving:
                evict.evict(
                    t,
                    Eviction(
                        EvictionCause.RESIZE, f"{es.RESIZE_REASON}: {js.reason or 'resized by the elastic policy'}"
                    ),
                )
            if len(evict):
                evict.commit()
            if short:
                if js.stuck_since is None:
                    js.stuck_since = ssn.now
                ssn.wake_at(js.stuck_since + plugin.interval, WAKE_RULE)  # the stuck rule, on time
            else:
                js.stuck_since = None
            js.reason = ""


def _hosts_rendezvous(task: TaskInfo) -> bool:
    """Whether the worker's pod hosts its job's rendezvous (annotation ``RENDEZVOUS_HOST``)."""
    return task.pod is not None and task.pod.metadata.annotations.get(es.RENDEZVOUS_HOST) == "true"


def _keep_lowest(ssn: Session, ej: ElasticJob, n: int) -> dict[str, int]:
    """Per-node counts of the job's ``n`` lowest-index alive workers (a scale-in keeps them)."""
    out: dict[str, int] = {}
    kept = 0
    for t in ej.workers:
        if kept >= n:
            break
        if t.status in ALIVE and t.node >= 0:
            name = ssn.nodes.names[t.node]
            out[name] = out.get(name, 0) + 1
            kept += 1
    return out


def _why(
    policy: str, name: str, n0: int, n1: int, grew: Iterable[str], shrank: Iterable[str], capacity: dict[str, int]
) -> str:
    def few(names: Iterable[str]) -> str:
        xs = [x.split("/", 1)[-1] for x in names if x != name]
        return ", ".join(xs[:3]) + (f" and {len(xs) - 3} more" if len(xs) > 3 else "")

    if n1 < n0:
        others = few(grew)
        return f"{policy} gives the GPUs to {others}" if others else f"{policy} shrinks it"
    if n1 > n0:
        others = few(shrank)
        return (
            f"{policy}: GPUs freed by {others}" if others else f"{policy}: {sum(capacity.values())} GPUs, room to grow"
        )
    return policy


def _note(ssn: Session, ej: ElasticJob, reason: str, message: str, count: int = 0) -> None:
    ej.state.reason = message
    ssn.record(ej.info, "elastic", message)
    ej.info.extra_conditions.append(("Resized", reason, message))
    ssn.report_resize(ej.info, reason, message, count)


def _tiresias_params(policy: Policy) -> tuple[tuple[float, ...], float]:
    """The policy's attained-service queue thresholds and starvation promotion factor (inf: none)."""
    from ...elastic.policies.tiresias import DEFAULT_THRESHOLDS

    th = policy.params.get("thresholds") if isinstance(policy.params, dict) else None
    if th is None:
        th = getattr(policy, "thresholds", None)
    thresholds = tuple(sorted(th if th is not None else DEFAULT_THRESHOLDS))
    knob = getattr(policy, "promote_knob", None)
    return thresholds, (8.0 if knob is None else float(knob))


def _rate_per_type(
    plugin: ElasticView, ej: ElasticJob, gpn_of: dict[str, int], gpn: int, gpu_type: str, n: int
) -> float:
    """A job's rate on ``n`` workers packed onto nodes of ``gpu_type``'s size (clusters whose types
    differ in GPUs per node)."""
    return plugin.rate_for(ej, gpu_type, n, gpus_per_node=gpn_of.get(gpu_type, gpn))


def _curves_per_type(
    plugin: ElasticView, ej: ElasticJob, types: list[str], gpn_of: dict[str, int], gpn: int
) -> dict[str, tuple[float, ...]]:
    """:meth:`ElasticView.curves` with each type's workers packed onto nodes of that type's size."""
    out: dict[str, tuple[float, ...]] = {}
    for ty in types:
        out.update(plugin.curves(ej, [ty], gpn_of.get(ty, gpn)))
    return out


def _gpus_idle(capacity: dict[str, int], jobs: dict[str, ElasticJob]) -> bool:
    """Whether the elastic jobs hold fewer GPUs than they may use (some stand idle)."""
    return sum(capacity.values()) > sum(ej.current * ej.gpus_per_worker for ej in jobs.values()) + EPS
