"""Broker administration (mqadmin brokerStatus, getBrokerConfig, updateBrokerConfig,
cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog, clusterList) on RocketMQ's wire:
28, 26, 25, 306, 316, 329, 305 and 315 to brokers, 106 to the NameServer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apogee.admin.base import AdminBase, Tick, load_object
from apogee.admin.namesrv import parse_properties, properties_body
from apogee.errors import ApogeeError
from apogee.remoting.bodies.admin import decode_runtime_info
from apogee.remoting.codes import RequestCode


@dataclass
class BrokerRow:
    """A row of mqadmin clusterList: one broker address (master or slave) and its figures
    from GET_BROKER_RUNTIME_INFO; ``error`` when the broker did not answer."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    version: str = ""
    in_tps: float = 0.0
    out_tps: float = 0.0
    msg_put_today: int = 0
    msg_get_today: int = 0
    hours: float = 0.0  # age of the earliest stored message
    space: float = 0.0  # commitLogDiskRatio
    error: str = ""


def _first_tps(value: str | None) -> float:
    """The 10-second figure of a "tps10 tps60 tps600" value (blank until sampled)."""
    try:
        return float((value or "").split(" ")[0])
    except ValueError:
        return 0.0


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def broker_row(cluster: str, name: str, broker_id: int, addr: str, info: dict[str, str] | str,
               now_ms: float) -> BrokerRow:
    """The clusterList row of one broker from its runtime info (28), or from the error text
    when it did not answer."""
    row = BrokerRow(cluster, name, broker_id, addr)
    if not isinstance(info, dict):
        row.error = info
        return row
    row.version = info.get("brokerVersionDesc", "")
    row.in_tps, row.out_tps = _first_tps(info.get("putTps")), _first_tps(info.get("getTransferedTps"))
    row.msg_put_today = _int(info.get("msgPutTotalTodayNow")) - _int(info.get("msgPutTotalTodayMorning"))
    row.msg_get_today = _int(info.get("msgGetTotalTodayNow")) - _int(info.get("msgGetTotalTodayMorning"))
    earliest = _int(info.get("earliestMessageTimeStamp"))
    row.hours = (now_ms - earliest) / 3_600_000 if earliest > 0 else 0.0
    try:
        row.space = float(info.get("commitLogDiskRatio") or 0.0)
    except ValueError:
        row.space = 0.0
    return row


class BrokerAdmin(AdminBase):
    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): every key the broker reports, values as strings."""
        resp = await self.call_broker(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return decode_runtime_info(resp.body_bytes())

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): the broker's settings under RocketMQ's names."""
        resp = await self.call_broker(broker_addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties(resp.body_bytes().decode(errors="replace"))

    async def update_broker_config(self, broker_addr: str, key: str, value: str) -> None:
        """UPDATE_BROKER_CONFIG (25): the body is Java properties text, ``key=value``."""
        await self.call_broker(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=properties_body({key: value}))

    async def clean_expired_cq(self, broker_addr: str) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306)."""
        await self.call_broker(broker_addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)

    async def clean_unused_topic(self, broker_addr: str) -> None:
        """CLEAN_UNUSED_TOPIC (316)."""
        await self.call_broker(broker_addr, RequestCode.CLEAN_UNUSED_TOPIC)

    async def delete_expired_commitlog(self, broker_addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG (329)."""
        await self.call_broker(broker_addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    async def system_topics(self, broker_addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)."""
        resp = await self.call_broker(broker_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        return [str(t) for t in load_object(resp.body_bytes()).get("topicList") or []]

    async def broker_stats(self, broker_addr: str, name: str, key: str) -> dict[str, Any]:
        """VIEW_BROKER_STATS_DATA (315): BrokerStatsData (statsMinute/Hour/Day: sum, tps, avgpt)."""
        resp = await self.call_broker(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                      {"statsName": name, "statsKey": key})
        return load_object(resp.body_bytes())

    async def cluster_rows(self, cluster: str | None = None, tick: Tick | None = None) -> list[BrokerRow]:
        """mqadmin clusterList: every registered broker address, slaves (id > 0) included, with
        its version, TPS in/out, today's counts, store age and disk ratio (28 to each)."""
        view = await self.cluster_info()
        addrs = [
            (cl, name, bid, addr)
            for cl in sorted(view.clusters) if cluster is None or cl == cluster
            for name in sorted(view.clusters[cl]) if name in view.brokers
            for bid, addr in sorted(view.brokers[name].broker_addrs.items())
        ]
        now_ms = time.time() * 1000
        rows = []
        for i, (cl, name, bid, addr) in enumerate(addrs):
            info: dict[str, str] | str
            try:
                info = await self.broker_runtime_info(addr)
            except ApogeeError as exc:
                info = str(exc)
            rows.append(broker_row(cl, name, bid, addr, info, now_ms))
            if tick:
                tick(i + 1, len(addrs))
        return rows

    async def runtime_infos(self, addrs: Iterable[str]) -> dict[str, dict[str, str] | str]:
        """GET_BROKER_RUNTIME_INFO (28) of every address at once: address -> its keys, or the
        error text of a broker that did not answer (one broker down does not hide the rest)."""

        async def one(addr: str) -> dict[str, str] | str:
            try:
                return await self.broker_runtime_info(addr)
            except ApogeeError as exc:
                return str(exc)

        unique = list(dict.fromkeys(addrs))
        return dict(zip(unique, await asyncio.gather(*(one(a) for a in unique)), strict=True))
