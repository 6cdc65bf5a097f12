"""Read multi-document Kubernetes YAML into typed objects.

Every problem found is reported with the file, the document number, the
object's kind/name and the field path; a set of inputs with any problem is
refused as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import yamlio
from .kinds import ALL, LOADABLE, LOADABLE_CURRENT
from .mpijob import MPIJobError, is_mpijob, to_volcano_job

# (older apiVersion, kind) -> the current apiVersion it is read as
OLDER_VERSIONS: dict[tuple[str, str], str] = {
    (v, k.api_kind): k.api_version for k in ALL if k.loadable for v in k.older_versions
}


@dataclass(frozen=True)
class Source:
    file: str
    document: int  # 1-based
    unit: str = "document"  # "line" for a row of a CSV trace

    def __str__(self) -> str:
        return f"{self.file}: {self.unit} {self.document}"


@dataclass
class Loaded:
    obj: Any
    source: Source


class InputError(Exception):
    """Invalid input; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class Problems:
    lines: list[str] = field(default_factory=list)

    def add(self, where: Source | str, what: str, path: str, message: str) -> None:
        parts = [str(where)]
        if what:
            parts.append(what)
        if path:
            parts.append(path)
        parts.append(message)
        self.lines.append(": ".join(parts))

    def raise_if_any(self) -> None:
        if self.lines:
            raise InputError(self.lines)


def loc_to_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def describe(kind: str, doc: Any) -> str:
    name = ""
    if isinstance(doc, dict):
        meta = doc.get("metadata")
        if isinstance(meta, dict):
            name = str(meta.get("name") or "")
            if not name and meta.get("generateName"):
                name = f"{meta['generateName']}*"
    return f"{kind}/{name}" if name else kind


def object_label(obj: Any) -> str:
    """``Job/train`` — or ``Job/train-*`` for an object named by ``metadata.generateName``."""
    name = obj.metadata.name or (f"{obj.metadata.generate_name}*" if obj.metadata.generate_name else "")
    return f"{obj.kind}/{name}"


