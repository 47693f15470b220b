"""SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2: the replies of request-reply (RIP-16).

(RocketMQ 4.9.8's ``ReplyMessageProcessor``.)  A requester sends an ordinary message carrying
``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and ``TTL``; whoever consumes it sends
a reply to ``<cluster>_REPLY_TOPIC`` with ``MSG_TYPE=reply``, which a client sends with these
codes instead of SEND_MESSAGE(_V2).  The broker then:

1. checks the reply as it checks a send (``SendProcessor.check``: permission, topic name and
   existence, queue id; the body's size);
2. pushes it at once to the requester's connection -- the channel of the producer client
   ``REPLY_TO_CLIENT`` names, known from its heartbeats -- as PUSH_REPLY_MESSAGE_TO_CLIENT
   (header ``ReplyMessageRequestHeader``, the properties plus ``PUSH_REPLY_TIME``) and waits
   for the client's answer (10 s, Broker2Client.callClient's);
3. with ``storeReplyMessageEnable`` (true by default) stores it in its topic as well: the
   properties as the replier sent them, no CLUSTER added.

The answer is SUCCESS with msgId "0" and queue offset 0 when the push succeeded (the stored
message's id and offset when it was stored too), else SYSTEM_ERROR with RocketMQ's remark
("push reply message fail, channel of <id> not found." ...), which a client retries on
another broker -- the one the requester did heartbeat, in a cluster of several.  A failed
store is only logged, as RocketMQ does.  One difference: RocketMQ stores a reply with sysflag
0 even when its body travelled compressed; Apogee keeps the COMPRESSED bit so the stored
reply stays readable.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from apogee.broker import send_rules as rules
from apogee.broker.processors.send import ipv4_peer
from apogee.common import constants as c
from apogee.common.message_codec import get_property, parse_properties, properties_to_string
from apogee.errors import ApogeeError
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.send import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from apogee.remoting.server import Answer, RequestDispatcher
from apogee.store.inner import InnerMessage
from apogee.store.results import PutStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from apogee.broker.clients import ClientManager
    from apogee.broker.config import BrokerAddress, BrokerConfig
    from apogee.broker.processors.send import SendProcessor
    from apogee.store.config import StoreConfig
    from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker.reply")

PUSH_REPLY_TIMEOUT_MS = 10_000  # Broker2Client.callClient
# A put that stored the reply (RocketMQ's putOk): its id and offset go into the answer.
_STORED = frozenset((
    PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE,
))


class ReplyProcessor:
    def __init__(
        self, *, config: BrokerConfig, store_config: StoreConfig, store: MessageStore, clients: ClientManager,
        address: BrokerAddress, sends: SendProcessor,
    ) -> None:
        self._config = config
        self._store_config = store_config
        self._store = store
        self._clients = clients
        self._address = address
        self.sends = sends
        self._random = random.Random()

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.SEND_REPLY_MESSAGE, self.reply)
        dispatcher.register(RequestCode.SEND_REPLY_MESSAGE_V2, self.reply)

    def reply(self, conn: Connection, req: RemotingCommand) -> Answer | Awaitable[Answer]:
        """Refusals at once; an accepted reply is pushed (and stored) in a task."""
        if req.code == RequestCode.SEND_REPLY_MESSAGE:
            h = SendMessageRequestHeader.decode(req.ext_fields)
        else:
            h = SendMessageRequestHeaderV2.decode(req.ext_fields).to_v1()
        config, new_topic, rejection = self.sends.check(req, h)
        if rejection is not None:
            return rejection
        assert config is not None
        body = req.body_bytes()
        refusal = rules.body_refusal(len(body), self._store_config.max_message_size)
        if refusal is not None:
            return req.response(refusal.code, refusal.remark)
        if new_topic:
            self.sends.create_topic(config)
        queue_id = h.queue_id
        if queue_id < 0:
            queue_id = self._random.randrange(max(1, config.write_queue_nums))
        return self._push_and_store(conn, req, h, body, queue_id)

    async def _push_and_store(
        self, conn: Connection, req: RemotingCommand, h: SendMessageRequestHeader, body: bytes, queue_id: int
    ) -> Answer:
        config = self._config
        remark = await self._push(conn, h, body)
        answer = {"MSG_REGION": config.region_id, "TRACE_ON": "true" if config.trace_on else "false"}
        if remark is None:  # pushed; "0" keeps a client's id decoding happy (RocketMQ's words)
            answer.update(SendMessageResponseHeader("0", queue_id, 0).encode())
        if config.store_reply_message_enable:
            msg = InnerMessage(
                topic=h.topic,
                queue_id=queue_id,
                body=body,
                flag=h.flag,
                properties=h.properties or "",
                sysflag=h.sys_flag & c.COMPRESSED_FLAG,
                born_timestamp=h.born_timestamp,
                born_host=ipv4_peer(conn),
                store_host=self._address.store_host,
                reconsume_times=h.reconsume_times or 0,
            )
            result = await self._store.put_message(msg, rules.waits_for_store(get_property(h.properties or "", c.WAIT)))
            if result.status in _STORED:
                answer.update(SendMessageResponseHeader(result.msg_id, queue_id, result.logics_offset).encode())
            else:
                log.warning("reply to topic %s not stored: %s", h.topic, result.status.name)
        if remark is None:
            return req.response(ResponseCode.SUCCESS, ext_fields=answer)
        return req.response(ResponseCode.SYSTEM_ERROR, remark, ext_fields=answer)

    async def _push(self, conn: Connection, h: SendMessageRequestHeader, body: bytes) -> str | None:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester; None when it took the reply, else
        the remark to answer the replier with."""
        props = parse_properties(h.properties)
        client_id = props.get(c.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if client_id is None:
            log.warning("%s is null, can not reply message", c.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            return f"reply message properties[{c.PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = self._clients.find_producer_channel(client_id)
        target = channel.conn if channel is not None else None
        if not isinstance(target, Connection) or not target.is_open:
            remark = f"push reply message fail, channel of <{client_id}> not found."
            log.warning(remark)
            return remark
        now = int(time.time() * 1000)
        props[c.PROPERTY_PUSH_REPLY_TIME] = str(now)
        born_ip, born_port = ipv4_peer(conn)
        header = ReplyMessageRequestHeader(
            producer_group=h.producer_group,
            topic=h.topic,
            default_topic=h.default_topic,
            default_topic_queue_nums=h.default_topic_queue_nums,
            queue_id=h.queue_id,
            sys_flag=h.sys_flag,
            born_timestamp=h.born_timestamp,
            flag=h.flag,
            born_host=f"{born_ip}:{born_port}",
            store_host=self._address.addr,
            store_timestamp=now,
            properties=properties_to_string(props),
            reconsume_times=h.reconsume_times,
            unit_mode=bool(h.unit_mode),
        )
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header.encode(), body)
        failed = f"push reply message to {client_id}fail."  # sic: RocketMQ's remark
        try:
            resp = await target.invoke(push, PUSH_REPLY_TIMEOUT_MS)
        except ApogeeError as exc:
            log.warning("push reply message to <%s> failed: %s", client_id, exc)
            return failed
        if resp.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", client_id, resp.remark)
            return failed
        return None
