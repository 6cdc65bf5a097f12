"""The sweep file of `lavaflow sweep`: its pydantic model, and its expansion into runs, each keyed
by a hash of what decides its outcome.

A sweep file names axes (inputs, loads, clusters, scheduler configurations, policies, seeds, policy
parameters, simulation settings); the runs are their product, or, with ``runs:``, the union of
the products of each entry (an entry's axes replace the top-level ones). See docs/sweeps.md.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Annotated, Any, Optional, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

Scalar = Union[StrictBool, StrictInt, StrictFloat, str]

# simulate's options a sweep may set, with `lavaflow simulate`'s defaults
SETTING_DEFAULTS: dict[str, Any] = {
    "until": None,
    "default_duration": "60s",
    "adaptive_batch": False,
    "oracle": False,
    "resize_interval": None,
    "resize_cost": None,
    "report_period": "30s",
    "report_noise": 0.0,
    "shared_profiles": None,
}
_DURATIONS = ("until", "default_duration", "resize_interval", "resize_cost", "report_period")


def _duration(value: Any, name: str) -> Any:
    from ..api.sim_annotations import parse_duration

    for v in value if isinstance(value, list) else [value]:
        if v is None and name != "default_duration" and name != "report_period":
            continue
        if not isinstance(v, str | int | float) or isinstance(v, bool):
            raise ValueError(f"expected a duration such as 30s or 2h, got {v!r}")
        secs = parse_duration(str(v), allow_inf=name == "default_duration")
        if name == "report_period" and not secs > 0:
            raise ValueError(f"must be longer than 0s, got {v!r}")
    # kept as text: a number of seconds given as 3600 is "3600", as simulate's options take it
    return [None if v is None else str(v) for v in value] if isinstance(value, list) else str(value)


class Settings(BaseModel):
    """`lavaflow simulate`'s options; a list makes the setting an axis of the sweep."""

    model_config = ConfigDict(extra="forbid")

    until: Optional[Union[str, int, list[Optional[Union[str, int]]]]] = None
    default_duration: Optional[Union[str, int, list[Union[str, int]]]] = None
    adaptive_batch: Optional[Union[StrictBool, list[StrictBool]]] = None
    oracle: Optional[Union[StrictBool, list[StrictBool]]] = None
    resize_interval: Optional[Union[str, int, list[Optional[Union[str, int]]]]] = None
    resize_cost: Optional[Union[str, int, list[Optional[Union[str, int]]]]] = None
    report_period: Optional[Union[str, int, list[Union[str, int]]]] = None
    report_noise: Optional[Union[float, list[float]]] = None
    shared_profiles: Optional[Union[StrictBool, list[Optional[StrictBool]]]] = None

    @field_validator(*_DURATIONS)
    @classmethod
    def _check_duration(cls, v: Any, info: Any) -> Any:
        return None if v is None else _duration(v, info.field_name)

    @field_validator("report_noise")
    @classmethod
    def _check_noise(cls, v: Any) -> Any:
        for x in v if isinstance(v, list) else [v]:
            if x is not None and not 0 <= x < 10:
                raise ValueError(f"must be between 0 and 10 (a log-normal sigma), got {x!r}")
        return v


def _known_policy(p: str) -> str:
    from ..elastic.policies import POLICY_NAMES, resolve_name

    try:
        return resolve_name(p)
    except KeyError:
        raise ValueError(f"unknown policy {p!r} (choose from {', '.join(POLICY_NAMES)})") from None


class Axes(BaseModel):
    """The axes of a sweep; every one is optional in a ``runs:`` entry."""

    model_config = ConfigDict(extra="forbid")

    inputs: Optional[list[Union[str, list[str]]]] = Field(default=None, min_length=1)
    loads: Optional[list[Union[StrictInt, StrictFloat]]] = Field(default=None, min_length=1)
    clusters: Optional[list[str]] = Field(default=None, min_length=1)
    configs: Optional[list[str]] = Field(default=None, min_length=1)
    policies: Optional[list[Annotated[str, AfterValidator(_known_policy)]]] = Field(default=None, min_length=1)
    seeds: Optional[Union[StrictInt, list[StrictInt]]] = None
    params: Optional[dict[str, Union[Scalar, list[Scalar]]]] = None
    settings: Optional[Settings] = None

    @field_validator("loads")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        for x in v or []:
            if not x > 0:
                raise ValueError(f"a load is a positive factor (1.0 = the trace as it is), got {x!r}")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        if isinstance(v, int):
            if v < 1:
                raise ValueError(f"a number of seeds is at least 1, got {v}")
            return list(range(v))
        if v is not None and not v:
            raise ValueError("name at least one seed")
        if v is not None and any(s < 0 for s in v):
            raise ValueError("seeds are non-negative integers")
        return v

    @field_validator("params")
    @classmethod
    def _params(cls, v: Any) -> Any:
        for name, values in (v or {}).items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not a parameter name")
            if isinstance(values, list) and not values:
                raise ValueError(f"{name}: give at least one value")
        return v


