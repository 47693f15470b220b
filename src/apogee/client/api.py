"""ClientAPI (RocketMQ's MQClientAPIImpl): one async method per request code.

Each method builds the request from the typed headers and bodies of ``apogee.remoting``,
sends it through the ``RemotingClient`` and turns the response into a value.  A response code
other than SUCCESS becomes the matching ``RemoteError`` subclass (``RemoteError.for_code``),
so callers handle one exception hierarchy; transport failures arrive as
``RequestTimeoutError`` / ``ConnectionClosedError``.

The pure halves (``build_pull_result``, ``parse_send_response``) take a response and give a
value without I/O, so they are unit-tested and reused by the async-callback paths.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Awaitable, Iterable

from apogee.client.types import PullResult, PullStatus, SendResult, SendStatus
from apogee.common import constants as c
from apogee.common.message import MessageExt, MessageQueue
from apogee.common.message_codec import decode_record, decode_records_fast
from apogee.errors import RemoteError
from apogee.remoting.bodies.heartbeat import (
    HeartbeatData,
    LockBatchRequest,
    QueueKey,
    decode_consumer_id_list,
    decode_lock_ok,
)
from apogee.remoting.bodies.route import TopicRouteData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.consumer import (
    CreateTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from apogee.remoting.headers.namesrv import GetRouteInfoRequestHeader
from apogee.remoting.headers.pull import PullMessageRequestHeader
from apogee.remoting.headers.send import ConsumerSendMsgBackRequestHeader

log = logging.getLogger("apogee.client.api")

# Read per send or pull (an Enum class attribute read is slow: docs/architecture.md, Principles).
_SUCCESS = ResponseCode.SUCCESS
_SEND_OK = SendStatus.SEND_OK
_FOUND = PullStatus.FOUND
_PULL_MESSAGE = RequestCode.PULL_MESSAGE

# PullMessageRequestHeader's wire keys in its field order, and its values in that order.
_PULL_FIELDS = PullMessageRequestHeader._fields()
PULL_KEYS = tuple(key for _attr, key, _kind, _required in _PULL_FIELDS)
_pull_values = operator.attrgetter(*(attr for attr, _key, _kind, _required in _PULL_FIELDS))

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def check(resp: RemotingCommand) -> RemotingCommand:
    """``resp`` itself when it is a success, else the matching ``RemoteError``."""
    if resp.code != _SUCCESS:
        raise RemoteError.for_code(resp.code, resp.remark)
    return resp


def _ext_int(ext: dict[str, str] | None, key: str, default: int = 0) -> int:
    if not ext:
        return default
    raw = ext.get(key)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def send_response_fields(
    resp: RemotingCommand, mq: MessageQueue, count: int
) -> tuple[SendStatus, list[str], MessageQueue, int, str, bool]:
    """What a send response says of its ``count`` messages: status, the ``count`` offset ids,
    the queue, the first queue offset, region and trace flag; ``RemoteError`` for a failure.

    A batch response carries the offset ids comma-joined and the first message's queue
    offset; the others follow consecutively.
    """
    status = _SEND_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise RemoteError.for_code(resp.code, resp.remark)
    ext = resp.ext_fields or {}
    offset_ids = (ext.get("msgId") or "").split(",")
    queue_id = _ext_int(ext, "queueId", mq.queue_id)
    first = _ext_int(ext, "queueOffset")
    region = ext.get("MSG_REGION", "")
    trace = ext.get("TRACE_ON") == "true"
    if queue_id != mq.queue_id:
        mq = MessageQueue(mq.topic, mq.broker_name, queue_id)
    if len(offset_ids) != count:  # a broker that answered fewer (or more) ids
        offset_ids = (offset_ids + [""] * count)[:count]
    return status, offset_ids, mq, first, region, trace


def parse_send_response(resp: RemotingCommand, mq: MessageQueue, uniq_ids: list[str]) -> list[SendResult]:
    """Send results for the ``len(uniq_ids)`` messages of one send (one, or a batch)."""
    return send_results(uniq_ids, *send_response_fields(resp, mq, len(uniq_ids)))


def send_result(resp: RemotingCommand, mq: MessageQueue, uniq: str) -> SendResult:
    """``parse_send_response`` of a single send: the same answer, without its lists for the
    usual SEND_OK (one per sync send, so it is worth its few lines)."""
    ext = resp.ext_fields
    if resp.code == _SUCCESS and ext:
        offset_id = ext.get("msgId")
        qid = ext.get("queueId")
        first = ext.get("queueOffset")
        if offset_id.__class__ is str and "," not in offset_id and qid is not None and first is not None:
            try:
                queue_id, first_offset = int(qid), int(first)
            except (TypeError, ValueError):
                pass
            else:
                if queue_id != mq.queue_id:
                    mq = MessageQueue(mq.topic, mq.broker_name, queue_id)
                return tuple.__new__(SendResult, (
                    _SEND_OK, uniq or offset_id, offset_id, mq, first_offset,
                    ext.get("MSG_REGION", ""), ext.get("TRACE_ON") == "true",
                ))
    return parse_send_response(resp, mq, [uniq])[0]


def send_results(uniq_ids: list[str], status: SendStatus, offset_ids: list[str], mq: MessageQueue,
                 first: int, region: str, trace: bool) -> list[SendResult]:
    """One ``SendResult`` per message (the reference of native.complete_sends)."""
    new = tuple.__new__  # SendResult's own __new__ re-checks arguments: 2x slower per message
    return [new(SendResult, (status, uniq or offset_id, offset_id, mq, first + i, region, trace))
            for i, (uniq, offset_id) in enumerate(zip(uniq_ids, offset_ids, strict=True))]


def tags_of(msg: MessageExt) -> str | None:
    return msg.properties.get(c.PROPERTY_TAGS)


def build_pull_result(resp: RemotingCommand, tags_set: frozenset[str] | None) -> PullResult:
    """The ``PullResult`` of a PULL_MESSAGE response; raises ``RemoteError`` on other codes.

    ``tags_set`` is the subscription's tags (None or empty: all).  The broker filtered by tag
    hash; two tags can share a hash, so the client filters again by the tag string.
    """
    status = _PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise RemoteError.for_code(resp.code, resp.remark)
    ext = resp.ext_fields
    result = PullResult(
        status,
        _ext_int(ext, "nextBeginOffset"),
        _ext_int(ext, "minOffset"),
        _ext_int(ext, "maxOffset"),
        suggest_which_broker_id=_ext_int(ext, "suggestWhichBrokerId"),
    )
    if status is _FOUND and resp.body:
        body = resp.body if type(resp.body) is bytes else resp.body_bytes()
        msgs = decode_records_fast(body)
        if tags_set:
            msgs = [m for m in msgs if m.properties.get(c.PROPERTY_TAGS) in tags_set]
        result.messages = msgs
    return result


def _queue_keys(mqs: Iterable[MessageQueue]) -> list[QueueKey]:
    return [QueueKey(mq.topic, mq.broker_name, mq.queue_id) for mq in mqs]


class ClientAPI:
    """Requests to NameServers and brokers, one method per request code."""

    def __init__(self, remoting: RemotingClient, timeout_ms: int) -> None:
        self.remoting = remoting
        self.timeout_ms = timeout_ms

    def _call(self, addr: str, request: RemotingCommand, timeout_ms: int | None = None) -> Awaitable[RemotingCommand]:
        return self.remoting.invoke(addr, request, timeout_ms or self.timeout_ms)

    # --- NameServer ---------------------------------------------------------------------------

    async def get_route(self, namesrv: str, topic: str, timeout_ms: int | None = None) -> TopicRouteData | None:
        """The topic's route, or None when the NameServer does not know the topic."""
        req = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic, accept_standard_json_only=True).encode(),
        )
        resp = await self._call(namesrv, req, timeout_ms)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        check(resp)
        if not resp.body:
            return None
        return TopicRouteData.decode(resp.body_bytes())

    # --- sending ------------------------------------------------------------------------------

    def send(self, addr: str, request: RemotingCommand, timeout_ms: int) -> Awaitable[RemotingCommand]:
        """A prepared SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE request; await it for the raw response."""
        return self.remoting.invoke(addr, request, timeout_ms)

    def send_fields(
        self, addr: str, code: int, keys: tuple[str, ...], values: tuple[str | int | None, ...], body: bytes,
        timeout_ms: int,
    ) -> Awaitable[RemotingCommand]:
        """``send`` of a request given as its header's keys and values (a producer's single
        send: written straight from them, see ``Connection.invoke_fields``)."""
        return self.remoting.invoke_fields(addr, code, keys, values, body, timeout_ms)

    async def consumer_send_msg_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout_ms: int | None = None,
    ) -> None:
        """Hand a failed message back: to ``%RETRY%group`` with a delay, or to the DLQ."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
        )
        req = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.encode())
        check(await self._call(addr, req, timeout_ms))

    # --- pulling and offsets ------------------------------------------------------------------

    def pull_request(self, addr: str, header: PullMessageRequestHeader, timeout_ms: int) -> Awaitable[RemotingCommand]:
        """Send one PULL_MESSAGE; its response.  Written straight from the header's values
        (``RemotingClient.invoke_fields``): a consumer sends one per pull, and a long-polling
        one per message at low rates, so no extFields dict and no request command is built."""
        return self.remoting.invoke_fields(addr, _PULL_MESSAGE, PULL_KEYS, _pull_values(header), None, timeout_ms)

    async def pull(
        self, addr: str, header: PullMessageRequestHeader, timeout_ms: int, tags_set: frozenset[str] | None
    ) -> PullResult:
        return build_pull_result(await self.pull_request(addr, header, timeout_ms), tags_set)

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        """The group's committed offset; ``QueryNotFoundError`` when it has none."""
        req = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(group, topic, queue_id).encode(),
        )
        resp = check(await self._call(addr, req))
        return _ext_int(resp.ext_fields, "offset", -1)

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int, *, oneway: bool = False
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset).encode()
        if oneway:
            await self.remoting.invoke_oneway(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header))
            return
        check(await self._call(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header)))

    async def _offset_call(self, addr: str, code: int, ext: dict[str, str], key: str = "offset") -> int:
        resp = check(await self._call(addr, RemotingCommand.request(code, ext)))
        return _ext_int(resp.ext_fields, key, -1)

    async def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset_call(
            addr, RequestCode.GET_MAX_OFFSET, TopicQueueRequestHeader(topic, queue_id).encode()
        )

    async def get_min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset_call(
            addr, RequestCode.GET_MIN_OFFSET, TopicQueueRequestHeader(topic, queue_id).encode()
        )

    async def search_offset(
        self, addr: str, topic: str, queue_id: int, timestamp_ms: int, boundary: str | None = None
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP.  Without ``boundary`` the broker answers as RocketMQ 4.x
        does (the entry nearest the time); ``"LOWER"`` / ``"UPPER"`` are RocketMQ 5's
        ``boundaryType`` (the first entry at or after the time / the last at or before it),
        which 4.x brokers ignore (see ``apogee.store.time_search``)."""
        return await self._offset_call(
            addr,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(topic, queue_id, timestamp_ms, boundary).encode(),
        )

    async def get_earliest_msg_store_time(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset_call(
            addr, RequestCode.GET_EARLIEST_MSG_STORETIME, TopicQueueRequestHeader(topic, queue_id).encode(), "timestamp"
        )

    async def view_message(self, addr: str, commit_log_offset: int) -> MessageExt:
        req = RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(commit_log_offset).encode()
        )
        resp = check(await self._call(addr, req))
        return decode_record(resp.body_bytes())

    # --- membership ---------------------------------------------------------------------------

    async def heartbeat(self, addr: str, data: HeartbeatData | bytes, timeout_ms: int | None = None) -> None:
        body = data if isinstance(data, bytes) else data.encode()
        check(await self._call(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body), timeout_ms))

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group).encode()
        check(await self._call(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header)))

    async def get_consumer_id_list(self, addr: str, group: str) -> list[str]:
        req = RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(group).encode()
        )
        resp = check(await self._call(addr, req))
        return decode_consumer_id_list(resp.body_bytes()) if resp.body else []

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], timeout_ms: int | None = None
    ) -> set[MessageQueue]:
        body = LockBatchRequest(group, client_id, _queue_keys(mqs)).encode()
        resp = check(await self._call(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body), timeout_ms))
        return {MessageQueue(k.topic, k.broker_name, k.queue_id) for k in decode_lock_ok(resp.body_bytes())}

    async def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], *, oneway: bool = False
    ) -> None:
        body = LockBatchRequest(group, client_id, _queue_keys(mqs)).encode()
        req = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body)
        if oneway:
            await self.remoting.invoke_oneway(addr, req)
        else:
            check(await self._call(addr, req))

    # --- administration -----------------------------------------------------------------------

    async def create_topic(
        self,
        addr: str,
        topic: str,
        queue_nums: int,
        *,
        perm: int = c.PERM_READ | c.PERM_WRITE,
        order: bool = False,
    ) -> None:
        header = CreateTopicRequestHeader(
            topic, c.TBW102, queue_nums, queue_nums, perm, "SINGLE_TAG", 0, order
        ).encode()
        check(await self._call(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)))
