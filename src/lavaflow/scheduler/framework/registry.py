"""Actions and plugins are registered by name, as in Volcano's factory.go."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .arguments import as_bool, as_number

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    import numpy as np

    from ..cache import SchedulerCache
    from ..model import JobInfo
    from .session import Session


class Plugin:
    """A scheduler plugin: registers callbacks on the session when it opens."""

    name: ClassVar[str] = ""
    # The arguments the plugin reads: name (or "prefix.*") -> kind (framework/arguments.py);
    # checked when the configuration is loaded.
    ARGUMENTS: ClassVar[dict[str, str]] = {}

    def __init__(self, arguments: dict[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    @classmethod
    def check_arguments(cls, arguments: dict[str, Any]) -> list[tuple[str, str]]:
        """(argument, problem) for arguments the plugin cannot use, found when the configuration
        is loaded; the declared ones by default."""
        from .arguments import check_declared

        return check_declared(cls.ARGUMENTS, arguments)

    @classmethod
    def argument_warnings(cls, arguments: dict[str, Any]) -> list[tuple[str, str]]:
        """(argument, warning) for arguments accepted but not acted on."""
        return []

    def on_session_open(self, ssn: Session) -> None:  # pragma: no cover - interface
        pass

    def on_session_close(self, ssn: Session) -> None:
        pass

    @classmethod
    def prepare_jobs(cls, jobs: Sequence[JobInfo], width: int, total: np.ndarray, cache: SchedulerCache) -> None:
        """Work out ahead of a session what this plugin keeps per job under the job's version: the
        very values its next session would work out and keep for these jobs as they stand, nothing
        else (``width`` and ``total`` are that session's). A backend calls it in its idle time
        (``Scheduler.prepare_jobs``), so that the first session over a large cluster finds them
        kept instead of visiting every job. Most plugins keep nothing per job."""

    # Argument helpers (Volcano arguments arrive as strings, ints or floats), read by the same
    # rules the configuration was checked with (arguments.py); anything else gives the default.
    def arg_float(self, key: str, default: float) -> float:
        value = as_number(self.arguments.get(key, default))
        return default if value is None else value

    def arg_bool(self, key: str, default: bool) -> bool:
        value = as_bool(self.arguments.get(key, default))
        return default if value is None else value


class Action:
    """A scheduler action: runs once per session, in configured order."""

    name: ClassVar[str] = ""

    def __init__(self, arguments: dict[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:  # pragma: no cover - interface
        raise NotImplementedError


PLUGINS: dict[str, type[Plugin]] = {}
ACTIONS: dict[str, type[Action]] = {}


def register_plugin(cls: type[Plugin]) -> type[Plugin]:
    PLUGINS[cls.name] = cls
    return cls


def register_action(cls: type[Action]) -> type[Action]:
    ACTIONS[cls.name] = cls
    return cls
