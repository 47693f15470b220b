"""The broker's ``/metrics``: rocketmq-exporter's names and labels, and Apogee's own.

rocketmq-exporter (apache/rocketmq-exporter, ``collector/RMQMetricsCollector.java`` for the
names and labels, ``task/MetricsCollectTask.java`` for how each figure is computed) asks every
broker with admin requests once a minute; the same figures are served here from the broker
itself, with the exporter's names, label names and value meanings, so dashboards built on the
exporter keep working against one Apogee broker scraped directly:

* 202 topic offsets: ``rocketmq_producer_offset`` (sum of the write queues' max offsets),
  ``rocketmq_topic_retry_offset`` for ``%RETRY%`` topics, ``rocketmq_topic_dlq_offset``
  (label ``group``, the topic without ``%DLQ%``);
* 208 consume stats for each group consuming each topic (not DLQ topics):
  ``rocketmq_group_diff`` / ``rocketmq_group_retrydiff`` (clustering groups; labels ``group``,
  ``topic``, ``countOfOnlineConsumers``, ``msgModel`` = the MessageModel ordinal, 1),
  ``rocketmq_consumer_offset`` (sum of committed offsets), ``rocketmq_group_count`` (online
  consumers; ``caddr``/``localaddr``: their addresses and client ids),
  ``rocketmq_group_get_latency_by_storetime`` (ms: the oldest unconsumed message's age, the
  largest over the queues);
* 315 statistics, minute window, TPS rounded to 2 decimals as the exporter does:
  ``rocketmq_producer_tps``/``_message_size`` (TOPIC_PUT_NUMS/SIZE), ``rocketmq_consumer_tps``/
  ``_message_size`` (GROUP_GET_NUMS/SIZE), ``rocketmq_send_back_nums`` (SNDBCK_PUT_NUMS, the
  minute's sum), ``rocketmq_broker_tps``/``_qps`` (BROKER_PUT/GET_NUMS); retry and DLQ topics
  skipped as the exporter skips them;
* 328: ``rocketmq_producer_count``; 28: ``rocketmq_brokeruntime_*`` for the runtime keys Apogee
  states (the exporter's labels: ``brokerIP`` the broker's address, ``brokerHost`` empty,
  ``des`` the version name, ``boottime``, ``broker_version``).  Byte figures the exporter
  reads from human-readable strings (``commitLogDirCapacity``, ``remainHowManyDataToFlush``)
  are exact bytes here.

Apogee's own (``apogee_*``): exact monotonic put/get counters, consumer lag per queue in
messages and seconds, store disk use, flush and dispatch latency histograms, connections.

``BrokerMetrics.parts`` runs on the broker's loop, a step per callback
(``common/metrics_http``); it reads, never writes.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

from apogee.broker.clients import ClientManager
from apogee.broker.consume_progress import ConsumeProgress
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.persistence import TableWriter
from apogee.broker.stats import BROKER_GET_NUMS, BROKER_PUT_NUMS, SNDBCK_PUT_NUMS, TPS_SECONDS, BrokerStats
from apogee.broker.topics import TopicConfigManager
from apogee.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from apogee.common.metrics_http import MetricSpec, Row, histogram_row, remoting_rows, remoting_specs
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import CURRENT_VERSION, CURRENT_VERSION_DESC
from apogee.remoting.server import RemotingServer
from apogee.store.message_store import MessageStore

CLUSTERING = "1"  # MessageModel.CLUSTERING.ordinal(), the exporter's msgModel label
STEP = 200  # topics, or (group, topic) pairs, read in one loop callback of a scrape

_TOPIC = ("cluster", "broker", "topic")
_GROUP = ("cluster", "broker", "topic", "group")
_BROKER = ("cluster", "brokerIP", "broker")
_DIFF = ("group", "topic", "countOfOnlineConsumers", "msgModel")
_RUNTIME = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")
_OWN = ("cluster", "broker")
_QUEUE = ("cluster", "broker", "group", "topic", "queue")


def _g(help_: str, labels: tuple[str, ...]) -> MetricSpec:
    return MetricSpec("gauge", help_, labels)


def _c(help_: str, labels: tuple[str, ...]) -> MetricSpec:
    return MetricSpec("counter", help_, labels)


# rocketmq_brokeruntime_<suffix>: the runtime-info key behind it (GET_BROKER_RUNTIME_INFO).
RUNTIME_KEYS = {
    "msg_put_total_today_now": "msgPutTotalTodayNow",
    "msg_gettotal_today_now": "msgGetTotalTodayNow",
    "msg_puttotal_todaymorning": "msgPutTotalTodayMorning",
    "msg_gettotal_todaymorning": "msgGetTotalTodayMorning",
    "msg_puttotal_yesterdaymorning": "msgPutTotalYesterdayMorning",
    "msg_gettotal_yesterdaymorning": "msgGetTotalYesterdayMorning",
    "put_message_size_total": "putMessageSizeTotal",
    "put_message_average_size": "putMessageAverageSize",
    "putmessage_times_total": "putMessageTimesTotal",
    "putmessage_entire_time_max": "putMessageEntireTimeMax",
    "put_latency_99": "putLatency99",
    "put_latency_999": "putLatency999",
}
# rocketmq_brokeruntime_<prefix><seconds>: the TPS figure behind it.
RUNTIME_TPS = {
    "put_tps": "putTps", "getfound_tps": "getFoundTps", "getmiss_tps": "getMissTps",
    "gettotal_tps": "getTotalTps", "gettransfered_tps": "getTransferedTps",
}
# rocketmq_brokeruntime_pmdt_<suffix>, in the order of stats.DISTRIBUTE_DESC.
PMDT = ("0ms", "0to10ms", "10to50ms", "50to100ms", "100to200ms", "200to500ms", "500to1s", "1to2s", "2to3s",
        "3to4s", "4to5s", "5to10s", "10stomore")
RUNTIME_STORE = (
    "dispatch_behind_bytes", "earliest_message_timestamp", "commitlog_maxoffset", "commitlog_minoffset",
    "remain_howmanydata_toflush", "commitlog_disk_ratio", "consumequeue_disk_ratio",
    "commitlogdir_capacity_free", "commitlogdir_capacity_total",
)


def _runtime_specs() -> dict[str, MetricSpec]:
    names = [*RUNTIME_KEYS, *RUNTIME_STORE, *(f"pmdt_{s}" for s in PMDT),
             *(f"{p}{s}" for p in RUNTIME_TPS for s in TPS_SECONDS)]
    return {f"rocketmq_brokeruntime_{n}": _g(f"GET_BROKER_RUNTIME_INFO figure ({n}).", _RUNTIME) for n in names}


SPECS: dict[str, MetricSpec] = {
    # rocketmq-exporter's
    "rocketmq_producer_offset": _g("Sum of the topic's write queues' max offsets (202).", _TOPIC),
    "rocketmq_topic_retry_offset": _g("Sum of a %RETRY% topic's max offsets.", _TOPIC),
    "rocketmq_topic_dlq_offset": _g("Sum of a group's %DLQ% topic's max offsets.", ("cluster", "broker", "group")),
    "rocketmq_producer_tps": _g("Messages put to the topic per second, last minute.", _TOPIC),
    "rocketmq_producer_message_size": _g("Bytes put to the topic per second, last minute.", _TOPIC),
    "rocketmq_consumer_tps": _g("Messages the group got from the topic per second, last minute.", _GROUP),
    "rocketmq_consumer_message_size": _g("Bytes the group got from the topic per second, last minute.", _GROUP),
    "rocketmq_send_back_nums": _g("Messages the group sent back (to retry) in the last minute.", _GROUP),
    "rocketmq_consumer_offset": _g("Sum of the group's committed offsets on the topic.", _GROUP),
    "rocketmq_group_get_latency_by_storetime": _g(
        "Age in ms of the oldest message the group has not consumed (largest over the queues).", _GROUP),
    "rocketmq_group_diff": _g("Messages the (clustering) group has not consumed on the topic.", _DIFF),
    "rocketmq_group_retrydiff": _g("Messages the group has not consumed on its %RETRY% topic.", _DIFF),
    "rocketmq_group_count": _g("Online consumers of the group.", ("caddr", "localaddr", "group")),
    "rocketmq_producer_count": _g("Online producers of the group.", ("cluster", "broker", "group")),
    "rocketmq_broker_tps": _g("Messages put to the broker per second, last minute.", _BROKER),
    "rocketmq_broker_qps": _g("Messages got from the broker per second, last minute.", _BROKER),
    **_runtime_specs(),
    # Apogee's
    "apogee_broker_put_messages_total": _c("Messages stored by sends since the broker started.", _OWN),
    "apogee_broker_put_bytes_total": _c("Bytes of the stored records of those messages.", _OWN),
    "apogee_broker_put_failures_total": _c("Sends the store refused.", _OWN),
    "apogee_broker_get_messages_total": _c("Messages handed to consumers by pulls since the broker started.", _OWN),
    "apogee_broker_pulls_found_total": _c("Pulls that found messages.", _OWN),
    "apogee_broker_pulls_missed_total": _c("Pulls that found none.", _OWN),
    "apogee_topic_put_messages_total": _c("Messages stored in the topic since the broker started.", _TOPIC),
    "apogee_topic_put_bytes_total": _c("Bytes stored in the topic since the broker started.", _TOPIC),
    "apogee_group_get_messages_total": _c("Messages the group got from the topic since the broker started.", _GROUP),
    "apogee_group_get_bytes_total": _c("Bytes the group got from the topic since the broker started.", _GROUP),
    "apogee_group_send_back_total": _c("Messages the group sent back since the broker started.", _GROUP),
    "apogee_consumer_lag_messages": _g("Messages of the queue the group has not consumed (committed).", _QUEUE),
    "apogee_consumer_lag_seconds": _g("Age of the first message of the queue the group has not consumed.", _QUEUE),
    "apogee_topics": _g("Topics in the broker's topic table.", _OWN),
    "apogee_producers": _g("Online producer connections.", _OWN),
    "apogee_consumers": _g("Online consumer connections.", _OWN),
    "apogee_store_disk_used_ratio": _g("Used fraction of the store's disk, as the disk guard last saw it.", _OWN),
    "apogee_store_commitlog_bytes": _g("CommitLog bytes held (max offset - min offset).", _OWN),
    "apogee_store_dispatch_behind_bytes": _g("CommitLog bytes not yet dispatched to ConsumeQueues.", _OWN),
    "apogee_store_flush_seconds": MetricSpec("histogram", "CommitLog fdatasync latency.", _OWN),
    "apogee_store_dispatch_latency_seconds": MetricSpec(
        "histogram", "Store time to ConsumeQueue (visible to consumers) of each dispatch pass' last record.", _OWN),
    "apogee_table_write_failures_total": _c("Failed writes of topics/groups/offsets tables.", _OWN),
    **remoting_specs(_OWN),
}


def _fixed(value: float) -> float:
    """The exporter's Utils.getFixedDouble: two decimals."""
    return round(value, 2)


