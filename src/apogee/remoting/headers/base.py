"""Typed request and response headers <-> ``extFields``.

A header is a dataclass subclassing ``Header``.  Each field's wire name is its camel-cased
name unless given with ``wire("name")``; a field without a default is required, as
RocketMQ's ``@CFNotNull`` fields are, and its absence is a ``HeaderError`` whose text
matches Java's ("the custom field <topic> is null").  Unknown keys (``AccessKey``,
``Signature``, ``OnsChannel`` from the C++ client, ``bname`` from 4.9.5+) are ignored.
Encoding writes every value as a string, the only form the C++ client reads.

A number must fit its Java type, as it must for a Java server to decode it: a field typed
``Int32`` (or plain ``int``) is a Java ``Integer``, ``Int64`` a ``Long``, ``Perm`` a topic
permission (PermName's bits, 0..15).  A value outside is a ``HeaderError`` naming the field
("the custom field <flag> is out of range for a Java int: 2147483648"), raised before any
processor sees the request, so nothing a broker stores or packs can overflow later.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, NamedTuple, TypeVar, get_args, get_origin, get_type_hints

from apogee.common.validators import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, PERM_BITS
from apogee.errors import HeaderError
from apogee.remoting.fields import parse_bool, parse_int, parse_text

H = TypeVar("H", bound="Header")

_INT, _BOOL, _STR = 0, 1, 2


class IntRange(NamedTuple):
    """The values a number field accepts, and what the error remark calls its type."""

    lo: int
    hi: int
    java: str


INT32 = IntRange(INT32_MIN, INT32_MAX, "a Java int")
INT64 = IntRange(INT64_MIN, INT64_MAX, "a Java long")
PERM = IntRange(0, PERM_BITS, "a permission (PermName bits, 0..15)")

Int32 = Annotated[int, INT32]
"""A Java ``Integer`` field (what a plain ``int`` annotation means too)."""
Int64 = Annotated[int, INT64]
"""A Java ``Long`` field: offsets, timestamps, broker ids."""
Perm = Annotated[int, PERM]
"""A topic permission: PermName's bits only."""


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A header field whose wire name is not its camel-cased attribute name."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"wire": name})
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _base(typ: Any) -> tuple[Any, IntRange | None]:
    """The field's type without ``None`` and its ``IntRange`` when it is annotated with one."""
    args = [a for a in get_args(typ) if a is not type(None)] if get_origin(typ) is not Annotated else []
    base = args[0] if args else typ
    if get_origin(base) is Annotated:
        base, *extras = get_args(base)
        return base, next((e for e in extras if isinstance(e, IntRange)), None)
    return base, None


def _kind(typ: Any) -> int:
    base, _ = _base(typ)
    if base is bool:
        return _BOOL
    if base is int:
        return _INT
    return _STR


class Header:
    """Base class; subclasses are ``@dataclass`` declarations of one header each."""

    _spec: ClassVar[tuple[tuple[str, str, int, bool], ...] | None] = None
    _codec: ClassVar[tuple[Any, Any] | None] = None

    @classmethod
    def int_ranges(cls) -> dict[str, IntRange]:
        """Wire key -> accepted range, for every number field."""
        hints = get_type_hints(cls, include_extras=True)
        out = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            base, bounds = _base(hints[f.name])
            if base is int:
                out[f.metadata.get("wire", _camel(f.name))] = bounds or INT32
        return out

    @classmethod
    def _fields(cls) -> tuple[tuple[str, str, int, bool], ...]:
        spec = cls.__dict__.get("_spec")
        if spec is None:
            hints = get_type_hints(cls, include_extras=True)
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
        codec = cls.__dict__.get("_codec")
        if codec is None:
            codec = _compile(cls)
        return codec[0](ext)  # type: ignore[no-any-return]

    def encode(self) -> dict[str, str]:
        """extFields for this header: every present value as a string."""
        cls = type(self)
        codec = cls.__dict__.get("_codec")
        if codec is None:
            codec = _compile(cls)
        return codec[1](self)  # type: ignore[no-any-return]


def _compile(cls: type[Header]) -> tuple[Any, Any]:
    """A decoder and an encoder written for ``cls``'s fields, the way dataclasses writes
    ``__init__``: every request's header goes through them, and straight-line code is several
    times faster than a loop over the field spec.  The rules are those of the module
    docstring: a missing or empty (non-string) required field raises HeaderError, an absent
    optional one keeps its default, a number outside its range raises HeaderError, unknown keys
    are ignored, values are written as strings."""
    ns: dict[str, Any] = {"cls": cls, "HeaderError": HeaderError, "parse_int": parse_int,
                          "parse_bool": parse_bool, "parse_text": parse_text, "_EMPTY": {}}
    ranges = cls.int_ranges()
    dec = ["def decode(ext):", "    if not ext:", "        ext = _EMPTY", "    get = ext.get"]
    enc = ["def encode(self):", "    out = {}"]
    args = []
    for i, (attr, key, kind, required) in enumerate(cls._fields()):
        field = cls.__dataclass_fields__[attr]  # type: ignore[attr-defined]
        assert field.init and not field.kw_only, f"{cls.__name__}.{attr}: headers are built positionally"
        v = f"v{i}"
        args.append(v)
        if kind == _INT:
            # int() inline (parse_int only to raise its error), then the Java range.
            lo, hi, java = ranges[key]
            out_of_range = f"the custom field <{key}> is out of range for {java}: "
            convert = ["try:", f"    {v} = int(raw)", "except (TypeError, ValueError):",
                       f"    {v} = parse_int({key!r}, raw)",
                       f"if not {lo} <= {v} <= {hi}:", f"    raise HeaderError({out_of_range!r} + str({v}))"]
        elif kind == _BOOL:
            convert = [f"{v} = parse_bool({key!r}, raw)"]
        else:
            convert = [f"{v} = raw if raw.__class__ is str else parse_text(raw)"]
        missing = "raw is None" if kind == _STR else "raw is None or raw == ''"
        dec += [f"    raw = get({key!r})", f"    if {missing}:"]
        if required:
            null = f"the custom field <{key}> is null"
            dec += [f"        raise HeaderError({null!r})", *("    " + line for line in convert)]
        else:
            if field.default_factory is not dataclasses.MISSING:
                ns[f"F{i}"] = field.default_factory
                dec.append(f"        {v} = F{i}()")
            else:
                ns[f"D{i}"] = field.default
                dec.append(f"        {v} = D{i}")
            dec += ["    else:", *("        " + line for line in convert)]
        enc += [f"    v = self.{attr}", "    if v is not None:"]
        if kind == _BOOL:
            enc.append(f"        out[{key!r}] = 'true' if v else 'false'")
        else:
            enc.append(f"        out[{key!r}] = v if isinstance(v, str) else str(v)")
    dec.append(f"    return cls({', '.join(args)})")
    enc.append("    return out")
    exec("\n".join(dec + enc), ns)  # noqa: S102 - generated from field specs
    codec = (ns["decode"], ns["encode"])
    cls._codec = codec
    return codec
