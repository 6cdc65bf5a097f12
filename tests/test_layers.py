"""The layers of src/lavaflow, as docs/architecture.md draws them: no module imports a higher layer.

Every ``import``/``from ... import`` in every module (at top level or inside a function: a lazy
import is still a dependency) is read with ``ast``; the package a module belongs to is the first
name under ``lavaflow`` (``lavaflow.scheduler.cache`` -> ``scheduler``, ``lavaflow.cli`` -> ``cli``).

    3  cli, report, dashboard,          the command line (may use everything), HTML reports, the
       forecast                         web UI, forecasts (forward runs of the simulator)
    2  sim, kube, testing               the two backends (neither imports the other) and the
                                        test doubles of kube (testing may import kube)
    1  scheduler, controllers           the scheduling core and the Volcano controllers
                                        (neither imports the other)
    0  api, elastic, store, jsonout     objects and their rules, the elastic-training library
                                        (api's admission reads elastic.spec's annotations, and
                                        elastic.spec reads pod requests from api), the Store
                                        interface, JSON output
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "lavaflow"

LAYERS: list[set[str]] = [
    {"", "api", "elastic", "store", "jsonout"},  # "" is the lavaflow package itself (__version__)
    {"scheduler", "controllers"},
    {"sim", "kube", "testing"},
    {"cli", "report", "dashboard", "forecast"},
]
# Packages of one layer that may import each other.
SAME_LAYER = {
    ("api", "elastic"),
    ("elastic", "api"),
    ("testing", "kube"),
    ("cli", "report"),
    ("cli", "dashboard"),
    ("cli", "forecast"),
    ("dashboard", "report"),
    ("dashboard", "forecast"),
}
# Inside the scheduler: the model of the cluster imports nothing else of the scheduler.
SCHEDULER_BOTTOM = {"lavaflow.scheduler.model", "lavaflow.scheduler.resources"}


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package it is in) for a file under src/lavaflow."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def imports() -> list[tuple[str, str]]:
    """(importing module, imported lavaflow module) for every import in src/lavaflow."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        module, package = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(module, a.name) for a in node.names if a.name.split(".")[0] == "lavaflow"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    if node.module:
                        out.append((module, ".".join(base + [node.module])))
                    else:  # from . import x: x may be a module
                        out += [(module, ".".join(base + [a.name])) for a in node.names]
                elif node.module and node.module.split(".")[0] == "lavaflow":
                    out.append((module, node.module))
    return out


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2:
        return ""
    top = parts[1]
    return top if (SRC / top).is_dir() or (SRC / f"{top}.py").is_file() else ""


def _layer(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"package lavaflow.{package} is in no layer: add it to LAYERS (and to docs/architecture.md)")


def breaks_layers(src: str, dst: str) -> bool:
    """Whether module ``src`` importing module ``dst`` goes up (or sideways) a layer."""
    a, b = _package(src), _package(dst)
    if a == b:
        return src in SCHEDULER_BOTTOM and dst.startswith("lavaflow.scheduler.") and dst not in SCHEDULER_BOTTOM
    la, lb = _layer(a), _layer(b)
    return lb > la or (lb == la and (a, b) not in SAME_LAYER)


def violations() -> list[tuple[str, str]]:
    return sorted({(src, dst) for src, dst in imports() if breaks_layers(src, dst)})


