"""Registering the broker with every NameServer (RocketMQ's BrokerOuterAPI).

At start, every ``registerNameServerPeriod`` (30 s) and whenever the topic table changes,
the broker sends REGISTER_BROKER with its whole topic table to each NameServer in parallel;
one unreachable NameServer never delays the others.  A slave (brokerId > 0) learns its
master's HA address from the answer (``haServerAddr``, RocketMQ ``RegisterBrokerResult``).  On clean shutdown it sends
UNREGISTER_BROKER so clients stop routing to it at once instead of after the 120 s expiry.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable

from apogee.common.aio import wait_event
from apogee.errors import ApogeeError
from apogee.remoting.bodies.route import DataVersion, RegisterBrokerBody, TopicConfigData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.namesrv import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)

log = logging.getLogger("apogee.broker.registration")


class NamesrvRegistrar:
    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: list[str],
        *,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        ha_addr: str,
        timeout_ms: int,
        period_ms: int,
        snapshot: Callable[[], tuple[DataVersion, dict[str, TopicConfigData]]],
        on_master: Callable[[str, str], None] | None = None,
    ) -> None:
        self._client = client
        self.namesrv_addrs = namesrv_addrs
        self._cluster = cluster
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._broker_addr = broker_addr
        self._ha_addr = ha_addr
        self._timeout_ms = timeout_ms
        self._period_ms = period_ms
        self._snapshot = snapshot
        # A slave's: told (master address, master HA address) from each answer naming them.
        self._on_master = on_master
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def register_all(self) -> int:
        """Register with every NameServer; returns how many accepted."""
        version, topics = self._snapshot()
        body = RegisterBrokerBody(version, topics).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self._broker_name,
            broker_addr=self._broker_addr,
            cluster_name=self._cluster,
            ha_server_addr=self._ha_addr,
            broker_id=self._broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        ).encode()
        results = await asyncio.gather(
            *(self._register_one(addr, header, body) for addr in self.namesrv_addrs)
        )
        return sum(results)

    async def _register_one(self, addr: str, header: dict[str, str], body: bytes) -> bool:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            response = await self._client.invoke(addr, request, self._timeout_ms)
        except ApogeeError as exc:
            log.warning("register with NameServer %s failed: %s", addr, exc)
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning("NameServer %s refused registration: %s %s", addr, response.code, response.remark)
            return False
        if self._on_master is not None:
            answer = RegisterBrokerResponseHeader.decode(response.ext_fields)
            if answer.ha_server_addr and answer.master_addr:
                self._on_master(answer.master_addr, answer.ha_server_addr)
        return True

    def trigger(self) -> None:
        """Register again soon (the topic table changed)."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await wait_event(self._wake, self._period_ms / 1000)
            self._wake.clear()
            try:
                await self.register_all()
            except Exception:
                log.exception("periodic registration failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        header = UnRegisterBrokerRequestHeader(
            self._broker_name, self._broker_addr, self._cluster, self._broker_id
        ).encode()

        async def one(addr: str) -> None:
            try:
                await self._client.invoke(
                    addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header)), 3000
                )
            except ApogeeError as exc:
                log.warning("unregister from NameServer %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in self.namesrv_addrs))
