"""Reports over the whole cluster (mqadmin statsAll, exportMetadata, exportConfigs,
exportMetrics): many requests per topic or broker, assembled into one answer."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from apogee.admin.base import Tick
from apogee.admin.brokers import BrokerAdmin, _first_tps
from apogee.admin.tracks import TrackAdmin
from apogee.common import constants as c
from apogee.errors import ApogeeError
from apogee.remoting.codes import CURRENT_VERSION_DESC

# Stats item names of RocketMQ's BrokerStatsManager that statsAll reads (315).
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"

# The broker settings exportConfigs keeps (ExportConfigsCommand.needBrokerProprties).
EXPORTED_BROKER_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable", "traceOn",
    "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)


@dataclass
class TopicGroupStats:
    """A row of mqadmin statsAll: a topic and one consumer group of it (none: ``group`` "")."""

    topic: str
    group: str
    accumulation: int
    in_tps: float
    out_tps: float
    in_today: int
    out_today: int | None  # None: the topic has no consumer


def _day_sum(stats: dict[str, Any]) -> int:
    """RocketMQ's compute24HourSum: the day window's sum, else the hour's, else the minute's."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        total = int((stats.get(window) or {}).get("sum") or 0)
        if total:
            return total
    return 0


def _minute_tps(stats: dict[str, Any]) -> float:
    return float((stats.get("statsMinute") or {}).get("tps") or 0.0)


def _is_user_topic(topic: str, special: bool) -> bool:
    if topic in c.SYSTEM_TOPICS or topic.startswith(c.SYSTEM_TOPIC_PREFIX):
        return False
    return special or not topic.startswith((c.RETRY_GROUP_TOPIC_PREFIX, c.DLQ_GROUP_TOPIC_PREFIX))


