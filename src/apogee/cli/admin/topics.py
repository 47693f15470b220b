"""Topic commands: update-topic (the one RocketMQ's quick start runs first), delete-topic,
update-topic-perm, topic-list, topic-route, topic-status, topic-cluster-list,
update-order-conf, allocate-mq, stats-all.

``update-topic`` brokers: ``-b ADDR`` (one), ``-c CLUSTER`` (its masters), or neither (every
master the NameServer knows).  It returns once the NameServer serves the topic's route, so a
consumer or ``apogee run`` started next finds it.
"""

from __future__ import annotations

import click

from apogee.admin.client import AdminClient
from apogee.admin.topics import ROUTE_WAIT_S
from apogee.cli.admin.commands import BOOL, Output, _fmt_ms, admin_command, admin_group, opt

FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2  # TopicSysFlag


async def wait_for_route(admin: AdminClient, topic: str, timeout_s: float = ROUTE_WAIT_S) -> None:
    """``AdminClient.wait_for_route`` (kept here for the callers of this module)."""
    await admin.wait_for_route(topic, timeout_s)


@admin_group.admin("update-topic", "updateTopic")
@opt("t", "topic", required=True)
@opt("b", "brokerAddr", help="Create on this broker only (host:port).")
@opt("c", "clusterName", "--cluster", help="Create on every master of this cluster.")
@opt("q", "queueNums", default=8, show_default=True, type=click.IntRange(1, 1024), help="Read and write queues.")
@opt("r", "readQueueNums", type=click.IntRange(1, 1024), help="Read queues (default: --queue-nums).")
@opt("w", "writeQueueNums", type=click.IntRange(1, 1024), help="Write queues (default: --queue-nums).")
@opt("p", "perm", default=6, show_default=True, type=click.IntRange(0, 7), help="2 write, 4 read, 6 both.")
@opt("o", "order", type=BOOL, is_flag=False, flag_value=True, default=False,
     help="Ordered topic: also sets the NameServer's order configuration.")
@opt("u", "unit", type=BOOL, default=False, help="Unit topic (TopicSysFlag).")
@opt("s", "hasUnitSub", type=BOOL, default=False, help="Has unit subscriptions (TopicSysFlag).")
@admin_command
async def update_topic(
    admin: AdminClient, out: Output, topic: str, broker_addr: str | None, cluster_name: str | None, queue_nums: int,
    read_queue_nums: int | None, write_queue_nums: int | None, perm: int, order: bool, unit: bool, has_unit_sub: bool,
) -> None:
    """Create or update a topic on brokers."""
    if broker_addr and cluster_name:
        raise click.UsageError("give --broker-addr or --cluster-name, not both")
    reads, writes = read_queue_nums or queue_nums, write_queue_nums or queue_nums
    sys_flag = (FLAG_UNIT if unit else 0) | (FLAG_UNIT_SUB if has_unit_sub else 0)
    created = await admin.create_topic(topic, broker_addr=broker_addr, cluster=cluster_name, read_queues=reads,
                                       write_queues=writes, perm=perm, order=order, sys_flag=sys_flag, wait_s=0)
    rows = [[name, addr, reads, writes, perm] for name, addr in created.brokers.items()]
    if out.json_mode:
        out.table(["broker", "address", "readQueueNums", "writeQueueNums", "perm"], rows, name="created")
    else:
        for name, addr, *_ in rows:
            out.line(f"create topic {topic} on {name} ({addr}): {reads}/{writes} queues, perm {perm}")
    if created.order_conf is not None:
        out.value("orderConf", created.order_conf, "set order configuration")
    await admin.wait_for_route(topic)
    out.line(f"topic {topic} is served by the NameServer")


@admin_group.admin("delete-topic", "deleteTopic")
@opt("t", "topic", required=True)
@opt("c", "clusterName", "--cluster", required=True, help="Delete from every master of this cluster.")
@admin_command
async def delete_topic(admin: AdminClient, out: Output, topic: str, cluster_name: str) -> None:
    """Delete a topic from a cluster's brokers (its queues and offsets too) and the NameServers."""
    brokers = await admin.delete_topic(topic, cluster_name)
    out.line(f"delete topic [{topic}] from cluster [{cluster_name}] success ({', '.join(brokers)}).")
    out.line(f"delete topic [{topic}] from NameServer success.")


@admin_group.admin("update-topic-perm", "updateTopicPerm")
@opt("t", "topic", required=True)
@opt("p", "perm", required=True, type=click.Choice(["2", "4", "6"]), help="2 write, 4 read, 6 both.")
@opt("b", "brokerAddr")
@opt("c", "clusterName", "--cluster")
@admin_command
async def update_topic_perm(admin: AdminClient, out: Output, topic: str, perm: str, broker_addr: str | None,
                            cluster_name: str | None) -> None:
    """Change a topic's permission, keeping its queue numbers."""
    if not broker_addr and not cluster_name:
        raise click.UsageError("give --broker-addr or --cluster-name")
    for addr in await admin.update_topic_perm(topic, int(perm), broker_addr, cluster_name):
        out.line(f"update topic perm to {perm} in {addr} success.")


