"""ROCKETMQ binary header serialization (serialize type 1), as Java's RocketMQSerializable.

Layout, all big-endian::

    code int16 | language int8 | version int16 | opaque int32 | flag int32
    | remarkLen int32 | remark UTF-8
    | extLen int32 | repeated (keyLen int16, key UTF-8, valueLen int32, value UTF-8)

A zero-length string decodes as null (remark absent, map entry dropped), as in Java.
Only Java clients configured for it send this; we answer in the request's serialize type.
"""

from __future__ import annotations

import struct
from typing import Any

from apogee.errors import LocalProtocolError, RemoteProtocolError
from apogee.remoting.header_json import stringify_ext_fields

_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLen
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")


def encode_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, Any] | None,
) -> bytes:
    remark_bytes = remark.encode() if remark else b""
    try:
        parts = [_FIXED.pack(code, language, version, opaque, flag, len(remark_bytes)), remark_bytes]
    except struct.error as exc:
        raise LocalProtocolError(f"field out of range for the ROCKETMQ header: {exc}") from None
    ext_parts: list[bytes] = []
    if ext_fields:
        for key, value in stringify_ext_fields(ext_fields).items():
            kb = key.encode()
            vb = value.encode()
            if len(kb) > 32767:
                raise LocalProtocolError(f"extFields key of {len(kb)} bytes is too long")
            ext_parts += (_I16.pack(len(kb)), kb, _I32.pack(len(vb)), vb)
    ext_blob = b"".join(ext_parts)
    parts += (_I32.pack(len(ext_blob)), ext_blob)
    return b"".join(parts)


def _text(data: bytes | memoryview, what: str) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        raise RemoteProtocolError(f"{what} is not valid UTF-8") from None


def decode_header(
    data: bytes | memoryview,
) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    end = len(data)
    if end < _FIXED.size + 4:
        raise RemoteProtocolError("ROCKETMQ header is shorter than its fixed fields")
    code, language, version, opaque, flag, remark_len = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > end:
        raise RemoteProtocolError("ROCKETMQ header remark length runs past the header")
    remark = _text(data[pos : pos + remark_len], "remark") if remark_len else None
    pos += remark_len
    (ext_len,) = _I32.unpack_from(data, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != end:
        raise RemoteProtocolError("ROCKETMQ header extFields length does not match the header")
    ext: dict[str, str] | None = None
    if ext_len:
        ext = {}
        while pos < end:
            if pos + 2 > end:
                raise RemoteProtocolError("truncated extFields key length")
            (klen,) = _U16.unpack_from(data, pos)
            pos += 2
            if pos + klen + 4 > end:
                raise RemoteProtocolError("truncated extFields key")
            key = _text(data[pos : pos + klen], "extFields key")
            pos += klen
            (vlen,) = _I32.unpack_from(data, pos)
            pos += 4
            if vlen < 0 or pos + vlen > end:
                raise RemoteProtocolError("truncated extFields value")
            value = _text(data[pos : pos + vlen], "extFields value")
            pos += vlen
            if key and vlen:
                ext[key] = value
    return code, language, version, opaque, flag, remark, ext
