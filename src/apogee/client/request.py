"""Request-reply (RocketMQ's RIP-16) on the requesting side.

A request is an ordinary message with three more properties (``prepare_request``):
``CORRELATION_ID`` (a fresh UUID), ``REPLY_TO_CLIENT`` (the requesting client's id) and
``TTL`` (its timeout in ms).  Whoever consumes it answers with a reply built from those
(``apogee.client.replier``); the broker the reply reaches pushes it to the requesting client
instance as PUSH_REPLY_MESSAGE_TO_CLIENT (``decode_pushed_reply``), which completes the
request waiting under that correlation id in the instance's ``RequestTable``.

The table holds one future per request, removed when it is settled: by its reply, by the
failure of the request's send, by the caller giving up, or at its deadline, when it fails
with ``ReplyTimeoutError`` (RocketMQ's RequestTimeoutException; its RequestFutureHolder scans
every second, here each request has its own timer).  A reply nobody waits for any more is
logged and dropped, as RocketMQ's client does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from apogee.common import constants as c
from apogee.common.message import Message, MessageExt
from apogee.common.message_codec import inflate_body, parse_properties
from apogee.errors import ClientStateError, ReplyTimeoutError
from apogee.remoting.client import split_address
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import ReplyMessageRequestHeader

log = logging.getLogger("apogee.client.request")


def prepare_request(msg: Message, client_id: str, timeout_ms: int) -> str:
    """Mark ``msg`` as a request of client ``client_id`` (DefaultMQProducerImpl's
    prepareSendRequest); return its correlation id."""
    correlation_id = str(uuid.uuid4())  # CorrelationIdUtil.createCorrelationId
    props = msg.properties
    props[c.PROPERTY_CORRELATION_ID] = correlation_id
    props[c.PROPERTY_MESSAGE_REPLY_TO_CLIENT] = client_id
    props[c.PROPERTY_MESSAGE_TTL] = str(timeout_ms)
    return correlation_id


def decode_pushed_reply(req: RemotingCommand, arrived_ms: int) -> MessageExt:
    """The reply a broker pushed (ClientRemotingProcessor.receiveReplyMessage): the replier's
    message with its body inflated, ``ARRIVE_TIME`` added; ``HeaderError`` or ``ValueError``
    when the push is malformed."""
    h = ReplyMessageRequestHeader.decode(req.ext_fields)
    props = parse_properties(h.properties)
    props[c.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(arrived_ms)
    return MessageExt(
        topic=h.topic,
        body=inflate_body(req.body_bytes(), h.sys_flag),
        flag=h.flag,
        properties=props,
        queue_id=h.queue_id,
        born_timestamp=h.born_timestamp,
        born_host=split_address(h.born_host),
        store_timestamp=h.store_timestamp,
        store_host=split_address(h.store_host),
        reconsume_times=h.reconsume_times or 0,
        msg_id=props.get(c.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
    )


class RequestTable:
    """Requests waiting for their reply, by correlation id (one per client instance)."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[asyncio.Future[MessageExt], asyncio.TimerHandle]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, correlation_id: str, topic: str, timeout_ms: int, remaining_s: float) -> asyncio.Future[MessageExt]:
        """A future of the reply to the request ``correlation_id``, failed with
        ``ReplyTimeoutError`` after ``remaining_s`` (what is left of ``timeout_ms``)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[MessageExt] = loop.create_future()
        timer = loop.call_later(max(0.0, remaining_s), self._expire, correlation_id, topic, timeout_ms)
        self._waiting[correlation_id] = (fut, timer)
        fut.add_done_callback(lambda _: self._forget(correlation_id, fut))  # the caller gave up
        return fut

    def complete(self, correlation_id: str, reply: MessageExt) -> bool:
        """Hand ``reply`` to the request waiting for it; False when none is (any more)."""
        fut = self._settle(correlation_id)
        if fut is None:
            return False
        fut.set_result(reply)
        return True

    def fail(self, correlation_id: str, error: BaseException) -> None:
        """The request cannot get a reply (its send failed, or its time is up)."""
        fut = self._settle(correlation_id)
        if fut is not None:
            fut.set_exception(error)

    def _settle(self, correlation_id: str) -> asyncio.Future[MessageExt] | None:
        """Take the request out of the table; its future if it still waits."""
        waiting = self._waiting.pop(correlation_id, None)
        if waiting is None:
            return None
        fut, timer = waiting
        timer.cancel()
        return None if fut.done() else fut

    def fail_all(self, reason: str) -> None:
        """The client instance shuts down: nothing more will arrive."""
        for correlation_id in list(self._waiting):
            self.fail(correlation_id, ClientStateError(reason))

    def _expire(self, correlation_id: str, topic: str, timeout_ms: int) -> None:
        self.fail(correlation_id, ReplyTimeoutError(
            f"send request message to <{topic}> OK, but wait reply message timeout, {timeout_ms} ms."
        ))

    def _forget(self, correlation_id: str, fut: asyncio.Future[MessageExt]) -> None:
        waiting = self._waiting.get(correlation_id)
        if waiting is not None and waiting[0] is fut:
            del self._waiting[correlation_id]
            waiting[1].cancel()
