"""Topology objects: the HyperNode rules (Volcano's HyperNode webhook and CRD) and the
Numatopology checks (cpusets and CPU ids, as the resource exporter writes them)."""

from __future__ import annotations

import re

from ..topology import MAX_CPUS, HyperNode, Numatopology, parse_cpuset
from ..validation import Problem


def validate_hypernode(hn: HyperNode) -> list[Problem]:
    """The HyperNode CRD's validation rules (Volcano's HyperNode webhook)."""
    out: list[Problem] = []
    if hn.spec.tier < 0:
        out.append(Problem("spec.tier", "must be ≥ 0"))
    if not hn.spec.members:
        out.append(Problem("spec.members", "needs at least one member"))
    for i, m in enumerate(hn.spec.members):
        path = f"spec.members[{i}]"
        if m.type not in ("Node", "HyperNode"):
            out.append(Problem(f"{path}.type", f"{m.type!r} is not a member type (use Node or HyperNode)"))
        sel = m.selector
        given = [s for s in (sel.exact_match, sel.regex_match, sel.label_match) if s is not None]
        if len(given) != 1:
            out.append(Problem(f"{path}.selector", "needs exactly one of exactMatch, regexMatch, labelMatch"))
            continue
        if sel.exact_match is not None and not sel.exact_match.name:
            out.append(Problem(f"{path}.selector.exactMatch.name", "is required"))
        if sel.regex_match is not None:
            try:
                re.compile(sel.regex_match.pattern)
            except re.error as exc:
                out.append(Problem(f"{path}.selector.regexMatch.pattern", f"is not a regular expression: {exc}"))
        if m.type == "HyperNode" and sel.exact_match is None:
            out.append(Problem(f"{path}.selector", "a HyperNode member can only be selected by exactMatch"))
    return out


def validate_numatopology(nt: Numatopology) -> list[Problem]:
    out: list[Problem] = []
    for res, info in nt.spec.numares.items():
        try:
            parse_cpuset(info.allocatable)
        except ValueError as exc:
            out.append(Problem(f"spec.numares[{res}].allocatable", str(exc)))
    for cpu in nt.spec.cpu_detail:
        if not cpu.isdigit():
            out.append(Problem(f"spec.cpuDetail[{cpu}]", "keys are CPU ids (integers)"))
        elif int(cpu) >= MAX_CPUS:
            out.append(Problem(f"spec.cpuDetail[{cpu}]", f"CPU ids are below {MAX_CPUS}"))
    return out
