"""JSON header serialization (serialize type 0), the only one the C++ and Node clients read.

Java writes the header with fastjson and reads ``extFields`` into ``HashMap<String,String>``;
the C++ client writes numbers and booleans into ``extFields`` and reads back only strings.
So the encoder stringifies every value and the decoder accepts strings, numbers and booleans.
"""

from __future__ import annotations

from typing import Any

import orjson

from apogee.errors import LocalProtocolError, RemoteProtocolError
from apogee.remoting.codes import LanguageCode

LANGUAGE_NAMES: dict[int, str] = {lang.value: lang.name for lang in LanguageCode}
LANGUAGE_BY_NAME: dict[str, int] = {lang.name: lang.value for lang in LanguageCode}
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def wire_value(value: object) -> str:
    """The string a Java peer expects for one extFields value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise LocalProtocolError(f"extFields value {value!r} is not a str, int or bool")


def stringify_ext_fields(ext: dict[str, Any]) -> dict[str, str]:
    for value in ext.values():
        if type(value) is not str:
            break
    else:
        return ext
    return {str(k): wire_value(v) for k, v in ext.items() if v is not None}


def encode_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, Any] | None,
) -> bytes:
    header: dict[str, Any] = {
        "code": code,
        "extFields": stringify_ext_fields(ext_fields) if ext_fields else {},
        "flag": flag,
        "language": LANGUAGE_NAMES.get(language, "OTHER"),
        "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": version,
    }
    if remark is not None:
        header["remark"] = remark
    return orjson.dumps(header)


def _int_field(obj: dict[str, Any], name: str, default: int | None = None) -> int:
    value = obj.get(name, default)
    if isinstance(value, str):  # lenient: a number written as a string
        try:
            value = int(value)
        except ValueError:
            raise RemoteProtocolError(f"header field {name!r} is not an integer") from None
    if type(value) is not int:
        raise RemoteProtocolError(f"header field {name!r} is missing or not an integer")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise RemoteProtocolError(f"header field {name!r} is out of the int32 range")
    return value


def _ext_value(key: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() else repr(value)
    raise RemoteProtocolError(f"extFields[{key!r}] is not a string, number or boolean")


def decode_header(
    data: bytes | memoryview,
) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    """Parse a JSON header into (code, language, version, opaque, flag, remark, ext)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"JSON header is not valid JSON: {exc}") from None
    if type(obj) is not dict:
        raise RemoteProtocolError("JSON header is not an object")
    get = obj.get
    code = get("code")
    version = get("version", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    # Fast path: well-formed ints in range (every real client); anything else is checked
    # field by field with a precise error.
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):
        code = _int_field(obj, "code")
        version = _int_field(obj, "version", 0)
        opaque = _int_field(obj, "opaque", 0)
        flag = _int_field(obj, "flag", 0)
    lang = get("language", "OTHER")
    language = LANGUAGE_BY_NAME.get(lang) if type(lang) is str else None
    if language is None:
        if type(lang) is int:
            language = lang
        elif type(lang) is str:
            language = LanguageCode.OTHER
        else:
            raise RemoteProtocolError("header field 'language' is not a name")
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise RemoteProtocolError("header field 'remark' is not a string")
    ext = get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise RemoteProtocolError("header field 'extFields' is not an object")
        for value in ext.values():
            if type(value) is not str:
                ext = {k: _ext_value(k, v) for k, v in ext.items() if v is not None}
                break
    return code, language, version, opaque, flag, remark, ext
