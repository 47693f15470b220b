"""A client connection that signs every request it sends (RocketMQ ACL 1.0).

``RemotingClient`` opens these instead of plain ``Connection`` objects when it is given a
``signing.Signer``: requests written as commands (``invoke``, ``invoke_callback``,
``invoke_oneway``) and straight from their fields (``invoke_fields``, a producer's send) get
AccessKey, Signature (and SecurityToken) as ``AclClientRPCHook`` adds them.  Answers to the
requests a broker sends the client are not signed (RocketMQ signs requests only).  A client
without credentials keeps the plain ``Connection``: signing costs nothing when it is off.

A request with a large body (an auto-batch) has its body hashed on the process's hasher
thread (``body_hasher``) while the loop goes on encoding the next messages; it is written
when its signature is ready.  Requests leave in the order they were made: while one waits
for its signature, those made after it wait behind it (``_unsent``), signed at once.  A
request is tracked (its timeout runs, a closed connection fails it) from when it is made.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from apogee.remoting.body_hasher import BACKGROUND_MIN_BYTES, HASHER
from apogee.remoting.codec import body_size, encode, fields_frame
from apogee.remoting.command import RPC_ONEWAY, Buffer, RemotingCommand
from apogee.remoting.connection import Connection, ResponseCallback
from apogee.remoting.signing import SIGNATURE, Signer


class _Unsent:
    """A request made while an earlier one waits for its signature: its frame once ready
    (empty: nothing to write, its hash failed)."""

    __slots__ = ("frame",)

    def __init__(self, frame: list[Buffer] | None) -> None:
        self.frame = frame


class SigningConnection(Connection):
    def __init__(self, signer: Signer, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.signer = signer
        self._unsent: deque[_Unsent] = deque()

    def _register(
        self,
        cmd: RemotingCommand,
        timeout_ms: int,
        future: asyncio.Future[RemotingCommand] | None,
        callback: ResponseCallback | None,
    ) -> None:
        body = cmd.body
        large = body is not None and body_size(body) >= BACKGROUND_MIN_BYTES
        if not large and not self._unsent:
            cmd.ext_fields = self.signer.sign_ext(cmd.ext_fields, body)
            super()._register(cmd, timeout_ms, future, callback)
            return
        opaque = self._take_opaque()
        cmd.opaque = opaque
        self._track(opaque, cmd.code, timeout_ms, future, callback)
        if not large:
            cmd.ext_fields = self.signer.sign_ext(cmd.ext_fields, body)
            self._unsent.append(_Unsent(encode(cmd)))
            return
        entry = _Unsent(None)
        self._unsent.append(entry)
        signer = self.signer
        unsigned = signer.unsigned_ext(cmd.ext_fields)
        mac = signer.begin(unsigned)

        def hashed(error: BaseException | None) -> None:
            if error is None:
                unsigned[SIGNATURE] = signer.finish(mac)
                cmd.ext_fields = unsigned
                entry.frame = encode(cmd)
            else:
                entry.frame = []
                pending = self._pending.pop(opaque, None)
                if pending is not None:
                    pending.finish(None, error)
            self._write_ready()

        HASHER.submit(mac, body, self._loop, hashed)

    def _write_ready(self) -> None:
        """Write the requests at the head of ``_unsent`` whose frames are ready."""
        unsent = self._unsent
        if not self.is_open:
            unsent.clear()  # their requests failed when the connection closed
            return
        while unsent and unsent[0].frame is not None:
            frame = unsent.popleft().frame
            if frame:
                self._write(frame)

    def invoke_fields(
        self,
        code: int,
        keys: tuple[str, ...],
        values: tuple[str | int | None, ...],
        body: bytes | None,
        timeout_ms: int,
    ) -> Awaitable[RemotingCommand]:
        keys, values = self.signer.sign_fields(keys, values, body)
        if not self._unsent:
            return super().invoke_fields(code, keys, values, body, timeout_ms)
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        opaque = self._take_opaque()
        self._track(opaque, code, timeout_ms, future, None)
        self._unsent.append(_Unsent([fields_frame(code, opaque, 0, keys, values, body)]))
        return future

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.ext_fields = self.signer.sign_ext(cmd.ext_fields, cmd.body)
        if not self._unsent:
            super().invoke_oneway(cmd)
            return
        cmd.flag |= RPC_ONEWAY
        cmd.opaque = self._take_opaque()
        self._unsent.append(_Unsent(encode(cmd)))


def connection_factory(signer: Signer | None) -> Callable[..., Connection]:
    """The class (or partial) a client builds its connections with."""
    if signer is None:
        return Connection

    def make(*args: Any, **kwargs: Any) -> Connection:
        return SigningConnection(signer, *args, **kwargs)

    return make
