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

_shapes: dict[frozenset[str], set[str]] = {}
# class -> (model fields, list-of-model fields, str fields, dict-of-str fields)
_plans: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _holds_model(tp: Any) -> bool:
    if isinstance(tp, type):
        return issubclass(tp, BaseModel)
    return any(_holds_model(a) for a in typing.get_args(tp))


def _kind(tp: Any) -> str:
    """'model', 'list', 'str', 'dict' or '' for a field annotation."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _kind(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        kinds = {_kind(a) for a in typing.get_args(tp) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else ""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "model"
    if tp is str:
        return "str"
    if origin is list and _holds_model(tp):
        return "list"
    if origin is dict and typing.get_args(tp)[1:] == (str,):
        return "dict"
    return ""


def _plan(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    plan = _plans.get(cls)
    if plan is None:
        by: dict[str, list[str]] = {"model": [], "list": [], "str": [], "dict": []}
        for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
            kind = _kind(info.annotation)
            if kind == "str" and name in _UNIQUE:
                continue
            if kind:
                by[kind].append(name)
        plan = _plans[cls] = (tuple(by["model"]), tuple(by["list"]), tuple(by["str"]), tuple(by["dict"]))
    return plan


def compact(model: BaseModel) -> None:
    """Share ``model``'s (and its nested models') field sets by shape and intern its repeated
    strings, in place."""
    fields_set = model.__pydantic_fields_set__
    key = frozenset(fields_set)
    shared = _shapes.get(key)
    if shared is None:
        if len(_shapes) >= _SHAPES_KEPT:
            _shapes.clear()
        _shapes[key] = fields_set
    elif shared is not fields_set:
        _SET_FIELDS_SET(model, shared)
    models, lists, strs, dicts = _plan(type(model))
    d = model.__dict__
    for name in strs:
        v = d.get(name)
        if type(v) is str and len(v) <= _LONGEST_INTERNED:
            d[name] = _intern(v)
    for name in dicts:
        v = d.get(name)
        if v:
            for k, s in v.items():
                if type(s) is str and len(s) <= _LONGEST_INTERNED:
                    v[k] = _intern(s)
    for name in models:
        v = d.get(name)
        if isinstance(v, BaseModel):
            compact(v)
    for name in lists:
        for v in d.get(name) or ():
            if isinstance(v, BaseModel):
                compact(v)
