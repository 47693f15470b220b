"""A client connection that signs every request it sends (RocketMQ ACL 1.0).

``RemotingClient`` opens these instead of plain ``Connection`` objects when it is given a
``signing.Signer``: requests written as commands (``invoke``, ``invoke_callback``,
``invoke_oneway``) and straight from their fields (``invoke_fields``, a producer's send) get
AccessKey, Signature (and SecurityToken) as ``AclClientRPCHook`` adds them.  Answers to the
requests a broker sends the client are not signed (RocketMQ signs requests only).  A client
without credentials keeps the plain ``Connection``: signing costs nothing when it is off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection, ResponseCallback
from apogee.remoting.signing import Signer


class SigningConnection(Connection):
    def __init__(self, signer: Signer, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.signer = signer

    def _register(
        self,
        cmd: RemotingCommand,
        timeout_ms: int,
        future: asyncio.Future[RemotingCommand] | None,
        callback: ResponseCallback | None,
    ) -> None:
        cmd.ext_fields = self.signer.sign_ext(cmd.ext_fields, cmd.body)
        super()._register(cmd, timeout_ms, future, callback)

    def invoke_fields(
        self,
        code: int,
        keys: tuple[str, ...],
        values: tuple[str | int | None, ...],
        body: bytes | None,
        timeout_ms: int,
    ) -> Awaitable[RemotingCommand]:
        keys, values = self.signer.sign_fields(keys, values, body)
        return super().invoke_fields(code, keys, values, body, timeout_ms)

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.ext_fields = self.signer.sign_ext(cmd.ext_fields, cmd.body)
        super().invoke_oneway(cmd)


def connection_factory(signer: Signer | None) -> Callable[..., Connection]:
    """The class (or partial) a client builds its connections with."""
    if signer is None:
        return Connection

    def make(*args: Any, **kwargs: Any) -> Connection:
        return SigningConnection(signer, *args, **kwargs)

    return make
