"""volcano-scheduler.conf: actions, tiers of plugins with switches and arguments."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ...api import yamlio

# Volcano's shipped default (installer/helm/.../volcano-scheduler.conf), plus lavaflow's elastic
# action and plugin (they only act on elastic training jobs; see scheduler/elastic/).
DEFAULT_SCHEDULER_CONF = """\
actions: "enqueue, elastic, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: elastic
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

# Volcano's shipped volcano-scheduler.conf alone, what a Volcano installation runs with: the default
# above without lavaflow's elastic action and plugin. (vc-scheduler's own fallback when given no
# file at all has no binpack; the shipped file is what issue 40 compares against.)
VOLCANO_SHIPPED_CONF = DEFAULT_SCHEDULER_CONF.replace("enqueue, elastic, allocate", "enqueue, allocate").replace(
    "  - name: elastic\n", ""
)


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
                return extra[key] is True  # (anything but a boolean is refused when loaded)
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
    # (path, message) for what was accepted but skipped, e.g. plugins lavaflow does not know.
    _warnings: list[tuple[str, str]] = PrivateAttr(default_factory=list)
    _skipped: list[str] = PrivateAttr(default_factory=list)

    @property
    def skipped_plugins(self) -> list[str]:
        """Names of the plugins skipped because lavaflow does not implement them."""
        return self._skipped

    @property
    def warnings(self) -> list[tuple[str, str]]:
        return self._warnings

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


def yaml_error_line(exc: Exception) -> str:
    """A YAML error as one line, with the line and column inside the configuration."""
    from ...api.yamlio import YamlError

    if isinstance(exc, YamlError) and exc.line is not None:
        return f"not valid YAML at line {exc.line}, column {exc.column} of the configuration: {exc.message}"
    return "not valid YAML: " + " ".join(str(exc).split())


def load_scheduler_conf(text: str | None = None, allow_kube_default: bool = False) -> SchedulerConfiguration:
    """Parse volcano-scheduler.conf text (YAML); None gives Volcano's shipped default.

    As Volcano does, a plugin it does not know is skipped (listed in ``conf.warnings``);
    an unknown action refuses the configuration. ``kube-default`` is lavaflow's kube-scheduler
    baseline, not a Volcano action: only the baseline's own configuration may name it.
    """
    from ..actions import ACTIONS  # noqa: F401 - ensure registration
    from ..elastic import action, plugin  # noqa: F401 - the elastic unit's action and plugin
    from ..plugins import PLUGINS  # noqa: F401
    from .registry import ACTIONS as _A, PLUGINS as _P

    if text is None:
        text = DEFAULT_SCHEDULER_CONF
    try:
        data = yamlio.load(text)
    except yamlio.YamlError as exc:
        raise SchedulerConfError([("", yaml_error_line(exc))]) from None
    if not isinstance(data, dict):
        raise SchedulerConfError([("", "expected a mapping with 'actions' and 'tiers'")])
    try:
        conf = SchedulerConfiguration.model_validate(data)
    except ValidationError as exc:
        raise SchedulerConfError([(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]) from None
    problems: list[tuple[str, str]] = []
    volcano_actions = sorted(a for a in _A if a != "kube-default")
    for name in conf.action_names:
        if name == "kube-default" and not allow_kube_default:
            problems.append(
                (
                    "actions",
                    "'kube-default' is not a Volcano action: it is the kube-scheduler-like baseline, "
                    "a scheduler of its own (run it with --scheduler kube-default)",
                )
            )
        elif name not in _A:
            problems.append(("actions", f"unknown action {name!r} (known: {', '.join(volcano_actions)})"))
    for ti, tier in enumerate(conf.tiers):
        kept = []
        for pi, p in enumerate(tier.plugins):
            where = f"tiers[{ti}].plugins[{pi}]"
            for key, value in (p.model_extra or {}).items():
                # A switch (enableJobOrder, enabledPreemptable, ...) is a YAML boolean: Volcano
                # cannot read "false" (a string) into one, and Python would take it as true.
                if key.startswith("enable") and value is not None and not isinstance(value, bool):
                    problems.append((f"{where}.{key}", f"{p.name}: expected true or false, got {value!r}"))
            if p.name in _P:
                kept.append(p)
                for key, msg in _P[p.name].check_arguments(p.arguments):
                    problems.append((f"{where}.arguments[{key}]", f"{p.name}: {msg}"))
                for key, msg in _P[p.name].argument_warnings(p.arguments):
                    conf.warnings.append((f"{where}.arguments[{key}]", f"{p.name}: {msg}"))
            else:
                conf.skipped_plugins.append(p.name)
                conf.warnings.append(
                    (
                        f"tiers[{ti}].plugins[{pi}].name",
                        f"unknown plugin {p.name!r} skipped, as Volcano skips plugins it does not have "
                        f"(lavaflow implements: {', '.join(sorted(_P))})",
                    )
                )
        tier.plugins = kept
        names = [p.name for p in tier.plugins]
        if "proportion" in names and any(p.name == "drf" and p.enabled("Hierarchy") for p in tier.plugins):
            problems.append((f"tiers[{ti}]", "drf with enableHierarchy cannot share a tier with proportion"))
    if problems:
        raise SchedulerConfError(problems)
    return conf
