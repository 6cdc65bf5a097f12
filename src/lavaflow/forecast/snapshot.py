"""Snapshots to forecast from: a live cluster's objects (listed once with the Kubernetes
backend's client) or a simulation's store at a time T (what its API server holds then)."""

from __future__ import annotations

from typing import Any

# What a forward run reads, in the order it is listed; kinds a cluster does not serve are skipped.
CLUSTER_KINDS = (
    "Node",
    "PriorityClass",
    "Queue",
    "HyperNode",
    "Numatopology",
    "ResourceQuota",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PodGroup",
    "Pod",
    "ReplicaSet",
    "StatefulSet",
    "Deployment",
    "BatchJob",
    "Job",
)
REQUIRED = ("Node", "Pod")


async def cluster_snapshot(client: Any) -> dict[str, list[Any]]:
    """Every object of ``CLUSTER_KINDS`` the cluster serves, decoded into lavaflow's models
    (objects lavaflow cannot read are left out, as its informers leave them out)."""
    from ..api.kinds import kind_info
    from ..kube.client import ApiError
    from ..kube.codec import decode
    from ..kube.ops import list_objects

    out: dict[str, list[Any]] = {}
    for kind in CLUSTER_KINDS:
        try:
            raws = await list_objects(client, kind)
        except ApiError as exc:
            if exc.not_found and kind not in REQUIRED:
                continue  # a CRD that is not installed, an API the server does not serve
            raise
        res = kind_info(kind)
        objs = [o for o in (decode(res, r) for r in raws) if o is not None]
        if objs:
            out[kind] = objs
    return out
