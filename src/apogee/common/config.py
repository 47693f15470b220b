"""One loader for every role's configuration, keyed by RocketMQ's own property names.

Each role keeps a ``@dataclass`` of snake_case fields with units in their names
(``file_reserved_time_h``).  The RocketMQ name of a field is derived by camel-casing it
(``flush_disk_type`` -> ``flushDiskType``) unless the field says otherwise with
``metadata={"key": "fileReservedTime"}``.  Operators bring their broker.conf unchanged;
keys that no field claims are reported, never silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from apogee.errors import ConfigError

T = TypeVar("T")


def rmq_key(name: str) -> dict[str, str]:
    """Field metadata naming the RocketMQ property when camel-casing would not give it."""
    return {"key": name}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def key_map(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """RocketMQ property name -> dataclass field, for ``cls``."""
    return {f.metadata.get("key", _camel(f.name)): f for f in dataclasses.fields(cls)}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (the subset broker.conf files use)."""
    result: dict[str, str] = {}
    for raw in text.splitlines():
        parsed = property_line(raw)
        if parsed is not None:
            result[parsed[0]] = parsed[1]
    return result


def property_line(raw: str) -> tuple[str, str] | None:
    """(key, value) of one ``.properties`` line; None for a blank line or a comment."""
    line = raw.strip()
    if not line or line[0] in "#!":
        return None
    match = _PROPERTY_LINE.match(line)
    if match is None:
        return line, ""
    return match.group(1), match.group(2).strip()


_PROPERTY_LINE = re.compile(r"([^=:\s]+)\s*[=:\s]\s*(.*)$")


def _convert(value: Any, typ: Any, key: str) -> Any:
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        if isinstance(value, typ):
            return value
        text = str(value).strip()
        try:
            return typ[text.upper()]
        except KeyError:
            pass
        try:  # RocketMQ's own spelling, where the member's value keeps it (CONSUME_FROM_FIRST_OFFSET)
            return typ(text)
        except ValueError:
            names = ", ".join(m.name for m in typ)
            raise ConfigError(f"{key}={value!r}: expected one of {names}") from None
    if typ is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}={value!r}: expected true or false")
    if typ is int:
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{key}={value!r}: expected an integer") from None
    if typ is float:
        try:
            return float(str(value).strip())
        except ValueError:
            raise ConfigError(f"{key}={value!r}: expected a number") from None
    return str(value).strip() if not isinstance(value, str) else value.strip()


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` naming the known name closest to ``name`` (case ignored), or ""
    when none is close: the hint every "unknown key/option" error carries."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def unknown_keys_error(source: str, unknown: Iterable[str], known: Iterable[str]) -> ConfigError:
    """The error a configuration file with keys nobody reads stops its server with: one line
    naming each key, with the closest known key for each."""
    names = list(known)
    parts = [f"{key}{did_you_mean(key, names)}" for key in sorted(unknown)]
    return ConfigError(f"unknown key{'s' if len(parts) > 1 else ''} in {source}: {', '.join(parts)}")


def known_keys(*configs: object) -> set[str]:
    """Every RocketMQ property name the ``configs`` read."""
    return {key for config in configs for key in key_map(type(config))}


def apply(config: T, values: Mapping[str, Any], *, strict: bool = True) -> list[str]:
    """Set fields of ``config`` from RocketMQ-named ``values``; return the unknown keys.

    With ``strict`` an unknown key raises ``ConfigError`` naming it.  Invalid values always
    raise ``ConfigError`` with the key and the expected type.
    """
    fields = key_map(type(config))
    hints = get_type_hints(type(config))
    unknown = [k for k in values if k not in fields]
    if unknown and strict:
        raise ConfigError("unknown configuration keys: " + ", ".join(sorted(unknown)))
    for key, value in values.items():
        field = fields.get(key)
        if field is None:
            continue
        typ = hints[field.name]
        setattr(config, field.name, _convert(value, typ, key))
    return unknown


def load_file(path: str | Path) -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None


def properties_text(*configs: object) -> str:
    """Every setting of ``configs`` as sorted ``key=value`` lines (GET_BROKER_CONFIG and
    GET_NAMESRV_CONFIG answer this, as RocketMQ's getAllConfigsFormatString); unset ones left out."""
    lines = sorted(f"{key}={value}\n" for config in configs for key, value in describe(config) if value is not None)
    return "".join(lines)


def describe(config: object) -> Iterable[tuple[str, Any]]:
    """(RocketMQ name, value) pairs of ``config``, for printing the effective config."""
    for key, field in key_map(type(config)).items():
        value = getattr(config, field.name)
        if isinstance(value, enum.Enum):
            value = value.name
        elif isinstance(value, bool):
            value = "true" if value else "false"
        yield key, value
