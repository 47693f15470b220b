"""Sans-I/O framing of RemotingCommands: bytes in, commands out; commands in, buffers out.

Frame layout (big-endian)::

    length int32 | serializeType<<24 | headerLength (int32) | header | body

``length`` counts everything after itself.  The body is whatever follows the header; there
is no separate body length.  Nothing here touches a socket or an event loop, so the same
code serves the asyncio transport, tests and benchmarks.

Every input is untrusted.  The decoder checks the length word against ``max_frame_size``
before buffering a byte of the frame, and raises ``RemoteProtocolError`` (and nothing else)
for anything malformed; the caller closes that one connection.  After an error the decoder
refuses further input, since the stream position is lost.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Protocol

from apogee.common.accel import native
from apogee.errors import RemoteProtocolError
from apogee.remoting import header_binary, header_json
from apogee.remoting.codes import CURRENT_VERSION, LanguageCode, SerializeType
from apogee.remoting.command import Body, Buffer, RemotingCommand
from apogee.remoting.tls_config import TLS_HANDSHAKE_RECORD

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
_PREFIX = struct.Struct(">ii")  # length, serializeType<<24 | headerLength
_LEN = struct.Struct(">i")
_HEADER_LEN_MASK = 0xFFFFFF
# Read per frame (an Enum class attribute read is slow: docs/architecture.md, Principles).
_JSON = SerializeType.JSON
_OTHER_LANGUAGE = LanguageCode.OTHER


def _body_parts(body: object) -> tuple[list[Buffer], int]:
    if body is None:
        return [], 0
    if isinstance(body, (bytes, bytearray, memoryview)):
        return [body], body.nbytes if isinstance(body, memoryview) else len(body)
    parts = list(body)  # type: ignore[call-overload]
    size = 0
    for part in parts:
        size += part.nbytes if isinstance(part, memoryview) else len(part)
    return parts, size


def body_size(body: object) -> int:
    """A body's length in bytes, as its frame will carry it (the one rule: ``_body_parts``)."""
    if body.__class__ is bytes:
        return len(body)
    return _body_parts(body)[1]


def encode(cmd: RemotingCommand) -> list[Buffer]:
    """The buffers that make up ``cmd`` on the wire, for ``transport.writelines``.

    The first buffer holds the length prefix and the header; body buffers follow unjoined.
    """
    body = cmd.body
    parts: list[Buffer]
    if body.__class__ is bytes:  # the usual body: no walk over parts
        parts, body_len = [body], len(body)
    elif body.__class__ is memoryview:  # a pull's records (StoreReader's C path)
        parts, body_len = [body], body.nbytes
    else:
        parts, body_len = _body_parts(body)
    if native is not None and cmd.serialize_type == _JSON:
        head = native.json_frame_head(
            cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, body_len,
            header_json.LANGUAGE_NAMES,
        )
        if head is not None:
            return [head, *parts]
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = header_binary.encode_header(
            cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields
        )
    else:
        header = header_json.encode_header(
            cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields
        )
    prefix = _PREFIX.pack(4 + len(header) + body_len, (cmd.serialize_type << 24) | len(header))
    return [prefix + header, *parts]


_PYTHON_LANGUAGE = header_json.LANGUAGE_NAMES[LanguageCode.PYTHON]


def request_command(
    code: int, keys: Sequence[str], values: Sequence[str | int | None], body: Body
) -> RemotingCommand:
    """The request whose extFields are ``keys[i] -> str(values[i])`` for each value that is not
    None, in that order.  Keys are distinct; values are str or int."""
    ext = {key: value if value.__class__ is str else str(value) for key, value in zip(keys, values, strict=True)
           if value is not None}
    return RemotingCommand.request(code, ext, body)