def test_the_scanner_sees_imports():
    found = set(imports())
    assert ("lavaflow.scheduler.cache", "lavaflow.scheduler.model") in found  # from .model import ...
    assert ("lavaflow.scheduler.cache", "lavaflow.api.core") in found  # from ..api.core import ...
    assert ("lavaflow.sim.engine", "lavaflow.scheduler.scheduler") in found


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("lavaflow.scheduler.cache", "lavaflow.sim.engine"),  # the core imports no backend
        ("lavaflow.scheduler.plugins.gang", "lavaflow.kube.store"),
        ("lavaflow.scheduler.cache", "lavaflow.controllers.job"),  # nor the controllers
        ("lavaflow.controllers.job", "lavaflow.scheduler.model"),  # which import no scheduler
        ("lavaflow.controllers.job", "lavaflow.sim.engine"),
        ("lavaflow.api.volcano", "lavaflow.controllers.job"),  # objects import no logic above them
        ("lavaflow.api.admission", "lavaflow.scheduler.model"),
        ("lavaflow.elastic.spec", "lavaflow.sim.training"),
        ("lavaflow.sim.engine", "lavaflow.kube.client"),  # one backend does not use the other
        ("lavaflow.testing.fake_kubelet", "lavaflow.sim.engine"),  # the test doubles run no simulator
        ("lavaflow.kube.scheduler_process", "lavaflow.cli"),
        ("lavaflow.kube.store", "lavaflow.testing.fake_apiserver"),  # the backend uses no test double
        ("lavaflow.scheduler.model", "lavaflow.scheduler.cache"),
    ],
)
def test_a_higher_layer_import_is_caught(src, dst):
    assert breaks_layers(src, dst)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("lavaflow.scheduler.cache", "lavaflow.api.core"),
        ("lavaflow.scheduler.elastic.plugin", "lavaflow.elastic.spec"),
        ("lavaflow.api.admission", "lavaflow.elastic.spec"),
        ("lavaflow.sim.engine", "lavaflow.scheduler.scheduler"),
        ("lavaflow.kube.controller_process", "lavaflow.controllers.queue"),
        ("lavaflow.cli.processes", "lavaflow.kube.scheduler_process"),
        ("lavaflow.cli.main", "lavaflow.report.simulation"),
        ("lavaflow.testing.fake_apiserver", "lavaflow.kube.client"),
        ("lavaflow.scheduler.cache", "lavaflow.scheduler.model"),
    ],
)
def test_a_lower_layer_import_is_allowed(src, dst):
    assert not breaks_layers(src, dst)


def test_no_lower_layer_imports_a_higher_one():
    found = violations()
    assert not found, "imports of a higher layer:\n" + "\n".join(f"  {a} -> {b}" for a, b in found)


