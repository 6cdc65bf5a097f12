"""volcano-scheduler.conf: actions, tiers of plugins with switches and arguments."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# Volcano's shipped default (installer/helm/.../volcano-scheduler.conf).
DEFAULT_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

class PluginOption(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def enabled(self, point: str) -> bool:
        """Whether extension point ``point`` (e.g. "JobOrder", "Preemptable") is on.

        Volcano spells the switches both ``enableXxx`` and ``enabledXxx``; both
        are accepted; hierarchy and namespace order are off unless asked for.
        """
        extra = self.model_extra or {}
        for key in (f"enabled{point}", f"enable{point}"):
            if key in extra and extra[key] is not None:
                return bool(extra[key])
        return point not in ("Hierarchy", "NamespaceOrder")

    @field_validator("arguments", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return v or {}


class Tier(BaseModel):
    plugins: list[PluginOption] = Field(default_factory=list)

    @field_validator("plugins", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return v or []


class ActionConfiguration(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class SchedulerConfiguration(BaseModel):
    model_config = ConfigDict(extra="ignore")

    actions: str = "enqueue, allocate, backfill"
    tiers: list[Tier] = Field(default_factory=list)
    configurations: list[ActionConfiguration] = Field(default_factory=list)

    @field_validator("tiers", "configurations", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return v or []

    @property
    def action_names(self) -> list[str]:
        return [a.strip() for a in self.actions.split(",") if a.strip()]

    def action_arguments(self, name: str) -> dict[str, Any]:
        for c in self.configurations:
            if c.name == name:
                return c.arguments
        return {}

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]


class SchedulerConfError(ValueError):
    """A scheduler configuration that cannot be used; ``problems`` are (path, message)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in problems))


def load_scheduler_conf(text: str | None = None) -> SchedulerConfiguration:
    """Parse volcano-scheduler.conf text (YAML); None gives Volcano's shipped default."""
    from ..actions import ACTIONS  # noqa: F401 - ensure registration
    from ..plugins import PLUGINS  # noqa: F401
    from .registry import ACTIONS as _A
    from .registry import PLUGINS as _P

    if text is None:
        text = DEFAULT_SCHEDULER_CONF
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise SchedulerConfError([("", f"not valid YAML: {exc}")]) from None
    if not isinstance(data, dict):
        raise SchedulerConfError([("", "expected a mapping with 'actions' and 'tiers'")])
    try:
        conf = SchedulerConfiguration.model_validate(data)
    except ValidationError as exc:
        raise SchedulerConfError(
            [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
        ) from None
    problems: list[tuple[str, str]] = []
    for name in conf.action_names:
        if name not in _A:
            problems.append(("actions", f"unknown action {name!r} (known: {', '.join(sorted(_A))})"))
    for ti, tier in enumerate(conf.tiers):
        names = [p.name for p in tier.plugins]
        for pi, p in enumerate(tier.plugins):
            if p.name not in _P:
                problems.append(
                    (f"tiers[{ti}].plugins[{pi}].name", f"unknown plugin {p.name!r} (known: {', '.join(sorted(_P))})")
                )
        if "proportion" in names and any(p.name == "drf" and p.enabled("Hierarchy") for p in tier.plugins):
            problems.append((f"tiers[{ti}]", "drf with enableHierarchy cannot share a tier with proportion"))
    if problems:
        raise SchedulerConfError(problems)
    return conf
