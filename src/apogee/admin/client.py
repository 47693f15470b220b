"""AdminClient: the operations of RocketMQ's mqadmin that Apogee's CLI offers.

Routes come from the NameServers through a ``ClientInstance`` (failover, caching); each
operation then talks to the brokers of the topic directly.  Methods return plain values and
raise from ``apogee.errors`` (``NoRouteError``, ``RemoteError`` with the broker's code and
remark), so the CLI prints one line per failure.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from apogee.client.config import ClientConfig
from apogee.client.instance import ClientInstance
from apogee.client.routes import read_addr
from apogee.client.trace import TRACE_TOPIC, MessageTrace, collect_trace
from apogee.common.message import MessageExt, MessageQueue
from apogee.common.message_codec import decode_records
from apogee.common.message_id import decode_offset_msg_id
from apogee.errors import ClientError, NoRouteError, RemoteError
from apogee.remoting.bodies.admin import (
    ConsumeStats,
    TopicOffset,
    decode_runtime_info,
    decode_topic_stats,
)
from apogee.remoting.bodies.heartbeat import QueueKey, decode_reset_offset_body
from apogee.remoting.bodies.route import TopicRouteData, decode_cluster_info, decode_topic_list
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.consumer import (
    CreateTopicRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
)
from apogee.remoting.headers.pull import FLAG_SUBSCRIPTION, PullMessageRequestHeader

TIMEOUT_MS = 5000
TRACE_QUERY_MAX = 64


class InvalidIdError(ClientError, ValueError):
    """The text given as a message id is not one."""
ADMIN_GROUP = "TOOLS_CONSUMER"


@dataclass
class FoundMessage:
    message: MessageExt
    broker_name: str


@dataclass
class QueueProgress:
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - max(self.consumer_offset, 0))


def _check(resp: RemotingCommand, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    if resp.code not in ok:
        raise RemoteError.for_code(resp.code, resp.remark)
    return resp


class AdminClient:
    def __init__(self, namesrv_addr: str, *, timeout_ms: int = TIMEOUT_MS) -> None:
        self.config = ClientConfig(namesrv_addr=namesrv_addr, instance_name=f"admin-{id(self)}")
        self.timeout_ms = timeout_ms
        self._instance: ClientInstance | None = None

    async def __aenter__(self) -> AdminClient:
        self._instance = await ClientInstance.acquire(self.config)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._instance is not None:
            await self._instance.release()

    @property
    def instance(self) -> ClientInstance:
        assert self._instance is not None, "use `async with AdminClient(...)`"
        return self._instance

    async def _invoke(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return await self.instance.remoting.invoke(addr, request, self.timeout_ms)

    async def _namesrv(self, request: RemotingCommand) -> RemotingCommand:
        resp: RemotingCommand = await self.instance.invoke_namesrv(lambda addr: self._invoke(addr, request))
        return resp

    # --- routes, topics, clusters -------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData:
        if not await self.instance.update_topic_route(topic):
            raise NoRouteError(f"no route for topic {topic!r}: no NameServer knows it")
        return self.instance.routes[topic]

    async def masters(self, topic: str) -> dict[str, str]:
        """broker name -> master address, for every broker serving ``topic``."""
        route = await self.route(topic)
        out = {b.broker_name: b.broker_addrs[0] for b in route.broker_datas if 0 in b.broker_addrs}
        if not out:
            raise NoRouteError(f"no master broker serves topic {topic!r}")
        return out

    async def readers(self, topic: str) -> dict[str, str]:
        """broker name -> where to read its state: the master, else (the master gone) a slave
        (``client.routes.read_addr``).  Writes use ``masters``."""
        route = await self.route(topic)
        out = {b.broker_name: a for b in route.broker_datas if (a := read_addr(b.broker_addrs)) is not None}
        if not out:
            raise NoRouteError(f"no broker serves topic {topic!r}")
        return out

    async def topic_list(self) -> list[str]:
        resp = _check(await self._namesrv(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)))
        return decode_topic_list(resp.body_bytes())

    async def cluster_info(self) -> tuple[dict[str, object], dict[str, list[str]]]:
        resp = _check(await self._namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)))
        brokers, clusters = decode_cluster_info(resp.body_bytes())
        return dict(brokers), clusters

    async def update_topic(
        self, topic: str, broker_addr: str, queues: int = 8, perm: int = 6, order: bool = False
    ) -> None:
        header = CreateTopicRequestHeader(
            topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm, order=order
        )
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.encode())
        _check(await self._invoke(broker_addr, request))

    # --- messages -----------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """By offset message id (store host + CommitLog offset): straight to that broker."""
        ip, port, offset = decode_offset_msg_id(offset_msg_id)
        if not 0 < port < 65536 or offset < 0:
            raise ValueError(f"port {port} or offset {offset} is impossible")
        resp = _check(await self._invoke(
            f"{ip}:{port}", RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        ))
        (msg,) = decode_records(resp.body_bytes())
        return msg

    async def query_by_key(
        self, topic: str, key: str, *, begin_ms: int = 0, end_ms: int = 2**62, max_num: int = 32, unique: bool = False
    ) -> list[FoundMessage]:
        """Messages of ``topic`` whose KEYS (or, with ``unique``, UNIQ_KEY) hold ``key`` and
        that were stored within [begin_ms, end_ms]; every broker is asked, newest first."""
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms).encode()
        if unique:
            header["_UNIQUE_KEY_QUERY"] = "true"

        async def one(name: str, addr: str) -> list[FoundMessage]:
            resp = await self._invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, dict(header)))
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                return []
            _check(resp)
            return [FoundMessage(m, name) for m in decode_records(resp.body_bytes())]

        brokers = await self.readers(topic)
        found = [m for part in await asyncio.gather(*(one(n, a) for n, a in brokers.items())) for m in part]
        found = [f for f in found if begin_ms <= f.message.store_timestamp <= end_ms]
        found.sort(key=lambda f: f.message.store_timestamp, reverse=True)
        return found[:max_num]

    async def query_by_id(self, msg_id: str, topic: str | None = None) -> list[FoundMessage]:
        """A client unique id (UNIQ_KEY; needs ``topic``) or an offset message id.

        Both are 32 hex digits, so with a topic the unique id is tried first (it is what
        consumers and send results show) and the offset id second."""
        if topic is not None:
            found = await self.query_by_key(topic, msg_id, unique=True)
            if found:
                return found
        try:
            return [FoundMessage(await self.view_message(msg_id), "")]
        except ValueError as exc:
            raise InvalidIdError(
                f"{msg_id!r} is not an offset message id ({exc}); give -t TOPIC for a unique id"
            ) from None
        except RemoteError:
            if topic is not None:
                return []
            raise

    async def message_trace(self, msg_id: str, trace_topic: str = TRACE_TOPIC) -> MessageTrace:
        """What the trace topic holds about ``msg_id`` (mqadmin's queryMsgTraceById): the trace
        messages whose KEYS hold the id (64 at most, as mqadmin asks), their records of it."""
        now_ms = int(time.time() * 1000)
        found = await self.query_by_key(trace_topic, msg_id, end_ms=now_ms, max_num=TRACE_QUERY_MAX)
        return collect_trace(msg_id, ((f.message.body, f.message.born_host[0]) for f in found))

    async def message_at(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt | None:
        masters = await self.readers(topic)
        if broker_name not in masters:
            raise NoRouteError(f"broker {broker_name!r} does not serve topic {topic!r}")
        header = PullMessageRequestHeader(
            consumer_group=ADMIN_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=1,
            sys_flag=FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, sub_version=0, subscription="*",
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.encode())
        resp = await self._invoke(masters[broker_name], request)
        if resp.code != ResponseCode.SUCCESS:
            return None
        messages = decode_records(resp.body_bytes())
        return messages[0] if messages and messages[0].queue_offset == offset else None

    # --- offsets ------------------------------------------------------------------------------

    async def offset_for_time(self, topic: str, broker_name: str, queue_id: int, timestamp_ms: int) -> int:
        masters = await self.readers(topic)
        return await self.instance.api.search_offset(masters[broker_name], topic, queue_id, timestamp_ms)

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group`` on ``topic`` to the message RocketMQ's searchOffset names for
        ``timestamp_ms`` (the one stored nearest it; -1: the end), on every broker; live
        consumers are told to resume there at once."""
        header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force).encode()
        out: dict[MessageQueue, int] = {}
        for name, addr in (await self.masters(topic)).items():
            request = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, dict(header))
            resp = _check(await self._invoke(addr, request))
            for key, offset in decode_reset_offset_body(resp.body_bytes()).items():
                out[MessageQueue(key.topic, key.broker_name or name, key.queue_id)] = offset
        return out

    async def consumer_progress(self, group: str, topic: str) -> list[QueueProgress]:
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
        return rows

    # --- broker state (RocketMQ's examineBrokerRuntimeStats, examineTopicStats, examineConsumeStats)

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: every key the broker reports, values as strings."""
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        return decode_runtime_info(_check(await self._invoke(broker_addr, request)).body_bytes())

    async def topic_stats(self, topic: str) -> dict[QueueKey, TopicOffset]:
        """Min/max offset and last update time of every queue of ``topic``, from each broker's master (else a slave)."""
        out: dict[QueueKey, TopicOffset] = {}
        for addr in (await self.readers(topic)).values():
            request = RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            out.update(decode_topic_stats(_check(await self._invoke(addr, request)).body_bytes()))
        return out

    async def consume_stats(self, group: str, topic: str) -> ConsumeStats:
        """Broker and consumer offsets of ``group`` on ``topic``'s queues, and its TPS."""
        total = ConsumeStats({}, 0.0)
        for addr in (await self.readers(topic)).values():
            request = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
            part = ConsumeStats.decode(_check(await self._invoke(addr, request)).body_bytes())
            total.offset_table.update(part.offset_table)
            total.consume_tps += part.consume_tps
        return total