def fields_frame_py(
    code: int, opaque: int, flag: int, keys: Sequence[str], values: Sequence[str | int | None],
    body: bytes | int | None,
) -> bytes:
    """``fields_frame`` built as a command and encoded: the reference of ``native.fields_frame``."""
    later = 0  # the length of a body the caller writes after the head
    if isinstance(body, int):
        later, body = body, None
    cmd = request_command(code, keys, values, body)
    cmd.opaque = opaque
    cmd.flag = flag
    frame = encode_bytes(cmd)
    if later:
        (length,) = _LEN.unpack_from(frame)
        return _LEN.pack(length + later) + frame[4:]
    return frame


def fields_frame(
    code: int, opaque: int, flag: int, keys: tuple[str, ...], values: tuple[str | int | None, ...],
    body: bytes | int | None,
) -> bytes:
    """The whole JSON frame of ``request_command(code, keys, values, body)`` with ``opaque`` and
    ``flag`` (0 for a request, ``RPC_RESPONSE`` for an answer, which then has no remark).

    A frame that is written once and never inspected (a producer's send, a broker's answer to
    it) needs no extFields dict and no ``RemotingCommand``: in C this is one call from the
    fields to the bytes.  ``body`` given as an int is the length of a body the caller writes
    after the returned bytes, unjoined (a pull's records): the frame's head alone.
    """
    if native is not None and (body is None or body.__class__ is bytes or body.__class__ is int):
        frame = native.fields_frame(code, opaque, flag, _PYTHON_LANGUAGE, CURRENT_VERSION, keys, values, body)
        if frame is not None:
            return frame
    return fields_frame_py(code, opaque, flag, keys, values, body)


