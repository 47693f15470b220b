"""A slave's copy of its master's metadata (RocketMQ ``SlaveSynchronize``).

Every 10 s, the first time 3 s after start (as RocketMQ's ``syncAll``), the slave asks the
master's remoting address, learnt from the NameServers' answer to REGISTER_BROKER
(``masterAddr``), for

* 21 GET_ALL_TOPIC_CONFIG: the whole topic table replaces the slave's when its dataVersion
  differs;
* 43 GET_ALL_CONSUMER_OFFSET: each topic@group the master holds replaces the slave's;
* 45 GET_ALL_DELAY_OFFSET: the delay levels' progress (delayOffset.json);
* 201 GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the whole group table, when its dataVersion differs.

Everything copied is written to the slave's own files, so a restarted slave (or one switched
to master by hand) has it.  Bodies are parsed leniently (``common.lenient_json``), so a
RocketMQ 4.9 master's fastjson answers (unquoted integer keys) are read too.  A master that
does not answer ends the round: that is logged once, and the next round tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.persistence import TableFile, TableWriter
from apogee.broker.schedule import ScheduleService
from apogee.broker.subscriptions import SubscriptionGroupManager
from apogee.broker.topics import TopicConfigManager
from apogee.common.lenient_json import loads
from apogee.errors import ApogeeError
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand

log = logging.getLogger("apogee.broker.ha.sync")

FIRST_DELAY_S = 3.0
PERIOD_S = 10.0
TIMEOUT_MS = 3000  # RocketMQ BrokerOuterAPI's getAll* timeout


class MasterUnreachable(Exception):
    """The master did not answer (closed, refused or timed out): the round ends here."""


class SlaveSynchronize:
    """The slave's periodic copy of its master's tables; ``master_addr`` is set from each
    registration answer that names the master."""

    def __init__(
        self,
        client: RemotingClient,
        *,
        own_addr: Callable[[], str],
        topics: TopicConfigManager,
        subscriptions: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        schedule: ScheduleService,
        table_writer: TableWriter,
    ) -> None:
        self._client = client
        self._own_addr = own_addr
        self._topics = topics
        self._subscriptions = subscriptions
        self._offsets = offsets
        self._schedule = schedule
        self._writer = table_writer
        self.master_addr: str | None = None
        self.rounds = 0  # completed rounds (every table copied)
        self._failing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="apogee-slave-sync")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        await asyncio.sleep(FIRST_DELAY_S)
        while True:
            try:
                await self.sync_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("copying the master's metadata failed")
            await asyncio.sleep(PERIOD_S)

    async def sync_all(self) -> bool:
        """One round: the four tables, in RocketMQ's order.  True when the master answered
        (a table it refused, or sent unreadable, is logged and left as it was)."""
        master = self.master_addr
        if master is None or master == self._own_addr():
            return False
        steps: list[tuple[int, Callable[[dict[str, Any]], TableFile | None]]] = [
            (RequestCode.GET_ALL_TOPIC_CONFIG, self._copy_topics),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, self._copy_offsets),
            (RequestCode.GET_ALL_DELAY_OFFSET, self._copy_delay),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self._copy_groups),
        ]
        changed: list[TableFile] = []
        try:
            for code, apply in steps:
                obj = await self._ask(master, code)
                if obj is None:
                    continue
                try:
                    f = apply(obj)
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    log.warning("malformed answer of master %s to request %d: %r", master, code, exc)
                    continue
                if f is not None:
                    changed.append(f)
        except MasterUnreachable as exc:
            if not self._failing:
                log.warning("cannot copy metadata from master %s (%s); retrying every %.0f s", master, exc, PERIOD_S)
            self._failing = True
            return False
        if self._failing:
            log.info("copying metadata from master %s again", master)
            self._failing = False
        for f in changed:
            await self._writer.save(f)
        self.rounds += 1
        return True

    def _copy_topics(self, obj: dict[str, Any]) -> TableFile | None:
        if not self._topics.replace_from_master(obj, str(self.master_addr)):
            return None
        log.info("topic table copied from master %s (%d topics)", self.master_addr, len(self._topics.table))
        return self._topics.file

    def _copy_offsets(self, obj: dict[str, Any]) -> TableFile | None:
        return self._offsets.file if self._offsets.merge_from_master(obj) else None

    def _copy_delay(self, obj: dict[str, Any]) -> TableFile | None:
        return self._schedule.file if self._schedule.replace_from_master(obj) else None

    def _copy_groups(self, obj: dict[str, Any]) -> TableFile | None:
        if not self._subscriptions.replace_from_master(obj):
            return None
        log.info("subscription groups copied from master %s", self.master_addr)
        return self._subscriptions.file

    async def _ask(self, master: str, code: int) -> dict[str, Any] | None:
        """The master's answer to ``code`` as a JSON object; None (logged) when it refused or
        sent something unreadable, so one bad table does not stop the others.  Raises
        ``MasterUnreachable`` when it did not answer at all."""
        try:
            resp = await self._client.invoke(master, RemotingCommand.request(code), TIMEOUT_MS)
        except ApogeeError as exc:  # closed, refused, timed out
            raise MasterUnreachable(str(exc)) from None
        if resp.code != ResponseCode.SUCCESS:
            log.warning("master %s refused request %d: %s %s", master, code, resp.code, resp.remark)
            return None
        try:
            obj = loads(resp.body_bytes()) if resp.body else None
        except ValueError as exc:
            log.warning("unreadable answer of master %s to request %d: %s", master, code, exc)
            return None
        if not isinstance(obj, dict):
            log.warning("answer of master %s to request %d is not a JSON object", master, code)
            return None
        return obj
