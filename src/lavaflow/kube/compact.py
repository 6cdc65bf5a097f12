"""Smaller decoded objects for the scheduler's informer cache.

At the scale of Volcano issue #5819 the scheduler holds ~87,000 PodGroups and as many of its own
pods as validated pydantic models, and more than a third of their memory is not their data: every
model instance carries its own *set of the fields that were given* (pydantic's
``__pydantic_fields_set__``, 216-472 bytes each, ~7-10 instances per pod). lavaflow never asks
which fields were set (no ``exclude_unset``, no ``model_fields_set``), and objects of one kind
decoded from one API server come in a handful of shapes, so one set per shape is kept and every
object of that shape points at it.

``compact(obj)`` does that in place for a model and the models nested in it, visiting only the
fields that can hold a model (a plan per class, computed once from its annotations). The objects
stay ordinary models: reading and comparing them is unchanged. Assigning a field of a compacted
model adds its name to the shared set, which changes nothing lavaflow reads.

Interning the strings that repeat across objects (namespace, node and queue names, label values)
was tried as well: ~40 MiB at that scale, for twice the CPU of sharing the sets; not kept.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

_SET_FIELDS_SET = vars(BaseModel)["__pydantic_fields_set__"].__set__
_SHAPES_KEPT = 4096

_Shape = tuple[set[str], tuple[tuple[str, bool], ...]]
# class -> {the names of the fields given: (the set shared by all such objects, the fields to visit
# as (name, holds a list of models))}
_shapes: dict[type, dict[frozenset[str], _Shape]] = {}
_last: dict[type, _Shape] = {}  # the shape each class last had
_NO_SHAPES: dict[frozenset[str], _Shape] = {}
# class -> {field name: holds a list of models} for the fields that can hold a model
_plans: dict[type, dict[str, bool]] = {}


def _holds_model(tp: Any) -> bool:
    if isinstance(tp, type):
        return issubclass(tp, BaseModel)
    return any(_holds_model(a) for a in typing.get_args(tp))


def _is_list(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _is_list(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(tp))
    return origin is list


def _plan(cls: type) -> dict[str, bool]:
    plan = _plans.get(cls)
    if plan is None:
        plan = _plans[cls] = {
            name: _is_list(info.annotation)
            for name, info in cls.model_fields.items()  # type: ignore[attr-defined]
            if _holds_model(info.annotation)
        }
    return plan


def _shape(cls: type, fields_set: set[str], key: frozenset[str]) -> _Shape:
    shapes = _shapes.setdefault(cls, {})
    if len(shapes) >= _SHAPES_KEPT:
        shapes.clear()
    plan = _plan(cls)
    # Only the fields the input gave can differ from their defaults (shared constants).
    shape = shapes[key] = (fields_set, tuple(sorted((name, plan[name]) for name in key if name in plan)))
    return shape


def compact(model: BaseModel) -> None:
    """Share ``model``'s (and its nested models') field sets with the objects of their shape, in
    place."""
    fields_set = model.__pydantic_fields_set__
    cls = type(model)
    shape = _last.get(cls)
    if shape is None or shape[0] != fields_set:  # objects of a kind mostly come in one shape
        key = frozenset(fields_set)
        shape = _last[cls] = _shapes.get(cls, _NO_SHAPES).get(key) or _shape(cls, fields_set, key)
    if shape[0] is not fields_set:
        _SET_FIELDS_SET(model, shape[0])
    d = model.__dict__
    for name, many in shape[1]:
        v = d[name]
        if many:
            for x in v or ():
                if isinstance(x, BaseModel):
                    compact(x)
        elif isinstance(v, BaseModel):
            compact(v)
