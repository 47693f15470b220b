"""PULL_MESSAGE with long polling (RocketMQ's PullMessageProcessor).

A pull that finds messages is answered at once with the stored records, as memoryview
slices of the CommitLog written straight to the socket.  A pull that finds nothing and
carries the SUSPEND flag is held by ``PullRequestHoldService`` and re-executed as soon as
the queue grows or the client's suspend timeout passes.

Every response carries ``suggestWhichBrokerId``, ``nextBeginOffset``, ``minOffset`` and
``maxOffset`` as strings: the C++ client keeps 0 for anything missing and then loops.  The
suggestion and what a slave answers differently follow ``broker.pull_rules``.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from apogee.broker.clients import ClientManager
from apogee.broker.config import BrokerAddress, BrokerConfig
from apogee.broker.long_polling import PullRequestHoldService
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.pull_rules import slave_corrects_offset, stores_commit_offset, suggest_broker_id
from apogee.broker.stats import BrokerStats
from apogee.broker.subscriptions import SubscriptionGroupManager
from apogee.broker.topics import TopicConfigManager
from apogee.common import constants as c
from apogee.common.accel import native
from apogee.filter import TAG, FilterExpressionError, compile_filter
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.pull import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from apogee.remoting.server import Deferred, FieldsAnswer, RequestDispatcher
from apogee.store.message_store import MessageStore
from apogee.store.results import GetResult, GetStatus, MessageFilter, TagCodeFilter

log = logging.getLogger("apogee.broker.pull")

# PullMessageResponseHeader's wire keys, in field order: every answer is a FieldsAnswer of them.
_ANSWER_KEYS = tuple(key for _attr, key, _kind, _req in PullMessageResponseHeader._fields())
_new_tuple = tuple.__new__
PERMITS_KEPT = 4096  # pull verdicts kept (``PullProcessor._filter``); the table starts again past it


class PullRequest(NamedTuple):
    """A PULL_MESSAGE header's fields, PullMessageRequestHeader's in its order: read by
    ``native.pull_fields`` when it reads them plainly, with no header object built."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None
    expression_type: str | None


_HEADER_ATTRS = tuple(attr for attr, _key, _kind, _req in PullMessageRequestHeader._fields())
_PULL_KEYS = tuple(key for _attr, key, _kind, _req in PullMessageRequestHeader._fields())  # native.pull_fields' order
assert PullRequest._fields == _HEADER_ATTRS, "PullRequest must list PullMessageRequestHeader's fields in order"


def read_pull_header(ext: dict[str, str] | None) -> PullRequest:
    """The request's header fields: ``native.pull_fields`` takes the plain ones (the Java, C++
    and Apogee clients' pulls), ``PullMessageRequestHeader.decode`` -- the specification --
    decides everything else, and raises HeaderError for a header it refuses."""
    if native is not None and ext:
        fields = native.pull_fields(ext, _PULL_KEYS)
        if fields is not None:
            return _new_tuple(PullRequest, fields)
    h = PullMessageRequestHeader.decode(ext)
    return PullRequest(*(getattr(h, attr) for attr in _HEADER_ATTRS))


def subscription_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """The broker-side filter of a subscription (compiled once; SQL92 compilations are cached).

    Raises FilterExpressionError for a malformed expression or an unknown type."""
    return compile_filter(expression_type or TAG, expression)


def filter_from_codes(sub_string: str, code_set: list[int], expression_type: str) -> MessageFilter:
    """The filter of a heartbeat subscription: its hash codes when the client sent them."""
    if expression_type == TAG and code_set and sub_string.strip() != "*":
        return TagCodeFilter(frozenset(code_set))
    return subscription_filter(expression_type, sub_string)


# Outcomes whose nextBeginOffset is a correction (RocketMQ nextOffsetCorrection): a slave
# without offsetCheckInSlave answers the requested offset instead.
_CORRECTIONS = frozenset({
    GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY,
    GetStatus.OFFSET_FOUND_NULL, GetStatus.NO_MATCHED_LOGIC_QUEUE,
})


# Each outcome's answer (RocketMQ's PullMessageProcessor).  The two outcomes of
# _EMPTY_QUEUE answer PULL_NOT_FOUND for a pull from offset 0 and PULL_OFFSET_MOVED otherwise.
# Module constants, read once per pull: on CPython 3.11 each read of an Enum class's
# attribute (GetStatus.FOUND) goes through EnumType.__getattr__'s slow lookup hook.
_FOUND = GetStatus.FOUND
_SUCCESS = ResponseCode.SUCCESS
_OFFSET_MOVED = ResponseCode.PULL_OFFSET_MOVED
_RETRY_NOW = ResponseCode.PULL_RETRY_IMMEDIATELY
_NOT_FOUND = ResponseCode.PULL_NOT_FOUND
_EMPTY_QUEUE = frozenset({GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE})
_PULL_CODES = {
    GetStatus.FOUND: _SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: _RETRY_NOW,
    GetStatus.MESSAGE_WAS_REMOVING: _RETRY_NOW,
    GetStatus.OFFSET_OVERFLOW_ONE: _NOT_FOUND,
    GetStatus.OFFSET_FOUND_NULL: _NOT_FOUND,
    GetStatus.NO_MESSAGE_IN_QUEUE: _OFFSET_MOVED,
    GetStatus.NO_MATCHED_LOGIC_QUEUE: _OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: _OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_BADLY: _OFFSET_MOVED,
}


