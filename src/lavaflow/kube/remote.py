"""The API-server half of KubeStore: its requests, and where a kind's status is written.

``StoreRemote`` (a base of KubeStore) sends the store's writes: creates (with their status,
written after the create where the kind has a status subresource), updates (three-way merges of
the caller's change onto the server's object, retried on conflict), deletes and patches. Whether a
kind is served with a status subresource is read from discovery at start and corrected at run time
(a CRD replaced by one with or without it). A Volcano Job's pods are created with every field of
their task template, modelled or not. A write the server refuses is reported (``refused``).

Its state lives on the store (KubeStore.__init__ sets every attribute declared here).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..api.core import PodTemplateSpec
from ..api.kinds import API_KINDS, Kind, kind_info
from ..api.volcano import JOB_NAME_KEY, TASK_SPEC_KEY
from . import codec
from .client import MERGE_PATCH, STRATEGIC_PATCH, ApiError, KubeClient
from .codec import resource_version
from .discovery import served_resources

if TYPE_CHECKING:
    from .informer import Informer

log = logging.getLogger("lavaflow.kube")

_REDISCOVER = 30.0  # seconds between two readings of one group/version's discovery at run time
_TEMPLATES_KEPT = 1024  # Job task templates kept worked out for their pods' creates


class AlreadyExists(KeyError):
    pass


def _kind_name(res: Kind) -> str:
    return f"{res.api_kind} ({res.api_version})"


def _status_way(has: bool) -> str:
    if has:
        return "served with a status subresource: status is written through it"
    return "served without a status subresource: status is written on the object itself"


def _kept(sent: object, got: object) -> bool:
    """Whether the object ``got`` holds what the merge patch ``sent`` set (a None removes)."""
    if not isinstance(sent, dict):
        return sent == got
    have = got if isinstance(got, dict) else {}
    return all(have.get(k) is None if v is None else _kept(v, have.get(k)) for k, v in sent.items())


def _without_empty(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its empty lists and maps (which an API object leaves out)."""
    return {k: v for k, v in d.items() if v != [] and v != {}}


