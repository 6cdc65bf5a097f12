"""bus.volcano.sh Command rules: a known action for the target's kind, and a target that exists."""

from __future__ import annotations

from collections.abc import Container

from ..validation import Problem
from ..volcano import Command, JobAction

COMMAND_TARGETS = {
    "Job": (
        JobAction.ABORT_JOB,
        JobAction.RESUME_JOB,
        JobAction.RESTART_JOB,
        JobAction.TERMINATE_JOB,
        JobAction.COMPLETE_JOB,
    ),
    "Queue": ("OpenQueue", "CloseQueue"),
}


def validate_command(
    cmd: Command, declared: Container[tuple[str, str]] | None, where: str = "in the input"
) -> list[Problem]:
    """``declared`` holds the (kind, key) of the Jobs and Queues that exist (a Queue's key is its
    name, a Job's ``namespace/name``); when None the target's existence is not checked."""
    target = cmd.target if isinstance(cmd.target, dict) else None
    if not target or not target.get("name") or target.get("kind") not in COMMAND_TARGETS:
        return [Problem("target", "must name a Job or a Queue (target.kind and target.name)")]
    kind = target["kind"]
    out: list[Problem] = []
    if cmd.action not in COMMAND_TARGETS[kind]:
        out.append(
            Problem(
                "action",
                f"{cmd.action!r} is not an action for a {kind} (use one of {', '.join(COMMAND_TARGETS[kind])})",
            )
        )
    key = target["name"] if kind == "Queue" else f"{cmd.namespace}/{target['name']}"
    if declared is not None and (kind, key) not in declared:
        out.append(Problem("target.name", f"no {kind} {target['name']!r} {where}"))
    return out
