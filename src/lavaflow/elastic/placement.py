"""Worker placement: best-fit consolidation, mapped onto the current placement with the fewest moves.

1. Pack every job's workers onto *virtual* copies of the nodes, largest job first, each onto the
   fullest node that still holds all its remaining workers (best fit); a job that fits nowhere
   fills the emptiest node and continues (it spans nodes).  Counts are exact: a spilled job
   records only what it placed (Voda recorded its full request there).
2. Assign virtual nodes to real nodes maximising the overlap with the current placement
   (Σ over jobs of min(workers on the virtual node, workers on the real node)) — an assignment
   problem solved with ``scipy.optimize.linear_sum_assignment``.  A virtual node may only go to a
   real node with at least as many GPUs.
3. A worker that must move to another node is a *migration*; removed workers of a shrinking job
   are not migrations.

Mode ``"keep"`` (:func:`keep_or_spread`) is how the Pollux artifact's Tiresias places jobs instead:
a running job keeps its nodes for as long as it runs at the same size (it is never moved), and a
job (re)started is placed, in the policy's order, on the node with the most free GPUs, taking as
many as it has there, then the next such node, and so on (ties: the first node).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .scipy_ext import extension


def _assignment_solver() -> Callable[..., Any]:
    """scipy's ``linear_sum_assignment``. Imported from ``scipy.optimize`` it brings the whole of
    that package (linear programming, minimisers, linear algebra, docstrings parsed at import):
    ~0.25 s, 5 % of a 160-job replay, for one function that is the C extension
    ``scipy.optimize._lsap``. So while scipy.optimize is not loaded, that extension is loaded on
    its own (:mod:`lavaflow.elastic.scipy_ext`: the same extension module, so the same function
    the package would give); with any other layout of scipy, or any trouble doing so, the public
    import."""
    if "scipy.optimize" not in sys.modules:
        module = extension("scipy.optimize._lsap", register=False)
        if module is not None:
            return module.linear_sum_assignment  # type: ignore[no-any-return]
    from scipy.optimize import linear_sum_assignment

    return cast("Callable[..., Any]", linear_sum_assignment)


linear_sum_assignment = _assignment_solver()


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    gpu_type: str = "default"


Placement = dict[str, dict[str, int]]  # job -> node -> workers


class PlacementError(ValueError):
    pass


def best_fit(capacities: Sequence[int], requests: Mapping[str, int]) -> list[dict[str, int]]:
    """Pack requests onto virtual nodes with the given capacities; returns per-node job counts."""
    free = list(capacities)
    nodes: list[dict[str, int]] = [{} for _ in capacities]
    if sum(requests.values()) > sum(capacities):
        raise PlacementError(f"{sum(requests.values())} workers requested, {sum(capacities)} GPUs")
    for job, n in sorted(requests.items(), key=lambda kv: (-kv[1], kv[0])):
        rem = n
        while rem > 0:
            fits = [i for i, f in enumerate(free) if f >= rem]
            if fits:
                i = min(fits, key=lambda i: (free[i], i))
                take = rem
            else:
                i = max(range(len(free)), key=lambda i: (free[i], -i))
                take = free[i]
                if take == 0:
                    raise PlacementError("no free GPU left")  # unreachable given the check above
            nodes[i][job] = nodes[i].get(job, 0) + take
            free[i] -= take
            rem -= take
    return nodes


def _excess(pl: Placement, nodes: Sequence[Node]) -> int:
    """Nodes spanned beyond the minimum each job needs (fragmentation)."""
    big = max((n.gpus for n in nodes), default=1)
    return sum(len([c for c in per.values() if c]) - -(-sum(per.values()) // big) for per in pl.values())


def sticky(
    nodes: Sequence[Node], current: Mapping[str, Mapping[str, int]], requests: Mapping[str, int]
) -> Placement | None:
    """Keep every worker where it is; shrink a job on the nodes holding fewest of its workers;
    place new workers next to the job's others, then best fit.  None if it does not fit."""
    idx = {nd.name: i for i, nd in enumerate(nodes)}
    free = [nd.gpus for nd in nodes]
    out: Placement = {}
    for job, n in sorted(requests.items()):
        cur = {k: v for k, v in (current.get(job) or {}).items() if k in idx and v > 0}
        keep = dict(cur)
        extra = sum(keep.values()) - n
        for node in sorted(keep, key=lambda k: (keep[k], -idx[k])):
            if extra <= 0:
                break
            take = min(extra, keep[node])
            keep[node] -= take
            extra -= take
        keep = {k: v for k, v in keep.items() if v}
        for node, c in keep.items():
            free[idx[node]] -= c
        out[job] = keep
    if any(f < 0 for f in free):
        return None
    for job, n in sorted(requests.items(), key=lambda kv: (-kv[1], kv[0])):
        rem = n - sum(out[job].values())
        # next to the job's other workers first
        for node in sorted(out[job], key=lambda k: (-free[idx[k]], idx[k])):
            if rem <= 0:
                break
            take = min(rem, free[idx[node]])
            if take > 0:
                out[job][node] += take
                free[idx[node]] -= take
                rem -= take
        while rem > 0:
            fits = [i for i, f in enumerate(free) if f >= rem]
            if fits:
                i = min(fits, key=lambda i: (free[i], i))
            else:
                i = max(range(len(free)), key=lambda i: (free[i], -i))
                if free[i] == 0:
                    return None
            take = min(rem, free[i])
            name = nodes[i].name
            out[job][name] = out[job].get(name, 0) + take
            free[i] -= take
            rem -= take
    return {j: pl for j, pl in out.items() if pl}


