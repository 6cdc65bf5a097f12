"""YAML reading with the checks a Kubernetes API server makes before it decodes anything.

PyYAML (with its C parser) composes each document into a node graph; before any Python object is
built from it, the graph is checked:

- **Aliases that expand too far** (a "billion laughs" document: a few lines whose aliases expand to
  billions of values) are refused, as sigs.k8s.io/yaml refuses "excessive aliasing": an alias is
  shared when built, but everything that walks the result later (validation, printing) walks every
  expansion. A recursive alias is refused too.
- **Duplicate keys** in one mapping are refused, as the API server's strict decoding refuses
  duplicate fields, instead of the last one silently winning. (``<<`` merge keys are not keys.)
- **Characters YAML does not allow** (NUL and other control characters) are one error with the line
  and column, not PyYAML's two-line message about ``"<unicode string>"``.

Errors are :class:`YamlError` with a one-line message and, where known, the 1-based line and column.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A document may expand its aliases to this many nodes whatever its size (sigs.k8s.io/yaml's
# go-yaml allows 400,000 decodes before it looks at the alias ratio) ...
EXPANSION_FLOOR = 400_000
# ... and beyond that to this many times the nodes it is written with.
EXPANSION_RATIO = 10

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlError(ValueError):
    """Text that is not YAML lavaflow reads; ``line``/``column`` are 1-based when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        super().__init__(self.where() + message if line is not None else message)

    def where(self) -> str:
        return f"line {self.line}, column {self.column}: " if self.line is not None else ""