class BrokerMetrics:
    """Reads the broker's state into rows (on its loop, in steps); ``SPECS`` declares them."""

    def __init__(
        self, *, cluster: str, broker: str, address: str, store: MessageStore, topics: TopicConfigManager,
        offsets: ConsumerOffsetManager, clients: ClientManager, stats: BrokerStats, server: RemotingServer,
        table_writer: TableWriter,
    ) -> None:
        self._cluster, self._broker, self._address = cluster, broker, address
        self._store = store
        self._topics = topics
        self._clients = clients
        self._stats = stats
        self._server = server
        self._table_writer = table_writer
        self._progress = ConsumeProgress(store, topics, offsets, clients)

    def parts(self) -> Iterator[list[Row]]:
        """The snapshot in steps (``metrics_http.Parts``): topics and consumer groups
        ``STEP`` at a time, then the statistics, runtime and store figures."""
        now_ms = int(time.time() * 1000)
        topics = list(self._topics.table.items())
        for i in range(0, len(topics), STEP):
            yield self._topic_rows(topics[i:i + STEP])
        pairs = sorted(self._progress.pairs())
        online: dict[str, tuple[str, str, str]] = {}
        for i in range(0, len(pairs), STEP):
            yield self._consumer_rows(pairs[i:i + STEP], online, now_ms)
        rows: list[Row] = [("rocketmq_group_count", (caddr, localaddr, group), int(count))
                           for group, (count, caddr, localaddr) in online.items()]
        self._stats_rows(rows)
        self._runtime_rows(rows, now_ms)
        self._own_rows(rows)
        yield rows

    def _topic_rows(self, topics: list[tuple[str, TopicConfigData]]) -> list[Row]:
        rows: list[Row] = []
        cluster, broker, store = self._cluster, self._broker, self._store
        for topic, config in topics:
            total = sum(max(0, store.get_max_offset_in_queue(topic, q)) for q in range(config.write_queue_nums))
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                rows.append(("rocketmq_topic_retry_offset", (cluster, broker, topic), total))
            elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                rows.append(("rocketmq_topic_dlq_offset",
                             (cluster, broker, topic.removeprefix(DLQ_GROUP_TOPIC_PREFIX)), total))
            else:
                rows.append(("rocketmq_producer_offset", (cluster, broker, topic), total))
        return rows

    def _consumer_rows(
        self, pairs: list[tuple[str, str]], online: dict[str, tuple[str, str, str]], now_ms: int
    ) -> list[Row]:
        """Rows of each (group, topic); ``online`` collects each group's online consumers."""
        rows: list[Row] = []
        cluster, broker = self._cluster, self._broker
        for group, topic in pairs:
            if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                continue
            config = self._topics.get(topic)
            progress = self._progress.of(group, topic, config.read_queue_nums) if config is not None else None
            if group not in online:
                online[group] = self._online(group)
            if progress is None:
                continue
            count, caddr, localaddr = online[group]
            info = self._clients.consumer_group(group)
            clustering = info is None or info.message_model == "CLUSTERING"
            rows.append(("rocketmq_consumer_offset", (cluster, broker, topic, group),
                         sum(p.consumer_offset for p in progress)))
            worst_ms = 0
            for p in progress:
                lag_ms = self._progress.lag_ms(topic, p, now_ms)
                worst_ms = max(worst_ms, lag_ms)
                labels = (cluster, broker, group, topic, str(p.queue_id))
                rows.append(("apogee_consumer_lag_messages", labels, p.lag))
                rows.append(("apogee_consumer_lag_seconds", labels, lag_ms / 1000))
            if clustering:
                retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                diff = "rocketmq_group_retrydiff" if retry else "rocketmq_group_diff"
                rows.append((diff, (group, topic, count, CLUSTERING), sum(p.lag for p in progress)))
                rows.append(("rocketmq_group_get_latency_by_storetime", (cluster, broker, topic, group), worst_ms))
        return rows

    def _online(self, group: str) -> tuple[str, str, str]:
        """(count, client addresses, client ids) of the group's online consumers."""
        info = self._clients.consumer_group(group)
        channels = list(info.channels.values()) if info is not None else []
        addrs = sorted("{}:{}".format(*getattr(ch.conn, "peer", ("", 0))) for ch in channels)
        return str(len(channels)), ",".join(addrs), ",".join(sorted(ch.client_id for ch in channels))

    def _stats_rows(self, rows: list[Row]) -> None:
        cluster, broker, stats = self._cluster, self._broker, self._stats
        labels: tuple[str, ...]
        for topic, nums, size in stats.topic_puts():
            labels = (cluster, broker, topic)
            rows.append(("apogee_topic_put_messages_total", labels, nums.value))
            rows.append(("apogee_topic_put_bytes_total", labels, size.value))
            if not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                rows.append(("rocketmq_producer_tps", labels, _fixed(nums.snapshot(0).tps)))
                rows.append(("rocketmq_producer_message_size", labels, _fixed(size.snapshot(0).tps)))
        for group, topic, nums, size in stats.group_gets():
            labels = (cluster, broker, topic, group)
            rows.append(("apogee_group_get_messages_total", labels, nums.value))
            rows.append(("apogee_group_get_bytes_total", labels, size.value))
            if not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                rows.append(("rocketmq_consumer_tps", labels, _fixed(nums.snapshot(0).tps)))
                rows.append(("rocketmq_consumer_message_size", labels, _fixed(size.snapshot(0).tps)))
        for key, item in stats.items[SNDBCK_PUT_NUMS].items():
            topic, _, group = key.partition("@")
            labels = (cluster, broker, topic, group)
            rows.append(("apogee_group_send_back_total", labels, item.value))
            if not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                rows.append(("rocketmq_send_back_nums", labels, item.snapshot(0).sum))
        for name, item_name in (("rocketmq_broker_tps", BROKER_PUT_NUMS), ("rocketmq_broker_qps", BROKER_GET_NUMS)):
            broker_item = stats.find(item_name, cluster)
            if broker_item is not None:
                rows.append((name, (cluster, self._address, broker), _fixed(broker_item.snapshot(0).tps)))
        for group in self._clients.producers:
            rows.append(("rocketmq_producer_count", (cluster, broker, group),
                         len(self._clients.producer_channels(group))))

    def _runtime_rows(self, rows: list[Row], now_ms: int) -> None:
        stats, store = self._stats, self._store
        labels = (self._cluster, self._address, "", CURRENT_VERSION_DESC, str(stats.boot_ms), str(CURRENT_VERSION))
        info = stats.runtime_info(now_ms)
        for suffix, key in RUNTIME_KEYS.items():
            rows.append((f"rocketmq_brokeruntime_{suffix}", labels, float(info[key])))
        for suffix, key in RUNTIME_TPS.items():
            for seconds in TPS_SECONDS:
                tps = stats.tps(key, seconds)
                if tps is not None:
                    rows.append((f"rocketmq_brokeruntime_{suffix}{seconds}", labels, tps))
        for suffix, count in zip(PMDT, stats.last_minute_distribution(), strict=True):
            rows.append((f"rocketmq_brokeruntime_pmdt_{suffix}", labels, count))
        figures: dict[str, float] = {
            "dispatch_behind_bytes": store.dispatch_behind_bytes,
            "earliest_message_timestamp": store.get_earliest_message_time(),
            "commitlog_maxoffset": store.max_phy_offset,
            "commitlog_minoffset": store.min_phy_offset,
            "remain_howmanydata_toflush": max(0, store.max_phy_offset - store.flushed_phy_offset),
        }
        try:
            disk = shutil.disk_usage(store.config.root)
        except OSError:
            disk = None
        if disk is not None and disk.total:
            used = (disk.total - disk.free) / disk.total
            figures.update(commitlog_disk_ratio=used, consumequeue_disk_ratio=used,
                           commitlogdir_capacity_free=disk.free, commitlogdir_capacity_total=disk.total)
        for suffix, value in figures.items():
            rows.append((f"rocketmq_brokeruntime_{suffix}", labels, value))

    def _own_rows(self, rows: list[Row]) -> None:
        own = (self._cluster, self._broker)
        stats, store = self._stats, self._store
        rows += [
            ("apogee_broker_put_messages_total", own, stats.put_times),
            ("apogee_broker_put_bytes_total", own, stats.put_size),
            ("apogee_broker_put_failures_total", own, stats.put_failed),
            ("apogee_broker_get_messages_total", own, stats.get_total),
            ("apogee_broker_pulls_found_total", own, stats.get_found),
            ("apogee_broker_pulls_missed_total", own, stats.get_miss),
            ("apogee_topics", own, len(self._topics.table)),
            ("apogee_producers", own, sum(len(chs) for chs in self._clients.producers.values())),
            ("apogee_consumers", own, sum(len(i.channels) for i in self._clients.consumers.values())),
            ("apogee_store_disk_used_ratio", own, store.cleaner.last_usage / 100),
            ("apogee_store_commitlog_bytes", own, store.max_phy_offset - store.min_phy_offset),
            ("apogee_store_dispatch_behind_bytes", own, store.dispatch_behind_bytes),
            histogram_row("apogee_store_flush_seconds", own, store.flush_latency),
            histogram_row("apogee_store_dispatch_latency_seconds", own, store.dispatch_latency),
            ("apogee_table_write_failures_total", own, self._table_writer.failures),
            *remoting_rows(own, len(self._server.connections), self._server.counters),
        ]
