"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK.

(RocketMQ's SendMessageProcessor.)  Every rejection is decided before anything is written,
answered with RocketMQ's response code and a remark saying what to fix; a message is either
stored whole or not at all.

Rewrites applied on the way in, as the Java broker does:

* a retry-topic message past its group's max reconsume times goes to ``%DLQ%<group>``;
* a message with ``DELAY=n`` goes to ``SCHEDULE_TOPIC_XXXX`` queue n-1, its real topic and
  queue kept in ``REAL_TOPIC``/``REAL_QID`` (the schedule service moves it back when due);
* a message with ``TRAN_MSG=true`` becomes a half message in ``RMQ_SYS_TRANS_HALF_TOPIC``;
* ``CLUSTER`` is added and ``WAIT`` dropped from the stored properties.
"""

from __future__ import annotations

import logging
import random
import zlib
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from apogee.broker.topics import NOT_ALLOWED_SEND_TOPICS, PERM_RW, validate_topic
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
from apogee.common.message_id import create_offset_msg_id
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
from apogee.remoting.server import Answer, FieldsAnswer, RequestDispatcher
from apogee.store.inner import InnerBatch, InnerMessage, PlainMessage
from apogee.store.results import PutResult, PutStatus

if TYPE_CHECKING:
    from apogee.broker.controller import BrokerController

log = logging.getLogger("apogee.broker.send")

# Wire keys of the headers the single-send fast path reads and writes, from the header classes.
_V2 = {attr: key for attr, key, _kind, _required in SendMessageRequestHeaderV2._fields()}
_RESP = {attr: key for attr, key, _kind, _required in SendMessageResponseHeader._fields()}
# What native.send_v2_fields reads, in its order.
_PLAIN_KEYS = tuple(
    _V2[k]
    for k in ("topic", "queue_id", "sys_flag", "born_timestamp", "flag", "properties", "reconsume_times", "batch")
)
_TRAN_MASK = c.TRANSACTION_TYPE_MASK
_PERM_WRITE = c.PERM_WRITE
_MULTI_TAGS = c.MULTI_TAGS_FLAG
_RETRY_PREFIX = c.RETRY_GROUP_TOPIC_PREFIX
_BORN_HOST = "apogee.born_host"  # Connection.attributes key: the peer as a record's BORNHOST
_new_tuple = tuple.__new__
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
    PutStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal, maybe msg body or properties length not matched."),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL, "the message properties are longer than 32767 bytes"),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now: the broker's disk is nearly full, or the broker is shutting down or not writable",
    ),
    PutStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutStatus.DISK_FULL: (  # RocketMQ's code and remark for a store that is not writable
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full, "
        "messages are put to the slave, message store has been shut down, etc.",
    ),
    PutStatus.FLUSH_DISK_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "flushing to disk failed on the broker; the message may not be durable and was not acknowledged",
    ),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


class SendProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.b = broker
        self._random = random.Random()
        self._plain_topics: set[str] = set()
        self._cluster: tuple[str, bytes] = ("", b"")

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

    def _check(
        self, req: RemotingCommand, h: SendMessageRequestHeader
    ) -> tuple[TopicConfigData | None, RemotingCommand | None]:
        """RocketMQ's msgCheck: permission, topic name, topic existence, queue id."""
        if not self.b.config.broker_permission & c.PERM_WRITE:
            return None, req.response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.b.broker_addr}] sending message is forbidden",
            )
        problem = validate_topic(h.topic)
        if problem is not None:
            return None, req.response(ResponseCode.SYSTEM_ERROR, problem)
        if h.topic in NOT_ALLOWED_SEND_TOPICS:
            return None, req.response(
                ResponseCode.NO_PERMISSION, f"sending message to topic[{h.topic}] is forbidden."
            )
        config = self.b.topics.get(h.topic)
        if config is None:
            if h.topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
                config, _ = self.b.topics.create_system_like(h.topic, 1, PERM_RW)
            else:
                config = self.b.topics.create_in_send(
                    h.topic, h.default_topic, h.default_topic_queue_nums
                )
            if config is None:
                return None, req.response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{h.topic}] not exist, apply first please!",
                )
            self.b.registrar_trigger()
        if not config.perm & c.PERM_WRITE:
            return None, req.response(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] sending message is forbidden"
            )
        if h.queue_id >= max(config.read_queue_nums, config.write_queue_nums):
            return None, req.response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{h.queue_id}] is illegal, topic {h.topic} has "
                f"{config.write_queue_nums} write queues",
            )
        return config, None

    def _check_body(self, req: RemotingCommand, body: bytes) -> RemotingCommand | None:
        if not body:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the message body is empty")
        limit = self.b.store_config.max_message_size
        if len(body) > limit:
            return req.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(body)} is over the limit {limit} (maxMessageSize)",
            )
        return None

    def _pick_queue(self, h: SendMessageRequestHeader, config: TopicConfigData) -> int:
        if h.queue_id < 0:
            return self._random.randrange(max(1, config.write_queue_nums))
        return h.queue_id

    # --- send ---------------------------------------------------------------------------------

    def send_v2(self, conn: Connection, req: RemotingCommand) -> Answer | Awaitable[Answer]:
        """SEND_MESSAGE_V2: the C path when it applies (``_send_plain``), else ``send``."""
        answer = self._send_plain(conn, req)
        return self.send(conn, req) if answer is None else answer

    def send(self, conn: Connection, req: RemotingCommand) -> Answer | Awaitable[Answer]:
        """Answer at once under ASYNC_FLUSH; under SYNC_FLUSH return an awaitable that
        answers when the group commit has made the message durable."""
        h = self._header(req)
        config, rejection = self._check(req, h)
        if rejection is not None:
            return rejection
        assert config is not None
        body = req.body_bytes()
        if h.batch:
            return self._send_batch(conn, req, h, config, body)
        bad = self._check_body(req, body)
        if bad is not None:
            return bad
        queue_id = self._pick_queue(h, config)
        props = parse_properties(h.properties) if h.properties else {}
        topic = h.topic
        reconsume_times = h.reconsume_times or 0
        sysflag = h.sys_flag
        if config.topic_filter_type == "MULTI_TAG":
            sysflag |= c.MULTI_TAGS_FLAG

        if topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
            redirected = self._retry_or_dlq(req, h, topic, reconsume_times, props)
            if isinstance(redirected, RemotingCommand):
                return redirected
            if redirected is not None:
                topic, queue_id = redirected

        tran_type = c.transaction_type(sysflag)
        if props.get(c.TRAN_MSG) == "true" and tran_type in (c.TRANSACTION_NOT_TYPE, c.TRANSACTION_PREPARED_TYPE):
            if self.b.config.reject_transaction_message:
                return req.response(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{self.b.broker_addr}] sending transaction message is forbidden",
                )
            props[c.REAL_TOPIC] = topic
            props[c.REAL_QID] = str(queue_id)
            topic, queue_id = c.RMQ_SYS_TRANS_HALF_TOPIC, 0
            sysflag = c.reset_transaction_type(sysflag, c.TRANSACTION_NOT_TYPE)
            tran_type = c.TRANSACTION_NOT_TYPE

        props.pop(c.WAIT, None)
        props[c.CLUSTER] = self.b.config.broker_cluster_name
        msg = self._message(conn, topic, queue_id, body, h.flag, props, sysflag, h.born_timestamp, reconsume_times)
        if topic != c.RMQ_SYS_TRANS_HALF_TOPIC:  # a half's delay applies when it is committed
            self.apply_delay(msg, props, tran_type)
        result, durable = self.b.store.put_message_nowait(msg)
        if durable is None:
            return self._response(req, result, queue_id=msg.queue_id)
        return self._after_flush(req, result, durable, msg.queue_id)

    def _send_plain(
        self, conn: Connection, req: RemotingCommand
    ) -> Answer | Awaitable[Answer] | None:
        """The common SEND_MESSAGE_V2, stored by one C call; None declines and the full path
        below decides (and answers any error).

        Common means: an existing writable topic that is not a retry topic, a queue id in
        range, no transaction, a body within limits, and properties the broker stores as they
        are apart from WAIT dropped and CLUSTER added (no DELAY, TRAN_MSG or CLUSTER, no
        duplicate or empty name; ``native.scan_single``).  The stored record is byte for byte
        the one the full path writes.
        """
        ext = req.ext_fields
        if not ext:
            return None
        name = self.b.config.broker_cluster_name
        if self._cluster[0] != name:
            self._cluster = (name, f"{c.CLUSTER}\x01{name}".encode())
        extra = self._cluster[1]
        fields = native.send_v2_fields(ext, extra, _PLAIN_KEYS)
        if fields is None:
            return None
        topic, queue_id, sysflag, born_timestamp, flag, props, reconsume_times, props_len = fields
        config = self.b.topics.get(topic)
        if config is None or not self.b.config.broker_permission & config.perm & _PERM_WRITE:
            return None
        if topic not in self._plain_topics:  # what never changes for a topic name, checked once
            if topic.startswith(_RETRY_PREFIX) or topic in NOT_ALLOWED_SEND_TOPICS or validate_topic(topic):
                return None
            self._plain_topics.add(topic)  # existing topics only: bounded by the topic table
        if queue_id < 0 or (queue_id >= config.read_queue_nums and queue_id >= config.write_queue_nums):
            return None
        if config.topic_filter_type == "MULTI_TAG":
            sysflag |= _MULTI_TAGS
        body = req.body
        if body.__class__ is not bytes:
            body = req.body_bytes()
        if not body or len(body) > self.b.store_config.max_message_size:
            return None
        if sysflag & _TRAN_MASK:  # any transaction type but NOT_TYPE
            return None
        born_host = conn.attributes.get(_BORN_HOST)
        if born_host is None:
            born_host = conn.attributes[_BORN_HOST] = _ipv4_peer(conn)
        # A NamedTuple built without its __new__ (its argument handling costs more than the rest).
        result, durable = self.b.store.put_plain_nowait(_new_tuple(PlainMessage, (
            topic, queue_id, body, props, extra, props_len, sysflag, flag, born_timestamp, born_host,
            (self.b.store_ip, self.b.listen_port), reconsume_times,
        )))
        if durable is None:
            return self._response(req, result, queue_id=queue_id)
        return self._after_flush(req, result, durable, queue_id)

    async def _after_flush(
        self, req: RemotingCommand, result: PutResult, durable: Awaitable[PutStatus], queue_id: int
    ) -> Answer:
        status = await durable
        if status is not PutStatus.PUT_OK:
            result.status = status
        return self._response(req, result, queue_id=queue_id)

    def _retry_or_dlq(
        self,
        req: RemotingCommand,
        h: SendMessageRequestHeader,
        topic: str,
        reconsume_times: int,
        props: dict[str, str],
    ) -> tuple[str, int] | RemotingCommand | None:
        group = topic[len(c.RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self.b.subscriptions.find(group)
        if group_config is None:
            return req.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = group_config.retry_max_times
        if req.version >= VERSION_V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        if reconsume_times > max_times:
            dlq = c.dlq_topic(group)
            config, created = self.b.topics.create_system_like(dlq, c.DLQ_NUMS_PER_GROUP, PERM_RW)
            if created:
                self.b.registrar_trigger()
            return dlq, 0
        return None

    def apply_delay(self, msg: InnerMessage, props: dict[str, str], tran_type: int) -> None:
        level_text = props.get(c.DELAY)
        if not level_text or tran_type not in (c.TRANSACTION_NOT_TYPE, c.TRANSACTION_COMMIT_TYPE):
            return
        try:
            level = int(level_text)
        except ValueError:
            return
        if level <= 0:
            return
        level = min(level, len(self.b.delay_levels_ms))
        props[c.DELAY] = str(level)
        props[c.REAL_TOPIC] = msg.topic
        props[c.REAL_QID] = str(msg.queue_id)
        msg.topic = c.SCHEDULE_TOPIC
        msg.queue_id = level - 1
        msg.properties = properties_to_string(props)

    def _message(
        self,
        conn: Connection,
        topic: str,
        queue_id: int,
        body: bytes,
        flag: int,
        props: dict[str, str],
        sysflag: int,
        born_timestamp: int,
        reconsume_times: int,
    ) -> InnerMessage:
        return InnerMessage(
            topic=topic,
            queue_id=queue_id,
            body=body,
            flag=flag,
            properties=properties_to_string(props),
            sysflag=sysflag,
            born_timestamp=born_timestamp,
            born_host=_ipv4_peer(conn),
            store_host=(self.b.store_ip, self.b.listen_port),
            reconsume_times=reconsume_times,
            tags_code=tags_code(props.get(c.TAGS)),
        )

    def _response(self, req: RemotingCommand, result: PutResult, *, queue_id: int) -> Answer:
        """SendMessageResponseHeader's fields, in ``_ANSWER_KEYS`` order: one answer per send."""
        stored_ok = result.status is PutStatus.PUT_OK
        if not stored_ok:
            code, remark = _STATUS_TO_CODE.get(result.status, (ResponseCode.SYSTEM_ERROR, result.status.name))
            if code not in _STORED_CODES:  # nothing stored: no id, no offset
                return req.response(code, remark)
        config = self.b.config
        values = (
            result.msg_id, queue_id, result.logics_offset, config.region_id, "true" if config.trace_on else "false",
        )
        if stored_ok:  # the usual answer: no table lookup, no command built
            return _new_tuple(FieldsAnswer, (_SUCCESS, _ANSWER_KEYS, values))
        return req.response(code, remark, ext_fields={k: str(v) for k, v in zip(_ANSWER_KEYS, values, strict=True)})

    def _send_batch(
        self,
        conn: Connection,
        req: RemotingCommand,
        h: SendMessageRequestHeader,
        config: TopicConfigData,
        body: bytes,
    ) -> Answer | Awaitable[Answer]:
        if h.topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be sent to a retry topic")
        if not body:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the batch body is empty")
        sysflag = h.sys_flag
        if sysflag & c.COMPRESSED_FLAG:
            # The C++ client 1.2.3 compresses the whole batch body; undo it and store the
            # inner messages uncompressed.
            try:
                body = zlib.decompressobj().decompress(body, self.b.store_config.max_message_size * 2)
            except zlib.error as exc:
                return req.response(ResponseCode.MESSAGE_ILLEGAL, f"the compressed batch body does not inflate: {exc}")
            sysflag &= ~c.COMPRESSED_FLAG
        queue_id = self._pick_queue(h, config)
        batch_props = parse_properties(h.properties) if h.properties else {}
        batch_props.pop(c.WAIT, None)
        batch_props[c.CLUSTER] = self.b.config.broker_cluster_name
        batch_pstr = properties_to_string(batch_props)
        # The C path writes the records straight from the body; it declines anything unusual,
        # which then gets the checks (and the error answers) below.
        scan = native.scan_batch(body, batch_pstr.encode("utf-8"), self.b.store_config.max_message_size) \
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
                    return req.response(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot have a delay level")
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
            store_host=(self.b.store_ip, self.b.listen_port),
            reconsume_times=h.reconsume_times or 0,
        )
        result, durable = self.b.store.put_messages_nowait(batch)
        if durable is None:
            return self._response(req, result, queue_id=queue_id)
        return self._after_flush(req, result, durable, queue_id)

    # --- send back (retry / DLQ) --------------------------------------------------------------

    async def send_back(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = ConsumerSendMsgBackRequestHeader.decode(req.ext_fields)
        group_config = self.b.subscriptions.find(h.group)
        if group_config is None:
            return req.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group}"
            )
        if not self.b.config.broker_permission & c.PERM_WRITE:
            return req.response(
                ResponseCode.NO_PERMISSION, f"the broker[{self.b.broker_addr}] sending message is forbidden"
            )
        if group_config.retry_queue_nums <= 0:
            return req.response(ResponseCode.SUCCESS)
        original = self.b.store.look_message_by_offset(h.offset)
        if original is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = dict(original.properties)
        if c.RETRY_TOPIC not in props:
            props[c.RETRY_TOPIC] = original.topic
        props.pop(c.WAIT, None)
        max_times = group_config.retry_max_times
        if req.version >= VERSION_V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        delay = h.delay_level
        reconsume = original.reconsume_times
        if reconsume >= max_times or delay < 0:
            topic = c.dlq_topic(h.group)
            config, created = self.b.topics.create_system_like(topic, c.DLQ_NUMS_PER_GROUP, PERM_RW)
            queue_id = 0
            delay = 0
        else:
            topic = c.retry_topic(h.group)
            config, created = self.b.topics.create_system_like(topic, group_config.retry_queue_nums, PERM_RW)
            queue_id = self._random.randrange(max(1, group_config.retry_queue_nums))
            if delay == 0:
                delay = 3 + reconsume
        if created:
            self.b.registrar_trigger()
        if not config.perm & c.PERM_WRITE:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        if c.ORIGIN_MESSAGE_ID not in props:
            props[c.ORIGIN_MESSAGE_ID] = h.origin_msg_id or create_offset_msg_id(
                original.store_host[0], original.store_host[1], original.commit_log_offset
            )
        if delay > 0:
            props[c.DELAY] = str(delay)
        else:
            props.pop(c.DELAY, None)
        msg = InnerMessage(
            topic=topic,
            queue_id=queue_id,
            body=original.body,
            flag=original.flag,
            properties=properties_to_string(props),
            sysflag=original.sys_flag,
            born_timestamp=original.born_timestamp,
            born_host=original.born_host,
            store_host=(self.b.store_ip, self.b.listen_port),
            reconsume_times=reconsume + 1,
            tags_code=tags_code(props.get(c.TAGS)),
        )
        self.apply_delay(msg, props, c.TRANSACTION_NOT_TYPE)
        result = await self.b.store.put_message(msg)
        if result.status != PutStatus.PUT_OK:
            code, remark = _STATUS_TO_CODE.get(result.status, (ResponseCode.SYSTEM_ERROR, result.status.name))
            return req.response(code if code != ResponseCode.SUCCESS else ResponseCode.SYSTEM_ERROR, remark)
        return req.response(ResponseCode.SUCCESS)


def _ipv4_peer(conn: Connection) -> tuple[str, int]:
    host, port = conn.peer
    if ":" in host:  # IPv6 peers: clients decode only the IPv4 layout
        host = host[7:] if host.startswith("::ffff:") else "0.0.0.0"
    return host or "0.0.0.0", port

