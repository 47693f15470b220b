"""Message commands: lookups by id, unique key, key and offset; reading queues (printMsg,
printMsgByQueue, consumeMessage, queryCq); sending (sendMessage) and send-latency probes
(sendMsgStatus, checkMsgSendRT, clusterRT)."""

from __future__ import annotations

import collections
import statistics

import click

from apogee.admin.client import AdminClient, FoundMessage
from apogee.admin.messages import SendProbe
from apogee.cli.admin.commands import BOOL, Output, admin_command, admin_group, opt, parse_timestamp, print_messages
from apogee.common.message import MessageExt, MessageQueue


async def _consume_directly(admin: AdminClient, out: Output, group: str, client_id: str, msg_id: str,
                            topic: str | None) -> None:
    result = await admin.consume_directly(group, client_id, msg_id, topic)
    out.pairs(result, "consumeResult", title="ConsumeMessageDirectlyResult")


@admin_group.admin("query-msg-by-id", "queryMsgById")
@opt("i", "msgId", required=True, help="Offset message id, or a unique id (UNIQ_KEY) with -t.")
@opt("t", "topic", help="Topic to search for a unique id.")
@opt("g", "consumerGroup", help="With -d: have this group's client consume the message (309).")
@opt("d", "clientId", help="With -g: the client that consumes it.")
@opt("s", "sendMessage", type=BOOL, default=False, help="Send the message again.")
@opt("u", "unitName", help="Accepted for mqadmin; Apogee has no units.")
@admin_command
async def query_msg_by_id(admin: AdminClient, out: Output, msg_id: str, topic: str | None, consumer_group: str | None,
                          client_id: str | None, send_message: bool, unit_name: str | None) -> None:
    """Show a message by its id (or resend it, or have a consumer consume it again)."""
    if consumer_group and client_id:
        await _consume_directly(admin, out, consumer_group, client_id, msg_id, topic)
        return
    if send_message:
        result = await admin.resend(msg_id)
        out.pairs({"sendStatus": result.status.name, "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id,
                   "queue": f"{result.message_queue.broker_name}/{result.message_queue.queue_id}"}, "sendResult")
        return
    print_messages(out, await admin.query_by_id(msg_id, topic))


@admin_group.admin("query-msg-by-unique-key", "queryMsgByUniqueKey")
@opt("i", "msgId", required=True, help="The unique id (UNIQ_KEY) send results and consumers show.")
@opt("t", "topic", required=True)
@opt("g", "consumerGroup", help="With -d: have this group's client consume the message (309).")
@opt("d", "clientId")
@opt("a", "showAll", is_flag=True, help="Every message with the id (32 at most), not only the newest.")
@admin_command
async def query_msg_by_unique_key(admin: AdminClient, out: Output, msg_id: str, topic: str,
                                  consumer_group: str | None, client_id: str | None, show_all: bool) -> None:
    """Show a message by its unique id."""
    if consumer_group and client_id:
        await _consume_directly(admin, out, consumer_group, client_id, msg_id, topic)
        return
    found = await admin.query_by_key(topic, msg_id, unique=True)
    print_messages(out, found if show_all else found[:1])


@admin_group.admin("query-msg-by-key", "queryMsgByKey")
@opt("t", "topic", required=True)
@opt("k", "msgKey", "--key", required=True)
@opt("b", "begin", default="0", help="Stored at or after (ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS).")
@opt("e", "end", default=str(2**62), help="Stored at or before.")
@opt(None, "max", dest="max_num", default=32, show_default=True)
@admin_command
async def query_msg_by_key(admin: AdminClient, out: Output, topic: str, msg_key: str, begin: str, end: str,
                           max_num: int) -> None:
    """Show the messages with a key, newest first."""
    found = await admin.query_by_key(topic, msg_key, begin_ms=parse_timestamp(begin), end_ms=parse_timestamp(end),
                                     max_num=max_num)
    print_messages(out, found)


