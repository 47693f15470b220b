"""The hooks that write traces: one record per message sent, consumed or decided, handed to
a ``TraceDispatcher`` (RocketMQ's ``*TraceHookImpl``).

* ``SendTraceHook``: a Pub record after every attempt the broker answered (none for oneway
  sends, failed attempts, or when the broker's answer says ``TRACE_ON=false``).  Each
  message of a batch gets its own record with its own id (RocketMQ's Java client writes one
  record for a whole batch, with the ids comma-joined, which no query by id finds).
* ``ConsumeTraceHook``: a SubBefore per message before the listener, a SubAfter per message
  after it, sharing a request id; messages stored with ``TRACE_ON=false`` are left out.
* ``EndTransactionTraceHook``: an EndTransaction record per decision sent to the broker.

Times are epoch milliseconds; a Pub's is when the attempt began, its cost the attempt's
round trip; a SubAfter's cost is the listener call's time divided by its messages.
"""

from __future__ import annotations

import time

from apogee.client.consumer.hooks import ConsumeMessageContext
from apogee.client.producer.hooks import EndTransactionContext, SendContext
from apogee.client.trace.dispatcher import TraceDispatcher
from apogee.client.trace.records import (
    DEFAULT_REGION,
    ConsumeReturnType,
    EndTransactionRecord,
    MessageType,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
)
from apogee.client.types import SendStatus
from apogee.common import constants as c
from apogee.common.uniq_id import create_uniq_id

_START_DELIVER_TIME = "__STARTDELIVERTIME"  # a timed message (Alibaba Cloud's); traced as delayed


def message_type(properties: dict[str, str]) -> MessageType:
    """What a Pub record says a message is (DefaultMQProducerImpl.sendKernelImpl's rule)."""
    if c.DELAY in properties or _START_DELIVER_TIME in properties:
        return MessageType.DELAY
    if properties.get(c.TRAN_MSG) == "true":
        return MessageType.TRANS_HALF
    return MessageType.NORMAL


class SendTraceHook:
    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def before_send(self, ctx: SendContext) -> None:
        pass

    def after_send(self, ctx: SendContext) -> None:
        result = ctx.result
        if result is None or not result.trace_on:
            return
        msg = ctx.message
        if msg.topic.startswith(self.dispatcher.topic):
            return
        props = msg.properties
        elapsed = ctx.elapsed_ms
        self.dispatcher.append(PubRecord(
            int(time.time() * 1000 - elapsed), result.region_id or DEFAULT_REGION, ctx.group, msg.topic,
            result.msg_id, props.get(c.TAGS), props.get(c.KEYS), ctx.broker_addr, len(msg.body), int(elapsed),
            message_type(props), result.offset_msg_id, result.status is SendStatus.SEND_OK,
        ))


class ConsumeTraceHook:
    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def before_consume(self, ctx: ConsumeMessageContext) -> None:
        traced = [m for m in ctx.messages if m.properties.get(c.PROPERTY_TRACE_SWITCH) != "false"]
        if not traced:
            return
        now = int(time.time() * 1000)
        request_id = create_uniq_id()
        ctx.hook_state = (request_id, traced)
        append = self.dispatcher.append
        for msg in traced:
            props = msg.properties
            append(SubBeforeRecord(
                now, props.get(c.PROPERTY_MSG_REGION), ctx.group, request_id, msg.msg_id, msg.reconsume_times,
                props.get(c.KEYS),
            ))

    def after_consume(self, ctx: ConsumeMessageContext) -> None:
        if ctx.hook_state is None:
            return
        request_id, traced = ctx.hook_state
        now = int(time.time() * 1000)
        cost = int(ctx.elapsed_ms) // len(ctx.messages)
        code = ConsumeReturnType[ctx.return_type]
        append = self.dispatcher.append
        for msg in traced:
            append(SubAfterRecord(
                request_id, msg.msg_id, cost, ctx.success, msg.properties.get(c.KEYS), code, now, ctx.group,
            ))


class EndTransactionTraceHook:
    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def end_transaction(self, ctx: EndTransactionContext) -> None:
        msg = ctx.message
        if msg.topic.startswith(self.dispatcher.topic):
            return
        props = msg.properties
        self.dispatcher.append(EndTransactionRecord(
            int(time.time() * 1000), props.get(c.PROPERTY_MSG_REGION) or DEFAULT_REGION, ctx.group, msg.topic,
            ctx.msg_id, props.get(c.TAGS), props.get(c.KEYS), ctx.broker_addr, MessageType.TRANS_COMMIT,
            ctx.transaction_id, ctx.state, ctx.from_check,
        ))
