"""Message bodies to and from Python values: what the template sends, what a listener receives.

PURE: no I/O.  Sending, ``encode_body`` keeps ``bytes`` as they are, encodes ``str`` as UTF-8
and anything else as JSON with orjson (dicts, lists, numbers, dataclasses, datetimes, UUIDs).
Receiving, ``decoder_for(annotation)`` is built once per listener from the annotation of its
payload parameter and turns a ``MessageExt`` into that type:

==========================  =================================================================
annotation                  the listener receives
==========================  =================================================================
``bytes``                   the body as it is
``str``                     the body decoded as UTF-8 (strictly)
``MessageExt`` / ``Message``  the raw message (also when the parameter has no annotation)
``dict``, ``list``, ``Any`` the body parsed as JSON
a dataclass                 the JSON object's fields, converted by the fields' annotations
``int``, ``float``, ...     the JSON value, checked against the annotation
==========================  =================================================================

Conversion is checked all the way down (``list[Item]``, ``Item | None``, nested dataclasses,
enums, ``Literal``, ``datetime``/``date``/``UUID`` from the strings orjson writes); a body
that does not fit raises ``PayloadDecodeError`` naming the path (``$.items[2].qty``).  Keys of
a JSON object that a dataclass does not declare are ignored, so a producer may add fields
before its consumers know them.  An annotation that cannot be decoded into is refused when
the listener is declared (``TypeError``), not when the first message arrives.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from apogee.common.message import Message, MessageExt
from apogee.errors import PayloadDecodeError

Convert = Callable[[Any, str], Any]
"""A checked conversion of one JSON value; the string is its path, for error messages."""

Decoder = Callable[[MessageExt], Any]


# --- sending ------------------------------------------------------------------------------------


def encode_body(body: object) -> bytes:
    """The wire body of ``body``: bytes as they are, str as UTF-8, anything else as JSON."""
    if type(body) is bytes:
        return body
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    try:
        return orjson.dumps(body)
    except TypeError as exc:
        raise TypeError(
            f"cannot send a {type(body).__name__}: a body is bytes, str or a JSON-serialisable value "
            f"(dict, list, number, dataclass...): {exc}"
        ) from None


# --- receiving ----------------------------------------------------------------------------------


def decoder_for(annotation: Any) -> Decoder:
    """A function decoding a message into ``annotation``; ``TypeError`` if none can."""
    if annotation is None or annotation is MessageExt or annotation is Message:
        return _raw
    if annotation is bytes:
        return _body
    if annotation is str:
        return _text
    convert = converter(annotation)

    def decode(msg: MessageExt) -> Any:
        try:
            value = orjson.loads(msg.body)
        except orjson.JSONDecodeError as exc:
            raise PayloadDecodeError(f"the body is not JSON: {exc}") from None
        return convert(value, "$")

    return decode


def _raw(msg: MessageExt) -> MessageExt:
    return msg


def _body(msg: MessageExt) -> bytes:
    return msg.body


def _text(msg: MessageExt) -> str:
    try:
        return msg.body.decode()
    except UnicodeDecodeError as exc:
        raise PayloadDecodeError(f"the body is not UTF-8 text: {exc}") from None


def _fail(path: str, expected: str, value: Any) -> PayloadDecodeError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return PayloadDecodeError(f"{path}: expected {expected}, got {type(value).__name__} {shown}")


def converter(tp: Any) -> Convert:
    """A checked conversion of parsed JSON into ``tp`` (see the module docstring)."""
    if tp is Any or tp is object:
        return _identity
    if tp is None or tp is type(None):
        return _none
    simple = _SIMPLE.get(tp)
    if simple is not None:
        return simple
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is list or origin is list:
        return _list(converter(args[0]) if args else _identity)
    if tp is tuple or origin is tuple:
        return _tuple(args)
    if tp is dict or origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"cannot decode JSON into {tp}: JSON object keys are strings")
        return _dict(converter(args[1]) if args else _identity)
    if origin is typing.Union or origin is types.UnionType:
        return _union([converter(a) for a in args], tp)
    if origin is typing.Literal:
        return _literal(args)
    raise TypeError(
        f"cannot decode a message into {tp!r}: use bytes, str, MessageExt, a JSON type "
        "(dict, list, int, float, bool, Any) or a dataclass of them"
    )


def _identity(value: Any, path: str) -> Any:
    return value


def _none(value: Any, path: str) -> None:
    if value is not None:
        raise _fail(path, "null", value)


def _bool(value: Any, path: str) -> bool:
    if type(value) is not bool:
        raise _fail(path, "a boolean", value)
    return value


def _int(value: Any, path: str) -> int:
    if type(value) is not int:
        raise _fail(path, "an integer", value)
    return value


def _float(value: Any, path: str) -> float:
    if type(value) is not float and type(value) is not int:
        raise _fail(path, "a number", value)
    return float(value)


def _str(value: Any, path: str) -> str:
    if type(value) is not str:
        raise _fail(path, "a string", value)
    return value


def _from_string(parse: Callable[[str], Any], what: str) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if type(value) is str:
            try:
                return parse(value)
            except ValueError:
                pass
        raise _fail(path, what, value)

    return convert


_SIMPLE: dict[Any, Convert] = {
    bool: _bool,
    int: _int,
    float: _float,
    str: _str,
    dt.datetime: _from_string(dt.datetime.fromisoformat, "an ISO 8601 date-time"),
    dt.date: _from_string(dt.date.fromisoformat, "an ISO 8601 date"),
    uuid.UUID: _from_string(uuid.UUID, "a UUID"),
}


def _enum(tp: type[enum.Enum]) -> Convert:
    def convert(value: Any, path: str) -> Any:
        try:
            return tp(value)
        except ValueError:
            raise _fail(path, f"a value of {tp.__name__}", value) from None

    return convert


def _list(item: Convert) -> Convert:
    def convert(value: Any, path: str) -> list[Any]:
        if type(value) is not list:
            raise _fail(path, "an array", value)
        return [item(v, f"{path}[{i}]") for i, v in enumerate(value)]

    return convert


def _tuple(args: tuple[Any, ...]) -> Convert:
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        each = _list(converter(args[0]) if args else _identity)
        return lambda value, path: tuple(each(value, path))
    items = [converter(a) for a in args]

    def convert(value: Any, path: str) -> tuple[Any, ...]:
        if type(value) is not list or len(value) != len(items):
            raise _fail(path, f"an array of {len(items)}", value)
        return tuple(item(v, f"{path}[{i}]") for i, (item, v) in enumerate(zip(items, value, strict=True)))

    return convert


def _dict(item: Convert) -> Convert:
    def convert(value: Any, path: str) -> dict[str, Any]:
        if type(value) is not dict:
            raise _fail(path, "an object", value)
        return {k: item(v, f"{path}.{k}") for k, v in value.items()}

    return convert


def _union(options: list[Convert], tp: Any) -> Convert:
    def convert(value: Any, path: str) -> Any:
        for option in options:
            try:
                return option(value, path)
            except PayloadDecodeError:
                continue
        raise _fail(path, str(tp), value)

    return convert


def _literal(allowed: tuple[Any, ...]) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if value not in allowed or type(value) not in {type(a) for a in allowed}:
            raise _fail(path, f"one of {list(allowed)}", value)
        return value

    return convert


_dataclasses: dict[type[Any], Convert] = {}
"""Converters of the dataclasses seen so far; also what lets a dataclass refer to itself."""


def _dataclass(cls: type[Any]) -> Convert:
    known = _dataclasses.get(cls)
    if known is not None:
        return known
    fields: list[tuple[str, Convert, bool]] = []

    def convert(value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _fail(path, f"an object for {cls.__name__}", value)
        kwargs = {}
        for name, conv, required in fields:
            if name in value:
                kwargs[name] = conv(value[name], f"{path}.{name}")
            elif required:
                raise PayloadDecodeError(f"{path}: {cls.__name__} needs the field {name!r}, which is missing")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # its __post_init__ refused the values
            raise PayloadDecodeError(f"{path}: {cls.__name__} refused the values: {exc}") from None

    _dataclasses[cls] = convert
    try:
        try:
            hints = typing.get_type_hints(cls)
        except NameError as exc:
            raise TypeError(f"the annotations of {cls.__qualname__} cannot be resolved: {exc}") from None
        for f in dataclasses.fields(cls):
            if f.init:
                required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                fields.append((f.name, converter(hints[f.name]), required))
    except BaseException:
        del _dataclasses[cls]
        raise
    return convert
