"""The object store interface that controllers and the scheduler cache work against.

Both backends implement it: the simulator with :class:`MemoryStore`, Kubernetes
with an informer-backed store that writes through the API server.
"""

from .base import ADDED, DELETED, MODIFIED, Store, kind_of
from .memory import MemoryStore

__all__ = ["ADDED", "DELETED", "MODIFIED", "MemoryStore", "Store", "kind_of"]
