"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK.

(RocketMQ's SendMessageProcessor.)  Every rejection is decided before anything is written,
answered with RocketMQ's response code and a remark saying what to fix; a message is either
stored whole or not at all.

Which sends are taken, and with which answer otherwise, is decided by ``send_rules`` (one
statement of every rule); the C fast path for plain SEND_MESSAGE_V2 judges with the same
functions and only declines more.

Rewrites applied on the way in, as the Java broker does (``rewrite``, shared with the
schedule and transaction services):

* a retry-topic message past its group's max reconsume times goes to ``%DLQ%<group>``;
* a message with ``DELAY=n`` goes to ``SCHEDULE_TOPIC_XXXX`` queue n-1, its real topic and
  queue kept in ``REAL_TOPIC``/``REAL_QID`` (the schedule service moves it back when due);
* a message with ``TRAN_MSG=true`` becomes a half message in ``RMQ_SYS_TRANS_HALF_TOPIC``;
* ``CLUSTER`` is added and ``WAIT`` dropped from the stored properties (a batch's own
  properties keep ``WAIT``, as RocketMQ's batch path does);
* a message a consumer hands back (CONSUMER_SEND_MSG_BACK) goes to its group's retry topic
  after a delay, or to its DLQ.

The processor is given the tables, store and address it uses; it never sees the controller.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import zlib
from collections.abc import Awaitable, Callable

from apogee.broker import rewrite
from apogee.broker import send_rules as rules
from apogee.broker.config import BrokerAddress, BrokerConfig, BrokerRole
from apogee.broker.persistence import TableWriter
from apogee.broker.records import message_at
from apogee.broker.reput import reput
from apogee.broker.send_rules import Refusal
from apogee.broker.stats import BrokerStats
from apogee.broker.subscriptions import SubscriptionGroupManager
from apogee.broker.topics import PERM_RW, TopicConfigManager
from apogee.common import constants as c
from apogee.common.accel import native
from apogee.common.java_hash import tags_code
from apogee.common.message_codec import (
    BatchItem,
    decode_batch,
    get_property,
    parse_properties,
    properties_to_string,
)
from apogee.common.validators import validate_group, validate_topic
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import VERSION_V3_4_9, RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.send import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from apogee.remoting.server import Answer, Deferred, FieldsAnswer, RequestDispatcher
from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.inner import InnerBatch, InnerMessage, PlainMessage
from apogee.store.message_store import MessageStore
from apogee.store.results import PutResult, PutStatus

log = logging.getLogger("apogee.broker.send")

# Wire keys of the headers the single-send fast path reads and writes, from the header classes.
_V2 = {attr: key for attr, key, _kind, _required in SendMessageRequestHeaderV2._fields()}
_RESP = {attr: key for attr, key, _kind, _required in SendMessageResponseHeader._fields()}
# What native.send_v2_fields reads, in its order.
_PLAIN_KEYS = tuple(
    _V2[k]
    for k in ("topic", "queue_id", "sys_flag", "born_timestamp", "flag", "properties", "reconsume_times", "batch")
)
_body_refusal = rules.body_refusal
_waits_unclear = rules.plain_waits_unclear
_queue_refusal = rules.queue_refusal
_TRAN_MASK = c.TRANSACTION_TYPE_MASK  # a transaction type needs the full path's rewrites
_BORN_HOST = "apogee.born_host"  # Connection.attributes key: the peer as a record's BORNHOST
_new_tuple = tuple.__new__
_ns = time.perf_counter_ns  # put latency for the statistics (RocketMQ's putMessageEntireTime)
_PUT_OK = PutStatus.PUT_OK
_SUCCESS = int(ResponseCode.SUCCESS)
# Answers that still carry the message's id and offset: it was stored.
_STORED_CODES = frozenset((
    ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
))
_ANSWER_KEYS = (*(_RESP[k] for k in ("msg_id", "queue_id", "queue_offset")), "MSG_REGION", "TRACE_ON")

_STATUS_TO_CODE: dict[PutStatus, tuple[int, str | None]] = {
    PutStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL, "the message is illegal, maybe msg body or properties length not matched."
    ),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL, "the message properties are longer than 32767 bytes"
    ),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now: the broker's disk is nearly full, or the broker is shutting down or not writable",
    ),
    PutStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
    ),
    PutStatus.DISK_FULL: (  # RocketMQ's code and remark for a store that is not writable
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full, "
        "messages are put to the slave, message store has been shut down, etc.",
    ),
    PutStatus.FLUSH_DISK_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "flushing to disk failed on the broker; the message may not be durable and was not acknowledged",
    ),
    PutStatus.SLAVE_READ_ONLY: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now: this broker is a slave (brokerRole=SLAVE) and takes no messages; "
        "send to its master (brokerId 0)",
    ),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


