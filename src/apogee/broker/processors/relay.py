"""GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): requests for one live
consumer, which the broker relays on that client's own connection (RocketMQ's
AdminBrokerProcessor.callConsumer).  mqadmin consumerStatus / consumeMessage, the dashboard's
consumer and message pages and rocketmq-exporter's client metrics use them.

The client is found by group and client id among the connections that heartbeat here; its
answer is passed back as it came (code, remark, body).  The requester's ACL fields (AccessKey,
Signature) are not relayed.  309 first loads the message the
``msgId`` names (an offset message id of this broker) and sends it in the body, with this
broker's name in ``brokerName``.  Errors are RocketMQ's: SYSTEM_ERROR when the client is not
connected or too old to answer, CONSUME_MSG_TIMEOUT when it does not answer within 10 s.
"""

from __future__ import annotations

import logging

from apogee.broker.clients import ClientManager
from apogee.broker.config import BrokerConfig
from apogee.broker.records import RecordSource, record_at
from apogee.common.message_id import decode_offset_msg_id
from apogee.errors import ApogeeError, RequestTimeoutError
from apogee.remoting.codes import VERSION_V3_1_8_SNAPSHOT, RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.consumer import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from apogee.remoting.server import RequestDispatcher
from apogee.remoting.signing import without_signing

log = logging.getLogger("apogee.broker.relay")

CALL_CLIENT_TIMEOUT_MS = 10_000  # RocketMQ's Broker2Client.callClient


class ConsumerRelayProcessor:
    def __init__(self, *, config: BrokerConfig, store: RecordSource, clients: ClientManager) -> None:
        self._config = config
        self._store = store
        self._clients = clients

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.running_info)
        dispatcher.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)

    async def running_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.decode(req.ext_fields)
        return await self._call_consumer(req, without_signing(req.ext_fields), None, h.consumer_group, h.client_id)

    async def consume_directly(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = ConsumeMessageDirectlyResultRequestHeader.decode(req.ext_fields)
        ext = without_signing(req.ext_fields)
        ext["brokerName"] = self._config.broker_name
        try:
            offset = decode_offset_msg_id(h.msg_id or "")[2]
        except ValueError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        record = record_at(self._store, offset)
        if record is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the msgId {h.msg_id}")
        try:
            body = bytes(record)
        finally:
            record.release()
        return await self._call_consumer(req, ext, body, h.consumer_group, h.client_id or "")

    async def _call_consumer(
        self, req: RemotingCommand, ext: dict[str, str], body: bytes | None, group: str, client_id: str
    ) -> RemotingCommand:
        info = self._clients.consumer_group(group)
        channel = next((ch for ch in info.channels.values() if ch.client_id == client_id), None) if info else None
        target = channel.conn if channel is not None else None
        if channel is None or not isinstance(target, Connection) or not target.is_open:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < VERSION_V3_1_8_SNAPSHOT:
            return req.response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{channel.version}> too low to finish, "
                "please upgrade it to V3_1_8_SNAPSHOT",
            )
        try:
            answer = await target.invoke(RemotingCommand.request(req.code, ext, body), CALL_CLIENT_TIMEOUT_MS)
        except RequestTimeoutError as exc:
            return req.response(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except ApogeeError as exc:
            return req.response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
            )
        return req.response(answer.code, answer.remark, ext_fields=answer.ext_fields, body=answer.body)