def _found(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{value!r}"


_EXPECTED = {
    "model_type": "a mapping (key: value)",
    "model_attributes_type": "a mapping (key: value)",
    "dict_type": "a mapping (key: value)",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def plain_message(err: dict[str, Any]) -> str:
    """A validation error in the user's words, without the model's internals."""
    kind = err.get("type", "")
    if kind == "missing":
        return "is required"
    expected = _EXPECTED.get(kind)
    if expected is not None:
        return f"expected {expected}, found {_found(err.get('input'))}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    if msg.startswith("Input should be "):
        return f"expected {msg[len('Input should be ') :]}, found {_found(err.get('input'))}"
    return msg


def parse_documents(text: str, file: str, problems: Problems) -> list[tuple[Source, Any]]:
    docs: list[tuple[Source, Any]] = []
    try:
        for i, doc in enumerate(yamlio.load_all(text), start=1):
            if doc is None:
                continue
            docs.append((Source(file, i), doc))
    except yamlio.YamlError as exc:
        where = f"{file}: line {exc.line}, column {exc.column}" if exc.line is not None else file
        problems.add(where, "", "", f"not valid YAML ({exc.message})")
    return docs


def list_items(doc: Any) -> list[Any]:
    """The objects of a document: the items of a ``kind: List``, or the document itself."""
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return list(doc["items"])
    return [doc]


def _expand_lists(docs: list[tuple[Source, Any]]) -> list[tuple[Source, Any]]:
    return [(src, item) for src, doc in docs for item in list_items(doc)]


class Unsupported(Exception):
    """A document of a kind lavaflow does not simulate (raised only when skipping is asked for)."""


def build_object(src: Source, doc: Any, problems: Problems, skip_unsupported: bool = False) -> Any | None:
    if not isinstance(doc, dict):
        problems.add(src, "", "", f"expected a Kubernetes object (a mapping), found {type(doc).__name__}")
        return None
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not api_version or not kind:
        missing = "apiVersion" if not api_version else "kind"
        problems.add(src, describe(str(kind or "object"), doc), missing, "is required")
        return None
    if is_mpijob(doc):
        # Voda's MPIJob: run as the elastic Volcano Job it stands for.
        try:
            doc = to_volcano_job(doc)
        except MPIJobError as exc:
            problems.add(src, describe(str(kind), doc), exc.path, exc.message)
            return None
        api_version, kind = doc["apiVersion"], doc["kind"]
    cls = LOADABLE.get((str(api_version), str(kind)))
    if cls is None:
        if skip_unsupported:
            raise Unsupported(
                f"{src}: {describe(str(kind), doc)}: unsupported kind {kind!r} of {api_version!r}, skipped"
            )
        known = ", ".join(f"{k} ({a})" for a, k in sorted(LOADABLE_CURRENT))
        problems.add(
            src,
            describe(str(kind), doc),
            "",
            f"unsupported kind {kind!r} of {api_version!r} (--skip-unsupported runs the rest without it); "
            f"supported: {known}",
        )
        return None
    try:
        # Strict, as the API server decodes: "2" or true is not a whole number, 1 is not a string.
        obj = cls.model_validate(doc, strict=True)
    except ValidationError as exc:
        for err in exc.errors():
            problems.add(src, describe(str(kind), doc), loc_to_path(err["loc"]), plain_message(dict(err)))
        return None
    if not obj.metadata.name and not obj.metadata.generate_name:
        problems.add(src, str(kind), "metadata.name", "is required")
        return None
    return obj


def load_files(
    paths: list[str | Path], skip_unsupported: bool = False, skipped: list[str] | None = None
) -> list[Loaded]:
    """Parse files into objects; raise InputError listing every problem.

    With ``skip_unsupported`` documents of kinds lavaflow does not simulate are left out, one
    line each appended to ``skipped``, instead of refusing the input."""
    problems = Problems()
    loaded: list[Loaded] = []
    for p in paths:
        path = Path(p)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.add(str(p), "", "", "file not found")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.add(str(p), "", "", f"cannot read file ({exc})")
            continue
        _build_all(_expand_lists(parse_documents(text, str(p), problems)), problems, loaded, skip_unsupported, skipped)
    problems.raise_if_any()
    return loaded


def _build_all(
    docs: list[tuple[Source, Any]],
    problems: Problems,
    loaded: list[Loaded],
    skip_unsupported: bool,
    skipped: list[str] | None,
) -> None:
    for src, doc in docs:
        obj = build_one(src, doc, problems, skip_unsupported, skipped)
        if obj is not None:
            loaded.append(Loaded(obj, src))


def build_one(
    src: Source, doc: Any, problems: Problems, skip_unsupported: bool, skipped: list[str] | None
) -> Any | None:
    """:func:`build_object`, with what is said of a document left out (``skip_unsupported``) or
    read as the current version of its kind added to ``skipped``."""
    try:
        obj = build_object(src, doc, problems, skip_unsupported)
    except Unsupported as exc:
        if skipped is not None:
            skipped.append(str(exc))
        return None
    if obj is not None:
        older = OLDER_VERSIONS.get((str(doc.get("apiVersion")), str(doc.get("kind"))))
        if older is not None and skipped is not None:
            # Read as the current version, but said: current Kubernetes refuses this apiVersion
            skipped.append(
                f"{src}: {describe(str(doc.get('kind')), doc)}: apiVersion {doc.get('apiVersion')} is not served "
                f"by current Kubernetes (scheduling.k8s.io/v1beta1 went in 1.22); read as {older}"
            )
    return obj


def load_text(
    text: str, name: str = "<input>", skip_unsupported: bool = False, skipped: list[str] | None = None
) -> list[Loaded]:
    problems = Problems()
    loaded: list[Loaded] = []
    _build_all(_expand_lists(parse_documents(text, name, problems)), problems, loaded, skip_unsupported, skipped)
    problems.raise_if_any()
    return loaded