def encode_bytes(cmd: RemotingCommand) -> bytes:
    """One ``bytes`` object for ``cmd`` (tests, small frames)."""
    return b"".join(encode(cmd))


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one frame *without* its length prefix (header-length word onwards)."""
    if len(frame) < 4:
        raise RemoteProtocolError("frame is shorter than its header-length word")
    (word,) = _LEN.unpack_from(frame, 0)
    serialize_type = (word >> 24) & 0xFF
    header_len = word & _HEADER_LEN_MASK
    if header_len > len(frame) - 4:
        raise RemoteProtocolError(
            f"header length {header_len} exceeds the frame's {len(frame) - 4} bytes"
        )
    header = frame[4 : 4 + header_len]
    if serialize_type == SerializeType.JSON:
        fields = header_json.decode_header(header)
    elif serialize_type == SerializeType.ROCKETMQ:
        fields = header_binary.decode_header(header)
    else:
        raise RemoteProtocolError(f"unknown serialize type {serialize_type}")
    cmd = _new_command(RemotingCommand)
    (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields) = fields
    cmd.body = bytes(frame[4 + header_len :]) if len(frame) > 4 + header_len else None
    cmd.serialize_type = serialize_type
    return cmd


# Decoded fields are already validated: build commands without __init__'s keyword handling.
_new_command = object.__new__


class FrameLedger(Protocol):
    """Where a server's decoders report the bytes they hold for incomplete frames
    (``limits.IncompleteFrames``); it may refuse by raising ``RemoteProtocolError``."""

    def start(self, owner: Any, nbytes: int) -> None: ...
    def grow(self, owner: Any, nbytes: int) -> None: ...
    def release(self, owner: Any) -> None: ...


class FrameDecoder:
    """Incremental decoder: ``feed`` whatever arrived, get back the complete commands.

    Memory is bounded by ``max_frame_size`` plus one read: a length word above the limit is
    rejected as soon as its four bytes arrive, before the frame is buffered.  With a
    ``ledger`` the decoder also reports, for ``owner``, every read that ends inside a frame
    (never a read of complete frames), so a server can bound the total over its connections.
    """

    __slots__ = ("max_frame_size", "_buf", "_failed", "_ledger", "_owner")

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, ledger: FrameLedger | None = None, owner: Any = None
    ) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._failed = False
        self._ledger = ledger
        self._owner = owner

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if native is not None and not self._buf and data.__class__ is bytes and not self._failed:
            # The usual read, nothing buffered before it: _feed's first branch in one call.
            done = native.decode_frames(
                data, self.max_frame_size, RemotingCommand, header_json.LANGUAGE_BY_NAME, _OTHER_LANGUAGE
            )
            if done is not None:  # else the pure path decides (and raises what is wrong)
                commands, pos = done
                if pos < len(data):
                    self._buf += memoryview(data)[pos:]
                    if self._ledger is not None:
                        self._report(True)
                return commands
        if self._failed:
            raise RemoteProtocolError("decoder already failed; the connection must be closed")
        try:
            return self._feed(data)
        except RemoteProtocolError:
            self.discard()
            raise

    def discard(self) -> None:
        """Drop what is buffered and refuse further input (the connection is closing)."""
        self._failed = True
        # A new buffer, not clear(): an error's traceback may still hold views of the old one.
        self._buf = bytearray()
        if self._ledger is not None:
            self._ledger.release(self._owner)

    def _report(self, new_frame: bool) -> None:
        """Tell the ledger what is held after a read (a frame started in it, or grew)."""
        assert self._ledger is not None
        try:
            if not self._buf:
                self._ledger.release(self._owner)
            elif new_frame:
                self._ledger.start(self._owner, len(self._buf))
            else:
                self._ledger.grow(self._owner, len(self._buf))
        except RemoteProtocolError:
            self.discard()
            raise

    def _check_length(self, length: int) -> None:
        if length < 4:
            raise RemoteProtocolError(f"frame length {length} is below the minimum of 4")
        if length > self.max_frame_size:
            tls = " (a TLS handshake: the peer speaks TLS, this port does not: tls.server.mode)" if (
                length >> 24 == TLS_HANDSHAKE_RECORD) else ""
            raise RemoteProtocolError(
                f"frame length {length} exceeds the maximum frame size {self.max_frame_size}{tls}"
            )

    def _feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buf
        if not buf:
            source = data if isinstance(data, bytes) else bytes(data)
            commands, pos = self._decode_all(source)
            if pos < len(source):
                buf += memoryview(source)[pos:]
                if self._ledger is not None:
                    self._report(True)
            return commands
        buf += data
        # Decode straight out of the buffer once a whole frame is there (a large frame that
        # arrives in many reads is never copied per read); bodies are copied out as bytes,
        # so the views can be released before the consumed prefix is dropped.
        if len(buf) >= 4:
            (length,) = _LEN.unpack_from(buf, 0)
            self._check_length(length)
            if len(buf) >= 4 + length:
                commands, pos = self._decode_all(buf)
                del buf[:pos]
                if self._ledger is not None:
                    self._report(True)  # what is left, if anything, starts a new frame
                return commands
        if self._ledger is not None:
            self._report(False)
        return []

    def _decode_all(self, source: bytes | bytearray) -> tuple[list[RemotingCommand], int]:
        """Every complete frame at the start of ``source`` and where the rest begins."""
        if native is not None:
            # JSON headers of the usual shape are read in C; anything else comes back None.
            done = native.decode_frames(
                source, self.max_frame_size, RemotingCommand, header_json.LANGUAGE_BY_NAME, _OTHER_LANGUAGE
            )
            if done is not None:
                return done
        return self._decode_all_py(source)

    def _decode_all_py(self, source: bytes | bytearray) -> tuple[list[RemotingCommand], int]:
        """The reference of ``native.decode_frames``: every frame, every check, in Python."""
        commands: list[RemotingCommand] = []
        pos = 0
        end = len(source)
        with memoryview(source) as view:
            while end - pos >= 4:
                (length,) = _LEN.unpack_from(source, pos)
                self._check_length(length)
                if end - pos - 4 < length:
                    break
                with view[pos + 4 : pos + 4 + length] as frame:
                    commands.append(decode_frame(frame))
                pos += 4 + length
        return commands, pos


def encode_many(cmds: Sequence[RemotingCommand]) -> bytes:
    """Several commands back to back (tests and benchmarks)."""
    return b"".join(b"".join(encode(c)) for c in cmds)
