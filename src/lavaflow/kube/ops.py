"""Small helpers over the REST client: create/get/list/delete manifests by their apiVersion/kind."""

from __future__ import annotations

from typing import Any

from ..api.kinds import Kind, kind_info, kind_of_manifest
from .client import ApiError, KubeClient


async def create_manifest(client: KubeClient, doc: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    res = kind_of_manifest(doc)
    meta = doc.setdefault("metadata", {})
    ns = None
    if res.namespaced:
        ns = meta.get("namespace") or namespace or "default"
        meta["namespace"] = ns
    return await client.request("POST", res.path(ns), body=doc)


async def apply_manifest(client: KubeClient, doc: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """Create, or replace the spec of an existing object."""
    try:
        return await create_manifest(client, doc, namespace)
    except ApiError as exc:
        if not exc.already_exists:
            raise
    res = kind_of_manifest(doc)
    meta = doc["metadata"]
    cur = await client.request("GET", res.path(meta.get("namespace"), meta["name"]))
    doc["metadata"] = {**cur.get("metadata", {}), **meta, "resourceVersion": cur["metadata"]["resourceVersion"]}
    return await client.request("PUT", res.path(meta.get("namespace"), meta["name"]), body=doc)


APPLY_PATCH = "application/apply-patch+yaml"


async def server_side_apply(
    client: KubeClient, doc: dict[str, Any], manager: str = "lavaflow", force: bool = True
) -> dict[str, Any]:
    """``kubectl apply --server-side`` of one manifest: created if absent, else the fields it
    gives set (with ``force``, taken over from other managers)."""
    res = kind_of_manifest(doc)
    meta = doc.get("metadata") or {}
    ns = (meta.get("namespace") or "default") if res.namespaced else None
    params = {"fieldManager": manager, "force": "true" if force else None}
    return await client.request("PATCH", res.path(ns, meta["name"]), body=doc, params=params, content_type=APPLY_PATCH)


async def list_objects(
    client: KubeClient, kind: str, namespace: str | None = None, label_selector: str | None = None
) -> list[dict[str, Any]]:
    res = kind_info(kind)
    items: list[dict[str, Any]] = []
    cont = None
    while True:
        page = await client.request(
            "GET", res.path(namespace), params={"limit": 500, "continue": cont, "labelSelector": label_selector}
        )
        items.extend(page.get("items") or [])
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return items


async def get_object(client: KubeClient, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    res = kind_info(kind)
    try:
        return await client.request("GET", res.path(namespace if res.namespaced else None, name))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def delete_object(client: KubeClient, kind: str, name: str, namespace: str | None = None) -> bool:
    res: Kind = kind_info(kind)
    try:
        await client.request(
            "DELETE",
            res.path(namespace if res.namespaced else None, name),
            body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
        )
        return True
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