def _third_party_imports() -> list[tuple[str, str]]:
    """(module, imported top-level third-party name) for every import in src/lavaflow."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        module, _ = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(module, a.name.split(".")[0]) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                out.append((module, node.module.split(".")[0]))
    return out


def test_plotting_lives_in_the_report_extra_only():
    """matplotlib is the ``report`` extra: only report/ imports it, and neither the base
    dependencies nor the ``kube`` extra (what the scheduler image installs) pull it in."""
    import tomllib

    users = sorted({m for m, name in _third_party_imports() if name == "matplotlib"})
    assert users and all(m == "lavaflow.report" or m.startswith("lavaflow.report.") for m in users), users
    project = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())["project"]
    image = project["dependencies"] + project["optional-dependencies"]["kube"]
    assert not [d for d in image if d.lower().startswith("matplotlib")]
    assert any(d.startswith("matplotlib") for d in project["optional-dependencies"]["report"])
    dockerfile = (SRC.parents[1] / "Dockerfile").read_text()
    assert "lavaflow[kube]" in dockerfile and "report" not in dockerfile
    # the default target (the last stage) is the scheduler's image: the dashboard's extra has its own
    last = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "'lavaflow[kube]'" in last and "dashboard" not in last


# Inside the scheduler, actions and plugins meet only through the session (its hooks and
# ssn.plugins by name), as in Volcano: no action imports a plugin module, no plugin another one.
# Their shared private helpers (modules named _*) and the elastic unit's state are not plugins.
PLUGIN_MODULES = ("lavaflow.scheduler.plugins.", "lavaflow.scheduler.elastic.plugin")
ACTION_MODULES = ("lavaflow.scheduler.actions.", "lavaflow.scheduler.elastic.action")


def _is(module: str, kinds: tuple[str, ...]) -> bool:
    return any(module == k or (k.endswith(".") and module.startswith(k)) for k in kinds) and not module.rsplit(".", 1)[
        -1
    ].startswith("_")


def crosses_hooks(src: str, dst: str) -> bool:
    """Whether ``src`` importing ``dst`` is an action importing a plugin, or a plugin another plugin."""
    if not _is(dst, PLUGIN_MODULES):
        return False
    return _is(src, ACTION_MODULES) or (_is(src, PLUGIN_MODULES) and src != dst)


@pytest.mark.parametrize(
    ("src", "dst", "crosses"),
    [
        ("lavaflow.scheduler.actions.allocate", "lavaflow.scheduler.plugins.proportion", True),
        ("lavaflow.scheduler.elastic.action", "lavaflow.scheduler.elastic.plugin", True),
        ("lavaflow.scheduler.plugins.overcommit", "lavaflow.scheduler.plugins.proportion", True),
        ("lavaflow.scheduler.elastic.plugin", "lavaflow.scheduler.plugins.gang", True),
        ("lavaflow.scheduler.plugins.overcommit", "lavaflow.scheduler.plugins._shares", False),
        ("lavaflow.scheduler.elastic.action", "lavaflow.scheduler.elastic.state", False),
        ("lavaflow.scheduler.actions.preempt", "lavaflow.scheduler.actions._evict", False),
        ("lavaflow.scheduler.plugins", "lavaflow.scheduler.plugins.gang", False),  # the registering package
    ],
)
def test_the_hook_rule_tells_crossings_apart(src, dst, crosses):
    assert crosses_hooks(src, dst) is crosses


def test_actions_and_plugins_meet_only_through_the_session():
    found = sorted({(a, b) for a, b in imports() if crosses_hooks(a, b)})
    assert not found, "an action or plugin imports a plugin module:\n" + "\n".join(f"  {a} -> {b}" for a, b in found)


# The tests of each scheduler plugin mirror src/: plugins/<name>.py has tests/scheduler/plugins/
# test_<name>.py, which holds tests, and every test file there is named after a plugin module
# (tests of several plugins together, of actions or of the framework live beside them in
# tests/scheduler/). Helpers those files share are modules without the test_ prefix.
PLUGINS_SRC = SRC / "scheduler" / "plugins"
PLUGINS_TESTS = SRC.parents[1] / "tests" / "scheduler" / "plugins"


def unmirrored(src: Path, tests: Path) -> tuple[list[str], list[str]]:
    """(plugin modules of ``src`` without a test file in ``tests`` holding a test, test files of
    ``tests`` named after no plugin module), as paths relative to the two folders."""
    plugins = sorted(p.stem for p in src.glob("*.py") if not p.stem.startswith("_"))
    missing = []
    for name in plugins:
        path = tests / f"test_{name}.py"
        if not path.is_file() or not any(
            isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            for node in ast.parse(path.read_text(), str(path)).body
        ):
            missing.append(f"test_{name}.py (for {name}.py)")
    strays = sorted(p.name for p in tests.glob("test_*.py") if p.stem.removeprefix("test_") not in plugins)
    return missing, strays


def test_the_mirror_rule_names_what_is_missing_and_what_strays(tmp_path):
    src, tests = tmp_path / "plugins", tmp_path / "tests"
    src.mkdir()
    tests.mkdir()
    for name in ("__init__", "_shares", "gang", "drf", "binpack"):
        (src / f"{name}.py").write_text("")
    (tests / "test_gang.py").write_text("def test_x():\n    pass\n")
    (tests / "test_drf.py").write_text("def helper():\n    pass\n")  # no test in it
    (tests / "test_drf_hierarchy.py").write_text("def test_y():\n    pass\n")
    (tests / "plugin_helpers.py").write_text("")
    assert unmirrored(src, tests) == (
        ["test_binpack.py (for binpack.py)", "test_drf.py (for drf.py)"],
        ["test_drf_hierarchy.py"],
    )


def test_each_plugin_has_its_tests_in_its_own_file():
    missing, strays = unmirrored(PLUGINS_SRC, PLUGINS_TESTS)
    assert not missing, f"plugins without their tests in {PLUGINS_TESTS}:\n" + "\n".join(f"  {m}" for m in missing)
    assert not strays, (
        f"test files in {PLUGINS_TESTS} named after no plugin module (tests of one plugin go in its "
        "test_<plugin>.py; of several, in tests/scheduler/):\n" + "\n".join(f"  {s}" for s in strays)
    )