@admin_group.admin("query-msg-by-offset", "queryMsgByOffset")
@opt("t", "topic", required=True)
@opt("b", "brokerName", required=True)
@opt("i", "queueId", type=int, required=True)
@opt("o", "offset", type=int, required=True)
@admin_command
async def query_msg_by_offset(admin: AdminClient, out: Output, topic: str, broker_name: str, queue_id: int,
                              offset: int) -> None:
    """Show the message at a queue offset."""
    msg = await admin.message_at(topic, broker_name, queue_id, offset)
    print_messages(out, [FoundMessage(msg, broker_name)] if msg else [])


def _message_row(m: MessageExt, charset: str, body: bool) -> list[object]:
    text = m.body.decode(charset, errors="replace") if body else ""
    return [m.queue_id, m.queue_offset, m.msg_id, m.tags or "", " ".join(m.keys), m.store_timestamp, text]


MESSAGE_COLUMNS = ["queue", "offset", "msgId", "tags", "keys", "storeTimestamp", "body"]


@admin_group.admin("print-msg", "printMsg")
@opt("t", "topic", required=True)
@opt("c", "charsetName", default="utf-8")
@opt("s", "subExpression", default="*", help="Tags, e.g. 'TagA || TagB'.")
@opt("b", "beginTimestamp", help="From the message stored nearest this time.")
@opt("e", "endTimestamp", help="Up to the message stored nearest this time.")
@opt("d", "printBody", type=BOOL, default=True)
@admin_command
async def print_msg(admin: AdminClient, out: Output, topic: str, charset_name: str, sub_expression: str,
                    begin_timestamp: str | None, end_timestamp: str | None, print_body: bool) -> None:
    """Print every message of a topic (or those stored within a time range)."""
    begin = parse_timestamp(begin_timestamp) if begin_timestamp else None
    end = parse_timestamp(end_timestamp) if end_timestamp else None
    queues = await admin.topic_queues(topic)
    rows = []
    with out.progress("queues") as tick:
        for i, (mq, addr) in enumerate(sorted(queues.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))):
            low, high = await admin.queue_bounds(addr, mq, begin, end)
            out.line(f"minOffset={low}, maxOffset={high}, {mq.broker_name}/{mq.queue_id}")
            async for m in admin.read_queue(mq, low, high, expression=sub_expression):
                rows.append([mq.broker_name, *_message_row(m, charset_name, print_body)])
            if tick:
                tick(i + 1, len(queues))
    out.table(["broker", *MESSAGE_COLUMNS], rows, name="messages")


@admin_group.admin("print-msg-by-queue", "printMsgByQueue")
@opt("t", "topic", required=True)
@opt("a", "brokerName", required=True)
@opt("i", "queueId", type=int, required=True)
@opt("c", "charsetName", default="utf-8")
@opt("s", "subExpression", default="*")
@opt("b", "beginTimestamp")
@opt("e", "endTimestamp")
@opt("p", "printMsg", type=BOOL, default=False, help="Print the messages.")
@opt("d", "printBody", type=BOOL, default=False)
@opt("f", "calculate", type=BOOL, default=False, help="Count the messages by tag.")
@admin_command
async def print_msg_by_queue(admin: AdminClient, out: Output, topic: str, broker_name: str, queue_id: int,
                             charset_name: str, sub_expression: str, begin_timestamp: str | None,
                             end_timestamp: str | None, print_msg: bool, print_body: bool, calculate: bool) -> None:
    """Walk one queue: print its messages and/or count them by tag."""
    mq = MessageQueue(topic, broker_name, queue_id)
    addr = (await admin.topic_queues(topic)).get(mq)
    if addr is None:
        raise click.UsageError(f"{broker_name}/{queue_id} is not a readable queue of {topic}")
    low, high = await admin.queue_bounds(addr, mq, parse_timestamp(begin_timestamp) if begin_timestamp else None,
                                         parse_timestamp(end_timestamp) if end_timestamp else None)
    rows, tags = [], collections.Counter[str]()
    async for m in admin.read_queue(mq, low, high, expression=sub_expression):
        tags[m.tags or ""] += 1
        if print_msg:
            rows.append(_message_row(m, charset_name, print_body))
    if print_msg:
        out.table(MESSAGE_COLUMNS, rows, name="messages")
    if calculate:
        out.table(["tag", "count"], [[t, n] for t, n in tags.most_common()], name="tags")
    out.value("count", sum(tags.values()), "messages")


