"""What the broker's processor and service tests share: the collaborators a controller
builds, around a real MessageStore in a temporary directory (the ``tables`` fixture of
``conftest.py``), and a connection whose transport only records what is written.  No
controller, no sockets."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apogee.broker.clients import ClientManager
from apogee.broker.config import BrokerAddress, BrokerConfig
from apogee.broker.locks import RebalanceLockManager
from apogee.broker.long_polling import PullRequestHoldService
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.persistence import TableWriter
from apogee.broker.schedule import ScheduleService
from apogee.broker.stats import BrokerStats
from apogee.broker.subscriptions import SubscriptionGroupManager
from apogee.broker.topics import TopicConfigManager
from apogee.common import constants as c
from apogee.common.message import MessageExt
from apogee.common.message_codec import decode_records
from apogee.remoting.codec import FrameDecoder, request_command
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.server import Answer, Deferred, FieldsAnswer, RequestDispatcher
from apogee.store import FlushDiskType, StoreConfig
from apogee.store.message_store import MessageStore

DELAY_LEVELS = "0s 1s 2s"  # level 1 is due at once: the schedule service is tested without waiting
MAX_SIZE = 64 * 1024


class RecordingTransport:
    """Stands in for a socket: keeps what the connection writes."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    def writelines(self, parts: list[bytes | memoryview]) -> None:
        for part in parts:
            self.data += part

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def connection(peer: tuple[str, int] = ("127.0.0.1", 5555)) -> Connection:
    """An open connection from ``peer``; what the broker sends on it is ``sent(conn)``."""
    conn = Connection(None, RemotingConfig())
    conn.connection_made(RecordingTransport())  # type: ignore[arg-type]
    conn.peer = peer
    return conn


def sent(conn: Connection) -> list[RemotingCommand]:
    """Every command written to ``conn`` so far (a turn's later frames wait for the loop:
    yield to it first)."""
    transport = conn._transport
    assert isinstance(transport, RecordingTransport)
    return FrameDecoder(1 << 24).feed(bytes(transport.data))


async def call(handler: Any, conn: Connection, req: RemotingCommand) -> Answer | None:
    """``handler``'s answer to ``req`` as the dispatcher would write it: awaited when the
    processor returns an awaitable, and an exception turned into its error answer."""
    try:
        answer = handler(conn, req)
        if isinstance(answer, Deferred):
            answer = answer.answer(await answer.future)
        elif inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        return RequestDispatcher._failure(req, exc)
    assert answer is None or isinstance(answer, Answer), answer
    return answer


async def answered(handler: Any, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """``call``, for handlers that always answer: the answer as the command the client reads
    (a ``FieldsAnswer`` as the response it is written as: its values as strings)."""
    return as_read(req, await call(handler, conn, req))


def as_read(req: RemotingCommand, answer: Answer | None) -> RemotingCommand:
    """The answer to ``req`` as the command the client reads: a ``FieldsAnswer`` as the
    response it is written as (its values as strings)."""
    if isinstance(answer, FieldsAnswer):
        ext = request_command(answer.code, answer.keys, answer.values, None).ext_fields
        return req.response(answer.code, None, ext, answer.body)
    assert isinstance(answer, RemotingCommand), answer
    return answer


@dataclass
class Tables:
    """What a controller owns and hands its processors."""

    config: BrokerConfig
    store_config: StoreConfig
    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    subscriptions: SubscriptionGroupManager
    clients: ClientManager
    locks: RebalanceLockManager
    long_polling: PullRequestHoldService
    schedule: ScheduleService
    table_writer: TableWriter
    address: BrokerAddress
    topic_changes: list[None] = field(default_factory=list)
    stats: BrokerStats = field(default_factory=lambda: BrokerStats("UnitCluster", 0))

    @property
    def max_delay_level(self) -> int:
        return len(c.parse_delay_levels(self.store_config.message_delay_level))

    def topics_changed(self) -> None:
        self.topic_changes.append(None)

    async def messages(self, topic: str, queue_id: int = 0) -> list[MessageExt]:
        """Every message of one queue, once the store has dispatched what it holds."""
        await self.store.wait_dispatched()
        result = self.store.get_message("reader", topic, queue_id, 0, 1000)
        body = b"".join(bytes(b) for b in result.buffers)
        result.release()
        return decode_records(body)


async def make_tables(root: Path, flush: FlushDiskType = FlushDiskType.ASYNC_FLUSH) -> Tables:
    """The collaborators, the store started."""
    config = BrokerConfig(broker_name="unit", broker_cluster_name="UnitCluster", default_topic_queue_nums=4)
    store_config = StoreConfig(store_path_root_dir=str(root / "store"), flush_disk_type=flush)
    store_config.mapped_file_size_commitlog = 1 << 20
    store_config.mapped_file_size_consume_queue = 300 * 20
    store_config.populate_ahead_bytes = 0
    store_config.max_hash_slot_num = 1024
    store_config.max_index_num = 4096
    store_config.max_message_size = MAX_SIZE
    store_config.message_delay_level = DELAY_LEVELS
    config_dir = root / "store" / "config"
    store = MessageStore(store_config)
    delay_levels = c.parse_delay_levels(DELAY_LEVELS)
    topics = TopicConfigManager(
        config_dir / "topics.json", cluster_name=config.broker_cluster_name, broker_name=config.broker_name,
        auto_create_topic_enable=True, default_topic_queue_nums=4, delay_level_count=len(delay_levels),
    )
    offsets = ConsumerOffsetManager(config_dir / "consumerOffset.json")
    subscriptions = SubscriptionGroupManager(
        config_dir / "subscriptionGroup.json", auto_create=True, max_reconsume_times=16
    )
    address = BrokerAddress("127.0.0.1", 10911)
    schedule = ScheduleService(store, delay_levels, address, config_dir / "delayOffset.json")
    writer = TableWriter((topics.file, subscriptions.file, offsets.file, schedule.file))
    await store.start()
    return Tables(
        config, store_config, store, topics, offsets, subscriptions, ClientManager(), RebalanceLockManager(60_000),
        PullRequestHoldService(4), schedule, writer, address,
    )


async def close_tables(t: Tables) -> None:
    t.long_polling.wake_all()
    await t.table_writer.close()
    await t.store.shutdown()
