"""Kube tests wait for scheduler cycles or a condition, never a wall-clock sleep then an assertion
(issue 37).

``sleep(0.5); assert not c.bindings()`` passes vacuously on a slow machine: the scheduler may not
have run yet. A test says what it waits for instead: ``kube_harness.settled`` (a scheduler cycle
over what its informers had seen, its writes out; twice for "a few more cycles"),
``kube_harness.controllers_settled`` (two controller passes), ``kube_harness.lease_tries`` (a
standby's refused tries for the lease), an event a later object's arrival proves delivered, or
``wait_for`` (a condition, with a deadline). Polling loops that sleep while they wait for a condition are fine, and so is a sleep
that paces a scenario (creates spaced out in time); a sleep of a literal duration whose next
statement asserts is not.

The tests read with ``ast``: every file under tests/kube/, and every test module that imports
``kube_harness``, ``dashboard_cluster`` or a module of ``lavaflow.kube`` (at top level or inside a
function), plus the two harnesses themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
HARNESSES = ("kube_harness", "dashboard_cluster")


def _imports_kube(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(n in HARNESSES or n == "lavaflow.kube" or n.startswith("lavaflow.kube.") for n in names):
            return True
    return False


def kube_test_files() -> list[Path]:
    out = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.stem in HARNESSES or path.parent.name == "kube":
            out.append(path)
        elif path.name.startswith("test_") and _imports_kube(ast.parse(path.read_text(), str(path))):
            out.append(path)
    return out


def _sleep_seconds(stmt: ast.stmt) -> float | None:
    """The duration of ``time.sleep(x)`` / ``await asyncio.sleep(x)`` / ``sleep(x)`` with a literal
    ``x``, alone as a statement; None for any other statement."""
    if not isinstance(stmt, ast.Expr):
        return None
    call = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
    if not isinstance(call, ast.Call) or not call.args:
        return None
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    arg = call.args[0]
    if name != "sleep" or not isinstance(arg, ast.Constant) or not isinstance(arg.value, int | float):
        return None
    return float(arg.value)


def _asserts(stmt: ast.stmt) -> bool:
    """An ``assert``, or a call of an ``assert…`` helper (``assert_no_double_binding(c)``)."""
    if isinstance(stmt, ast.Assert):
        return True
    if isinstance(stmt, ast.Expr):
        call = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
        if isinstance(call, ast.Call):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            return name.startswith("assert")
    return False


def sleeps_then_asserts(source: str, filename: str = "<test>") -> list[int]:
    """Line numbers of sleeps of a literal non-zero duration whose next statement asserts."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for stmt, after in zip(block, block[1:], strict=False):
                if isinstance(stmt, ast.stmt) and _sleep_seconds(stmt) and _asserts(after):
                    out.append(stmt.lineno)
    return sorted(out)


@pytest.mark.parametrize(
    "source, lines",
    [
        ("async def f(c):\n    await asyncio.sleep(0.5)\n    assert not c.bindings()\n", [2]),
        ("def f(a):\n    time.sleep(1)\n    assert a.failed\n", [2]),
        ("async def f(c):\n    await asyncio.sleep(0.3)\n    assert_no_double_binding(c)\n", [2]),
        ("def f(a):\n    try:\n        sleep(0.2)\n        assert a\n    finally:\n        pass\n", [3]),
        # a sleep of no duration only yields to the loop; a polling loop asserts after its deadline
        ("async def f(c):\n    await asyncio.sleep(0)\n    assert c\n", []),
        ("def f(a):\n    while not a.done:\n        time.sleep(0.05)\n    assert a.ok\n", []),
        # pacing a scenario, a computed duration, a wait before the assertion
        ("async def f(c):\n    await asyncio.sleep(0.25)\n    await c.create([])\n    assert c\n", []),
        ("async def f(c, d):\n    await asyncio.sleep(d)\n    assert c\n", []),
        ("async def f(c, s):\n    await settled(s)\n    assert not c.bindings()\n", []),
    ],
)
def test_the_scanner_tells_a_sleep_then_an_assertion_apart(source, lines):
    assert sleeps_then_asserts(source) == lines


def test_the_kube_tests_are_found():
    names = {p.relative_to(TESTS).as_posix() for p in kube_test_files()}
    assert {"kube_harness.py", "kube/test_kube_e2e.py", "agent/test_agent_kube.py"} <= names
    assert "dashboard/test_dashboard.py" in names and "test_layers.py" not in names


def test_no_kube_test_sleeps_then_asserts():
    found = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in kube_test_files()
        for line in sleeps_then_asserts(path.read_text(), str(path))
    ]
    assert not found, (
        "a wall-clock sleep followed by an assertion (vacuous or flaky on a slow machine); wait for "
        "a scheduler cycle (kube_harness.settled), controller passes or a condition: " + ", ".join(found)
    )
