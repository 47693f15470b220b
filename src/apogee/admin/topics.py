"""Topic administration (mqadmin updateTopic, deleteTopic, updateTopicPerm, topicList,
topicClusterList, topicStatus, updateOrderConf, allocateMQ) on RocketMQ's wire: 17 and 215 to
brokers, 105, 206, 216 and the ORDER_TOPIC_CONFIG key-values (100-102) to NameServers."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from apogee.admin.base import Tick, load_object
from apogee.admin.errors import NoWritableQueueError, TopicNotFoundError
from apogee.admin.namesrv import NamesrvAdmin
from apogee.client.consumer.allocate import AllocateAveragely
from apogee.client.routes import publish_queues, subscribe_queues
from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.errors import NoRouteError, RemoteError
from apogee.namesrv.kv_config import ORDER_TOPIC_CONFIG
from apogee.remoting.bodies.admin import TopicOffset, decode_topic_stats
from apogee.remoting.bodies.heartbeat import QueueKey
from apogee.remoting.codes import RequestCode
from apogee.remoting.headers.consumer import CreateTopicRequestHeader
from apogee.remoting.headers.namesrv import DeleteTopicFromNamesrvRequestHeader

DEFAULT_QUEUES = 8  # mqadmin updateTopic's default read and write queue numbers
ROUTE_WAIT_S = 10.0  # how long a created topic may take to be served by the NameServer


@dataclass
class TopicUse:
    """A row of ``topicList -c``: the topic, its cluster and the groups that consume it."""

    cluster: str
    topic: str
    groups: list[str]


@dataclass
class CreatedTopic:
    """What ``create_topic`` wrote: broker name -> address, and the order configuration
    stored on the NameServers (ordered topics only)."""

    brokers: dict[str, str]
    order_conf: str | None = None


class TopicAdmin(NamesrvAdmin):
    async def update_topic(
        self, topic: str, broker_addr: str, queues: int = DEFAULT_QUEUES, perm: int = 6, order: bool = False, *,
        read_queues: int | None = None, write_queues: int | None = None, sys_flag: int | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) on one broker."""
        header = CreateTopicRequestHeader(
            topic, read_queue_nums=queues if read_queues is None else read_queues,
            write_queue_nums=queues if write_queues is None else write_queues, perm=perm, order=order,
            topic_sys_flag=sys_flag,
        )
        await self.call_broker(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.encode())

    async def create_topic(
        self, topic: str, *, broker_addr: str | None = None, cluster: str | None = None,
        read_queues: int = DEFAULT_QUEUES, write_queues: int = DEFAULT_QUEUES, perm: int = 6, order: bool = False,
        sys_flag: int | None = None, wait_s: float = ROUTE_WAIT_S,
    ) -> CreatedTopic:
        """mqadmin updateTopic: create or update ``topic`` on one broker (``broker_addr``), the
        masters of ``cluster``, or (neither) every master; an ordered topic's queues are also
        stored as the NameServers' order configuration.  Returns once the NameServer serves
        the route (``wait_s`` 0: at once), so a consumer started next finds the topic."""
        if broker_addr:
            view = await self.cluster_info()
            targets = {view.name_of(broker_addr) or broker_addr: broker_addr}
        else:
            targets = await self.cluster_masters(cluster)
        targets = dict(sorted(targets.items()))
        for addr in targets.values():
            await self.update_topic(topic, addr, perm=perm, order=order, read_queues=read_queues,
                                    write_queues=write_queues, sys_flag=sys_flag)
        stored = None
        if order:
            conf = ";".join(f"{name}:{write_queues}" for name in targets)
            stored = await self.put_order_conf(topic, conf, replace=not broker_addr)
        if wait_s > 0:
            await self.wait_for_route(topic, wait_s)
        return CreatedTopic(targets, stored)

    async def wait_for_route(self, topic: str, timeout_s: float = ROUTE_WAIT_S) -> None:
        """Return once the NameServer serves ``topic``: a broker registers a new topic a moment later."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await self.route(topic)
                return
            except TopicNotFoundError:
                if time.monotonic() > deadline:
                    raise NoRouteError(f"the NameServer does not serve {topic!r} after {timeout_s:.0f} s") from None
                await asyncio.sleep(0.1)

    async def topic_configs(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_TOPIC_CONFIG (21): every topic config of one broker (TopicConfig fields:
        readQueueNums, writeQueueNums, perm, order, topicSysFlag, ...), in one request."""
        body = load_object((await self.call_broker(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)).body_bytes())
        table = body.get("topicConfigTable") or {}
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """mqadmin deleteTopic: DELETE_TOPIC_IN_BROKER (215) on every master of ``cluster``,
        then DELETE_TOPIC_IN_NAMESRV (216) on every NameServer.  Returns the brokers."""
        masters = sorted((await self.cluster_masters(cluster)).values())
        for addr in masters:
            await self.call_broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        header = DeleteTopicFromNamesrvRequestHeader(topic, cluster).encode()
        await self.call_each_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, header)
        return masters

    async def update_topic_perm(self, topic: str, perm: int, broker_addr: str | None, cluster: str | None) -> list[str]:
        """mqadmin updateTopicPerm: the topic's queue numbers from its route (105), sent back
        with the new permission (17) to the broker or the cluster's masters."""
        route = await self.route(topic)
        view = await self.cluster_info()
        done = []
        for addr in await self.targets(broker_addr, cluster):
            name = view.name_of(addr)
            qd = next((q for q in route.queue_datas if q.broker_name == name), None)
            if qd is None:
                continue
            await self.update_topic(topic, addr, perm=perm, read_queues=qd.read_queue_nums,
                                    write_queues=qd.write_queue_nums, sys_flag=qd.topic_sys_flag)
            done.append(addr)
        if not done:
            raise NoWritableQueueError(f"no broker named by -b/-c serves topic {topic!r}")
        return done

    async def consumed_by(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300) on every broker of the topic: the groups."""
        groups: set[str] = set()
        for addr in (await self.readers(topic)).values():
            resp = await self.call_broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            groups.update(str(g) for g in (load_object(resp.body_bytes()).get("groupList") or []))
        return sorted(groups)

    async def topic_uses(self, tick: Tick | None = None) -> list[TopicUse]:
        """mqadmin ``topicList -c``: each topic (no retry or DLQ topics) with its cluster and
        consumer groups; a route and a 300 per topic, so it reports progress."""
        topics = [t for t in await self.topic_list()
                  if not t.startswith((c.RETRY_GROUP_TOPIC_PREFIX, c.DLQ_GROUP_TOPIC_PREFIX))]
        view = await self.cluster_info()
        out = []
        for i, topic in enumerate(topics):
            try:
                route = await self.route(topic)
                cluster = next((view.cluster_of(b.broker_name) or "" for b in route.broker_datas), "")
                groups = await self.consumed_by(topic)
            except RemoteError:
                cluster, groups = "", []
            out.append(TopicUse(cluster, topic, groups))
            if tick:
                tick(i + 1, len(topics))
        return out

    async def topic_clusters(self, topic: str) -> list[str]:
        """mqadmin topicClusterList: the clusters whose brokers serve ``topic``."""
        route = await self.route(topic)
        view = await self.cluster_info()
        return sorted({cl for b in route.broker_datas if (cl := view.cluster_of(b.broker_name))})

    async def topic_stats(self, topic: str) -> dict[QueueKey, TopicOffset]:
        """Min/max offset and last update time of every queue of ``topic``, on every master (202)."""
        out: dict[QueueKey, TopicOffset] = {}
        for addr in (await self.readers(topic)).values():
            resp = await self.call_broker(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            out.update(decode_topic_stats(resp.body_bytes()))
        return out

    async def writable_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a producer may send to; none is an error that says why."""
        queues, _ = publish_queues(topic, await self.route(topic))
        if not queues:
            raise NoWritableQueueError(
                f"topic {topic!r} has no writable queue: its brokers' permission lacks write "
                "(`apogee admin add-write-perm` / `update-topic-perm -p 6`)"
            )
        return queues

    async def allocate(self, topic: str, clients: list[str]) -> dict[str, list[MessageQueue]]:
        """mqadmin allocateMQ: the queues AllocateMessageQueueAveragely gives each client id."""
        mqs = sorted(subscribe_queues(topic, await self.route(topic)), key=lambda q: (q.broker_name, q.queue_id))
        ids = sorted(clients)
        strategy = AllocateAveragely()
        return {cid: strategy.allocate("", cid, mqs, ids) for cid in ids}

    # --- order configuration: the NameServer's ORDER_TOPIC_CONFIG key-values -----------------

    async def get_order_conf(self, topic: str) -> str | None:
        return await self.get_kv(ORDER_TOPIC_CONFIG, topic)

    async def put_order_conf(self, topic: str, conf: str, *, replace: bool = True) -> str:
        """Set ``brokerName:queues;...``; without ``replace`` the brokers named are merged into
        the stored value (mqadmin updateTopic -b -o true).  Returns the stored value."""
        if not replace:
            merged = dict(_order_items(await self.get_order_conf(topic) or ""))
            merged.update(_order_items(conf))
            conf = ";".join(f"{name}:{nums}" for name, nums in merged.items())
        await self.put_kv(ORDER_TOPIC_CONFIG, topic, conf)
        return conf

    async def delete_order_conf(self, topic: str) -> None:
        await self.delete_kv(ORDER_TOPIC_CONFIG, topic)


def _order_items(conf: str) -> list[tuple[str, str]]:
    return [(name, nums) for item in conf.split(";") if item for name, _, nums in [item.partition(":")]]