class SweepSpec(Axes):
    """A sweep file."""

    name: Optional[str] = None
    description: Optional[str] = None
    runs: Optional[list[Axes]] = Field(default=None, min_length=1)


class SpecError(Exception):
    """Problems with a sweep file, each already naming the file and the field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "int", "float", "bool", "list[...]", "list[str]") or "[" in str(part):
            continue  # pydantic's union member names
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def read_spec(path: Path) -> SweepSpec:
    """The sweep file, validated; :class:`SpecError` names the file and field of each problem."""
    from ..api import yamlio
    from .main import Invalid, read_text

    try:
        text = read_text(path)
    except Invalid as exc:
        raise SpecError(exc.problems) from None
    try:
        data = yamlio.load(text)  # duplicate keys and alias bombs refused, as everywhere in lavaflow
    except yamlio.YamlError as exc:
        where = f"line {exc.line}: " if exc.line is not None else ""
        raise SpecError([f"{path}: {where}not valid YAML ({exc.message})"]) from None
    if not isinstance(data, dict):
        raise SpecError(
            [f"{path}: expected a mapping of axes (inputs, policies, seeds, ...), got {type(data).__name__}"]
        )
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        seen: dict[str, str] = {}
        for e in exc.errors():
            where = _loc(e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = "unknown field"
            seen.setdefault(where, msg)
        raise SpecError([f"{path}: {w}: {m}" for w, m in seen.items()]) from None
    if not spec.inputs and not (spec.runs and all(r.inputs for r in spec.runs)):
        raise SpecError([f"{path}: inputs: give at least one input file or glob (at the top level or in every run)"])
    return spec


# ---------------------------------------------------------------------------- expansion into runs


@dataclass(frozen=True)
class FileRef:
    """A file a run reads: how the table names it, and where it is."""

    name: str
    path: Path


@dataclass
class Run:
    key: str
    axes: dict[str, Any]  # the table's axis columns
    files: list[FileRef]  # inputs, then the cluster file
    config: FileRef | None
    policy: str | None
    seed: int
    params: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)

    def task(self, contents: dict[Path, bytes]) -> dict[str, Any]:
        """What a worker needs (files travel by content: a Ray worker may not share this disk)."""
        return {
            "key": self.key,
            "axes": self.axes,
            "files": [(f.name, contents[f.path]) for f in self.files],
            "config": None if self.config is None else (self.config.name, contents[self.config.path]),
            "policy": self.policy,
            "seed": self.seed,
            "params": self.params,
            "settings": self.settings,
        }


def _data_roots() -> list[Path]:
    from ..elastic.data_paths import data_roots

    return data_roots()


def _display(p: Path, base: Path) -> str:
    """A file's name in the table: relative to the sweep file's folder, else to a data folder, else
    relative to the sweep file's folder through ``..`` when they share a folder, else absolute."""
    import os

    p = p.resolve()
    for root in [base, *_data_roots()]:
        try:
            return p.relative_to(root.resolve()).as_posix()
        except ValueError:
            continue
    # a neighbour of the sweep file's folder (../../tests/data/x.csv) by its relative name; a file
    # that shares no folder with it but the root by its absolute one
    common = Path(os.path.commonpath([p, base.resolve()]))
    return Path(os.path.relpath(p, base.resolve())).as_posix() if len(common.parts) > 1 else p.as_posix()


def _resolve(pattern: str, base: Path) -> list[Path]:
    """Files a name or glob stands for: relative to the sweep file's folder, else to the data
    folders ($LAVAFLOW_DATA, ../shared/data, the package's copies)."""
    pat = Path(pattern).expanduser()
    roots = [Path("/")] if pat.is_absolute() else [base, *_data_roots()]
    for root in roots:
        full = str(root / pat) if not pat.is_absolute() else str(pat)
        hits = sorted(Path(h) for h in glob.glob(full, recursive=True) if Path(h).is_file())
        if hits:
            return sorted(hits, key=lambda h: _natural(h.as_posix()))
    return []


def _natural(s: str) -> list[tuple[int, int, str]]:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", s) if t]


