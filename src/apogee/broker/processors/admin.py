"""Queue metadata, message lookup and topic administration (RocketMQ's AdminBrokerProcessor
and QueryMessageProcessor): GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE, topic and group admin.

An admin change (topic or group created, updated or deleted, offsets reset) is on disk
before it is answered, as RocketMQ persists these at once: the table's file is written by the
broker's ``TableWriter`` off the event loop, and a write that fails is answered with the
error (the change stays in memory and the writer keeps retrying).  A request that is refused
changes nothing.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable

import orjson

from apogee.broker.clients import ClientChannel, ClientManager
from apogee.broker.config import BrokerConfig
from apogee.broker.consume_progress import ConsumeProgress
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.persistence import TableFile, TableWriter
from apogee.broker.records import record_at
from apogee.broker.stats import GROUP_GET_NUMS, BrokerStats
from apogee.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupManager, group_config_problem
from apogee.broker.topics import TopicConfigManager, topic_config_problem
from apogee.common.constants import SCHEDULE_TOPIC, SYSTEM_TOPICS
from apogee.common.lenient_json import loads
from apogee.common.validators import is_system_topic, validate_topic
from apogee.errors import HeaderError
from apogee.remoting.bodies.admin import (
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    encode_broker_consume_stats,
    encode_runtime_info,
    encode_topic_stats,
)
from apogee.remoting.bodies.heartbeat import QueueKey, encode_reset_offset_body
from apogee.remoting.bodies.route import TopicConfigData, encode_topic_list
from apogee.remoting.codes import (
    CURRENT_VERSION,
    CURRENT_VERSION_DESC,
    VERSION_V3_0_7_SNAPSHOT,
    LanguageCode,
    RequestCode,
    ResponseCode,
)
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.fields import parse_bool
from apogee.remoting.headers.consumer import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    ViewMessageRequestHeader,
)
from apogee.remoting.server import Processor, RequestDispatcher
from apogee.store.message_store import MessageStore
from apogee.store.time_search import Boundary

SLAVE_READ_ONLY_REMARK = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)

log = logging.getLogger("apogee.broker.admin")

DEFAULT_QUERY_MAX_NUM = 32
MAX_QUEUE_NUMS = 1024
MAX_CQ_QUERY = 1024  # entries one QUERY_CONSUME_QUEUE answers at most
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")  # RocketMQ's TopicFilterType


class AdminProcessor:
    """``topics_changed`` is called after a topic is created or deleted (the NameServers
    should learn it); ``delay_offsets`` answers GET_ALL_DELAY_OFFSET (delayOffset.json)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        subscriptions: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        table_writer: TableWriter,
        delay_offsets: Callable[[], bytes],
        topics_changed: Callable[[], None],
        stats: BrokerStats,
        ha_info: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self._ha_info = ha_info  # the HA keys (haRole, haSlaves ...; docs/replication.md)
        self._config = config
        self._stats = stats
        self._store = store
        self._topics = topics
        self._subscriptions = subscriptions
        self._offsets = offsets
        self._clients = clients
        self._table_writer = table_writer
        self._delay_offsets = delay_offsets
        self._topics_changed = topics_changed
        self._progress = ConsumeProgress(store, topics, offsets, clients)

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        handlers: dict[int, Processor] = {
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_time,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_consumer_offsets,
            RequestCode.GET_ALL_DELAY_OFFSET: self.all_delay_offsets,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_stats,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topics,
            RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topics,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queues,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commitlog,
            RequestCode.GET_ALL_PRODUCER_INFO: self.all_producers,
        }
        for code, handler in handlers.items():
            dispatcher.register(code, handler)

    # --- queue metadata -----------------------------------------------------------------------

    def get_max_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = TopicQueueRequestHeader.decode(req.ext_fields)
        offset = self._store.get_max_offset_in_queue(h.topic, h.queue_id)
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).encode())

    def get_min_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = TopicQueueRequestHeader.decode(req.ext_fields)
        offset = self._store.get_min_offset_in_queue(h.topic, h.queue_id)
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).encode())

    def search_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.decode(req.ext_fields)
        boundary = Boundary.from_wire(h.boundary_type)
        offset = self._store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp, boundary)
        return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).encode())

    def earliest_time(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = TopicQueueRequestHeader.decode(req.ext_fields)
        ts = self._store.get_earliest_message_time(h.topic, h.queue_id)
        return req.response(
            ResponseCode.SUCCESS, ext_fields=GetEarliestMsgStoretimeResponseHeader(max(ts, 0)).encode()
        )

    # --- message lookup -----------------------------------------------------------------------

    def view_message(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """One record, and only where one starts (``records.record_at``)."""
        h = ViewMessageRequestHeader.decode(req.ext_fields)
        record = record_at(self._store, h.offset)
        if record is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return req.response(ResponseCode.SUCCESS, body=record)

    def query_message(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.decode(req.ext_fields)
        max_num = h.max_num
        if (req.ext_fields or {}).get("_UNIQUE_KEY_QUERY") == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        result = self._store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = QueryMessageResponseHeader(
            result.index_last_update_timestamp, result.index_last_update_phyoffset
        ).encode()
        if not result.buffers:
            return req.response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext_fields=ext
            )
        return req.response(ResponseCode.SUCCESS, ext_fields=ext, body=result.buffers)

    # --- topics -------------------------------------------------------------------------------

    async def _saved(self, req: RemotingCommand, file: TableFile) -> RemotingCommand:
        """SUCCESS once ``file`` is written; SYSTEM_ERROR saying so when that fails."""
        try:
            await self._table_writer.flush(file)
        except Exception as exc:
            return req.response(
                ResponseCode.SYSTEM_ERROR,
                f"the change is made but writing {file.name} failed ({type(exc).__name__}: {exc}); "
                "the broker keeps retrying",
            )
        return req.response(ResponseCode.SUCCESS)

    def _slave_refusal(self, req: RemotingCommand) -> RemotingCommand | None:
        """RocketMQ's validateSlave: topics and groups change on the master only; a slave copies
        them from it (a change made here would be overwritten by the next copy)."""
        if self._config.is_slave:
            return req.response(ResponseCode.SYSTEM_ERROR, SLAVE_READ_ONLY_REMARK)
        return None

    def _system_topic_refusal(self, req: RemotingCommand, topic: str) -> RemotingCommand | None:
        """RocketMQ's answer when an admin request would create or delete a system topic
        (or an illegal name); None when the topic may be changed."""
        problem = validate_topic(topic)
        if problem is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        if is_system_topic(topic, (self._config.broker_cluster_name, self._config.broker_name)):
            return req.response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        return None

    async def create_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.decode(req.ext_fields)
        refused = self._slave_refusal(req) or self._system_topic_refusal(req, h.topic)
        if refused is not None:
            return refused
        if not (1 <= h.read_queue_nums <= MAX_QUEUE_NUMS and 1 <= h.write_queue_nums <= MAX_QUEUE_NUMS):
            return req.response(
                ResponseCode.SYSTEM_ERROR, f"readQueueNums and writeQueueNums must be between 1 and {MAX_QUEUE_NUMS}"
            )
        if h.topic_filter_type not in TOPIC_FILTER_TYPES:
            return req.response(
                ResponseCode.SYSTEM_ERROR, f"topicFilterType {h.topic_filter_type!r} is not one of {TOPIC_FILTER_TYPES}"
            )
        config = TopicConfigData(
            h.topic, h.read_queue_nums, h.write_queue_nums, h.perm, h.topic_filter_type, h.topic_sys_flag or 0, h.order
        )
        problem = topic_config_problem(config)
        if problem is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        self._topics.put(config)
        self._topics_changed()
        return await self._saved(req, self._topics.file)

    async def delete_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicRequestHeader.decode(req.ext_fields)
        refused = self._slave_refusal(req) or self._system_topic_refusal(req, h.topic)
        if refused is not None:
            return refused
        self._topics.delete(h.topic)
        self._offsets.remove_topic(h.topic)
        self._stats.forget_topic(h.topic)
        removed = await self._store.delete_topic(h.topic)
        log.info("deleted topic %s: %d ConsumeQueues removed", h.topic, removed)
        self._topics_changed()
        answer = await self._saved(req, self._topics.file)
        return answer if answer.code != ResponseCode.SUCCESS else await self._saved(req, self._offsets.file)

    async def clean_unused_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC (mqadmin cleanUnusedTopic): remove the ConsumeQueues of every
        topic the topic table no longer holds, except the schedule topic (RocketMQ's
        cleanUnusedTopic)."""
        unused = {topic for topic, _ in self._store.consume_queues.queues} - set(self._topics.table) - {SCHEDULE_TOPIC}
        for topic in sorted(unused):
            removed = await self._store.delete_topic(topic)
            log.info("cleaned unused topic %s: %d ConsumeQueues removed", topic, removed)
        return req.response(ResponseCode.SUCCESS)

    async def clean_expired_consume_queues(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE (mqadmin cleanExpiredCQ): destroy the ConsumeQueues whose
        messages the CommitLog no longer holds (RocketMQ's cleanExpiredConsumerQueue); SUCCESS."""
        removed = await self._store.clean_expired_consume_queues()
        log.info("cleanExpiredConsumeQueue asked by %s: %d ConsumeQueues destroyed", getattr(conn, "peer", "?"),
                 removed)
        return req.response(ResponseCode.SUCCESS)

    def delete_expired_commitlog(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (mqadmin deleteExpiredCommitLog): the cleaner deletes
        expired CommitLog files on its next passes whatever the hour (RocketMQ's
        executeDeleteFilesManually)."""
        self._store.request_delete_files()
        log.info("expired CommitLog files to be deleted at once, asked by %s", getattr(conn, "peer", "?"))
        return req.response(ResponseCode.SUCCESS)

    def all_topic_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self._topics.encode())

    def _last_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at ``offset`` (0 when there is none), as RocketMQ's
        getMessageStoreTimeStamp."""
        return max(0, self._store.get_message_store_timestamp(topic, queue_id, offset)) if offset >= 0 else 0

    def topic_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """TopicStatsTable: min/max offset and last store time of every write queue."""
        topic = (req.ext_fields or {}).get("topic")
        if not topic:
            raise HeaderError("the custom field <topic> is null")
        config = self._topics.get(topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table: dict[QueueKey, TopicOffset] = {}
        for qid in range(config.write_queue_nums):
            low = max(0, self._store.get_min_offset_in_queue(topic, qid))
            high = max(0, self._store.get_max_offset_in_queue(topic, qid))
            table[QueueKey(topic, self._config.broker_name, qid)] = TopicOffset(
                low, high, self._last_store_time(topic, qid, high - 1)
            )
        return req.response(ResponseCode.SUCCESS, body=encode_topic_stats(table))

    def _group_stats(self, group: str, topic: str, queues: int) -> ConsumeStats | None:
        """ConsumeStats of ``group`` on one topic's first ``queues`` queues; None when the topic
        is unknown or the group's live consumers do not subscribe it (RocketMQ skips those)."""
        progress = self._progress.of(group, topic, queues)
        if progress is None:
            return None
        table: dict[QueueKey, OffsetWrapper] = {
            QueueKey(topic, self._config.broker_name, p.queue_id): OffsetWrapper(
                p.broker_offset, p.consumer_offset, self._last_store_time(topic, p.queue_id, p.consumer_offset - 1))
            for p in progress
        }
        item = self._stats.find(GROUP_GET_NUMS, f"{topic}@{group}")
        return ConsumeStats(table, item.snapshot(0).tps if item is not None else 0.0)

    def consume_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """ConsumeStats of a group on one topic (or every topic it has offsets on): broker and
        consumer offset, the store time of the last consumed message, and the group's pull TPS
        over the last minute."""
        ext = req.ext_fields or {}
        group = ext.get("consumerGroup")
        if not group:
            raise HeaderError("the custom field <consumerGroup> is null")
        topics = [ext["topic"]] if ext.get("topic") else sorted(self._offsets.topics_of_group(group))
        total = ConsumeStats({}, 0.0)
        for topic in topics:
            config = self._topics.get(topic)
            part = self._group_stats(group, topic, config.read_queue_nums) if config is not None else None
            if part is not None:
                total.offset_table.update(part.offset_table)
                total.consume_tps += part.consume_tps
        return req.response(ResponseCode.SUCCESS, body=total.encode())

    def broker_consume_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): every subscription group's
        ConsumeStats per topic it has offsets on (only ordered topics with ``isOrder``), and the
        total lag."""
        only_order = (req.ext_fields or {}).get("isOrder") == "true"
        groups: list[dict[str, list[ConsumeStats]]] = []
        total_diff = 0
        for group in sorted(self._subscriptions.table):
            per_topic: list[ConsumeStats] = []
            for topic in sorted(self._offsets.topics_of_group(group)):
                config = self._topics.get(topic)
                if config is None or (only_order and not config.order):
                    continue
                part = self._group_stats(group, topic, config.write_queue_nums)
                if part is not None:
                    per_topic.append(part)
                    total_diff += sum(w.broker_offset - w.consumer_offset for w in part.offset_table.values())
            if per_topic:
                groups.append({group: per_topic})
        return req.response(ResponseCode.SUCCESS, body=encode_broker_consume_stats(groups, total_diff))

    def consumer_connections(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.decode(req.ext_fields)
        info = self._clients.consumer_group(h.consumer_group)
        if info is None:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
        body = {
            "connectionSet": [_connection_json(ch) for ch in info.channels.values()],
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
            "subscriptionTable": {t: s.to_json() for t, s in info.subscriptions.items()},
        }
        return req.response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    def producer_connections(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """ProducerConnection: the live connections of a producer group."""
        group = (req.ext_fields or {}).get("producerGroup")
        if not group:
            raise HeaderError("the custom field <producerGroup> is null")
        channels = self._clients.producer_channels(group)
        if not channels:
            return req.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return req.response(ResponseCode.SUCCESS, body=orjson.dumps(
            {"connectionSet": [_connection_json(ch) for ch in channels]}))

    def all_producers(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """ProducerTableInfo (GET_ALL_PRODUCER_INFO, mqadmin producer and the exporter's
        producer count): every producer group's live clients.  ``remoteIP`` as Java's
        ``InetSocketAddress.toString()`` writes it (``/ip:port``)."""
        data: dict[str, list[dict[str, object]]] = {}
        for group in sorted(self._clients.producers):
            rows = data[group] = []
            for ch in self._clients.producer_channels(group):
                info = _connection_json(ch)
                rows.append({"clientId": ch.client_id, "language": info["language"],
                             "lastUpdateTimestamp": ch.last_update_ms, "remoteIP": f"/{info['clientAddr']}",
                             "version": ch.version})
        return req.response(ResponseCode.SUCCESS, body=orjson.dumps({"data": data}))

    def consumed_by(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """GroupList: the groups consuming a topic, live or with offsets on it."""
        topic = (req.ext_fields or {}).get("topic")
        if not topic:
            raise HeaderError("the custom field <topic> is null")
        live = {g for g, info in self._clients.consumers.items() if topic in info.subscriptions}
        groups = live | self._offsets.groups_of_topic(topic)
        return req.response(ResponseCode.SUCCESS, body=orjson.dumps({"groupList": sorted(groups)}))

    def system_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """TopicList: RocketMQ's system topics, with this broker's cluster and broker names."""
        topics = set(SYSTEM_TOPICS) | {self._config.broker_cluster_name, self._config.broker_name}
        return req.response(ResponseCode.SUCCESS, body=encode_topic_list(sorted(topics)))

    def query_consume_queue(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (mqadmin queryCq): ``count`` raw entries of one ConsumeQueue from
        ``index``, with the queue's bounds and, given a group, its subscription."""
        ext = req.ext_fields or {}
        try:
            topic, queue_id = ext["topic"], int(ext["queueId"])
            index, count = int(ext["index"]), int(ext["count"])
        except (KeyError, ValueError) as exc:
            raise HeaderError(f"QueryConsumeQueueRequestHeader needs topic, queueId, index, count: {exc!r}") from None
        queue = self._store.consume_queues.get(topic, queue_id)
        if queue is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body: dict[str, object] = {"maxQueueIndex": queue.max_offset, "minQueueIndex": queue.min_offset}
        group = ext.get("consumerGroup")
        if group:
            sub = self._clients.subscription(group, topic)
            body["subscriptionData"] = sub.to_json() if sub is not None else None
            if sub is None:
                body["filterData"] = f"{group}@{topic} is not online!"
        entries = []
        for offset in range(index, index + max(0, min(count, MAX_CQ_QUERY))):
            entry = queue.get_entry(offset)
            if entry is None:
                break
            phys, size, tags = entry
            entries.append({"eval": False, "physicOffset": phys, "physicSize": size, "tagsCode": tags})
        if not entries:
            return req.response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
        body["queueData"] = entries
        return req.response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    def all_consumer_offsets(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self._offsets.encode())

    def all_delay_offsets(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self._delay_offsets())

    # --- subscription groups ------------------------------------------------------------------

    async def create_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        refused = self._slave_refusal(req)
        if refused is not None:
            return refused
        try:
            config = SubscriptionGroupConfig.from_json(loads(req.body_bytes()))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
            raise HeaderError(f"malformed subscription group body: {exc!r}") from None
        problem = group_config_problem(config)
        if problem is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        self._subscriptions.put(config)
        return await self._saved(req, self._subscriptions.file)

    def all_groups(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self._subscriptions.encode())

    async def delete_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        refused = self._slave_refusal(req)
        if refused is not None:
            return refused
        fields = req.ext_fields or {}
        name = fields.get("groupName")
        if not name:
            raise HeaderError("the custom field <groupName> is null")
        remove_offset = parse_bool("removeOffset", fields.get("removeOffset", "false"))
        self._subscriptions.delete(name)
        answer = await self._saved(req, self._subscriptions.file)
        if not remove_offset or answer.code != ResponseCode.SUCCESS:
            return answer
        self._offsets.remove_group(name)  # deleteSubGroup -r (RocketMQ's removeOffset)
        return await self._saved(req, self._offsets.file)

    async def reset_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """Rewind (or forward) a group on a topic to a time, and tell its live consumers.

        Offsets are set here first, so a consumer that is offline picks them up when it
        starts; live consumers get RESET_CONSUMER_CLIENT_OFFSET and resume from there
        without restarting.  ``timestamp`` -1 means the end of each queue.  Unless forced,
        a queue whose committed offset is already below the target is left alone.
        """
        h = ResetOffsetRequestHeader.decode(req.ext_fields)
        config = self._topics.get(h.topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        if self._subscriptions.find(h.group) is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group}")
        offsets: dict[QueueKey, int] = {}
        for qid in range(config.read_queue_nums):
            if h.timestamp < 0:
                target = self._store.get_max_offset_in_queue(h.topic, qid)
            else:
                target = self._store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            current = self._offsets.query(h.group, h.topic, qid)
            if h.is_force or current < 0 or target < current:
                self._offsets.commit(h.group, h.topic, qid, target)
                offsets[QueueKey(h.topic, self._config.broker_name, qid)] = target
            else:
                offsets[QueueKey(h.topic, self._config.broker_name, qid)] = current
        saved = await self._saved(req, self._offsets.file)
        if saved.code != ResponseCode.SUCCESS:
            return saved
        self._tell_consumers(h, offsets)
        log.info("reset group %s on %s to %d: %s", h.group, h.topic, h.timestamp,
                 {q.queue_id: o for q, o in offsets.items()})
        body = encode_reset_offset_body(offsets, java=req.language == LanguageCode.JAVA)
        return req.response(ResponseCode.SUCCESS, body=body)

    def _tell_consumers(self, h: ResetOffsetRequestHeader, offsets: dict[QueueKey, int]) -> None:
        info = self._clients.consumer_group(h.group)
        if info is None:
            return
        header = ResetOffsetRequestHeader(h.topic, h.group, h.timestamp, h.is_force).encode()
        for channel in info.channels.values():
            conn = channel.conn
            if not isinstance(conn, Connection) or not conn.is_open:
                continue
            if channel.version < VERSION_V3_0_7_SNAPSHOT:
                continue
            body = encode_reset_offset_body(offsets, java=channel.language == LanguageCode.JAVA)
            request = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(header), body, oneway=True)
            conn.send(request)

    def runtime_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """RocketMQ's prepareRuntimeInfo keys that Apogee can state truthfully (statistics,
        store offsets, disk), beside Apogee's own store figures (``dispatchBehindBytes``,
        ``tableWriteFailures`` ...).  Every value is a string, formatted as Java formats it."""
        store = self._store
        table = {k: _java_str(v) for k, v in store.runtime_info().items()}
        table.update(self._stats.runtime_info(int(time.time() * 1000)))
        table["brokerVersionDesc"] = CURRENT_VERSION_DESC
        table["brokerVersion"] = str(CURRENT_VERSION)
        table["earliestMessageTimeStamp"] = str(store.get_earliest_message_time())
        root = self._store.config.root
        try:
            disk = shutil.disk_usage(root)
        except OSError:
            disk = None
        if disk is not None:
            used = (disk.total - disk.free) / disk.total if disk.total else -1.0
            table["commitLogDiskRatio"] = repr(used)
            table["consumeQueueDiskRatio"] = repr(used)
            table["commitLogDirCapacity"] = (
                f"Total : {human_bytes(disk.total)}, Free : {human_bytes(disk.free)}."
            )
        table["remainHowManyDataToFlush"] = human_bytes(max(0, store.max_phy_offset - store.flushed_phy_offset))
        # Table files (topics.json ...) whose writes failed, and the ones still behind.
        writer = self._table_writer
        table["tableWriteFailures"] = str(writer.failures)
        table["tablesUnsaved"] = ",".join(f.name for f in writer.files if f.dirty)
        if self._ha_info is not None:
            table.update(self._ha_info())
        return req.response(ResponseCode.SUCCESS, body=encode_runtime_info(table))

    def view_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA: one statistics item's minute, hour and day windows."""
        ext = req.ext_fields or {}
        name, key = ext.get("statsName"), ext.get("statsKey")
        if not name or not key:
            raise HeaderError("the custom fields <statsName> and <statsKey> are required")
        item = self._stats.find(name, key)
        if item is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        body = {w: item.snapshot(i).to_json() for i, w in enumerate(("statsMinute", "statsHour", "statsDay"))}
        return req.response(ResponseCode.SUCCESS, body=orjson.dumps(body))


def _connection_json(ch: ClientChannel) -> dict[str, object]:
    """RocketMQ's Connection: the language by name, as fastjson writes the enum."""
    try:
        language: object = LanguageCode(ch.language).name
    except ValueError:
        language = ch.language
    host, port = getattr(ch.conn, "peer", ("", 0))
    return {"clientAddr": f"{host}:{port}", "clientId": ch.client_id, "language": language, "version": ch.version}


def _java_str(value: object) -> str:
    """``String.valueOf`` of a Java value: booleans lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def human_bytes(n: int) -> str:
    """RocketMQ's MixAll.humanReadableByteCount(bytes, si=false): "512 B", "1.5 KiB"."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"