def keep_or_spread(
    nodes: Sequence[Node], current: Mapping[str, Mapping[str, int]], requests: Mapping[str, int]
) -> Placement:
    """The Pollux artifact's Tiresias placement (``simulator/tiresias.py``, OSDI'21 branch, read for
    its semantics): a job whose size is unchanged keeps exactly its current nodes; every other job,
    in the order of ``requests``, takes GPUs from the node with the most free GPUs (the first such
    node on ties), as many as it still needs or the node has, until it is placed.  No job is
    consolidated or migrated."""
    idx = {nd.name: i for i, nd in enumerate(nodes)}
    free = [nd.gpus for nd in nodes]
    out: Placement = {}
    todo: list[tuple[str, int]] = []
    for job, n in requests.items():
        if n <= 0:
            continue
        cur = {k: v for k, v in (current.get(job) or {}).items() if k in idx and v > 0}
        if cur and sum(cur.values()) == n and all(free[idx[k]] >= v for k, v in cur.items()):
            for k, v in cur.items():
                free[idx[k]] -= v
            out[job] = dict(cur)
        else:
            todo.append((job, n))
    for job, n in todo:
        got: dict[str, int] = {}
        rem = n
        while rem > 0:
            i = max(range(len(free)), key=lambda i: (free[i], -i)) if free else -1
            if i < 0 or free[i] <= 0:
                raise PlacementError(f"{sum(requests.values())} workers requested, {sum(nd.gpus for nd in nodes)} GPUs")
            take = min(rem, free[i])
            got[nodes[i].name] = got.get(nodes[i].name, 0) + take
            free[i] -= take
            rem -= take
        out[job] = got
    return out


def place(
    nodes: Sequence[Node],
    current: Mapping[str, Mapping[str, int]],
    requests: Mapping[str, int],
    mode: str = "auto",
) -> tuple[Placement, dict[str, int]]:
    """New placement for ``requests`` (job -> workers) on ``nodes``; returns it and migrations per job.

    ``current`` is the present placement (job -> node name -> workers); nodes not in ``nodes``
    are ignored (e.g. removed nodes).  ``mode``: ``"repack"`` = best-fit consolidation mapped with
    the fewest moves (Voda's scheme, corrected); ``"sticky"`` = no worker moves; ``"auto"`` (default)
    = sticky unless re-packing leaves jobs spread over fewer nodes, in which case re-pack;
    ``"keep"`` = the Pollux artifact's Tiresias placement (:func:`keep_or_spread`, no migrations).
    """
    if mode == "keep":
        return keep_or_spread(nodes, current, requests), {}
    if mode in ("auto", "sticky"):
        st = sticky(nodes, current, requests)
        if st is not None and (mode == "sticky" or _excess(st, nodes) == 0):
            return st, {}
        if st is not None:
            rp, mig = place(nodes, current, requests, "repack")
            if _excess(rp, nodes) < _excess(st, nodes):
                return rp, mig
            return st, {}
    reqs = {j: n for j, n in requests.items() if n > 0}
    if not nodes:
        if reqs:
            raise PlacementError("no nodes")
        return {}, {}
    caps = [nd.gpus for nd in nodes]
    virt = best_fit(caps, reqs)
    idx = {nd.name: i for i, nd in enumerate(nodes)}
    # current occupancy per real node
    real: list[dict[str, int]] = [{} for _ in nodes]
    for job, per_node in current.items():
        for node, c in per_node.items():
            i = idx.get(node)
            if i is not None and c > 0:
                real[i][job] = c
    m = len(nodes)
    score = np.zeros((m, m))
    for v in range(m):
        used = sum(virt[v].values())
        for r in range(m):
            if used > caps[r]:
                score[v, r] = -1e9
                continue
            if virt[v] and real[r]:
                s = 0
                for job, c in virt[v].items():
                    rc = real[r].get(job)
                    if rc:
                        s += min(c, rc)
                score[v, r] = s
    rows, cols = linear_sum_assignment(score, maximize=True)
    new: Placement = {}
    for v, r in zip(rows, cols):
        for job, c in virt[v].items():
            new.setdefault(job, {})[nodes[r].name] = c
    migrations: dict[str, int] = {}
    for job, per_node in new.items():
        old = current.get(job)
        if not old:
            continue
        old_live = {k: v for k, v in old.items() if k in idx}
        lost = sum(max(0, c - per_node.get(node, 0)) for node, c in old_live.items())
        shrink = max(0, sum(old_live.values()) - sum(per_node.values()))
        moved = max(0, lost - shrink)
        if moved:
            migrations[job] = moved
    return new, migrations


def placement_shape(per_node: Mapping[str, int]) -> tuple[int, ...]:
    """Per-node worker counts (for the speed model)."""
    return tuple(sorted((c for c in per_node.values() if c > 0), reverse=True))