@admin_group.admin("consume-message", "consumeMessage")
@opt("t", "topic", required=True)
@opt("b", "brokerName", help="Only this broker's queues.")
@opt("i", "queueId", type=int, help="Only this queue (with -b).")
@opt("o", "offset", type=int, help="From this offset (default: each queue's first).")
@opt("g", "consumerGroup", default="TOOLS_CONSUMER", show_default=True)
@opt("c", "MessageNumber", dest="count", type=int, default=128, show_default=True,
     help="How many messages at most.")
@opt("s", "beginTimestamp", help="From the message stored nearest this time.")
@opt("e", "endTimestamp", help="Up to the message stored nearest this time.")
@admin_command
async def consume_message(admin: AdminClient, out: Output, topic: str, broker_name: str | None, queue_id: int | None,
                          offset: int | None, consumer_group: str, count: int, begin_timestamp: str | None,
                          end_timestamp: str | None) -> None:
    """Pull and print messages of a topic, a broker or one queue (no offset is committed)."""
    queues = {
        mq: a for mq, a in (await admin.topic_queues(topic)).items()
        if (broker_name is None or mq.broker_name == broker_name) and (queue_id is None or mq.queue_id == queue_id)
    }
    if not queues:
        raise click.UsageError("no readable queue matches -b/-i")
    rows: list[list[object]] = []
    for mq, addr in sorted(queues.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id)):
        low, high = await admin.queue_bounds(addr, mq, parse_timestamp(begin_timestamp) if begin_timestamp else None,
                                             parse_timestamp(end_timestamp) if end_timestamp else None)
        if offset is not None:
            low = offset
        async for m in admin.read_queue(mq, low, high, group=consumer_group, limit=count - len(rows)):
            rows.append([mq.broker_name, *_message_row(m, "utf-8", True)])
        if len(rows) >= count:
            break
    out.table(["broker", *MESSAGE_COLUMNS], rows, name="messages")


@admin_group.admin("send-message", "sendMessage")
@opt("t", "topic", required=True)
@opt("p", "body", required=True, help="The body, as UTF-8 text.")
@opt("k", "key", help="Message keys.")
@opt("c", "tags")
@opt("b", "broker", help="Send to this broker (its name).")
@opt("i", "qid", type=int, help="Send to this queue (with -b).")
@opt("m", "msgTraceEnable", type=BOOL, default=False, help="Accepted for mqadmin; the tool's send is not traced.")
@admin_command
async def send_message(admin: AdminClient, out: Output, topic: str, body: str, key: str | None, tags: str | None,
                       broker: str | None, qid: int | None, msg_trace_enable: bool) -> None:
    """Send one message."""
    result = await admin.send_message(topic, body.encode(), keys=key, tags=tags, broker_name=broker, queue_id=qid)
    out.table(["broker", "queue", "status", "msgId", "offsetMsgId"], [[
        result.message_queue.broker_name, result.message_queue.queue_id, result.status.name, result.msg_id,
        result.offset_msg_id]], name="sent")


