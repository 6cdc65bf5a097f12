"""Smaller decoded objects for the scheduler's informer cache.

At the scale of Volcano issue #5819 the scheduler holds ~87,000 PodGroups and as many of its own
pods as validated pydantic models, and most of their memory is not their data:

- every model instance carries its own *set of the fields that were given* (pydantic's
  ``__pydantic_fields_set__``, 216-472 bytes each, ~10 per pod). lavaflow never asks which
  fields were set (no ``exclude_unset``, no ``model_fields_set``), and objects of one kind decoded
  from one API server share a handful of shapes, so one set per shape is kept and shared;
- JSON decoding gives each object its own copy of every string, although most of them repeat
  across the cluster (namespace, node, scheduler and queue names, phases, toleration keys, label
  values). Those are interned; the ones unique to an object (name, uid, resourceVersion) are not.

``compact(obj)`` does both in place, following a plan per model class computed once from its
field annotations, so only the fields that can hold a nested model or a repeated string are
visited. The objects stay ordinary models: reading them is unchanged. Assigning a field of a
compacted model adds its name to the shared set, which changes nothing lavaflow reads.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any

from pydantic import BaseModel

_SET_FIELDS_SET = vars(BaseModel)["__pydantic_fields_set__"].__set__
_intern = sys.intern

# Strings unique to one object: interning them would only grow the interpreter's table.
_UNIQUE = frozenset({"name", "uid", "resource_version", "generate_name", "message", "node_name_hint"})
_LONGEST_INTERNED = 100  # longer strings (messages, JSON in annotations) are rarely shared
_SHAPES_KEPT = 4096

# class -> {the names of the fields given: (the set shared by all such objects, the fields to visit)}
_shapes: dict[type, dict[frozenset[str], tuple[set[str], tuple[tuple[str, int], ...]]]] = {}
_last: dict[type, tuple[set[str], tuple[tuple[str, int], ...]]] = {}  # the shape each class last had
_NO_SHAPES: dict[frozenset[str], tuple[set[str], tuple[tuple[str, int], ...]]] = {}
# class -> {field name: what it can hold} for the fields worth visiting
_STR, _DICT, _MODEL, _LIST = 1, 2, 3, 4
_plans: dict[type, dict[str, int]] = {}


def _holds_model(tp: Any) -> bool:
    if isinstance(tp, type):
        return issubclass(tp, BaseModel)
    return any(_holds_model(a) for a in typing.get_args(tp))


def _kind(tp: Any) -> int:
    """What a field annotation can hold: _STR, _DICT (of str), _MODEL, _LIST (of models) or 0."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _kind(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        kinds = {_kind(a) for a in typing.get_args(tp) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else 0
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _MODEL
    if tp is str:
        return _STR
    if origin is list and _holds_model(tp):
        return _LIST
    if origin is dict and typing.get_args(tp)[1:] == (str,):
        return _DICT
    return 0


def _plan(cls: type) -> dict[str, int]:
    plan = _plans.get(cls)
    if plan is None:
        plan = {}
        for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
            kind = _kind(info.annotation)
            if kind and not (kind == _STR and name in _UNIQUE):
                plan[name] = kind
        _plans[cls] = plan
    return plan


def _shape(cls: type, fields_set: set[str], key: frozenset[str]) -> tuple[set[str], tuple[tuple[str, int], ...]]:
    shapes = _shapes.setdefault(cls, {})
    if len(shapes) >= _SHAPES_KEPT:
        shapes.clear()
    plan = _plan(cls)
    # Only the fields the input gave can differ from their defaults (shared constants).
    visit = tuple(sorted((name, plan[name]) for name in key if name in plan))
    shape = shapes[key] = (fields_set, visit)
    return shape


def compact(model: BaseModel) -> None:
    """Share ``model``'s (and its nested models') field sets by shape and intern its repeated
    strings, in place."""
    fields_set = model.__pydantic_fields_set__
    cls = type(model)
    shape = _last.get(cls)
    if shape is None or shape[0] != fields_set:  # objects of a kind mostly come in one shape
        key = frozenset(fields_set)
        shape = _last[cls] = _shapes.get(cls, _NO_SHAPES).get(key) or _shape(cls, fields_set, key)
    if shape[0] is not fields_set:
        _SET_FIELDS_SET(model, shape[0])
    d = model.__dict__
    for name, kind in shape[1]:
        v = d[name]
        if kind == _STR:
            if type(v) is str and len(v) <= _LONGEST_INTERNED:
                d[name] = _intern(v)
        elif kind == _MODEL:
            if v is not None:
                compact(v)
        elif kind == _LIST:
            for x in v or ():
                if isinstance(x, BaseModel):
                    compact(x)
        elif v:
            for k, s in v.items():
                if type(s) is str and len(s) <= _LONGEST_INTERNED:
                    v[k] = _intern(s)
