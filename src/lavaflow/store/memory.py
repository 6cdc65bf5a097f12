"""An in-memory store with synchronous watch notifications (the simulator's API server).

Only the handlers watching an object's kind are called, in the order they were registered.
Controllers keep their own indexes (pods by job, PodGroups by queue) from these events, so the
same controllers work against this store and the Kubernetes informer store alike.
"""

from __future__ import annotations

import builtins
import random
from collections.abc import Callable
from typing import Any

from .base import ADDED, DELETED, MODIFIED, Handler

# Version 4, RFC 4122 variant: the bits uuid.UUID(int=..., version=4) sets.
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET = (0x8000 << 48) | (4 << 76)


def _stamp(meta: Any, values: dict[str, Any]) -> None:
    """``setattr(meta, name, value)`` for each of ``values``: for a pydantic model (as assignment
    without validation does it: the value into ``__dict__``, the name into the set fields) without
    its per-call dispatch, as the store stamps every object it writes."""
    fields_set = getattr(meta, "__pydantic_fields_set__", None)
    if fields_set is None:
        for name, value in values.items():
            setattr(meta, name, value)
        return
    meta.__dict__.update(values)
    fields_set.update(values)


def _stamp1(meta: Any, name: str, value: Any) -> None:
    """``_stamp(meta, {name: value})``, for the one field update and delete stamp."""
    fields_set = getattr(meta, "__pydantic_fields_set__", None)
    if fields_set is None:
        setattr(meta, name, value)
        return
    meta.__dict__[name] = value
    fields_set.add(name)


class AlreadyExists(KeyError):
    pass


class MemoryStore:
    def __init__(self, clock: Callable[[], float] = lambda: 0.0, seed: int = 0) -> None:
        self._objects: dict[str, dict[str, Any]] = {}
        self._handlers: dict[str, list[Handler]] = {}
        self.clock = clock
        self.version = 0
        self.quiet = 0  # quiet updates among the versions (see update)
        self._rng = random.Random(seed)
        self._generated = 0
        # The API server's admission for creates: kind -> checks that raise base.Forbidden.
        self.admission: dict[str, list[Callable[[Any], None]]] = {}

    def new_uid(self) -> str:
        """``str(uuid.UUID(int=<128 random bits>, version=4))``, without building the UUID object."""
        h = "%032x" % (self._rng.getrandbits(128) & _UUID4_CLEAR | _UUID4_SET)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def get(self, kind: str, key: str) -> Any | None:
        return self._objects.get(kind, {}).get(key)

    def list(self, kind: str) -> list[Any]:
        return list(self._objects.get(kind, {}).values())

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))

    def watch(self, kind: str, handler: Handler) -> None:
        self._handlers.setdefault(kind, []).append(handler)

    def _notify(self, kind: str, event: str, obj: Any, old: Any) -> None:
        for h in self._handlers.get(kind, ()):
            h(event, obj, old)

    def create(self, obj: Any) -> Any:
        kind = type(obj).__name__
        meta = obj.metadata
        if not meta.name and meta.generate_name:
            self._generated += 1
            meta.name = f"{meta.generate_name}{self._rng.getrandbits(24):06x}"
        if obj.namespaced and meta.namespace is None:
            meta.namespace = "default"
        bucket = self._objects.setdefault(kind, {})
        key = obj.key
        if key in bucket:
            raise AlreadyExists(f"{kind} {key} already exists")
        for check in self.admission.get(kind, ()):
            check(obj)
        self.version += 1
        stamp: dict[str, Any] = {"resource_version": str(self.version)}
        if not meta.uid:
            stamp["uid"] = self.new_uid()
        if meta.creation_timestamp is None:
            stamp["creation_timestamp"] = self.clock()
        _stamp(meta, stamp)
        bucket[key] = obj
        for h in self._handlers.get(kind, ()):
            h(ADDED, obj, None)
        return obj

    @property
    def changes(self) -> int:
        """Changes that may call for a scheduling cycle: every change but the quiet updates."""
        return self.version - self.quiet

    def create_many(self, objs: builtins.list[Any]) -> builtins.list[Any]:
        """One create after another (a memory store has no round trips to overlap)."""
        return [self.create(obj) for obj in objs]

    def create_later(self, obj: Any) -> Any:
        """At once (nothing to overlap)."""
        return self.create(obj)

    def update(self, obj: Any, old: Any = None, quiet: bool = False) -> Any:
        """Store a changed object (objects are updated in place; ``old`` is an optional earlier copy).
        ``quiet``: a change nothing but a later cycle reads (a training job's report), counted
        apart in ``changes`` so that it does not call for a cycle of its own."""
        kind = type(obj).__name__
        bucket = self._objects.get(kind)
        key = obj.key
        if bucket is None or key not in bucket:
            raise KeyError(f"{kind} {key} not found")
        if quiet:
            self.quiet += 1
        self.version = version = self.version + 1
        _stamp1(obj.metadata, "resource_version", str(version))
        bucket[key] = obj
        for h in self._handlers.get(kind, ()):
            h(MODIFIED, obj, old)
        return obj

    def update_later(self, obj: Any) -> Any:
        """At once (nothing to overlap)."""
        return self.update(obj)

    def delete(self, kind: str, key: str) -> Any | None:
        obj = self._objects.get(kind, {}).pop(key, None)
        if obj is None:
            return None
        self.version += 1
        _stamp1(obj.metadata, "deletion_timestamp", self.clock())
        for h in self._handlers.get(kind, ()):
            h(DELETED, obj, None)
        return obj