@admin_group.admin("query-cq", "queryCq")
@opt("t", "topic", required=True)
@opt("q", "queue", type=int, required=True, help="Queue id.")
@opt("i", "index", type=int, required=True, help="First queue index (offset).")
@opt("c", "count", type=int, default=10, show_default=True)
@opt("b", "broker", help="The broker's address (default: the topic's first master).")
@opt("g", "consumer", help="Show this group's subscription and filter too.")
@admin_command
async def query_cq(admin: AdminClient, out: Output, topic: str, queue: int, index: int, count: int, broker: str | None,
                   consumer: str | None) -> None:
    """ConsumeQueue entries of a queue: CommitLog offset, size and tags code of each."""
    body = await admin.query_consume_queue(topic, queue, index, count, broker, consumer)
    out.value("minQueueIndex", body.get("minQueueIndex"))
    out.value("maxQueueIndex", body.get("maxQueueIndex"))
    out.table(["physicOffset", "physicSize", "tagsCode"],
              [[e.get("physicOffset"), e.get("physicSize"), e.get("tagsCode")] for e in body.get("queueData") or []],
              name="queueData")
    for key in ("subscriptionData", "filterData"):
        if body.get(key) is not None:
            out.value(key, body[key])


def _probe_rows(out: Output, probes: list[SendProbe]) -> None:
    out.table(["broker", "queue", "result", "rt ms"], [
        [p.queue.broker_name if p.queue else "", p.queue.queue_id if p.queue else "", p.result, round(p.rt_ms, 3)]
        for p in probes
    ], name="sends")
    ok = [p.rt_ms for p in probes if p.ok]
    out.value("sent", len(ok))
    out.value("failed", len(probes) - len(ok))
    out.value("avgRtMs", round(statistics.fmean(ok), 3) if ok else None, "average rt (ms)")


@admin_group.admin("send-msg-status", "sendMsgStatus")
@opt("b", "brokerName", required=True, help="The broker (its name is also its topic).")
@opt("s", "messageSize", type=click.IntRange(1), default=128, show_default=True)
@opt("c", "count", type=click.IntRange(1), default=50, show_default=True)
@admin_command
async def send_msg_status(admin: AdminClient, out: Output, broker_name: str, message_size: int, count: int) -> None:
    """Send messages to a broker's own topic and show each send's latency."""
    with out.progress("sending") as tick:
        probes = await admin.probe_sends(broker_name, count, message_size, broker_name=broker_name, tick=tick)
    _probe_rows(out, probes)


@admin_group.admin("check-msg-send-rt", "checkMsgSendRT")
@opt("t", "topic", required=True)
@opt("a", "amount", type=click.IntRange(1), default=100, show_default=True)
@opt("s", "size", type=click.IntRange(1), default=128, show_default=True)
@admin_command
async def check_msg_send_rt(admin: AdminClient, out: Output, topic: str, amount: int, size: int) -> None:
    """Send messages to a topic and show each send's latency and the average."""
    with out.progress("sending") as tick:
        probes = await admin.probe_sends(topic, amount, size, tick=tick)
    _probe_rows(out, probes)


@admin_group.admin("cluster-rt", "clusterRT")
@opt("a", "amount", type=click.IntRange(1), default=100, show_default=True)
@opt("s", "size", type=click.IntRange(1), default=128, show_default=True)
@opt("c", "cluster", help="Only this cluster (default: every cluster).")
@opt("i", "interval", type=int, help="Accepted for mqadmin; Apogee measures one round per run.")
@admin_command
async def cluster_rt(admin: AdminClient, out: Output, amount: int, size: int, cluster: str | None,
                     interval: int | None) -> None:
    """Send latency to every master (to its own topic): success and failure counts and average RT."""
    view = await admin.cluster_info()
    rows = []
    with out.progress("brokers") as tick:
        masters = [(cl, name) for cl in sorted(view.clusters) if cluster is None or cl == cluster
                   for name in sorted(view.masters(cl))]
        for i, (cl, name) in enumerate(masters):
            probes = await admin.probe_sends(name, amount, size, broker_name=name)
            ok = [p.rt_ms for p in probes if p.ok]
            rows.append([cl, name, round(statistics.fmean(ok), 3) if ok else None, len(ok), len(probes) - len(ok)])
            if tick:
                tick(i + 1, len(masters))
    out.table(["cluster", "broker", "rt ms", "success", "failed"], rows, name="brokers")
