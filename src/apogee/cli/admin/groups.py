"""Group commands: subscription groups, connections, progress and offsets (mqadmin's
updateSubGroup, deleteSubGroup, getConsumerConfig, consumerConnection, producerConnection,
producer, consumerProgress, consumerStatus, resetOffsetByTime, skipAccumulatedMessage,
cloneGroupOffset, brokerConsumeStats)."""

from __future__ import annotations

from typing import Any

import click

from apogee.admin.client import AdminClient
from apogee.cli.admin.commands import BOOL, Output, _fmt_ms, admin_command, admin_group, opt, parse_timestamp
from apogee.common.message import MessageQueue
from apogee.errors import ApogeeError

# updateSubGroup's options -> SubscriptionGroupConfig fields.
GROUP_FIELDS = {
    "consume_enable": "consumeEnable", "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable", "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes", "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed": "notifyConsumerIdsChangedEnable",
}


def _targets_required(broker_addr: str | None, cluster: str | None) -> None:
    if not broker_addr and not cluster:
        raise click.UsageError("give --broker-addr (-b) or --cluster-name (-c)")


@admin_group.admin("update-sub-group", "updateSubGroup")
@opt("g", "groupName", required=True)
@opt("b", "brokerAddr")
@opt("c", "clusterName", "--cluster")
@opt("s", "consumeEnable", type=BOOL)
@opt("m", "consumeFromMinEnable", type=BOOL)
@opt("d", "consumeBroadcastEnable", type=BOOL)
@opt("q", "retryQueueNums", type=int)
@opt("r", "retryMaxTimes", type=int)
@opt("i", "brokerId", type=int)
@opt("w", "whichBrokerWhenConsumeSlowly", type=int)
@opt("a", "notifyConsumerIdsChanged", type=BOOL)
@admin_command
async def update_sub_group(admin: AdminClient, out: Output, group_name: str, broker_addr: str | None,
                           cluster_name: str | None, **settings: Any) -> None:
    """Create or update a subscription group on brokers."""
    _targets_required(broker_addr, cluster_name)
    fields = {GROUP_FIELDS[k]: v for k, v in settings.items() if v is not None}
    for addr in await admin.targets(broker_addr, cluster_name):
        config = await admin.update_group(addr, group_name, **fields)
        out.line(f"create subscription group to {addr} success.")
    out.pairs(config, "config")


@admin_group.admin("delete-sub-group", "deleteSubGroup")
@opt("g", "groupName", required=True)
@opt("b", "brokerAddr")
@opt("c", "clusterName", "--cluster")
@opt("r", "removeOffset", type=BOOL, default=False, help="Also remove the group's offsets.")
@admin_command
async def delete_sub_group(admin: AdminClient, out: Output, group_name: str, broker_addr: str | None,
                           cluster_name: str | None, remove_offset: bool) -> None:
    """Delete a subscription group (with -c also its retry and DLQ topics, as mqadmin)."""
    _targets_required(broker_addr, cluster_name)
    for addr in await admin.targets(broker_addr, cluster_name):
        await admin.delete_group(addr, group_name, remove_offset)
        out.line(f"delete subscription group [{group_name}] from broker [{addr}] success.")
    if cluster_name and not broker_addr:
        for topic in (f"%RETRY%{group_name}", f"%DLQ%{group_name}"):
            await admin.delete_topic(topic, cluster_name)
            out.line(f"delete topic [{topic}] from cluster [{cluster_name}] success.")


@admin_group.admin("get-consumer-config", "getConsumerConfig")
@opt("g", "groupName", required=True)
@admin_command
async def get_consumer_config(admin: AdminClient, out: Output, group_name: str) -> None:
    """A subscription group's config on each master that has it."""
    configs = await admin.group_config(group_name)
    if out.json_mode:
        out.doc["configs"] = configs
        return
    for addr, config in configs.items():
        out.pairs(config, "config", title=f"{group_name} on {addr}")


