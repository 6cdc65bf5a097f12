"""Store: typed objects by kind and key, with watch handlers."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Protocol

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

Handler = Callable[[str, Any, Any], None]  # (event, new object, old object or None)


class Forbidden(Exception):
    """A create the API server's admission refuses (HTTP 403), e.g. a pod past a ResourceQuota."""


def kind_of(obj_or_cls: Any) -> str:
    """The store kind of an object: its model class name (BatchJob for batch/v1 Job)."""
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return cls.__name__


class Store(Protocol):
    def get(self, kind: str, key: str) -> Any | None: ...

    def list(self, kind: str) -> list[Any]: ...

    def create(self, obj: Any) -> Any: ...

    def create_many(self, objs: builtins.list[Any]) -> builtins.list[Any]:
        """Create several objects (a Volcano Job's pods): the same as one create after another,
        which a store may send side by side. Raises the first error once every create was tried."""
        ...

    def create_later(self, obj: Any) -> Any:
        """A create whose result the caller reads only as the object it asked for: a store may send
        it while the caller goes on (its get answers ``obj`` meanwhile) and apply it before the
        caller's key is synced again. Returns the object created, or ``obj`` where it is sent later."""
        ...

    def update(self, obj: Any) -> Any: ...

    def update_later(self, obj: Any) -> Any:
        """An update whose result the caller does not read: a store may send it while the caller
        goes on, and apply it (its watch handlers run then) before the caller's key is synced
        again. Raises or returns as update does where it is sent at once."""
        ...

    def delete(self, kind: str, key: str) -> Any | None: ...

    def watch(self, kind: str, handler: Handler) -> None: ...
