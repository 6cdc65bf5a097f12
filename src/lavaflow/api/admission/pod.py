"""Volcano's Pod rules (pods of our scheduler): kube-apiserver's pod checks and the disruption-budget annotations."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .. import validation as api
from ..core import Pod
from ..validation import Problem
from .common import JDB_MAX_UNAVAILABLE, JDB_MIN_AVAILABLE

_POSITIVE_INT = re.compile(r"\d+")
_PERCENT = re.compile(r"(\d+)%")


def _jdb_value_error(value: str) -> str | None:
    if _POSITIVE_INT.fullmatch(value):
        return None if int(value) > 0 else "a count must be a positive integer"
    m = _PERCENT.fullmatch(value)
    if m:
        return None if 1 <= int(m.group(1)) <= 99 else "a percentage must be between 1% and 99%"
    return "it must be a positive integer such as '2' or a percentage from '1%' to '99%'"


def validate_pod(pod: Pod, scheduler_names: Iterable[str] | None = None) -> list[Problem]:
    """kube-apiserver's pod checks (name, namespace, containers, quantities), then the
    disruption-budget annotations.

    When ``scheduler_names`` is given, pods of other schedulers get only kube-apiserver's checks
    (Volcano's webhook does not see them; the API server checks every pod).
    """
    out: list[Problem] = []
    api.check_meta(pod, out)
    api.check_pod_spec(pod.spec, "spec", out)
    if scheduler_names is not None and (pod.spec.scheduler_name or "default-scheduler") not in set(scheduler_names):
        return out
    ann = pod.metadata.annotations
    present = [k for k in (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE) if k in ann]
    for key in present:
        why = _jdb_value_error(ann[key])
        if why:
            out.append(Problem(f"metadata.annotations[{key}]", f"Value {ann[key]!r} for {key} is invalid: {why}."))
    if len(present) == 2:
        out.append(
            Problem(
                "metadata.annotations",
                f"Set only one of {JDB_MIN_AVAILABLE} and {JDB_MAX_UNAVAILABLE}, not both.",
            )
        )
    return out
