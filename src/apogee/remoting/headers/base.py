"""Typed request and response headers <-> ``extFields``.

A header is a dataclass subclassing ``Header``.  Each field's wire name is its camel-cased
name unless given with ``wire("name")``; a field without a default is required, as
RocketMQ's ``@CFNotNull`` fields are, and its absence is a ``HeaderError`` whose text
matches Java's ("the custom field <topic> is null").  Unknown keys (``AccessKey``,
``Signature``, ``OnsChannel`` from the C++ client, ``bname`` from 4.9.5+) are ignored.
Encoding writes every value as a string, the only form the C++ client reads.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar, get_args, get_type_hints

from apogee.errors import HeaderError
from apogee.remoting.fields import parse_bool, parse_int

H = TypeVar("H", bound="Header")

_INT, _BOOL, _STR = 0, 1, 2


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A header field whose wire name is not its camel-cased attribute name."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"wire": name})
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _kind(typ: Any) -> int:
    args = [a for a in get_args(typ) if a is not type(None)] or [typ]
    if args[0] is bool:
        return _BOOL
    if args[0] is int:
        return _INT
    return _STR


class Header:
    """Base class; subclasses are ``@dataclass`` declarations of one header each."""

    _spec: ClassVar[tuple[tuple[str, str, int, bool], ...] | None] = None

    @classmethod
    def _fields(cls) -> tuple[tuple[str, str, int, bool], ...]:
        spec = cls.__dict__.get("_spec")
        if spec is None:
            hints = get_type_hints(cls)
            spec = tuple(
                (
                    f.name,
                    f.metadata.get("wire", _camel(f.name)),
                    _kind(hints[f.name]),
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
            cls._spec = spec
        return spec

    @classmethod
    def decode(cls: type[H], ext: dict[str, str] | None) -> H:
        """Build the header from a request's extFields, validating required fields."""
        ext = ext or {}
        values: dict[str, Any] = {}
        for attr, key, kind, required in cls._fields():
            raw = ext.get(key)
            if raw is None or (raw == "" and kind != _STR):
                if required:
                    raise HeaderError(f"the custom field <{key}> is null")
                continue
            if kind == _INT:
                values[attr] = parse_int(key, raw)
            elif kind == _BOOL:
                values[attr] = parse_bool(key, raw)
            else:
                values[attr] = raw
        return cls(**values)

    def encode(self) -> dict[str, str]:
        """extFields for this header: every present value as a string."""
        out: dict[str, str] = {}
        for attr, key, kind, _ in self._fields():
            value = getattr(self, attr)
            if value is None:
                continue
            if kind == _BOOL:
                out[key] = "true" if value else "false"
            else:
                out[key] = value if isinstance(value, str) else str(value)
        return out