def _pull_code(status: GetStatus, offset: int) -> ResponseCode:
    """The code RocketMQ answers a pull's outcome with."""
    if offset == 0 and status in _EMPTY_QUEUE:
        return _NOT_FOUND
    return _PULL_CODES[status]


def _not_found(status: GetStatus, offset: int) -> bool:
    """Whether RocketMQ answers this outcome with PULL_NOT_FOUND (the one that is held)."""
    return _pull_code(status, offset) is _NOT_FOUND


class PullProcessor:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        subscriptions: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        long_polling: PullRequestHoldService,
        address: BrokerAddress,
        stats: BrokerStats,
    ) -> None:
        self._config = config
        self._stats = stats
        self._store = store
        self._topics = topics
        self._subscriptions = subscriptions
        self._offsets = offsets
        self._clients = clients
        self._long_polling = long_polling
        self._address = address
        self._slave_read_enable = config.slave_read_enable
        self._stores_commit = stores_commit_offset(config.is_slave)
        self._corrects_offset = slave_corrects_offset(config.is_slave, store.config.offset_check_in_slave)
        # ``_prepare``'s verdict (the pull's filter) for what it read of a request, kept while
        # every table and setting it read is as it was (``_stamp``): a consumer repeats the
        # same group, topic, queue and subscription pull after pull.  Refusals are not kept.
        self._permits: dict[tuple[Any, ...], tuple[tuple[int | bool, ...], MessageFilter]] = {}

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.PULL_MESSAGE, self.pull)

    def pull(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | FieldsAnswer | Deferred:
        """Answer at once when possible; a ``Deferred`` answer when the pull is held."""
        h = read_pull_header(req.ext_fields)
        prepared = self._filter(req, h)
        if isinstance(prepared, RemotingCommand):
            return prepared
        message_filter = prepared
        if h.sys_flag & FLAG_COMMIT_OFFSET and h.commit_offset >= 0 and self._stores_commit:
            self._offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        result = self._store.get_message(
            h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, message_filter=message_filter
        )
        if h.sys_flag & FLAG_SUSPEND and _not_found(result.status, h.queue_offset):
            return self._hold(conn, req, h, message_filter)
        return self._response(req, h, result)

    def _hold(
        self, conn: Connection, req: RemotingCommand, h: PullRequest, message_filter: MessageFilter
    ) -> Deferred:
        """Hold a pull that found nothing; answer it when a message arrives or it times out.

        The read that found nothing ran in this same callback, so no message can have been
        dispatched in between: the waiter is registered before anything else runs.  The
        answer is read in the future's done callback, right after the dispatch that woke it;
        what it reads was just written, so it is in memory (no cold read to page in).
        """
        if self._config.long_polling_enable:
            timeout_ms = h.suspend_timeout_millis
        else:
            timeout_ms = self._config.short_polling_time_ms
        timeout_ms = max(0, min(timeout_ms, 60_000))
        held = self._long_polling.hold(
            h.topic, h.queue_id, h.queue_offset, timeout_ms / 1000, message_filter.is_matched_by_consume_queue,
            owner=conn,
        )
        return Deferred(held, lambda _woken: self._answer_held(req, h, message_filter))

    def _answer_held(self, req: RemotingCommand, h: PullRequest, message_filter: MessageFilter) -> FieldsAnswer:
        result = self._store.get_message(
            h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, message_filter=message_filter
        )
        return self._response(req, h, result)

    def _filter(self, req: RemotingCommand, h: PullRequest) -> MessageFilter | RemotingCommand:
        """``_prepare``'s verdict, from ``_permits`` when the same request was accepted and
        nothing it depends on changed since."""
        if h.sys_flag & FLAG_SUBSCRIPTION:
            key: tuple[Any, ...] = (h.consumer_group, h.topic, h.queue_id, h.subscription, h.expression_type)
        else:
            key = (h.consumer_group, h.topic, h.queue_id, h.sub_version)
        kept = self._permits.get(key)
        if kept is not None and kept[0] == self._stamp():
            return kept[1]
        prepared = self._prepare(req, h)
        if not isinstance(prepared, RemotingCommand):
            if len(self._permits) >= PERMITS_KEPT:  # bounded: subscriptions are the clients' text
                self._permits.clear()
            self._permits[key] = (self._stamp(), prepared)  # stamped after: it may have created the group
        return prepared

    def _stamp(self) -> tuple[int | bool, ...]:
        """What ``_prepare`` reads besides the request: the topic and group tables, the
        consumers' subscriptions and the live settings (any change makes a new stamp)."""
        config = self._config
        return (self._topics.file.version, self._subscriptions.file.version, self._clients.subscriptions_version,
                config.broker_permission, config.enable_property_filter)

    def _prepare(self, req: RemotingCommand, h: PullRequest) -> MessageFilter | RemotingCommand:
        """The pull's filter, or its refusal.  A group that does not exist yet is created
        (when allowed) only once the pull is accepted: a refused pull changes no table."""
        if not self._config.broker_permission & c.PERM_READ:
            return req.response(
                ResponseCode.NO_PERMISSION, f"the broker[{self._address.addr}] pulling message is forbidden"
            )
        group = self._subscriptions.get(h.consumer_group)
        if group is None:
            problem = self._subscriptions.creation_problem(h.consumer_group)
            if problem is not None:
                return req.response(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    f"subscription group [{h.consumer_group}] does not exist: {problem}",
                )
        elif not group.consume_enable:
            return req.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}")
        prepared = self._check(req, h)
        if group is None and prepared.__class__ is not RemotingCommand:
            self._subscriptions.find(h.consumer_group)  # accepted: auto-create it now
        return prepared

    def _check(self, req: RemotingCommand, h: PullRequest) -> MessageFilter | RemotingCommand:
        """Topic, queue and subscription checks of a pull; its filter when they pass."""
        config = self._topics.get(h.topic)
        if config is None:
            return req.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not config.perm & c.PERM_READ:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if h.queue_id < 0 or h.queue_id >= config.read_queue_nums:
            return req.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
                f"[{config.read_queue_nums}] consumer:[{req.ext_fields and h.consumer_group}]",
            )
        if h.sys_flag & FLAG_SUBSCRIPTION:
            expression_type = h.expression_type or TAG
            if expression_type != TAG and not self._config.enable_property_filter:
                return req.response(
                    ResponseCode.SYSTEM_ERROR,
                    "The broker does not support consumer to filter message by " + expression_type,
                )
            try:
                return subscription_filter(expression_type, h.subscription)
            except FilterExpressionError as exc:
                return req.response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
                )
        info = self._clients.consumer_group(h.consumer_group)
        if info is None:
            return req.response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist, group: {h.consumer_group}",
            )
        sub = info.subscriptions.get(h.topic)
        if sub is None:
            return req.response(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist, group: {h.consumer_group} topic: {h.topic}",
            )
        if sub.sub_version < h.sub_version:
            return req.response(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        try:
            return filter_from_codes(sub.sub_string, sub.code_set, sub.expression_type)
        except FilterExpressionError as exc:
            return req.response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
            )

    def _response(self, req: RemotingCommand, h: PullRequest, result: GetResult) -> FieldsAnswer:
        status = result.status
        body = None
        if status is _FOUND:
            code = _SUCCESS
            buffers = result.buffers
            body = buffers[0] if len(buffers) == 1 else buffers  # one buffer: the C path's copy
            self._stats.got(h.consumer_group, h.topic, len(result.queue_offsets), result.buffer_total_size)
        else:
            code = _pull_code(status, h.queue_offset)
            self._stats.got(h.consumer_group, h.topic, 0, 0)
        suggest = 0
        if self._slave_read_enable:
            group = self._subscriptions.get(h.consumer_group)
            if group is not None:
                suggest = suggest_broker_id(
                    True, result.suggest_pulling_from_slave, group.broker_id, group.which_broker_when_consume_slowly
                )
        if code is _OFFSET_MOVED:
            if self._corrects_offset:
                log.info(
                    "pull offset moved: group %s topic %s queue %d requested %d, next %d (min %d max %d)",
                    h.consumer_group, h.topic, h.queue_id, h.queue_offset,
                    result.next_begin_offset, result.min_offset, result.max_offset,
                )
            else:  # a slave (behind its master, perhaps) does not move the consumer's offset
                code = _RETRY_NOW
                group = self._subscriptions.get(h.consumer_group)
                suggest = group.broker_id if group is not None else 0
                log.debug(  # RocketMQ warns; the consumer retries at once, so it would flood the log
                    "PULL_OFFSET_MOVED: none correction (slave, offsetCheckInSlave=false): group %s topic %s "
                    "queue %d requested %d (min %d max %d)",
                    h.consumer_group, h.topic, h.queue_id, h.queue_offset, result.min_offset, result.max_offset,
                )
        next_begin = result.next_begin_offset
        if not self._corrects_offset and status in _CORRECTIONS:
            next_begin = h.queue_offset
        # PullMessageResponseHeader's fields, written as strings, without a header object.
        values = (suggest, next_begin, result.min_offset, result.max_offset)
        return _new_tuple(FieldsAnswer, (code, _ANSWER_KEYS, values, body))
