"""Base model and ObjectMeta shared by every API object."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

from .quantity import parse_quantity

M = TypeVar("M", bound=BaseModel)


class K8sModel(BaseModel):
    """Kubernetes-style model: camelCase in YAML/JSON, snake_case in Python.

    Unknown fields are ignored, as ordinary manifests carry many fields the
    scheduler never reads (images, volumes, probes...).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        validate_assignment=False,
        arbitrary_types_allowed=True,
    )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def set_fields(model: BaseModel, values: dict[str, Any]) -> None:
    """``setattr(model, name, value)`` for each field, as pydantic assigns a field without
    validate_assignment (the value into ``__dict__``, the name into the set fields), without its
    per-call dispatch: for the simulator's hot paths. ``values`` must name declared fields."""
    model.__dict__.update(values)
    model.__pydantic_fields_set__.update(values)


_new = object.__new__  # what a pydantic model's __new__ resolves to, without the lookup
_setattr = object.__setattr__
# BaseModel's slots, set through their descriptors (object.__setattr__ looks each name up first)
_SET_FIELDS_SET, _SET_EXTRA, _SET_PRIVATE = (
    vars(BaseModel)[name].__set__ for name in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
)


def clone(model: M, changes: dict[str, Any]) -> M:
    """A shallow copy of a validated model with some fields replaced (values trusted, not
    validated): what ``model.model_copy(update=changes)`` gives, without its per-call overhead.
    For the simulator's hot paths."""
    c = _new(type(model))
    values = model.__dict__.copy()
    fields_set = set(model.__pydantic_fields_set__)
    if changes:
        values.update(changes)
        fields_set.update(changes)
    _setattr(c, "__dict__", values)
    _SET_FIELDS_SET(c, fields_set)
    extra, private = model.__pydantic_extra__, model.__pydantic_private__
    _SET_EXTRA(c, None if extra is None else dict(extra))
    _SET_PRIVATE(c, None if private is None else dict(private))
    return c


def _quantity_str(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text


Quantity = Annotated[Decimal, BeforeValidator(parse_quantity), PlainSerializer(_quantity_str, return_type=str)]
"""A resource quantity, parsed exactly; serialised back as a plain decimal string."""

ResourceList = dict[str, Quantity]


class OwnerReference(K8sModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(K8sModel):
    name: str = ""
    generate_name: str | None = None
    namespace: str | None = None
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    resource_version: str | None = None
    generation: int | None = None
    # Simulated seconds in the simulator; RFC 3339 strings on a cluster.
    creation_timestamp: Any = None
    deletion_timestamp: Any = None


class ObjectKeys:
    """``name``, ``namespace`` and ``key`` of an object with a ``metadata`` (its name and namespace)
    and a ``namespaced`` flag: the typed models, and the lighter pods the Kubernetes store keeps."""

    __slots__ = ()
    if TYPE_CHECKING:  # (no annotations at run time: pydantic would read them as fields)
        metadata: Any
        namespaced: ClassVar[bool]

    @property
    def name(self) -> str:
        return self.metadata.name  # type: ignore[no-any-return]

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def key(self) -> str:
        """``namespace/name`` for namespaced objects, ``name`` otherwise."""
        meta = self.metadata
        if self.namespaced:
            return f"{meta.namespace or 'default'}/{meta.name}"
        return meta.name  # type: ignore[no-any-return]


class TypedObject(K8sModel, ObjectKeys):
    namespaced: ClassVar[bool] = True

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def annotation(self, key: str, default: str | None = None) -> str | None:
        return self.metadata.annotations.get(key, default)
