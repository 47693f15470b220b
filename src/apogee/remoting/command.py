"""The RemotingCommand: the one message shape every NameServer, Broker and client exchanges.

A command is plain data.  Encoding and decoding live in ``codec.py``; this module only
holds the fields and the small factories that keep the flag and opaque rules in one place:
a response copies its request's ``opaque`` and serialize type and sets flag bit 0; a oneway
request sets flag bit 1 and gets no response.
"""

from __future__ import annotations

from collections.abc import Sequence

from apogee.remoting.codes import CURRENT_VERSION, LanguageCode, SerializeType

RPC_RESPONSE = 0x1
RPC_ONEWAY = 0x2

# A body may be one buffer or several (header + memoryview slices of stored messages), so a
# pull response can go to the socket without joining them.
Buffer = bytes | bytearray | memoryview
Body = Buffer | Sequence[Buffer] | None


_new = object.__new__
# Read per request (an Enum class attribute read is slow: docs/architecture.md, Principles).
_PYTHON = LanguageCode.PYTHON
_JSON = SerializeType.JSON


class RemotingCommand:
    """A request or response frame.

    ``ext_fields`` maps header names to strings on the wire; values given as ints or bools
    are stringified by the encoder.  ``language`` is kept as the raw int so that an unknown
    language from a peer survives a round trip.
    """

    __slots__ = (
        "code",
        "language",
        "version",
        "opaque",
        "flag",
        "remark",
        "ext_fields",
        "body",
        "serialize_type",
    )

    def __init__(
        self,
        code: int,
        *,
        language: int = LanguageCode.PYTHON,
        version: int = CURRENT_VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = None,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type

    # --- flag bits ----------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """A oneway *request*: the peer must not answer it.

        The C++ client sends its answers to broker-initiated requests with flag 3 (response
        and oneway); bit 0 wins, so such a frame is a response, not a oneway request.
        """
        return bool(self.flag & RPC_ONEWAY) and not self.flag & RPC_RESPONSE

    # --- factories ----------------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = None,
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        if cls is not RemotingCommand:
            return cls(code, ext_fields=ext_fields, body=body, flag=RPC_ONEWAY if oneway else 0)
        req = _new(RemotingCommand)  # every field set here: no keyword handling per request
        req.code = code
        req.language = _PYTHON
        req.version = CURRENT_VERSION
        req.opaque = 0
        req.flag = RPC_ONEWAY if oneway else 0
        req.remark = None
        req.ext_fields = ext_fields
        req.body = body
        req.serialize_type = _JSON
        return req

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = None,
    ) -> RemotingCommand:
        """The answer to this request: same opaque and serialize type, flag bit 0 set."""
        resp = _new(RemotingCommand)  # every field set here: no keyword handling per answer
        resp.code = code
        resp.language = _PYTHON
        resp.version = CURRENT_VERSION
        resp.opaque = self.opaque
        resp.flag = RPC_RESPONSE
        resp.remark = remark
        resp.ext_fields = ext_fields
        resp.body = body
        resp.serialize_type = self.serialize_type
        return resp

    # --- helpers ------------------------------------------------------------------------------

    def body_bytes(self) -> bytes:
        """The body as one ``bytes`` object (joins a multi-part body)."""
        body = self.body
        if body is None:
            return b""
        if isinstance(body, bytes):
            return body
        if isinstance(body, (bytearray, memoryview)):
            return bytes(body)
        return b"".join(body)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        size = len(self.body_bytes()) if self.body is not None else 0
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} "
            f"remark={self.remark!r} ext={self.ext_fields!r} body={size}B)"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (
            self.code == other.code
            and self.language == other.language
            and self.version == other.version
            and self.opaque == other.opaque
            and self.flag == other.flag
            and self.remark == other.remark
            and (self.ext_fields or {}) == (other.ext_fields or {})
            and self.body_bytes() == other.body_bytes()
            and self.serialize_type == other.serialize_type
        )

    __hash__ = None  # type: ignore[assignment]