class ReportAdmin(TrackAdmin, BrokerAdmin):
    async def _stats_sum(self, addrs: list[str], name: str, key: str) -> tuple[float, int]:
        tps, today = 0.0, 0
        for addr in addrs:
            try:
                data = await self.broker_stats(addr, name, key)
            except ApogeeError:
                continue  # RocketMQ skips brokers without the item
            tps += _minute_tps(data)
            today += _day_sum(data)
        return tps, today

    async def stats_all(self, topic: str | None = None, active_only: bool = False,
                        tick: Tick | None = None) -> list[TopicGroupStats]:
        """mqadmin statsAll: per topic (no retry or DLQ topic) and consumer group, the
        accumulation (208), in/out TPS and today's counts (315), consumers found with 300."""
        topics = [t for t in await self.topic_list()
                  if not t.startswith((c.RETRY_GROUP_TOPIC_PREFIX, c.DLQ_GROUP_TOPIC_PREFIX))
                  and (topic is None or t == topic)]
        rows: list[TopicGroupStats] = []
        for i, name in enumerate(topics):
            if tick:
                tick(i, len(topics))
            try:
                addrs = sorted((await self.masters(name)).values())
                groups = await self.consumed_by(name)
            except ApogeeError:
                continue
            in_tps, in_today = await self._stats_sum(addrs, TOPIC_PUT_NUMS, name)
            if not groups and (not active_only or in_today > 0):
                rows.append(TopicGroupStats(name, "", 0, in_tps, 0.0, in_today, None))
            for group in groups:
                out_tps, out_today = await self._stats_sum(addrs, GROUP_GET_NUMS, f"{name}@{group}")
                try:
                    stats = await self.consume_stats(group, name)
                    acc = max(0, sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values()))
                except ApogeeError:
                    acc = 0
                if not active_only or in_today > 0 or out_today > 0:
                    rows.append(TopicGroupStats(name, group, acc, in_tps, out_tps, in_today, out_today))
        if tick:
            tick(len(topics), len(topics))
        return rows

    async def _user_tables(self, addr: str, special: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """GET_ALL_TOPIC_CONFIG (21) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) without system
        topics and groups (RocketMQ's getUserTopicConfig / getUserSubscriptionGroup)."""
        topics = {k: v for k, v in (await self.topic_configs(addr)).items() if _is_user_topic(k, special)}
        groups = {k: v for k, v in (await self.groups_on(addr)).items() if not k.startswith(c.CID_RMQ_SYS_PREFIX)}
        return topics, groups

    async def export_metadata(self, cluster: str | None, broker_addr: str | None, special: bool = False
                              ) -> dict[str, Any]:
        """mqadmin exportMetadata: user topics and groups, queue numbers summed over brokers."""
        topics: dict[str, dict[str, Any]] = {}
        groups: dict[str, dict[str, Any]] = {}
        for addr in await self.targets(broker_addr, cluster):
            t_table, g_table = await self._user_tables(addr, special)
            for name, config in t_table.items():
                seen = topics.get(name)
                if seen is not None:
                    config = {**config, "readQueueNums": seen["readQueueNums"] + config.get("readQueueNums", 0),
                              "writeQueueNums": seen["writeQueueNums"] + config.get("writeQueueNums", 0)}
                topics[name] = config
            for name, config in g_table.items():
                seen = groups.get(name)
                if seen is not None:
                    config = {**config, "retryQueueNums": seen["retryQueueNums"] + config.get("retryQueueNums", 0)}
                groups[name] = config
        return {"topicConfigTable": topics, "subscriptionGroupTable": groups, "exportTime": int(time.time() * 1000)}

    async def export_configs(self, cluster: str) -> dict[str, Any]:
        """mqadmin exportConfigs: the chosen settings of each master, and the cluster's scale."""
        view = await self.cluster_info()
        masters = await self.cluster_masters(cluster)
        configs = {}
        for name, addr in sorted(masters.items()):
            props = await self.broker_config(addr)
            configs[props.get("brokerName", name)] = {k: props[k] for k in EXPORTED_BROKER_KEYS if k in props}
        slaves = sum(len([b for b in view.brokers[n].broker_addrs if b != c.MASTER_ID]) for n in masters)
        scale = {"namesrvSize": len(self.namesrv_addrs), "masterBrokerSize": len(masters), "slaveBrokerSize": slaves}
        return {"brokerConfigs": configs, "clusterScale": scale}

    async def export_metrics(self, cluster: str) -> dict[str, Any]:
        """mqadmin exportMetrics: per master its runtime environment, quotas (disk ratios,
        TPS, today's counts, topic and group counts) and client versions."""
        report: dict[str, Any] = {}
        total_tps: dict[str, float] = {}
        total_day: dict[str, int] = {}
        for name, addr in sorted((await self.cluster_masters(cluster)).items()):
            info = await self.broker_runtime_info(addr)
            props = await self.broker_config(addr)
            topics, groups = await self._user_tables(addr, False)
            in_tps, out_tps = _first_tps(info.get("putTps")), _first_tps(info.get("getTransferedTps"))
            put_day = int(info.get("msgPutTotalTodayNow") or 0) - int(info.get("msgPutTotalTodayMorning") or 0)
            get_day = int(info.get("msgGetTotalTodayNow") or 0) - int(info.get("msgGetTotalTodayMorning") or 0)
            clients = set()
            for group in groups:
                try:
                    for conn in (await self.consumer_connection(group, addr)).clients:
                        clients.add(f"{conn.get('language')}%{conn.get('version')}")
                except ApogeeError:
                    pass
            report[name] = {
                "runtimeEnv": {"cpuNum": props.get("clientCallbackExecutorThreads"),
                               "totalMemKBytes": info.get("totalMemKBytes")},
                "runtimeQuota": {
                    "diskRatio": {"commitLogDiskRatio": info.get("commitLogDiskRatio"),
                                  "consumeQueueDiskRatio": info.get("consumeQueueDiskRatio")},
                    "tps": {"normalInTps": in_tps, "normalOutTps": out_tps},
                    "msgCount": {"normalOneDayInNum": put_day, "normalOneDayOutNum": get_day},
                    "topicSize": {"normalTopicSize": len(topics)},
                    "groupSize": {"normalGroupSize": len(groups)},
                },
                "runtimeVersion": {"rocketmqVersion": CURRENT_VERSION_DESC, "clientInfo": sorted(clients)},
            }
            total_tps["totalInTps"] = total_tps.get("totalInTps", 0.0) + in_tps
            total_tps["totalOutTps"] = total_tps.get("totalOutTps", 0.0) + out_tps
            total_day["normalOneDayInNum"] = total_day.get("normalOneDayInNum", 0) + put_day
            total_day["normalOneDayOutNum"] = total_day.get("normalOneDayOutNum", 0) + get_day
        return {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}