class SendProcessor:
    """``topics_changed`` is called when a send creates a topic (the NameServers should
    learn it); ``max_delay_level`` is the highest delay level."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        store_config: StoreConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        subscriptions: SubscriptionGroupManager,
        table_writer: TableWriter,
        address: BrokerAddress,
        max_delay_level: int,
        topics_changed: Callable[[], None],
        stats: BrokerStats,
    ) -> None:
        self._config = config
        self._stats = stats
        self._store_config = store_config
        self._store = store
        self._topics = topics
        self._subscriptions = subscriptions
        self._table_writer = table_writer
        self._address = address
        self._max_delay_level = max_delay_level
        self._topics_changed = topics_changed
        self._random = random.Random()
        # topic -> (its config, the broker permission, sysflag bits) for which the rules that
        # depend on the topic alone accepted plain sends (``_plain_topic``).
        self._plain: dict[str, tuple[TopicConfigData, int, int]] = {}
        self._cluster: tuple[str, bytes] = ("", b"")
        # A put may wait for its flush or a slave: then its WAIT property matters.
        self._waiting_store = (
            store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH or config.broker_role is BrokerRole.SYNC_MASTER
        )

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.SEND_MESSAGE, self.send)
        dispatcher.register(RequestCode.SEND_MESSAGE_V2, self.send_v2 if native is not None else self.send)
        dispatcher.register(RequestCode.SEND_BATCH_MESSAGE, self.send)
        dispatcher.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back)

    # --- parsing and checks -------------------------------------------------------------------

    @staticmethod
    def _header(req: RemotingCommand) -> SendMessageRequestHeader:
        if req.code == RequestCode.SEND_MESSAGE:
            return SendMessageRequestHeader.decode(req.ext_fields)
        header = SendMessageRequestHeaderV2.decode(req.ext_fields).to_v1()
        if req.code == RequestCode.SEND_BATCH_MESSAGE:
            header.batch = True
        return header

    def _refuse(self, req: RemotingCommand, refusal: Refusal) -> RemotingCommand:
        return req.response(refusal.code, refusal.remark)

    def _check(
        self, req: RemotingCommand, h: SendMessageRequestHeader
    ) -> tuple[TopicConfigData | None, bool, RemotingCommand | None]:
        """RocketMQ's msgCheck (``send_rules`` 1-5): permission, topic name, topic existence,
        topic permission, queue id.  A topic that may be auto-created is judged as it would
        be created, and returned with True: the caller adds it once the send is accepted."""
        refusal = rules.broker_refusal(self._config.broker_permission, self._address.addr) \
            or rules.topic_name_refusal(h.topic)
        if refusal is not None:
            return None, False, self._refuse(req, refusal)
        config = self._topics.get(h.topic)
        new_topic = config is None
        if config is None:
            if rules.is_retry_topic(h.topic):
                config = TopicConfigData(h.topic, 1, 1, PERM_RW)
            else:
                config = self._topics.plan_in_send(h.topic, h.default_topic, h.default_topic_queue_nums)
            if config is None:
                return None, False, self._refuse(req, rules.missing_topic(h.topic))
        refusal = rules.topic_perm_refusal(h.topic, config.perm) \
            or rules.queue_refusal(h.topic, h.queue_id, config.read_queue_nums, config.write_queue_nums)
        if refusal is not None:
            return None, False, self._refuse(req, refusal)
        return config, new_topic, None

    def _check_body(self, req: RemotingCommand, body: bytes) -> RemotingCommand | None:
        refusal = rules.body_refusal(len(body), self._store_config.max_message_size)
        return None if refusal is None else self._refuse(req, refusal)

    def _pick_queue(self, h: SendMessageRequestHeader, config: TopicConfigData) -> int:
        if h.queue_id < 0:
            return self._random.randrange(max(1, config.write_queue_nums))
        return h.queue_id

    # --- send ---------------------------------------------------------------------------------

    def send_v2(self, conn: Connection, req: RemotingCommand) -> Answer | Deferred | Awaitable[Answer]:
        """SEND_MESSAGE_V2: the C path when it applies (``_send_plain``), else ``send``."""
        answer = self._send_plain(conn, req)
        return self.send(conn, req) if answer is None else answer

    def send(self, conn: Connection, req: RemotingCommand) -> Answer | Deferred | Awaitable[Answer]:
        """Answer at once under ASYNC_FLUSH; under SYNC_FLUSH return an awaitable that
        answers when the group commit has made the message durable (and, for a send that
        created its topic, the topic table).  Every refusal comes before any table changes."""
        h = self._header(req)
        config, new_topic, rejection = self._check(req, h)
        if rejection is not None:
            return rejection
        assert config is not None
        body = req.body_bytes()
        if h.batch:
            return self._send_batch(conn, req, h, config, new_topic, body)
        bad = self._check_body(req, body)
        if bad is not None:
            return bad
        props = parse_properties(h.properties) if h.properties else {}
        sysflag = h.sys_flag | rules.topic_sysflag_bits(config.topic_filter_type)
        half = rewrite.is_half(props, sysflag)
        if half:
            refusal = rules.transaction_refusal(self._config.reject_transaction_message, self._address.addr)
            if refusal is not None:
                return self._refuse(req, refusal)
        topic = h.topic
        reconsume_times = h.reconsume_times or 0
        redirected: str | None = None
        if rules.is_retry_topic(topic):
            routed = self._retry_or_dlq(req, h, topic, reconsume_times)
            if isinstance(routed, RemotingCommand):
                return routed
            redirected = routed
        # Accepted: from here on tables may change.
        table_version = self._create_topic(config) if new_topic else 0
        queue_id = 0 if redirected is not None else self._pick_queue(h, config)
        placed = rewrite.received(
            rewrite.Placement(redirected or topic, queue_id, props, sysflag),
            cluster=self._config.broker_cluster_name, half=half, max_delay_level=self._max_delay_level,
        )
        msg = InnerMessage(
            topic=placed.topic,
            queue_id=placed.queue_id,
            body=body,
            flag=h.flag,
            properties=properties_to_string(placed.properties),
            sysflag=placed.sysflag,
            born_timestamp=h.born_timestamp,
            born_host=_ipv4_peer(conn),
            store_host=self._address.store_host,
            reconsume_times=reconsume_times,
            tags_code=tags_code(placed.properties.get(c.TAGS)),
        )
        t0 = _ns()
        result, durable = self._store.put_message_nowait(msg, rules.waits_for_store(props.get(c.WAIT)))
        self._count(redirected or topic, result, t0)
        return self._answer(req, result, durable, msg.queue_id, table_version)

    def _count(self, topic: str, result: PutResult, t0: int) -> None:
        """The statistics of one put (``BrokerStats``): stored or failed, the records' bytes
        (RocketMQ counts wroteBytes), and how long it took."""
        if result.status is _PUT_OK:
            self._stats.put(topic, result.msg_num, result.wrote_bytes, (_ns() - t0) // 1_000_000)
        else:
            self._stats.put_failed_once()

    def _create_topic(self, config: TopicConfigData) -> int:
        """Add a topic an accepted send created; the topic table's version that holds it."""
        _, created = self._topics.add_if_absent(config)
        if created:
            log.info("auto-created topic %s with %d queues", config.topic_name, config.write_queue_nums)
            self._topics_changed()
        return self._topics.file.version

    # What a reply (processors/reply.py) shares with a send: msgCheck and topic creation.
    check = _check
    create_topic = _create_topic

    def _answer(
        self, req: RemotingCommand, result: PutResult, durable: Awaitable[PutStatus] | None, queue_id: int,
        table_version: int,
    ) -> Answer | Deferred | Awaitable[Answer]:
        if durable is None:
            return self._response(req, result, queue_id=queue_id)
        if table_version:
            return self._after_flush_and_table(req, result, durable, queue_id, table_version)
        return self._after_flush(req, result, durable, queue_id)

    async def _after_flush_and_table(
        self, req: RemotingCommand, result: PutResult, durable: Awaitable[PutStatus], queue_id: int, version: int
    ) -> Answer:
        """SYNC_FLUSH for a send that created its topic: the message and the topic table are
        both on disk before the answer, so a crash cannot keep the message and lose its topic.
        A table write that does not finish in syncFlushTimeout answers FLUSH_DISK_TIMEOUT
        (stored, not yet durable), as a slow CommitLog flush does."""
        # The table is written while the CommitLog flushes, not after.
        table = asyncio.ensure_future(self._table_writer.saved(
            self._topics.file, version, self._store_config.sync_flush_timeout_ms / 1000
        ))
        status = await durable
        table_saved = await table
        if status is not PutStatus.PUT_OK:
            result.status = status
        elif not table_saved:
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return self._response(req, result, queue_id=queue_id)

    def _send_plain(
        self, conn: Connection, req: RemotingCommand
    ) -> Answer | Deferred | Awaitable[Answer] | None:
        """The common SEND_MESSAGE_V2, stored by one C call; None declines and the full path
        (``send``) decides and answers, refusals included.

        Taken only when ``send_rules`` accepts it -- judged by the same functions, the
        per-topic rules once per topic config (``_plain_topic``) -- and nothing needs
        rewriting: an existing topic, a chosen queue, no retry topic or transaction type, and
        properties the broker stores as they are apart from WAIT dropped and CLUSTER added
        (no DELAY, TRAN_MSG or CLUSTER, no duplicate or empty name; ``native.scan_single``).
        Header numbers outside their Java ranges are declined by ``native.send_v2_fields``.
        When puts wait (SYNC_FLUSH, SYNC_MASTER) a WAIT other than one plain ``WAIT=true`` is
        declined (``send_rules.plain_waits_unclear``): the fast path always waits.
        The stored record is byte for byte the one the full path writes.
        """
        ext = req.ext_fields
        if not ext:
            return None
        name = self._config.broker_cluster_name
        if self._cluster[0] != name:
            self._cluster = (name, f"{c.CLUSTER}\x01{name}".encode())
        extra = self._cluster[1]
        fields = native.send_v2_fields(ext, extra, _PLAIN_KEYS)
        if fields is None:
            return None
        topic, queue_id, sysflag, born_timestamp, flag, props, reconsume_times, props_len = fields
        config = self._topics.get(topic)
        if config is None or (self._waiting_store and _waits_unclear(props)):
            return None
        plain = self._plain.get(topic)
        broker_perm = self._config.broker_permission
        if plain is None or plain[0] is not config or plain[1] != broker_perm:
            plain = self._plain_topic(topic, config, broker_perm)
            if plain is None:
                return None
        body = req.body
        if body.__class__ is not bytes:
            body = req.body_bytes()
        if (
            queue_id < 0
            or sysflag & _TRAN_MASK
            or _queue_refusal(topic, queue_id, config.read_queue_nums, config.write_queue_nums)
            or _body_refusal(len(body), self._store_config.max_message_size)
        ):
            return None
        born_host = conn.attributes.get(_BORN_HOST)
        if born_host is None:
            born_host = conn.attributes[_BORN_HOST] = _ipv4_peer(conn)
        # A NamedTuple built without its __new__ (its argument handling costs more than the rest).
        t0 = _ns()
        result, durable = self._store.put_plain_nowait(_new_tuple(PlainMessage, (
            topic, queue_id, body, props, extra, props_len, sysflag | plain[2], flag, born_timestamp, born_host,
            self._address.store_host, reconsume_times,
        )))
        if result.status is _PUT_OK:
            self._stats.put(topic, 1, result.wrote_bytes, (_ns() - t0) // 1_000_000)
        else:
            self._stats.put_failed_once()
        if durable is None:
            return self._response(req, result, queue_id=queue_id)
        return self._after_flush(req, result, durable, queue_id)

    def _plain_topic(
        self, topic: str, config: TopicConfigData, broker_perm: int
    ) -> tuple[TopicConfigData, int, int] | None:
        """The fast path's verdict on what depends on the topic and the broker alone
        (``send_rules`` 1, 2 and 4, and no retry routing), kept per config object: a topic
        update replaces the object, so the verdict is taken again."""
        if (
            rules.broker_refusal(broker_perm, "")
            or rules.topic_name_refusal(topic)
            or rules.topic_perm_refusal(topic, config.perm)
            or rules.is_retry_topic(topic)
        ):
            return None
        plain = (config, broker_perm, rules.topic_sysflag_bits(config.topic_filter_type))
        self._plain[topic] = plain  # existing topics only: bounded by the topic table
        return plain

    def _after_flush(
        self, req: RemotingCommand, result: PutResult, durable: Awaitable[PutStatus], queue_id: int
    ) -> Deferred | Awaitable[Answer]:
        """The answer once the put is durable (SYNC_FLUSH) and/or held by a slave
        (SYNC_MASTER): a ``Deferred`` on the store's future, answered from its done callback
        (no task per send), or a coroutine when the store combines two waits."""
        if isinstance(durable, asyncio.Future):
            return Deferred(durable, lambda status: self._durable_response(req, result, queue_id, status))
        return self._await_durable(req, result, durable, queue_id)

    async def _await_durable(
        self, req: RemotingCommand, result: PutResult, durable: Awaitable[PutStatus], queue_id: int
    ) -> Answer:
        return self._durable_response(req, result, queue_id, await durable)

    def _durable_response(self, req: RemotingCommand, result: PutResult, queue_id: int, status: PutStatus) -> Answer:
        if status is not PutStatus.PUT_OK:
            result.status = status
        return self._response(req, result, queue_id=queue_id)

    def _max_reconsume_times(self, req: RemotingCommand, header_max: int | None, group_max: int) -> int:
        """The group's max reconsume times, or the client's own from V3_4_9 on."""
        if req.version >= VERSION_V3_4_9 and header_max is not None:
            return header_max
        return group_max

    def _retry_or_dlq(
        self,
        req: RemotingCommand,
        h: SendMessageRequestHeader,
        topic: str,
        reconsume_times: int,
    ) -> str | RemotingCommand | None:
        """Where a message sent to a retry topic goes: its DLQ (queue 0) past the group's max
        reconsume times (None: the retry topic itself).  Refused when the group does not exist."""
        group = topic[len(c.RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self._subscriptions.find(group)
        if group_config is None:
            return self._refuse(req, rules.missing_group(group, self._subscriptions.creation_problem(group)))
        max_times = self._max_reconsume_times(req, h.max_reconsume_times, group_config.retry_max_times)
        if rewrite.to_dlq(reconsume_times, max_times, 0):
            dlq = c.dlq_topic(group)
            config, created = self._topics.create_system_like(dlq, c.DLQ_NUMS_PER_GROUP, PERM_RW)
            if created:
                self._topics_changed()
            return dlq
        return None

    def _response(self, req: RemotingCommand, result: PutResult, *, queue_id: int) -> Answer:
        """SendMessageResponseHeader's fields, in ``_ANSWER_KEYS`` order: one answer per send."""
        stored_ok = result.status is _PUT_OK
        if not stored_ok:
            code, remark = _STATUS_TO_CODE.get(result.status, (ResponseCode.SYSTEM_ERROR, result.status.name))
            if code not in _STORED_CODES:  # nothing stored: no id, no offset
                return req.response(code, remark)
        config = self._config
        values = (
            result.msg_id, queue_id, result.logics_offset, config.region_id, "true" if config.trace_on else "false",
        )
        if stored_ok:  # the usual answer: no table lookup, no command built
            return _new_tuple(FieldsAnswer, (_SUCCESS, _ANSWER_KEYS, values, None))
        return req.response(code, remark, ext_fields={k: str(v) for k, v in zip(_ANSWER_KEYS, values, strict=True)})

    def _send_batch(
        self,
        conn: Connection,
        req: RemotingCommand,
        h: SendMessageRequestHeader,
        config: TopicConfigData,
        new_topic: bool,
        body: bytes,
    ) -> Answer | Deferred | Awaitable[Answer]:
        refusal = rules.batch_refusal(h.topic, len(body))
        if refusal is not None:
            return self._refuse(req, refusal)
        sysflag = h.sys_flag
        if sysflag & c.COMPRESSED_FLAG:
            # The C++ client 1.2.3 compresses the whole batch body; undo it and store the
            # inner messages uncompressed.
            try:
                body = zlib.decompressobj().decompress(body, self._store_config.max_message_size * 2)
            except zlib.error as exc:
                return req.response(ResponseCode.MESSAGE_ILLEGAL, f"the compressed batch body does not inflate: {exc}")
            sysflag &= ~c.COMPRESSED_FLAG
        # The batch's own properties, appended to every record's: CLUSTER added and, unlike a
        # single send's, WAIT kept (RocketMQ 4.9.8's batch path stores the header's properties
        # as they came; a Java client's batch carries WAIT=true: 10 bytes a record).
        batch_props = parse_properties(h.properties) if h.properties else {}
        batch_props[c.CLUSTER] = self._config.broker_cluster_name
        batch_pstr = properties_to_string(batch_props)
        # The C path writes the records straight from the body; it declines anything unusual,
        # which then gets the checks (and the error answers) below.
        scan = native.scan_batch(body, batch_pstr.encode("utf-8"), self._store_config.max_message_size) \
            if native is not None else None
        if scan is not None:
            items: list[BatchItem] = []
        else:
            try:
                items = decode_batch(body)
            except ValueError as exc:
                return req.response(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {exc}")
            if not items:
                return req.response(ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
            for item in items:
                bad = self._check_body(req, item.body)
                if bad is not None:
                    return bad
                if get_property(item.properties, c.DELAY):
                    return self._refuse(req, rules.BATCH_DELAY)
        # Accepted: from here on tables may change.
        table_version = self._create_topic(config) if new_topic else 0
        queue_id = self._pick_queue(h, config)
        batch = InnerBatch(
            topic=h.topic,
            queue_id=queue_id,
            items=items,
            raw=body if scan is not None else None,
            raw_scan=scan or (0, 0),
            properties=batch_pstr,
            sysflag=sysflag,
            born_timestamp=h.born_timestamp,
            born_host=_ipv4_peer(conn),
            store_host=self._address.store_host,
            reconsume_times=h.reconsume_times or 0,
        )
        t0 = _ns()
        result, durable = self._store.put_messages_nowait(batch, rules.waits_for_store(batch_props.get(c.WAIT)))
        self._count(h.topic, result, t0)
        return self._answer(req, result, durable, queue_id, table_version)

    # --- send back (retry / DLQ) --------------------------------------------------------------

    async def send_back(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """A consumer hands back a message it failed to consume: it goes to the group's retry
        topic with a delay level, or to its DLQ past the max reconsume times.  Refusals first
        (broker permission, the group and its retry topic's names, the message), then changes."""
        h = ConsumerSendMsgBackRequestHeader.decode(req.ext_fields)
        refusal = rules.broker_refusal(self._config.broker_permission, self._address.addr)
        if refusal is not None:
            return self._refuse(req, refusal)
        problem = validate_group(h.group)
        if problem is not None:
            return self._refuse(req, rules.missing_group(h.group, problem))
        problem = validate_topic(c.retry_topic(h.group))
        if problem is not None:
            return req.response(
                ResponseCode.SYSTEM_ERROR, f"the retry topic of group {h.group} is not a legal topic: {problem}"
            )
        original = message_at(self._store, h.offset)
        if original is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        group_config = self._subscriptions.find(h.group)
        if group_config is None:
            return self._refuse(req, rules.missing_group(h.group, self._subscriptions.creation_problem(h.group)))
        if group_config.retry_queue_nums <= 0:
            return req.response(ResponseCode.SUCCESS)
        max_times = self._max_reconsume_times(req, h.max_reconsume_times, group_config.retry_max_times)
        reconsume = original.reconsume_times
        dlq = rewrite.to_dlq(reconsume, max_times, h.delay_level)
        if dlq:
            topic = c.dlq_topic(h.group)
            config, created = self._topics.create_system_like(topic, c.DLQ_NUMS_PER_GROUP, PERM_RW)
            queue_id = 0
        else:
            topic = c.retry_topic(h.group)
            config, created = self._topics.create_system_like(topic, group_config.retry_queue_nums, PERM_RW)
            queue_id = self._random.randrange(max(1, group_config.retry_queue_nums))
        if created:
            self._topics_changed()
        refusal = rules.topic_perm_refusal(topic, config.perm)
        if refusal is not None:
            return self._refuse(req, refusal)
        placed = rewrite.sent_back(
            rewrite.Placement.of(original),
            group=h.group,
            dlq=dlq,
            queue_id=queue_id,
            delay_level=h.delay_level,
            reconsume_times=reconsume,
            origin_msg_id=original.offset_msg_id,  # RocketMQ's msgExt.getMsgId(), not the header's
            max_delay_level=self._max_delay_level,
        )
        msg = reput(original, placed, self._address.store_host, reconsume_times=reconsume + 1)
        t0 = _ns()
        # WAIT=false (``rewrite.sent_back``): RocketMQ waits for neither flush nor slave here.
        result = await self._store.put_message(msg, rules.waits_for_store(placed.properties.get(c.WAIT)))
        self._count(msg.topic, result, t0)  # RocketMQ counts a send-back as a put to its topic too
        if result.status != PutStatus.PUT_OK:
            code, remark = _STATUS_TO_CODE.get(result.status, (ResponseCode.SYSTEM_ERROR, result.status.name))
            return req.response(code if code != ResponseCode.SUCCESS else ResponseCode.SYSTEM_ERROR, remark)
        self._stats.sent_back(h.group, original.topic)
        return req.response(ResponseCode.SUCCESS)


def _ipv4_peer(conn: Connection) -> tuple[str, int]:
    host, port = conn.peer
    if ":" in host:  # IPv6 peers: clients decode only the IPv4 layout
        host = host[7:] if host.startswith("::ffff:") else "0.0.0.0"
    return host or "0.0.0.0", port


ipv4_peer = _ipv4_peer  # the peer as a record's BORNHOST, for processors/reply.py
