"""What a consumer answers when a broker relays an operator's question to it:
GET_CONSUMER_RUNNING_INFO (its settings, subscriptions, owned queues and consume figures:
mqadmin consumerStatus, the dashboard's client page, rocketmq-exporter's client metrics) and
CONSUME_MESSAGE_DIRECTLY (one message handed to the consumer's own listener, and how it
ended: mqadmin consumeMessage, the dashboard's "resend" button).  RocketMQ's shapes
(``remoting.bodies.consumer_info``).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from apogee.client.consumer.base import reset_retry_topic
from apogee.client.consumer.concurrently import to_result
from apogee.client.types import ConsumeContext, ConsumeResult
from apogee.common.config import describe
from apogee.common.message import MessageExt, MessageQueue
from apogee.remoting.bodies import consumer_info as ci
from apogee.remoting.bodies.heartbeat import QueueKey
from apogee.remoting.codes import CURRENT_VERSION_DESC

if TYPE_CHECKING:
    from apogee.client.consumer.base import ConsumerBase

MIB = 1024 * 1024


def running_info(consumer: ConsumerBase, namesrvs: list[str], jstack: bool) -> ci.ConsumerRunningInfo:
    """RocketMQ's consumerRunningInfo: the consumer's settings as properties (RocketMQ's
    names), its subscriptions, a ProcessQueueInfo per owned queue and a ConsumeStatus per
    subscribed topic; with ``jstack`` the stacks of every thread and task."""
    config = consumer.config
    props = {key: str(value) for key, value in describe(config)}
    props["consumeFromWhere"] = config.consume_from_where.value
    props[ci.PROP_CONSUME_ORDERLY] = "true" if consumer.orderly else "false"
    props[ci.PROP_THREADPOOL_CORE_SIZE] = str(config.consume_thread_max)
    props[ci.PROP_CONSUMER_START_TIMESTAMP] = str(consumer.start_ms)
    props[ci.PROP_NAMESERVER_ADDR] = "".join(f"{addr};" for addr in namesrvs)
    props[ci.PROP_CONSUME_TYPE] = consumer.consume_type
    props[ci.PROP_CLIENT_VERSION] = CURRENT_VERSION_DESC
    info = ci.ConsumerRunningInfo(properties=props)
    info.subscriptions = [s.to_data() for s in consumer.subscriptions.values()]
    store = consumer.offset_store
    pqs = consumer.rebalancer.process_queues if consumer.rebalancer is not None else {}
    for mq, pq in pqs.items():
        fill = pq.info()
        info.mq_table[QueueKey(mq.topic, mq.broker_name, mq.queue_id)] = ci.ProcessQueueInfo(
            commit_offset=store.memory_offset(mq) if store is not None else -1,
            cached_msg_size_in_mib=pq.msg_size // MIB,
            locked=pq.locked,
            try_unlock_times=pq.try_unlock_times,
            last_lock_timestamp=pq.last_lock_ms,
            droped=pq.dropped,
            last_pull_timestamp=pq.last_pull_ms,
            last_consume_timestamp=pq.last_consume_ms,
            **fill,
        )
    for topic in consumer.subscriptions:
        info.status_table[topic] = consumer.stats.status(topic)
    if jstack:
        info.jstack = stacks()
    return info


def stacks() -> str:
    """Every thread's stack and every asyncio task's (Java's jstack in the answer)."""
    out: list[str] = []
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        out.append(f'"{names.get(ident, ident)}"\n' + "".join(traceback.format_stack(frame)))
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        tasks = set()
    for task in tasks:
        frames = [line for f in task.get_stack() for line in traceback.format_stack(f, limit=1)]
        out.append(f'"task {task.get_name()}"\n' + "".join(frames))
    return "\n".join(out)


_RESULTS = {
    ConsumeResult.CONSUME_SUCCESS: ci.CR_SUCCESS,
    ConsumeResult.RECONSUME_LATER: ci.CR_LATER,
    ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT: ci.CR_LATER,
}


async def consume_directly(
    consumer: ConsumerBase, listener: Any, is_async: bool, msg: MessageExt, broker_name: str
) -> ci.ConsumeMessageDirectlyResult:
    """One message through the consumer's listener, outside the queues: nothing is committed
    or sent back, whatever the listener answers (RocketMQ's consumeMessageDirectly)."""
    result = ci.ConsumeMessageDirectlyResult(order=consumer.orderly, auto_commit=True)
    msgs = [msg]
    reset_retry_topic(msgs, consumer.group)
    ctx = ConsumeContext(MessageQueue(msg.topic, broker_name, msg.queue_id))
    began = time.monotonic()
    try:
        if is_async:
            value = await listener(msgs, ctx)
        else:
            value = await asyncio.get_running_loop().run_in_executor(None, listener, msgs, ctx)
        result.consume_result = _RESULTS[to_result(value)]
    except Exception as exc:
        result.consume_result = ci.CR_THROW_EXCEPTION
        result.remark = exception_desc(exc)
    result.spent_time_mills = int((time.monotonic() - began) * 1000)
    return result


def exception_desc(exc: BaseException) -> str:
    """RocketMQ's RemotingHelper.exceptionSimpleDesc: the exception and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f", {frames[-1].name}({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
