"""Consumer and producer groups (mqadmin updateSubGroup, deleteSubGroup, getConsumerConfig,
consumerConnection, producerConnection, producer, consumerProgress, consumerStatus,
resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset, brokerConsumeStats) on
RocketMQ's wire: 200, 201, 207, 203, 204, 328, 208, 222, 15, 317 and the relayed 307.

A group no broker knows (no subscription config, no committed offset, no live client) is a
``GroupNotFoundError``, not an empty table: a misspelt group name must not look like a
group that is all caught up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from apogee.admin.base import AdminBase, Tick, load_object
from apogee.admin.errors import GroupNotFoundError, TopicNotFoundError
from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.errors import RemoteError
from apogee.remoting.bodies.admin import ConsumeStats, decode_broker_consume_stats
from apogee.remoting.bodies.heartbeat import decode_reset_offset_body
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.headers.consumer import ResetOffsetRequestHeader, UpdateConsumerOffsetRequestHeader

# SubscriptionGroupConfig's fields and RocketMQ's defaults; mqadmin updateSubGroup starts from
# these with consumeBroadcastEnable and consumeFromMinEnable off.
GROUP_DEFAULTS: dict[str, Any] = {
    "consumeEnable": True,
    "consumeFromMinEnable": False,
    "consumeBroadcastEnable": False,
    "retryQueueNums": 1,
    "retryMaxTimes": 16,
    "brokerId": c.MASTER_ID,
    "whichBrokerWhenConsumeSlowly": 1,
    "notifyConsumerIdsChangedEnable": True,
}


@dataclass
class QueueProgress:
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - max(self.consumer_offset, 0))


@dataclass
class Connections:
    """ConsumerConnection (203) or ProducerConnection (204)."""

    clients: list[dict[str, Any]]
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""
    tag_sets: dict[str, list[str]] = field(default_factory=dict)  # topic -> subscribed tags (empty: all)


@dataclass
class GroupSummary:
    """A row of mqadmin consumerProgress without ``-g``."""

    group: str
    count: int
    version: str
    consume_type: str
    message_model: str
    tps: float
    diff: int


class GroupAdmin(AdminBase):
    # --- subscription groups ------------------------------------------------------------------

    async def update_group(self, addr: str, group: str, **settings: Any) -> dict[str, Any]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): RocketMQ's field names as keys."""
        config = {**GROUP_DEFAULTS, **settings, "groupName": group}
        await self.call_broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=orjson.dumps(config, option=orjson.OPT_SORT_KEYS))
        return config

    async def delete_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        ext = {"groupName": group, "removeOffset": "true" if remove_offset else "false"}
        await self.call_broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)

    async def groups_on(self, addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): group -> its config."""
        resp = await self.call_broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = load_object(resp.body_bytes()).get("subscriptionGroupTable") or {}
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}

    async def group_config(self, group: str) -> dict[str, dict[str, Any]]:
        """mqadmin getConsumerConfig: master address -> the group's config, where it exists."""
        out = {}
        for addr in sorted((await self.cluster_masters()).values()):
            config = (await self.groups_on(addr)).get(group)
            if config is not None:
                out[addr] = config
        if not out:
            raise GroupNotFoundError(f"consumer group {group!r} does not exist on any broker")
        return out

    async def group_known(self, group: str, addrs: list[str]) -> bool:
        """Whether any of ``addrs`` has a subscription config or committed offsets of ``group``."""
        suffix = "@" + group
        for addr in addrs:
            if group in await self.groups_on(addr):
                return True
            resp = await self.call_broker(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
            if any(str(k).endswith(suffix) for k in load_object(resp.body_bytes()).get("offsetTable") or {}):
                return True
        return False

    async def require_group(self, group: str, addrs: list[str] | None = None) -> None:
        if addrs is None:
            addrs = sorted((await self.cluster_masters()).values())
        if not await self.group_known(group, addrs):
            raise GroupNotFoundError(
                f"consumer group {group!r} does not exist: no broker has its subscription config "
                "or a committed offset (check the name; `apogee admin consumer-progress` lists groups)"
            )

    # --- connections --------------------------------------------------------------------------

    async def _group_broker(self, group: str) -> str:
        """A broker of the group's retry topic, where RocketMQ's tools ask about a group."""
        masters = await self.masters(c.retry_topic(group))
        return sorted(masters.values())[0]

    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> Connections:
        """GET_CONSUMER_CONNECTION_LIST (203): the group's live clients and subscriptions."""
        addr = broker_addr or await self._group_broker(group)
        resp = await self.call_broker(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                                      ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
            raise GroupNotFoundError(f"consumer group {group!r} has no live consumer on {addr} ({resp.remark})")
        obj = load_object(resp.body_bytes())
        table = {str(t): s for t, s in (obj.get("subscriptionTable") or {}).items() if isinstance(s, dict)}
        subs = {t: str(s.get("subString", "*")) for t, s in table.items()}
        tags = {t: [str(tag) for tag in s.get("tagsSet") or []] for t, s in table.items()}
        return Connections(list(obj.get("connectionSet") or []), subs, str(obj.get("consumeType") or ""),
                           str(obj.get("messageModel") or ""), str(obj.get("consumeFromWhere") or ""), tags)

    async def producer_connection(self, group: str, topic: str) -> Connections:
        """GET_PRODUCER_CONNECTION_LIST (204) on the topic's brokers."""
        clients: dict[str, dict[str, Any]] = {}
        for addr in sorted((await self.masters(topic)).values()):
            resp = await self.call_broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group},
                                          ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
            for conn in load_object(resp.body_bytes()).get("connectionSet") or [] if resp.code == 0 else []:
                clients[str(conn.get("clientId"))] = conn
        if not clients:
            raise GroupNotFoundError(f"producer group {group!r} has no live producer on the brokers of {topic!r}")
        return Connections(list(clients.values()))

    async def all_producers(self, addr: str) -> dict[str, list[dict[str, Any]]]:
        """GET_ALL_PRODUCER_INFO (328): producer group -> its clients."""
        resp = await self.call_broker(addr, RequestCode.GET_ALL_PRODUCER_INFO)
        return {str(g): list(v or []) for g, v in (load_object(resp.body_bytes()).get("data") or {}).items()}

    async def running_info(self, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO (307), relayed by a broker of the group to the client:
        ConsumerRunningInfo (properties, subscriptionSet, mqTable keyed by MessageQueue,
        statusTable)."""
        addr = await self._group_broker(group)
        ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "true" if jstack else "false"}
        resp = await self.call_broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        return load_object(resp.body_bytes(), keyed=True)

    # --- offsets ------------------------------------------------------------------------------

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS (208): broker and consumer offsets of ``group`` on ``topic`` (on
        every topic it consumes when None, asked of its retry topic's brokers, as RocketMQ)."""
        if topic is not None:
            masters = await self.readers(topic)
        else:
            try:
                masters = await self.readers(c.retry_topic(group))
            except TopicNotFoundError:  # no consumer ever started: ask every master
                masters = await self.cluster_masters()
        total = ConsumeStats({}, 0.0)
        ext = {"consumerGroup": group, **({"topic": topic} if topic is not None else {})}
        for addr in masters.values():
            part = ConsumeStats.decode((await self.call_broker(addr, RequestCode.GET_CONSUME_STATS, ext)).body_bytes())
            total.offset_table.update(part.offset_table)
            total.consume_tps += part.consume_tps
        return total

    async def group_progress(self, group: str, topic: str | None = None) -> tuple[list[QueueProgress], float]:
        """mqadmin consumerProgress -g: each queue's broker offset, committed offset and last
        consume time, and the group's TPS; an unknown group is an error."""
        await self.require_group(group)  # 208 answers any group name (offsets 0)
        stats = await self.consume_stats(group, topic)
        rows = [QueueProgress(MessageQueue(q.topic, q.broker_name, q.queue_id), w.broker_offset, w.consumer_offset,
                              w.last_timestamp) for q, w in stats.offset_table.items()]
        rows.sort(key=lambda r: (r.queue.topic, r.queue.broker_name, r.queue.queue_id))
        return rows, stats.consume_tps

    async def groups_summary(self, tick: Tick | None = None) -> list[GroupSummary]:
        """mqadmin consumerProgress without -g: every group that has a retry topic, with its
        live client count, version, type, model, TPS and total lag."""
        topics = [t for t in await self.topic_list() if t.startswith(c.RETRY_GROUP_TOPIC_PREFIX)]
        out = []
        for i, topic in enumerate(topics):
            group = topic[len(c.RETRY_GROUP_TOPIC_PREFIX):]
            tps, diff = 0.0, 0
            try:
                stats = await self.consume_stats(group)
                tps = stats.consume_tps
                diff = sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
            except RemoteError:
                pass
            count, version, ctype, model = 0, "", "", ""
            try:
                conns = await self.consumer_connection(group)
                count = len(conns.clients)
                version = str(conns.clients[0].get("version", "")) if conns.clients else ""
                ctype, model = conns.consume_type, conns.message_model
            except (RemoteError, GroupNotFoundError):
                pass
            out.append(GroupSummary(group, count, version, ctype, model, tps, diff))
            if tick:
                tick(i + 1, len(topics))
        return out

    async def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
        """Per queue of ``topic``: the max offset and ``group``'s committed offset (14 and 30),
        the way a client reads them; an unknown group is an error."""
        route = await self.route(topic)
        masters = await self.readers(topic)
        rows = []
        for qd in route.queue_datas:
            addr = masters.get(qd.broker_name)
            if addr is None:
                continue
            for qid in range(qd.read_queue_nums):
                mq = MessageQueue(topic, qd.broker_name, qid)
                broker_offset = await self.instance.api.get_max_offset(addr, topic, qid)
                try:
                    consumer_offset = await self.instance.api.query_consumer_offset(addr, group, topic, qid)
                except RemoteError:
                    consumer_offset = -1
                rows.append(QueueProgress(mq, broker_offset, consumer_offset))
        if all(r.consumer_offset < 0 for r in rows):
            await self.require_group(group, sorted(masters.values()))
        return rows

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group`` on ``topic`` to the message RocketMQ's searchOffset names for
        ``timestamp_ms`` (the one stored nearest it; -1: the end), on every broker (222); live
        consumers are told to resume there at once."""
        header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force).encode()
        out: dict[MessageQueue, int] = {}
        masters = await self.masters(topic)
        # A broker that creates groups on demand (autoCreateSubscriptionGroup, RocketMQ's default)
        # would reset a misspelt group too: ask first.
        await self.require_group(group, sorted(masters.values()))
        for name, addr in masters.items():
            resp = await self.call_broker(
                addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header,
                ok=(ResponseCode.SUCCESS, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
            )
            if resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                raise GroupNotFoundError(f"consumer group {group!r} does not exist on broker {name} ({addr})")
            for key, offset in decode_reset_offset_body(resp.body_bytes()).items():
                out[MessageQueue(key.topic, key.broker_name or name, key.queue_id)] = offset
        return out

    async def clone_group_offset(self, src: str, dest: str, topic: str) -> dict[MessageQueue, int]:
        """mqadmin cloneGroupOffset: ``src``'s committed offsets on ``topic`` (208) written as
        ``dest``'s (15) on each queue's master."""
        rows, _ = await self.group_progress(src, topic)
        masters = await self.masters(topic)
        out = {}
        for r in rows:
            addr = masters.get(r.queue.broker_name)
            if addr is None or r.consumer_offset < 0:
                continue
            header = UpdateConsumerOffsetRequestHeader(dest, topic, r.queue.queue_id, r.consumer_offset).encode()
            await self.call_broker(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)
            out[r.queue] = r.consumer_offset
        return out

    async def broker_group_stats(self, addr: str, order: bool = False) -> tuple[list[tuple[str, ConsumeStats]], int]:
        """GET_BROKER_CONSUME_STATS (317): every group's ConsumeStats per topic on one broker
        (offsets, last consume time and the group's TPS on that topic) and the total lag."""
        resp = await self.call_broker(addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                      {"isOrder": "true" if order else "false"})
        return decode_broker_consume_stats(resp.body_bytes())

    async def broker_consume_stats(self, addr: str, order: bool = False) -> tuple[list[tuple[str, QueueProgress]], int]:
        """GET_BROKER_CONSUME_STATS (317): (group, queue progress) rows and the total lag."""
        pairs, total = await self.broker_group_stats(addr, order)
        rows = [
            (group, QueueProgress(MessageQueue(q.topic, q.broker_name, q.queue_id), w.broker_offset,
                                  w.consumer_offset, w.last_timestamp))
            for group, stats in pairs for q, w in stats.offset_table.items()
        ]
        return rows, total
