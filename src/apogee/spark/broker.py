"""What the connector asks NameServers and brokers, as a thin layer over ``ClientAPI``.

Routes, queue bounds, search by time, consumer offsets and pulls go through the client's
``ClientAPI`` methods and request builders.  Three requests the client has no method for are
built here from the shared header classes: GET_TOPIC_STATS_INFO (every queue's min/max offset
of a topic in one round trip per broker), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (for
``topicPattern``) and the NameServer's GET/PUT_KV_CONFIG (the exactly-once sink's commit
record).  A pull here returns the raw response body: executors decode it column-wise
(``apogee.spark.decode``), never into one Python object per message.

Every failure a user can cause (unknown topic, unreachable NameServer or broker) becomes an
``ApogeeSparkError`` with one readable line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from apogee.client.api import ClientAPI, check
from apogee.client.instance import subscribe_queues
from apogee.client.routes import read_addr
from apogee.common import constants as c
from apogee.common import validators
from apogee.common.lenient_json import loads
from apogee.errors import ConnectionClosedError, QueryNotFoundError, RemoteError, RequestTimeoutError
from apogee.remoting.bodies.route import TopicRouteData, decode_topic_list
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.namesrv import GetKVConfigResponseHeader, KVConfigRequestHeader
from apogee.remoting.headers.pull import FLAG_SUBSCRIPTION, PullMessageRequestHeader
from apogee.spark.errors import ApogeeSparkError
from apogee.spark.offsets import QueueKey

log = logging.getLogger("apogee.spark.broker")

T = TypeVar("T")


def is_system_topic(topic: str) -> bool:
    """Not a user's topic: RocketMQ's system topics, retry, dead-letter and reply topics."""
    return (
        validators.is_system_topic(topic)
        or topic.startswith((c.RETRY_GROUP_TOPIC_PREFIX, c.DLQ_GROUP_TOPIC_PREFIX, "RMQ_SYS_"))
        or topic.endswith(c.REPLY_TOPIC_POSTFIX)
    )


@dataclass(frozen=True)
class PullReply:
    """One pull: RocketMQ status code, where to go next, the queue's bounds, the raw records."""

    code: int
    next_begin: int
    min_offset: int
    max_offset: int
    body: bytes | None
    remark: str = ""


def _ext_int(ext: dict[str, str] | None, key: str, default: int = 0) -> int:
    try:
        return int((ext or {}).get(key, default))
    except (TypeError, ValueError):
        return default


def unreachable(what: str, addr: str, exc: BaseException) -> ApogeeSparkError:
    return ApogeeSparkError(f"cannot reach the {what} at {addr}: {exc}")