class StoreRemote:
    """KubeStore's requests to the API server (see the module's docstring)."""

    client: KubeClient
    keep_raw: bool
    raw: dict[str, dict[str, dict[str, Any]]]
    informers: dict[str, Informer]
    conflict_retries: int
    conflicts: int
    status_subresource: dict[str, bool]
    _rediscovered: dict[str, float]
    refusals: collections.Counter[tuple[str, str, int]]
    refusal_hooks: list[Callable[[str, str, int], None]]
    _templates: dict[tuple[str, str | None, str], tuple[dict[str, Any], dict[str, Any]]]

    # ------------------------------------------------------------------ status subresources
    def has_status(self, res: Kind) -> bool:
        """Whether ``res`` is served with a status subresource: as the server's discovery says
        (Volcano's PodGroup CRD has none, lavaflow's has one), else as the table of kinds says."""
        return self.status_subresource.get(res.kind, res.status)

    async def discover(self, versions: Iterable[str] | None = None) -> None:
        """Read which resources of ``versions`` (default: those of the informed kinds) have a status
        subresource. A group/version that cannot be read keeps the table's flags."""
        if versions is None:
            versions = {kind_info(k).api_version for k in self.informers}
        await asyncio.gather(*(self._discover_version(v) for v in sorted(set(versions))))

    async def _discover_version(self, api_version: str) -> None:
        try:
            served = await served_resources(self.client, api_version)
        except Exception as exc:  # not served (no CRD), not readable, or no answer
            log.debug("discovery of %s: %s; status subresources as lavaflow's CRDs have them", api_version, exc)
            return
        for res in API_KINDS.values():
            if res.api_version != api_version or res.plural not in served:
                continue
            has = f"{res.plural}/status" in served
            if has == self.has_status(res):
                self.status_subresource[res.kind] = has
            elif res.kind in self.status_subresource:
                self._set_status(res, has, "discovery says so now")
            else:
                self.status_subresource[res.kind] = has
                log.info("%s: %s", _kind_name(res), _status_way(has))

    def _set_status(self, res: Kind, has: bool, why: str) -> None:
        self.status_subresource[res.kind] = has
        log.warning("%s: %s (%s; its CRD was replaced?)", _kind_name(res), _status_way(has), why)

    async def _status_gone(self, res: Kind, key: str, exc: ApiError) -> bool:
        """A write to the status subresource of ``key`` was answered ``exc``: True (and the kind's
        status is written on the object from now on) when that is a 404 while the object exists,
        that is, the subresource is gone."""
        if not exc.not_found or not self.has_status(res):
            return False
        if await self._get_remote(res, key) is None:
            return False
        self._set_status(res, False, f"{exc.method} {exc.path} answered 404 while the object exists")
        return True

    async def _status_back(self, res: Kind) -> bool:
        """A status written on the object did not stay there: True when discovery, read again (at
        most every _REDISCOVER seconds per group/version), now lists a status subresource."""
        now = time.monotonic()
        if now - self._rediscovered.get(res.api_version, -_REDISCOVER) < _REDISCOVER:
            return False
        self._rediscovered[res.api_version] = now
        await self._discover_version(res.api_version)
        return self.has_status(res)

    def refused(self, kind: str, key: str, verb: str, exc: ApiError) -> None:
        """A write the API server refused: an error line naming the object, the verb and the
        HTTP status, counted in ``refusals`` and handed to the hooks."""
        self.refusals[(kind, verb, exc.status)] += 1
        log.error(
            "API server refused to %s %s %s: HTTP %d %s: %s (%s %s)",
            verb,
            kind,
            key,
            exc.status,
            exc.reason or "",
            exc.message or "",
            exc.method,
            exc.path,
        )
        for hook in self.refusal_hooks:
            try:
                hook(kind, verb, exc.status)
            except Exception:  # a metrics bug must not hide the refusal
                log.exception("refusal hook failed")

    # ------------------------------------------------------------------ remote calls
    async def _get_remote(self, res: Kind, key: str) -> dict[str, Any] | None:
        try:
            return await self.client.request("GET", res.path_for_key(key))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def create_body(self, res: Kind, obj: Any) -> dict[str, Any]:
        body = codec.encode(obj, res)
        if res.kind == "Pod":
            body = self._with_template(obj, body)
        body.get("metadata", {}).pop("resourceVersion", None)
        return body

    def _with_template(self, pod: Any, body: dict[str, Any]) -> dict[str, Any]:
        """A Volcano Job's pod keeps every field of its task template, modelled or not."""
        ann = pod.metadata.annotations
        job_name, task_name = ann.get(JOB_NAME_KEY), ann.get(TASK_SPEC_KEY)
        if not job_name or not task_name:
            return body
        job_key = f"{pod.namespace}/{job_name}"
        raw_job = self.raw.get("Job", {}).get(job_key)
        if raw_job is None:
            return body
        parts = self._template_parts(job_key, raw_job, task_name)
        if parts is None:
            return body
        base, old = parts
        merged = codec.merge3(
            base,
            old,
            {"metadata": body.get("metadata", {}), "spec": body.get("spec", {})},
        )
        out = dict(body)
        out["metadata"] = merged["metadata"]
        out["spec"] = merged["spec"]
        return out

    def _template_parts(
        self, job_key: str, raw_job: dict[str, Any], task_name: str
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A Job's task template as written (``base``) and as lavaflow's model reads it (``old``),
        worked out once per version of the Job and shared by its pods (read-only)."""
        memo_key = (job_key, resource_version(raw_job), task_name)
        hit = self._templates.get(memo_key)
        if hit is not None:
            return hit
        for t in (raw_job.get("spec") or {}).get("tasks") or []:
            if t.get("name") == task_name:
                tmpl = t.get("template") or {}
                old = codec.encode(PodTemplateSpec.model_validate(tmpl))
                parts = (
                    {"metadata": dict(tmpl.get("metadata") or {}), "spec": tmpl.get("spec") or {}},
                    {"metadata": old.get("metadata", {}), "spec": old.get("spec", {})},
                )
                if len(self._templates) >= _TEMPLATES_KEPT:
                    self._templates.clear()
                self._templates[memo_key] = parts
                return parts
        return None

    async def _create_remote(self, res: Kind, obj: Any) -> dict[str, Any]:
        body = self.create_body(res, obj)
        ns = obj.namespace if res.namespaced else None
        try:
            raw = await self.client.request("POST", res.path(ns), body=body)
        except ApiError as exc:
            if exc.already_exists:
                raise AlreadyExists(f"{res.kind} {obj.key} already exists") from None
            self.refused(res.kind, obj.key, "create", exc)
            raise
        want = body.get("status")
        if want and _kept(_without_empty(want), raw.get("status")):
            return raw  # (a new pod: its status is the server's Pending, as sent)
        if want and not self.has_status(res):
            await self._status_back(res)  # the server dropped the status: a subresource now?
        if want and self.has_status(res):
            raw.setdefault("apiVersion", res.api_version)
            raw.setdefault("kind", res.api_kind)
            got = codec.encode(codec.decode(res, raw) or obj, res).get("status")
            if got != want:
                status_body = dict(raw)
                status_body["status"] = codec.merge3(raw.get("status") or {}, got or {}, want)
                path = res.path(ns, raw["metadata"]["name"], "status")
                try:
                    raw = await self.client.request("PUT", path, body=status_body)
                except ApiError as exc:
                    # no subresource after all: the object was created with its status
                    if not await self._status_gone(res, obj.key, exc):
                        self.refused(res.kind, obj.key, "update", exc)
                        raise
        return raw

    async def _update_remote(self, res: Kind, obj: Any) -> dict[str, Any]:
        key = obj.key
        base = self.raw.get(res.kind, {}).get(key) if self.keep_raw else None
        if base is None:
            base = await self._get_remote(res, key)
            if base is None:
                raise KeyError(f"{res.kind} {key} not found")
        new_d = codec.encode(obj, res)
        new_d.get("metadata", {}).pop("resourceVersion", None)
        # The caller's change is what differs from the version it read (the informer's copy). On a
        # conflict that change is applied again onto the server's newer object, so fields someone
        # else changed meanwhile (e.g. an annotation a training script patched) are kept.
        base = dict(base)
        base.setdefault("apiVersion", res.api_version)
        base.setdefault("kind", res.api_kind)
        old_model = codec.decode(res, base)
        old_d = codec.encode(old_model, res) if old_model is not None else {}
        old_d.get("metadata", {}).pop("resourceVersion", None)
        main_old, main_new = codec.without(old_d, "status"), codec.without(new_d, "status")
        status_changed = old_d.get("status") != new_d.get("status")
        for attempt in range(self.conflict_retries):
            base = dict(base)
            base.setdefault("apiVersion", res.api_version)
            base.setdefault("kind", res.api_kind)
            result = base
            to_status = False
            try:
                sub = self.has_status(res)
                if main_old != main_new or (status_changed and not sub):
                    # without a status subresource the status goes with the object
                    body = codec.merge3(base, main_old if sub else old_d, main_new if sub else new_d)
                    result = await self.client.request("PUT", res.path_for_key(key), body=body)
                    if status_changed and not sub and not _kept(body.get("status"), result.get("status")):
                        sub = await self._status_back(res)  # dropped: through a subresource now?
                if sub and status_changed:
                    to_status = True
                    body = codec.merge3(result, old_d, new_d)
                    body.setdefault("metadata", {})["resourceVersion"] = resource_version(result)
                    result = await self.client.request("PUT", res.path_for_key(key, "status"), body=body)
                return result
            except ApiError as exc:
                if to_status and await self._status_gone(res, key, exc):
                    base = result  # the status goes with the object now
                    continue
                if exc.not_found:
                    raise KeyError(f"{res.kind} {key} not found") from None
                if not exc.conflict or attempt == self.conflict_retries - 1:
                    self.refused(res.kind, key, "update", exc)
                    raise
                self.conflicts += 1
                await asyncio.sleep(min(0.01 * 2**attempt, 0.5) * random.random())
                fresh = await self._get_remote(res, key)
                if fresh is None:
                    raise KeyError(f"{res.kind} {key} not found") from None
                base = fresh
        raise RuntimeError("unreachable")

    async def _delete_remote(self, res: Kind, key: str, grace: int | None = None) -> dict[str, Any] | None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        try:
            return await self.client.request("DELETE", res.path_for_key(key), body=body)
        except ApiError as exc:
            if exc.not_found:
                return None
            self.refused(res.kind, key, "delete", exc)
            raise

    # ------------------------------------------------------------------ raw helpers
    async def patch(
        self, kind: str, key: str, patch: dict[str, Any], status: bool = False, strategic: bool = False
    ) -> dict[str, Any]:
        """A merge (or strategic merge) patch of ``key``; with ``status``, of its status: through
        the status subresource where the kind has one (see has_status), else on the object itself.
        Raises ApiError (a 404: the object is gone); any other refusal is reported (see refused)."""
        res = kind_info(kind)
        content_type = STRATEGIC_PATCH if strategic else MERGE_PATCH
        answer: dict[str, Any] = {}
        for _ in range(3):  # (a subresource found gone, or back, is tried once the other way)
            sub = "status" if status and self.has_status(res) else None
            try:
                answer = await self.client.request(
                    "PATCH", res.path_for_key(key, sub), body=patch, content_type=content_type
                )
            except ApiError as exc:
                if sub and await self._status_gone(res, key, exc):
                    continue
                if not exc.not_found:
                    self.refused(res.kind, key, "patch", exc)
                raise
            if status and not sub and not strategic and not _kept(patch.get("status"), answer.get("status")):
                if await self._status_back(res):
                    continue
            return answer
        return answer