def _from_pyyaml(exc: yaml.YAMLError, text: str) -> YamlError:
    if isinstance(exc, yaml.reader.ReaderError):
        # A character YAML does not allow: PyYAML names the string and a character offset.
        pos = max(0, min(exc.position, len(text)))
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        ch = exc.character
        code = ord(ch) if isinstance(ch, str) else int(ch)
        return YamlError(f"character U+{code:04X} is not allowed in YAML", line, column)
    mark = getattr(exc, "problem_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and cmark is not None:
        problem += f" ({' '.join(str(context).split())} at line {cmark.line + 1}, column {cmark.column + 1})"
    if mark is None:
        return YamlError(problem)
    return YamlError(problem, mark.line + 1, mark.column + 1)


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
# Scalars of these tags are built by SafeConstructor's own functions; a document with any other tag
# (timestamps, binary, sets, merge keys, a tag of its own) is built by SafeConstructor itself.
_SCALARS = {
    "tag:yaml.org,2002:int": SafeConstructor.construct_yaml_int,
    "tag:yaml.org,2002:float": SafeConstructor.construct_yaml_float,
    "tag:yaml.org,2002:bool": SafeConstructor.construct_yaml_bool,
    "tag:yaml.org,2002:null": SafeConstructor.construct_yaml_null,
}
_SCALAR_BUILDER = SafeConstructor()  # those functions read nothing of it but the node
# Memos bounded in size (an input of many distinct values keeps the first ones): the values of
# non-string scalars by (tag, text), and the tags the resolver gives plain and quoted scalars.
_MEMO_LIMIT = 4096
_scalar_values: dict[tuple[str, str], Any] = {}
_resolved: dict[tuple[str, tuple[bool, bool]], str] = {}


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The C parser with the resolver's answers remembered: a Kubernetes input repeats the same
    keys and values document after document, and the resolver tries its regular expressions on
    each one. The tag of a scalar depends on its text and on whether it was plain or quoted alone
    (SafeLoader has no path resolvers), so a remembered answer is the one it would give."""

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass  # only path resolvers need it, and there are none

    def ascend_resolver(self) -> None:
        pass

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = _resolved.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_resolved) < _MEMO_LIMIT:
                _resolved[key] = tag
        return tag


def _check(root: Node) -> None:
    """Refuse duplicate keys and aliases that expand too far, before anything is built."""
    written: set[int] = set()  # nodes as written (an alias is the same node object again)
    size: dict[int, int] = {}  # node -> nodes it expands to, itself included
    on_path: set[int] = set()
    # An explicit stack (documents may nest deeper than Python's recursion limit allows).
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            on_path.discard(nid)
            if isinstance(node, MappingNode):
                kids = [n for pair in node.value for n in pair]
            else:
                kids = node.value
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            continue
        if nid in size:
            continue
        if nid in on_path:
            m = node.start_mark
            raise YamlError("a recursive alias (a value that contains itself) is not allowed", m.line + 1, m.column + 1)
        written.add(nid)
        if isinstance(node, ScalarNode):
            size[nid] = 1
            continue
        on_path.add(nid)
        stack.append((node, True))
        if isinstance(node, MappingNode):
            seen: dict[tuple[str, str], Node] = {}
            for key, value in node.value:
                if isinstance(key, ScalarNode) and key.tag != _MERGE_TAG:
                    k = (key.tag, key.value)
                    if k in seen:
                        raise _duplicate_key(key, seen[k])
                    seen[k] = key
                stack.append((value, False))
                stack.append((key, False))
        elif isinstance(node, SequenceNode):
            stack.extend((item, False) for item in reversed(node.value))
    total = size[id(root)]
    if total > max(EXPANSION_FLOOR, EXPANSION_RATIO * len(written)):
        m = root.start_mark
        raise YamlError(
            f"excessive aliasing: {len(written):,} values written expand to {total:,}",
            m.line + 1,
            m.column + 1,
        )


def _duplicate_key(key: ScalarNode, first_key: Node) -> YamlError:
    """The error for a mapping key met a second time (``first_key`` is where it was first)."""
    m, first = key.start_mark, first_key.start_mark
    return YamlError(
        f"duplicate key {key.value!r} (first at line {first.line + 1}, column {first.column + 1})",
        m.line + 1,
        m.column + 1,
    )


class _Again(Exception):
    """The document is left to _check and SafeConstructor (see _build)."""


def _build(root: Node) -> Any:
    """The document of ``root``, checked as above and built as SafeConstructor builds it.

    Most documents share no mapping or list through an alias: then nothing can expand much beyond
    what is written, nor contain itself, and the document is built from the top down in one pass
    that checks only for duplicate keys, meeting them in the order _check would. At the first
    mapping or list met twice, anything only SafeConstructor builds (another tag, a merge key, a
    mapping or list as a key, a value its tag refuses), or more values than aliases may expand to,
    the document is left to _check and SafeConstructor, from the start, as before."""
    if not isinstance(root, ScalarNode):
        try:
            return _build_shared_nothing(root)
        except _Again:
            pass
    _check(root)
    return SafeConstructor().construct_document(root)


def _build_shared_nothing(root: Node) -> Any:
    met: set[int] = set()  # the mappings and lists met
    values = 1  # values it expands to (a scalar met through an alias counts each time)
    top: Any = {} if isinstance(root, MappingNode) else []
    stack: list[tuple[Node, Any]] = [(root, top)]
    pop = stack.pop
    while stack:
        node, into = pop()
        nid = id(node)
        if nid in met or node.tag != (_MAP if isinstance(node, MappingNode) else _SEQ):
            raise _Again
        met.add(nid)
        mapping = isinstance(node, MappingNode)
        values += 2 * len(node.value) if mapping else len(node.value)
        if values > EXPANSION_FLOOR:
            raise _Again  # aliased scalars may be too many: counted by the other walk
        later: list[tuple[Node, Any]] = []
        if mapping:
            seen: dict[tuple[str, str], Node] = {}
            for key, value in node.value:
                if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
                    raise _Again
                k = (key.tag, key.value)
                if k in seen:
                    raise _duplicate_key(key, seen[k])
                seen[k] = key
                into[key.value if key.tag == _STR else _scalar_value(key)] = _value(value, later)
            stack.extend(later)  # the last pair's value is walked first, as _check does
        else:
            into.extend([_value(item, later) for item in node.value])
            stack.extend(reversed(later))  # the first item first
    return top


def _value(node: Node, later: list[tuple[Node, Any]]) -> Any:
    """A scalar's value, or the empty mapping or list a mapping or list is built into (later)."""
    if isinstance(node, ScalarNode):
        return node.value if node.tag == _STR else _scalar_value(node)
    into: Any = {} if isinstance(node, MappingNode) else []
    later.append((node, into))
    return into


def _scalar_value(node: ScalarNode) -> Any:
    """A scalar of a core tag other than string, built by SafeConstructor's function for it;
    _Again for another tag, or a value the function refuses (SafeConstructor will raise it)."""
    tag = node.tag
    key = (tag, node.value)
    value = _scalar_values.get(key, _scalar_values)
    if value is _scalar_values:
        make = _SCALARS.get(tag)
        if make is None:
            raise _Again
        try:
            value = make(_SCALAR_BUILDER, node)
        except Exception:
            raise _Again from None
        if len(_scalar_values) < _MEMO_LIMIT:
            _scalar_values[key] = value
    return value


def load_all(text: str) -> Iterator[Any]:
    """The documents of ``text`` (None for an empty one), checked as above; raises YamlError."""
    try:
        for node in yaml.compose_all(text, Loader=_Loader):
            yield None if node is None else _build(node)
    except yaml.YAMLError as exc:
        raise _from_pyyaml(exc, text) from None


def load(text: str) -> Any:
    """The one document of ``text`` (None when empty); raises YamlError, also for a second document."""
    docs = load_all(text)
    first = next(docs, None)
    if next(docs, None) is not None:
        raise YamlError("expected one YAML document, found more")
    return first


__all__ = ["EXPANSION_FLOOR", "EXPANSION_RATIO", "YamlError", "load", "load_all"]