@admin_group.admin("topic-list", "topicList")
@opt("c", "clusterModel", is_flag=True, help="Also show each topic's cluster and consumer groups.")
@admin_command
async def topic_list(admin: AdminClient, out: Output, cluster_model: bool) -> None:
    """Every topic the NameServer knows."""
    if not cluster_model:
        out.items("topics", await admin.topic_list())
        return
    with out.progress("topics") as tick:
        uses = await admin.topic_uses(tick)
    out.table(["cluster", "topic", "consumer groups"],
              [[u.cluster, u.topic, " ".join(u.groups)] for u in uses])


@admin_group.admin("topic-route", "topicRoute")
@opt("t", "topic", required=True)
@opt("l", "list", dest="list_", is_flag=True, help="One row per broker (mqadmin's list format); the default too.")
@admin_command
async def topic_route(admin: AdminClient, out: Output, topic: str, list_: bool) -> None:
    """Brokers and queues of a topic."""
    route = await admin.route(topic)
    addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
    out.table(["broker", "addresses", "read queues", "write queues", "perm"], [
        [q.broker_name, ", ".join(f"{k}:{v}" for k, v in sorted(addrs.get(q.broker_name, {}).items())),
         q.read_queue_nums, q.write_queue_nums, q.perm]
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
    ])
    if route.order_topic_conf:
        out.value("orderTopicConf", route.order_topic_conf)


@admin_group.admin("topic-status", "topicStatus")
@opt("t", "topic", required=True)
@admin_command
async def topic_status(admin: AdminClient, out: Output, topic: str) -> None:
    """Min and max offset and last update time of each queue of a topic."""
    stats = sorted((await admin.topic_stats(topic)).items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    out.table(["broker", "queue", "min offset", "max offset", "last updated"], [
        [q.broker_name, q.queue_id, o.min_offset, o.max_offset, _fmt_ms(o.last_update_timestamp)] for q, o in stats
    ])


@admin_group.admin("topic-cluster-list", "topicClusterList")
@opt("t", "topic", required=True)
@admin_command
async def topic_cluster_list(admin: AdminClient, out: Output, topic: str) -> None:
    """The clusters that serve a topic."""
    out.items("clusters", await admin.topic_clusters(topic))


@admin_group.admin("update-order-conf", "updateOrderConf")
@opt("t", "topic", required=True)
@opt("m", "method", required=True, type=click.Choice(["put", "get", "delete"]))
@opt("v", "orderConf", help="brokerName1:num;brokerName2:num (with put).")
@admin_command
async def update_order_conf(admin: AdminClient, out: Output, topic: str, method: str, order_conf: str | None) -> None:
    """Get, put or delete a topic's order configuration on the NameServers."""
    if method == "get":
        out.value("orderConf", await admin.get_order_conf(topic), f"get orderConf success. topic={topic}, orderConf")
    elif method == "put":
        if not order_conf:
            raise click.UsageError("put needs -v brokerName:num;...")
        await admin.put_order_conf(topic, order_conf)
        out.line(f"update orderConf success. topic={topic}, orderConf={order_conf}")
    else:
        await admin.delete_order_conf(topic)
        out.line(f"delete orderConf success. topic={topic}")


@admin_group.admin("allocate-mq", "allocateMQ")
@opt("t", "topic", required=True)
@opt("i", "ipList", required=True, help="Client ids (or IPs), comma-separated.")
@admin_command
async def allocate_mq(admin: AdminClient, out: Output, topic: str, ip_list: str) -> None:
    """How AllocateMessageQueueAveragely spreads a topic's queues over the clients given."""
    result = await admin.allocate(topic, [ip.strip() for ip in ip_list.split(",") if ip.strip()])
    out.table(["client", "broker", "queue"],
              [[cid, q.broker_name, q.queue_id] for cid, queues in result.items() for q in queues])


@admin_group.admin("stats-all", "statsAll")
@opt("a", "activeTopic", is_flag=True, help="Only topics with traffic today.")
@opt("t", "topic", help="Only this topic.")
@admin_command
async def stats_all(admin: AdminClient, out: Output, active_topic: bool, topic: str | None) -> None:
    """Every topic and consumer group: accumulation, in/out TPS and today's message counts."""
    with out.progress("topics") as tick:
        rows = await admin.stats_all(topic, active_topic, tick)
    out.table(["topic", "consumer group", "accumulation", "in tps", "out tps", "in today", "out today"], [
        [r.topic, r.group, r.accumulation, round(r.in_tps, 2), round(r.out_tps, 2), r.in_today,
         "NO_CONSUMER" if r.out_today is None else r.out_today] for r in rows
    ])
