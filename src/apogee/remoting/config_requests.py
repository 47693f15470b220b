"""The GET/UPDATE config requests of a server: broker 26/25 (GET/UPDATE_BROKER_CONFIG) and
NameServer 319/318 (GET/UPDATE_NAMESRV_CONFIG), one handler for both.

GET answers every setting as ``key=value`` lines (RocketMQ's getAllConfigsFormatString); the
broker's answer also carries the configuration's data version in the ``version`` header.
UPDATE applies the properties text of the body through ``LiveConfig`` (which keys may change,
and why the others may not) and persists it before answering.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import orjson

from apogee.common.config import parse_properties
from apogee.common.config_update import LiveConfig
from apogee.remoting.codes import ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.server import RequestDispatcher

log = logging.getLogger("apogee.config")


class ConfigRequestProcessor:
    """``on_change(keys)`` is told the keys a request changed, after they are applied."""

    def __init__(
        self,
        live: LiveConfig,
        *,
        get_code: int,
        update_code: int,
        version_header: bool,
        on_change: Callable[[set[str]], None] | None = None,
    ) -> None:
        self.live = live
        self._codes = (get_code, update_code)
        self._version_header = version_header
        self._on_change = on_change

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(self._codes[0], self.get_config)
        dispatcher.register(self._codes[1], self.update_config)

    def get_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        ext = {"version": orjson.dumps(self.live.version()).decode()} if self._version_header else None
        return req.response(ResponseCode.SUCCESS, body=self.live.text().encode(), ext_fields=ext)

    async def update_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """No body changes nothing (SUCCESS, as RocketMQ).  A refused request changes nothing:
        the remark names every key refused and why (NO_PERMISSION when only a restart could
        change them, as RocketMQ answers its black list; SYSTEM_ERROR for unknown keys and bad
        values).  A change applied but not written answers SYSTEM_ERROR saying so."""
        live = self.live
        body = req.body_bytes()
        if not body:
            return req.response(ResponseCode.SUCCESS)
        try:
            values = parse_properties(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"the properties text is not UTF-8: {exc}")
        update = live.plan(values)
        host, port = getattr(conn, "peer", ("?", 0))
        peer = f"{host}:{port}"
        if update.problems:
            log.warning("config update from %s refused: %s", peer, "; ".join(update.problems))
            code = ResponseCode.NO_PERMISSION if update.restart_only else ResponseCode.SYSTEM_ERROR
            return req.response(code, "; ".join(update.problems))
        if not update.changes:
            return req.response(ResponseCode.SUCCESS)
        live.apply(update, int(time.time() * 1000))
        log.info("config changed by %s: %s", peer, update.changes)
        if self._on_change is not None:
            self._on_change(set(update.changes))
        try:
            await asyncio.get_running_loop().run_in_executor(None, live.persist, update.changes)
        except OSError as exc:
            log.error("config change made but writing %s failed: %s", live.path, exc)
            return req.response(
                ResponseCode.SYSTEM_ERROR,
                f"the change is made but writing {live.path} failed ({type(exc).__name__}: {exc}); "
                "a restart would not keep it",
            )
        return req.response(ResponseCode.SUCCESS)
