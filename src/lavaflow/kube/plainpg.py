"""Volcano PodGroups decoded without the generic walk over their times.

On a restart at the scale of Volcano issue #5819 the scheduler reads ~87,000 PodGroups.
``codec.decode`` copies each object and walks its metadata and status for RFC 3339 times to turn
into floats before validating it (``_times_in``): more CPU than pydantic's validation itself.

A PodGroup's model holds times in three fields only, all typed ``Any`` (so validation keeps the
value it is given): its metadata's creation and deletion timestamps and each status condition's
last transition time. ``volcano_podgroup`` validates the JSON as it is and then turns those three
into floats with the same function (``codec.parse_time``): the same model, the same values, the
same fields given. The two differ only when a time is given under its Python name (which the
generic walk leaves alone, and validation reads): such an object, and any that does not validate,
is left to ``codec.decode`` (None), which also reports what does not validate.

(A decoder building the five models straight from the JSON in Python, checking each value's type
against a plan made from the models' fields, was tried first: ~2 µs per model on this project's
machines, no faster than pydantic's validator for the whole object.)
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..api.volcano import PodGroup
from .codec import parse_time

_NO_STATUS: dict[str, Any] = {}


_validate = PodGroup.__pydantic_validator__.validate_python  # (model_validate without its wrapper)


def volcano_podgroup(raw: dict[str, Any]) -> PodGroup | None:
    """``raw`` (a scheduling.volcano.sh PodGroup as listed or watched) as the PodGroup
    ``codec.decode`` gives for it, or None when ``codec.decode`` must read it."""
    meta = raw.get("metadata")
    if type(meta) is not dict or "creation_timestamp" in meta or "deletion_timestamp" in meta:
        return None
    status = raw.get("status", _NO_STATUS)
    if type(status) is not dict:
        return None
    conditions = status.get("conditions", ())
    if type(conditions) is not list:
        if conditions != ():
            return None
    else:
        for c in conditions:
            if type(c) is not dict or "last_transition_time" in c:
                return None
    try:
        pg: PodGroup = _validate(raw)
    except ValidationError:
        return None
    times = pg.metadata.__dict__
    t = times["creation_timestamp"]
    if t is not None:
        times["creation_timestamp"] = parse_time(t)
    t = times["deletion_timestamp"]
    if t is not None:
        times["deletion_timestamp"] = parse_time(t)
    for c in pg.status.conditions:
        times = c.__dict__
        t = times["last_transition_time"]
        if t is not None:
            times["last_transition_time"] = parse_time(t)
    return pg