class Cluster:
    """Questions about topics and queues, asked from the driver (or an executor) of one query.

    Methods are coroutines for the process's runtime loop (``apogee.spark.runtime``).
    """

    def __init__(self, api: ClientAPI, namesrv: str, timeout_ms: int = 5000) -> None:
        self.api = api
        self.namesrvs = [a for a in namesrv.split(";") if a]
        self.timeout_ms = timeout_ms
        self.routes: dict[str, TopicRouteData] = {}

    # --- NameServer ---------------------------------------------------------------------------

    async def on_namesrv(self, call: Callable[[str], Awaitable[T]]) -> T:
        """``call(addr)`` on the first NameServer that answers."""
        errors: list[str] = []
        for addr in self.namesrvs:
            try:
                return await call(addr)
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                errors.append(f"{addr} ({exc})")
        if len(self.namesrvs) == 1:
            raise ApogeeSparkError(f"cannot reach the NameServer at {errors[0]}; is it running? (option namesrv)")
        raise ApogeeSparkError(f"cannot reach any NameServer: {'; '.join(errors)} (option namesrv)")

    async def route(self, topic: str) -> TopicRouteData:
        route = await self.on_namesrv(lambda addr: self.api.get_route(addr, topic, self.timeout_ms))
        if route is None or not route.queue_datas:
            raise ApogeeSparkError(
                f"topic {topic!r} does not exist: the NameServer ({';'.join(self.namesrvs)}) has no route for it"
            )
        self.routes[topic] = route
        return route

    async def topic_list(self) -> list[str]:
        async def call(addr: str) -> list[str]:
            req = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            resp = check(await self.api.remoting.invoke(addr, req, self.timeout_ms))
            return decode_topic_list(resp.body_bytes()) if resp.body else []

        return await self.on_namesrv(call)

    async def kv_get(self, namespace: str, key: str) -> list[str | None]:
        """The value under ``namespace``/``key`` on every reachable NameServer (None: absent)."""

        async def one(addr: str) -> str | None | BaseException:
            req = RemotingCommand.request(RequestCode.GET_KV_CONFIG, KVConfigRequestHeader(namespace, key).encode())
            try:
                resp = await self.api.remoting.invoke(addr, req, self.timeout_ms)
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                return exc
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                return None
            check(resp)
            return GetKVConfigResponseHeader.decode(resp.ext_fields or {}).value

        results = await asyncio.gather(*(one(a) for a in self.namesrvs))
        values = [r for r in results if not isinstance(r, BaseException)]
        if not values:
            raise ApogeeSparkError(f"cannot reach any NameServer ({';'.join(self.namesrvs)}) to read {namespace}/{key}")
        return values

    async def kv_put(self, namespace: str, key: str, value: str) -> None:
        """Store ``value`` on every NameServer; an error unless all of them took it (each
        persists it to disk before answering)."""

        async def one(addr: str) -> None:
            header = KVConfigRequestHeader(namespace, key, value).encode()
            try:
                check(
                    await self.api.remoting.invoke(
                        addr, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, header), self.timeout_ms
                    )
                )
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                raise unreachable("NameServer", addr, exc) from None

        await asyncio.gather(*(one(a) for a in self.namesrvs))

    # --- topics and queues --------------------------------------------------------------------

    async def resolve_topics(self, topics: Iterable[str], pattern: str | None) -> list[str]:
        if pattern is None:
            return list(topics)
        import re

        regex = re.compile(pattern)
        return sorted(t for t in await self.topic_list() if not is_system_topic(t) and regex.fullmatch(t))

    async def queues(self, topics: Iterable[str]) -> dict[QueueKey, str]:
        """Every readable queue of ``topics`` with the address to read it from: the master,
        else (the master gone) a slave (``client.routes.read_addr``).  Unknown topics raise."""
        out: dict[QueueKey, str] = {}
        routes = await asyncio.gather(*(self.route(t) for t in topics))
        for topic, route in zip(topics, routes, strict=True):
            addrs = {bd.broker_name: read_addr(bd.broker_addrs) for bd in route.broker_datas}
            for mq in subscribe_queues(topic, route):
                addr = addrs.get(mq.broker_name)
                if addr:
                    out[QueueKey(topic, mq.broker_name, mq.queue_id)] = addr
        return dict(sorted(out.items()))

    async def broker_addr(self, topic: str, broker: str) -> str:
        route = self.routes.get(topic) or await self.route(topic)
        for bd in route.broker_datas:
            if bd.broker_name == broker:
                addr = read_addr(bd.broker_addrs)
                if addr:
                    return addr
        raise ApogeeSparkError(f"broker {broker!r} of topic {topic!r} is not in the route")

    async def bounds(self, queues: dict[QueueKey, str]) -> dict[QueueKey, tuple[int, int]]:
        """``(min, max)`` offset of every queue: one GET_TOPIC_STATS_INFO per broker and topic."""
        groups: dict[tuple[str, str], list[QueueKey]] = {}
        for key, addr in queues.items():
            groups.setdefault((addr, key.topic), []).append(key)

        async def one(addr: str, topic: str, keys: list[QueueKey]) -> dict[QueueKey, tuple[int, int]]:
            try:
                return await self._topic_stats(addr, topic, keys)
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                raise unreachable("broker", addr, exc) from None

        out: dict[QueueKey, tuple[int, int]] = {}
        for part in await asyncio.gather(*(one(a, t, ks) for (a, t), ks in groups.items())):
            out.update(part)
        return out

    async def _topic_stats(self, addr: str, topic: str, keys: list[QueueKey]) -> dict[QueueKey, tuple[int, int]]:
        req = RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        resp = await self.api.remoting.invoke(addr, req, self.timeout_ms)
        table: dict[int, tuple[int, int]] = {}
        if resp.code == ResponseCode.SUCCESS and resp.body:
            try:
                raw = loads(resp.body_bytes()).get("offsetTable")
                items: list[Any] = raw if isinstance(raw, list) else []
                for item in items:
                    lo, hi = max(0, int(item["minOffset"])), max(0, int(item["maxOffset"]))
                    table[int(item["mq"]["queueId"])] = (lo, max(lo, hi))
            except (ValueError, KeyError, TypeError, AttributeError):
                table = {}
        out: dict[QueueKey, tuple[int, int]] = {}
        missing = []
        for key in keys:
            if key.queue_id in table:
                out[key] = table[key.queue_id]
            else:
                missing.append(key)
        if missing:  # a broker that answers the stats differently: ask queue by queue

            async def each(key: QueueKey) -> tuple[QueueKey, tuple[int, int]]:
                lo, hi = await asyncio.gather(
                    self.api.get_min_offset(addr, key.topic, key.queue_id),
                    self.api.get_max_offset(addr, key.topic, key.queue_id),
                )
                return key, (max(0, lo), max(0, lo, hi))

            out.update(dict(await asyncio.gather(*(each(k) for k in missing))))
        return out

    async def search(self, queues: dict[QueueKey, str], timestamp_ms: int) -> dict[QueueKey, int]:
        """Per queue, the first offset stored at or after ``timestamp_ms`` (the max offset when
        every message is older): RocketMQ 5's LOWER boundary, which Apogee brokers answer
        exactly (a RocketMQ 4.x broker answers its nearest entry instead)."""

        async def one(key: QueueKey, addr: str) -> tuple[QueueKey, int]:
            try:
                return key, await self.api.search_offset(addr, key.topic, key.queue_id, timestamp_ms, "LOWER")
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                raise unreachable("broker", addr, exc) from None

        return dict(await asyncio.gather(*(one(k, a) for k, a in queues.items())))

    async def group_offsets(self, group: str, queues: dict[QueueKey, str]) -> dict[QueueKey, int | None]:
        """The group's committed offset of every queue; None where it has none."""

        async def one(key: QueueKey, addr: str) -> tuple[QueueKey, int | None]:
            try:
                value = await self.api.query_consumer_offset(addr, group, key.topic, key.queue_id)
            except QueryNotFoundError:
                return key, None
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                raise unreachable("broker", addr, exc) from None
            return key, value if value >= 0 else None

        return dict(await asyncio.gather(*(one(k, a) for k, a in queues.items())))

    async def commit_group(self, group: str, positions: dict[QueueKey, int], queues: dict[QueueKey, str]) -> None:
        """Store ``positions`` as the group's consumer offsets (monitoring: lag in broker tools)."""

        async def one(key: QueueKey, offset: int) -> None:
            addr = queues.get(key)
            if addr is None:
                return
            try:
                await self.api.update_consumer_offset(addr, group, key.topic, key.queue_id, offset)
            except (RemoteError, ConnectionClosedError, RequestTimeoutError) as exc:
                log.warning("committing %s offset %d of group %s failed: %s", key, offset, group, exc)

        await asyncio.gather(*(one(k, o) for k, o in positions.items()))

    async def sample_sizes(
        self, queues: dict[QueueKey, str], positions: dict[QueueKey, int], group: str
    ) -> dict[QueueKey, float]:
        """Stored size of the message at each queue's position (a one-message pull), to turn a
        byte budget into message counts."""

        async def one(key: QueueKey) -> tuple[QueueKey, float] | None:
            addr = queues.get(key)
            if addr is None:
                return None
            try:
                reply = await pull(self.api, addr, group, key, positions[key], 1, "*", None, self.timeout_ms)
            except (ConnectionClosedError, RequestTimeoutError, RemoteError):
                return None
            if reply.code == ResponseCode.SUCCESS and reply.body and len(reply.body) >= 4:
                return key, float(int.from_bytes(reply.body[:4], "big", signed=True))
            return None

        found = await asyncio.gather(*(one(k) for k in positions if k in queues))
        return dict(f for f in found if f is not None)


async def pull(
    api: ClientAPI,
    addr: str,
    group: str,
    key: QueueKey,
    offset: int,
    max_nums: int,
    expression: str,
    expression_type: str | None,
    timeout_ms: int,
) -> PullReply:
    """One PULL_MESSAGE that answers at once (no long polling, no offset commit)."""
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=key.topic,
        queue_id=key.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=FLAG_SUBSCRIPTION,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription=expression,
        expression_type=expression_type,
    )
    resp = await api.pull_request(addr, header, timeout_ms)
    ext = resp.ext_fields
    body = None
    if resp.code == ResponseCode.SUCCESS and resp.body:
        body = resp.body if type(resp.body) is bytes else resp.body_bytes()
    return PullReply(
        resp.code,
        _ext_int(ext, "nextBeginOffset", offset),
        _ext_int(ext, "minOffset"),
        _ext_int(ext, "maxOffset"),
        body,
        resp.remark or "",
    )