@admin_group.admin("consumer-connection", "consumerConnection")
@opt("g", "consumerGroup", required=True)
@opt("b", "brokerAddr", help="Ask this broker (default: a broker of the group's retry topic).")
@admin_command
async def consumer_connection(admin: AdminClient, out: Output, consumer_group: str, broker_addr: str | None) -> None:
    """A consumer group's live clients and subscriptions."""
    conns = await admin.consumer_connection(consumer_group, broker_addr)
    out.table(["clientId", "clientAddr", "language", "version"],
              [[c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version")] for c in conns.clients],
              name="connections")
    out.table(["topic", "subExpression"], [[t, e] for t, e in sorted(conns.subscriptions.items())],
              name="subscriptions")
    out.value("consumeType", conns.consume_type, "ConsumeType")
    out.value("messageModel", conns.message_model, "MessageModel")
    out.value("consumeFromWhere", conns.consume_from_where, "ConsumeFromWhere")


@admin_group.admin("producer-connection", "producerConnection")
@opt("g", "producerGroup", required=True)
@opt("t", "topic", required=True)
@admin_command
async def producer_connection(admin: AdminClient, out: Output, producer_group: str, topic: str) -> None:
    """A producer group's live clients, asked of the topic's brokers."""
    conns = await admin.producer_connection(producer_group, topic)
    out.table(["clientId", "clientAddr", "language", "version"],
              [[c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version")] for c in conns.clients],
              name="connections")


@admin_group.admin("producer", "producer")
@opt("b", "broker", required=True, help="The broker's address.")
@admin_command
async def producer(admin: AdminClient, out: Output, broker: str) -> None:
    """Every producer group a broker knows and its clients."""
    table = await admin.all_producers(broker)
    out.table(["group", "clientId", "remoteIP", "language", "version", "lastUpdateTimestamp"], [
        [g, p.get("clientId"), p.get("remoteIP"), p.get("language"), p.get("version"), p.get("lastUpdateTimestamp")]
        for g, clients in sorted(table.items()) for p in clients
    ], name="producers")


async def _client_of_queue(admin: AdminClient, group: str) -> dict[MessageQueue, str]:
    """Which client (its IP) holds each queue, from its running info (307); best effort, as mqadmin."""
    out: dict[MessageQueue, str] = {}
    try:
        conns = await admin.consumer_connection(group)
    except ApogeeError:
        return out
    for conn in conns.clients:
        cid = str(conn.get("clientId"))
        try:
            info = await admin.running_info(group, cid)
        except ApogeeError:
            continue
        for key, _ in info.get("mqTable") or []:
            if isinstance(key, dict):
                out[MessageQueue(str(key.get("topic")), str(key.get("brokerName")), int(key.get("queueId", 0)))] = \
                    cid.split("@")[0]
    return out


@admin_group.admin("consumer-progress", "consumerProgress")
@opt("g", "groupName", "--group", help="The group (default: every group, one row each).")
@opt("t", "topic", help="Only this topic.")
@opt("s", "showClientIP", type=BOOL, default=False, help="Show which client holds each queue (asks them, 307).")
@admin_command
async def consumer_progress(admin: AdminClient, out: Output, group_name: str | None, topic: str | None,
                            show_client_ip: bool) -> None:
    """Each queue's broker offset, consumer offset, lag and last consume time; without -g every group."""
    if group_name is None:
        with out.progress("groups") as tick:
            groups = await admin.groups_summary(tick)
        out.table(["group", "count", "version", "type", "model", "tps", "diff total"], [
            [g.group, g.count, g.version, g.consume_type, g.message_model, round(g.tps, 2), g.diff] for g in groups
        ], name="groups")
        return
    rows, tps = await admin.group_progress(group_name, topic)
    owners = await _client_of_queue(admin, group_name) if show_client_ip else {}
    columns = ["topic", "broker", "queue", "broker offset", "consumer offset", "diff", "last time"]
    if show_client_ip:
        columns.insert(5, "client IP")
    table = []
    for r in rows:
        row: list[Any] = [r.queue.topic, r.queue.broker_name, r.queue.queue_id, r.broker_offset, r.consumer_offset,
                          r.broker_offset - r.consumer_offset, _fmt_ms(r.last_timestamp) if r.last_timestamp else "N/A"]
        if show_client_ip:
            row.insert(5, owners.get(r.queue, "N/A"))
        table.append(row)
    out.table(columns, table, name="queues")
    out.value("consumeTps", round(tps, 2), "Consume TPS")
    out.value("diffTotal", sum(r.broker_offset - r.consumer_offset for r in rows), "Diff Total")


@admin_group.admin("consumer-status", "consumerStatus")
@opt("g", "consumerGroup", required=True)
@opt("i", "clientId", help="One client (default: every live client of the group).")
@opt("b", "brokerAddr", help="Broker to find the clients on.")
@opt("s", "jstack", is_flag=True, help="Ask for the client's thread stacks too.")
@admin_command
async def consumer_status(admin: AdminClient, out: Output, consumer_group: str, client_id: str | None,
                          broker_addr: str | None, jstack: bool) -> None:
    """A consumer's running info (its properties, subscriptions, queues and their process state,
    consume TPS and RT), relayed through a broker (307)."""
    ids = [client_id] if client_id else [
        str(c.get("clientId")) for c in (await admin.consumer_connection(consumer_group, broker_addr)).clients
    ]
    infos = {}
    for cid in ids:
        info = await admin.running_info(consumer_group, cid, jstack)
        infos[cid] = {k: ([[dict(q), v] for q, v in val] if k in ("mqTable",) else val) for k, val in info.items()}
    out.data("runningInfo", infos)


@admin_group.admin("reset-offset-by-time", "resetOffsetByTime")
@opt("g", "group", required=True)
@opt("t", "topic", required=True)
@opt("s", "timestamp", required=True, help="now, ms since epoch, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS.")
@opt("f", "force", type=BOOL, is_flag=False, flag_value=True, default=True, show_default=True,
     help="Also move offsets forward (true|false).")
@opt("c", "cplus", is_flag=True, help="Accepted for mqadmin; Apogee's broker resets C++ clients the same way.")
@admin_command
async def reset_offset_by_time(admin: AdminClient, out: Output, group: str, topic: str, timestamp: str, force: bool,
                               cplus: bool) -> None:
    """Rewind (or forward) a consumer group to a time; live consumers resume there at once."""
    ts = -1 if timestamp == "now" else parse_timestamp(timestamp)
    offsets = await admin.reset_offset_by_time(group, topic, ts, force=force)
    out.table(["broker", "queue", "new offset"],
              [[mq.broker_name, mq.queue_id, offset] for mq, offset in sorted(offsets.items())], name="offsets")


@admin_group.admin("skip-accumulated-message", "skipAccumulatedMessage")
@opt("g", "group", required=True)
@opt("t", "topic", required=True)
@opt("f", "force", type=BOOL, is_flag=False, flag_value=True, default=True, show_default=True)
@admin_command
async def skip_accumulated_message(admin: AdminClient, out: Output, group: str, topic: str, force: bool) -> None:
    """Move a consumer group to the end of each queue (skip what has accumulated)."""
    offsets = await admin.reset_offset_by_time(group, topic, -1, force=force)
    out.table(["broker", "queue", "new offset"],
              [[mq.broker_name, mq.queue_id, offset] for mq, offset in sorted(offsets.items())], name="offsets")


@admin_group.admin("clone-group-offset", "cloneGroupOffset")
@opt("s", "srcGroup", required=True)
@opt("d", "destGroup", required=True)
@opt("t", "topic", required=True)
@opt("o", "offline", help="Accepted for mqadmin (the offsets are written on the brokers either way).")
@admin_command
async def clone_group_offset(admin: AdminClient, out: Output, src_group: str, dest_group: str, topic: str,
                             offline: str | None) -> None:
    """Copy one group's committed offsets on a topic to another group."""
    copied = await admin.clone_group_offset(src_group, dest_group, topic)
    out.table(["broker", "queue", "offset"],
              [[mq.broker_name, mq.queue_id, o] for mq, o in sorted(copied.items())], name="offsets")
    out.line(f"clone group offset success. srcGroup[{src_group}], destGroup=[{dest_group}], topic[{topic}]")


@admin_group.admin("broker-consume-stats", "brokerConsumeStats")
@opt("b", "brokerAddr", required=True)
@opt("t", "timeoutMillis", type=int, help="Request timeout (ms).")
@opt("l", "level", type=int, default=0, help="Only queues whose diff is at least this.")
@opt("o", "order", type=BOOL, default=False, help="Only ordered topics.")
@admin_command
async def broker_consume_stats(admin: AdminClient, out: Output, broker_addr: str, timeout_millis: int | None,
                               level: int, order: bool) -> None:
    """Every group's progress on one broker."""
    if timeout_millis:
        admin.timeout_ms = timeout_millis
    rows, total = await admin.broker_consume_stats(broker_addr, order)
    out.table(["topic", "group", "broker", "queue", "broker offset", "consumer offset", "diff", "last time"], [
        [r.queue.topic, g, r.queue.broker_name, r.queue.queue_id, r.broker_offset, r.consumer_offset,
         r.broker_offset - r.consumer_offset, _fmt_ms(r.last_timestamp)]
        for g, r in rows if r.broker_offset - r.consumer_offset >= level
    ], name="queues")
    out.value("diffTotal", total, "Diff Total")