def load_variant(path: Path, load: float) -> Path | None:
    """The file for ``load`` of a trace kept in load-variant folders, as Pollux's are
    (``workloads/`` is load 1.0, ``workloads-0.5/``, ``workloads-1.5/``... the others)."""
    folder = path.parent
    base = re.sub(r"-\d+(\.\d+)?$", "", folder.name)
    names = [f"{base}-{load}", f"{base}-{load:g}"] + ([base] if load == 1 else [])
    for n in dict.fromkeys(names):
        cand = folder.parent / n / path.name
        if cand.is_file():
            return cand
    return None


def _merge(top: Axes, entry: Axes) -> Axes:
    """A ``runs:`` entry over the top-level axes: its axes replace the top level's, its params and
    settings are merged into the top level's name by name."""
    values = {k: getattr(top, k) for k in Axes.model_fields}
    values.update({k: getattr(entry, k) for k in Axes.model_fields if getattr(entry, k) is not None})
    if top.params and entry.params:
        values["params"] = {**top.params, **entry.params}
    if top.settings and entry.settings:
        values["settings"] = Settings.model_construct(
            **{**top.settings.model_dump(exclude_none=True), **entry.settings.model_dump(exclude_none=True)}
        )
    return Axes.model_construct(**values)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _listify(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _effective_policy(policy: str | None, conf_text: str | None) -> str:
    """The elastic policy a run uses: the sweep's, else its configuration's, else the default."""
    if policy is not None:
        return policy
    if conf_text is not None:
        from ..scheduler.framework.conf import load_scheduler_conf

        conf = load_scheduler_conf(conf_text)
        for t in conf.tiers:
            for p in t.plugins:
                if p.name == "elastic" and "elastic.policy" in p.arguments:
                    return str(p.arguments["elastic.policy"])
    return "Lavaflow"


def expand(spec: SweepSpec, spec_path: Path) -> tuple[list[Run], list[str], dict[Path, bytes]]:
    """The runs of a sweep (in spec order, duplicates dropped), warnings, and the contents of the
    files they read; :class:`SpecError` for files that are not there or axes that do not fit
    together."""
    from .. import __version__
    from ..elastic.policies import policy_parameters
    from ..scheduler.framework.conf import SchedulerConfError, load_scheduler_conf

    base = spec_path.resolve().parent
    problems: list[str] = []
    warnings: list[str] = []
    contents: dict[Path, bytes] = {}

    def read(p: Path, where: str) -> bytes | None:
        if p not in contents:
            try:
                contents[p] = p.read_bytes()
            except OSError as exc:
                problems.append(f"{spec_path}: {where}: {p}: cannot read ({exc.strerror or exc})")
                return None
        return contents[p]

    def match(pattern: str, where: str) -> list[Path]:
        hits = _resolve(pattern, base)
        if not hits:
            problems.append(f"{spec_path}: {where}: no file matches {pattern!r} (relative to {base} or a data folder)")
        return hits

    entries = [(f"runs[{i}].", _merge(spec, e)) for i, e in enumerate(spec.runs)] if spec.runs else [("", spec)]
    runs: dict[str, Run] = {}
    for prefix, ax in entries:
        # inputs: each item is a file or glob (every match one input), or a list of them (one input)
        inputs: list[list[Path]] = []
        for i, item in enumerate(ax.inputs or []):
            where = f"{prefix}inputs[{i}]"
            if isinstance(item, list):  # one input of several files
                group = [h for j, pat in enumerate(item) for h in match(pat, f"{where}[{j}]")]
                if group:
                    inputs.append(group)
            else:
                inputs += [[h] for h in match(item, where)]
        clusters: list[Path | None] = [None]
        if ax.clusters:
            clusters = []
            for i, c in enumerate(ax.clusters):
                clusters += match(c, f"{prefix}clusters[{i}]")
        configs: list[Path | None] = [None]
        if ax.configs:
            configs = []
            for i, c in enumerate(ax.configs):
                for h in match(c, f"{prefix}configs[{i}]"):
                    data = read(h, f"{prefix}configs[{i}]")
                    if data is None:
                        continue
                    try:
                        conf = load_scheduler_conf(data.decode("utf-8"))
                    except (SchedulerConfError, UnicodeDecodeError) as exc:
                        detail = "; ".join(
                            f"{p + ': ' if p else ''}{m}" for p, m in getattr(exc, "problems", [("", str(exc))])
                        )
                        problems.append(f"{spec_path}: {prefix}configs[{i}]: {_display(h, base)}: {detail}")
                        continue
                    elastic_on = "elastic" in conf.action_names and any(
                        p.name == "elastic" for t in conf.tiers for p in t.plugins
                    )
                    if (ax.policies or ax.params) and not elastic_on:
                        problems.append(
                            f"{spec_path}: {prefix}configs[{i}]: {_display(h, base)} does not enable elastic "
                            "scheduling, so policies and params cannot apply to it"
                        )
                    configs.append(h)
        loads: list[float | None] = [None] if not ax.loads else [float(x) for x in ax.loads]
        policies: list[str | None] = list(ax.policies) if ax.policies else [None]
        # (a number of seeds is a list by now: the validator made it one)
        seeds = cast("list[int]", ax.seeds) if ax.seeds is not None else [0]
        params_axes = {k: _listify(v) for k, v in (ax.params or {}).items()}
        settings = ax.settings.model_dump(exclude_none=True) if ax.settings else {}
        settings_axes = {k: _listify(v) for k, v in settings.items()}
        if params_axes:
            takers = {n: policy_parameters(n) for n in (p for p in policies if p is not None)}
            for name in params_axes:
                if takers and not any(name in t for t in takers.values()):
                    known = sorted(set().union(*takers.values()))
                    problems.append(
                        f"{spec_path}: {prefix}params.{name}: no policy of this sweep takes it "
                        f"(they take: {', '.join(known) or 'no parameters'})"
                    )
        if problems:
            continue
        for group, load, cluster, config, policy, seed, pvals, svals in product(
            inputs,
            loads,
            clusters,
            configs,
            policies,
            seeds,
            list(product(*params_axes.values())),
            list(product(*settings_axes.values())),
        ):
            files = []
            for f in group:
                if load is not None:
                    v = load_variant(f, load)
                    if v is None:
                        problems.append(
                            f"{spec_path}: {prefix}loads: no load-{load:g} variant of {_display(f, base)} "
                            f"(looked for {f.parent.parent}/{re.sub(r'-[0-9.]+$', '', f.parent.name)}-{load:g}/{f.name})"
                        )
                        continue
                    f = v
                files.append(f)
            if len(files) != len(group):
                continue
            conf_text = None
            if config is not None:
                conf_text = contents[config].decode("utf-8")
            eff = _effective_policy(policy, conf_text)
            takes = policy_parameters(eff) if eff in _policy_names() else set()
            params = {k: v for k, v in zip(params_axes, pvals) if k in takes}
            sett = dict(SETTING_DEFAULTS)
            sett.update(dict(zip(settings_axes, svals)))
            refs = [FileRef(_display(f, base), f) for f in files]
            if cluster is not None:
                refs.append(FileRef(_display(cluster, base), cluster))
            cref = FileRef(_display(config, base), config) if config is not None else None
            datas = []
            for r in refs + ([cref] if cref else []):
                d = read(r.path, f"{prefix}inputs")
                datas.append(_sha(d or b""))
            axes: dict[str, Any] = {
                "input": " + ".join(_display(f, base) for f in group),
                "load": load,
                "cluster": cref_name(cluster, base),
                "config": cref.name if cref else None,
                "policy": eff if (policy is not None or config is not None) else None,
            }
            axes.update({f"param.{k}": (v if k in takes else None) for k, v in zip(params_axes, pvals)})
            axes.update({k: v for k, v in zip(settings_axes, svals)})
            axes["seed"] = seed
            ident = {
                "lavaflow": __version__,
                # settings count by their values (in full below): a default given or left out is one run
                "axes": {k: v for k, v in axes.items() if k not in SETTING_DEFAULTS},
                "policy": policy,
                "params": params,
                "settings": sett,
                "contents": datas,
            }
            key = _sha(json.dumps(ident, sort_keys=True, default=str).encode())[:16]
            if key in runs:
                continue
            runs[key] = Run(key, axes, refs, cref, policy, seed, params, sett)
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))
    out = list(runs.values())
    noisy = any(r.settings["report_noise"] for r in out)
    if len({r.seed for r in out}) > 1 and not noisy and any(f.name.endswith(".csv") for r in out for f in r.files):
        warnings.append(
            "seeds: several seeds but report_noise is 0: trace replays are deterministic, so their runs "
            "differ by the seed only where the seed is used (UIDs, random node ties); set "
            "settings.report_noise to make the seeds sample measurement noise"
        )
    return out, warnings, contents


def cref_name(p: Path | None, base: Path) -> str | None:
    return None if p is None else _display(p, base)


def _policy_names() -> set[str]:
    from ..elastic.policies import POLICY_NAMES

    return set(POLICY_NAMES)
