"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, LOCK/UNLOCK_BATCH_MQ,
QUERY/UPDATE_CONSUMER_OFFSET: what clients say about themselves and their progress.

(RocketMQ's ClientManageProcessor and ConsumerManageProcessor.)

Names that would enter a table are checked first (``common.validators``): a heartbeat whose
consumer group name RocketMQ's clients would refuse is answered with the reason and
registers nothing, and so is an offset commit for an illegal group or topic name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from apogee.broker.clients import ClientChannel, ClientManager
from apogee.broker.config import BrokerConfig
from apogee.broker.locks import RebalanceLockManager
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.processors.pull import subscription_filter
from apogee.broker.subscriptions import SubscriptionGroupManager
from apogee.broker.topics import PERM_RW, TopicConfigManager
from apogee.common.constants import retry_topic
from apogee.common.lenient_json import loads
from apogee.common.validators import validate_group, validate_topic
from apogee.errors import ApogeeError
from apogee.filter import TAG, FilterExpressionError
from apogee.remoting.bodies.heartbeat import (
    HeartbeatData,
    LockBatchRequest,
    encode_consumer_id_list,
    encode_lock_ok,
)
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.consumer import (
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from apogee.remoting.server import RequestDispatcher
from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker.client_manage")


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClientManageProcessor:
    """``topics_changed`` is called when a heartbeat creates a retry topic (the NameServers
    should learn it)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        subscriptions: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        locks: RebalanceLockManager,
        topics_changed: Callable[[], None],
    ) -> None:
        self._config = config
        self._store = store
        self._topics = topics
        self._subscriptions = subscriptions
        self._offsets = offsets
        self._clients = clients
        self._locks = locks
        self._topics_changed = topics_changed

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.HEART_BEAT, self.heartbeat)
        dispatcher.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        dispatcher.register(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config)
        dispatcher.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list)
        dispatcher.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch)
        dispatcher.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch)
        dispatcher.register(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        dispatcher.register(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)

    # --- membership ---------------------------------------------------------------------------

    def _check_subscriptions(self, req: RemotingCommand, data: HeartbeatData) -> RemotingCommand | None:
        """Reject a bad group name or filter expression when it is subscribed, not when
        messages flow."""
        for consumer in data.consumers:
            problem = validate_group(consumer.group_name)
            if problem is not None:
                return req.response(ResponseCode.SYSTEM_ERROR, f"consumer group refused: {problem}")
            for sub in consumer.subscriptions:
                if sub.expression_type != TAG and not self._config.enable_property_filter:
                    return req.response(
                        ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {sub.expression_type}",
                    )
                try:
                    subscription_filter(sub.expression_type, sub.sub_string)
                except FilterExpressionError as exc:
                    return req.response(
                        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                        f"subscription of group {consumer.group_name} to {sub.topic} is invalid: {exc}",
                    )
        return None

    def heartbeat(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        data = HeartbeatData.decode(req.body_bytes())
        rejected = self._check_subscriptions(req, data)
        if rejected is not None:
            return rejected
        now = _now_ms()
        channel = ClientChannel(conn, data.client_id, req.language, req.version, now)
        conn.attributes["client_id"] = data.client_id
        conn.attributes["language"] = req.language
        conn.attributes["version"] = req.version
        topics_created = False
        for consumer in data.consumers:
            group_config = self._subscriptions.find(consumer.group_name)
            retry = retry_topic(consumer.group_name)
            if group_config is not None and validate_topic(retry) is None:  # a group over 120 characters has none
                _, created = self._topics.create_system_like(retry, group_config.retry_queue_nums, PERM_RW)
                topics_created |= created
            changed = self._clients.register_consumer(consumer, channel)
            if changed:
                log.info("consumer group %s: client %s joined", consumer.group_name, data.client_id)
                if group_config is None or group_config.notify_consumer_ids_changed_enable:
                    notify_consumer_ids_changed(self._clients, consumer.group_name)
        for group in data.producer_groups:
            self._clients.register_producer(group, channel)
        if topics_created:
            self._topics_changed()
        return req.response(ResponseCode.SUCCESS)

    def unregister_client(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.decode(req.ext_fields)
        if header.producer_group:
            self._clients.unregister_producer(header.producer_group, conn)
        if header.consumer_group and self._clients.unregister_consumer(header.consumer_group, conn):
            log.info("consumer group %s: client %s left", header.consumer_group, header.client_id)
            notify_consumer_ids_changed(self._clients, header.consumer_group)
        return req.response(ResponseCode.SUCCESS)

    def check_client_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG: Java clients validate a subscription before they start."""
        try:
            body = loads(req.body_bytes() or b"{}")
            sub = body.get("subscriptionData") or {}
            expression_type = str(sub.get("expressionType") or TAG)
            expression = str(sub.get("subString") or "*")
        except (ValueError, AttributeError) as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"malformed client config: {exc}")
        if expression_type != TAG and not self._config.enable_property_filter:
            return req.response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type}",
            )
        try:
            subscription_filter(expression_type, expression)
        except FilterExpressionError as exc:
            return req.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return req.response(ResponseCode.SUCCESS)

    def get_consumer_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.decode(req.ext_fields)
        info = self._clients.consumer_group(header.consumer_group)
        if info is None or not info.channels:
            return req.response(
                ResponseCode.SYSTEM_ERROR,
                f"no consumer for this group, {header.consumer_group}",
            )
        return req.response(ResponseCode.SUCCESS, body=encode_consumer_id_list(info.client_ids()))

    # --- orderly locks ------------------------------------------------------------------------

    def lock_batch(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        request = LockBatchRequest.decode(req.body_bytes())
        held = self._locks.try_lock_batch(
            request.consumer_group, request.mq_set, request.client_id, _now_ms()
        )
        return req.response(ResponseCode.SUCCESS, body=encode_lock_ok(held))

    def unlock_batch(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        request = LockBatchRequest.decode(req.body_bytes())
        self._locks.unlock_batch(request.consumer_group, request.mq_set, request.client_id)
        return req.response(ResponseCode.SUCCESS)

    # --- offsets ------------------------------------------------------------------------------

    def query_consumer_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.decode(req.ext_fields)
        offset = self._offsets.query(h.consumer_group, h.topic, h.queue_id)
        if offset >= 0:
            return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).encode())
        # RocketMQ's rule: a group new to a queue whose first message is still at offset 0
        # starts there, so a fresh consumer on a young topic misses nothing.
        if self._store.get_min_offset_in_queue(h.topic, h.queue_id) <= 0:
            return req.response(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(0).encode())
        return req.response(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_consumer_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.decode(req.ext_fields)
        problem = validate_group(h.consumer_group) or validate_topic(h.topic)
        if problem is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        self._offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return req.response(ResponseCode.SUCCESS)


def notify_request(group: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        NotifyConsumerIdsChangedRequestHeader(group).encode(),
        oneway=True,
    )


def notify_consumer_ids_changed(clients: ClientManager, group: str) -> None:
    """Tell every client of ``group`` to rebalance now (oneway, best effort)."""
    info = clients.consumer_group(group)
    if info is None:
        return
    for channel in list(info.channels.values()):
        conn = channel.conn
        if isinstance(conn, Connection) and conn.is_open:
            try:
                conn.send(notify_request(group))
            except ApogeeError as exc:
                log.debug("notify %s failed: %s", channel.client_id, exc)
