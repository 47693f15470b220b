"""The single-send fast path never accepts what the full path refuses.

Every refusal of ``SendProcessor.send`` is fed to ``_send_plain`` (the C fast path of
SEND_MESSAGE_V2) too: it must decline (return None, so the full path answers) or give the
identical answer.  And a refused send changes nothing: no topic, no group, no stored byte.
A real broker's processors and store in a temporary directory; no sockets.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from apogee.broker.config import BrokerConfig
from apogee.broker.controller import BrokerController
from apogee.common.accel import native
from apogee.common.message_codec import properties_to_string
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.server import FieldsAnswer, RequestDispatcher
from apogee.store import StoreConfig

MAX_SIZE = 1024


def header(topic: str = "Plain", **over: str) -> dict[str, str]:
    """A SEND_MESSAGE_V2 header as Apogee's producer writes it (no batch key: the C reader
    declines any header that has one); ``over`` replaces or adds keys."""
    ext = {
        "a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string({"KEYS": "k", "WAIT": "true"}),
        "j": "0", "k": "false",
    }
    ext.update(over)
    return {k: v for k, v in ext.items() if v is not None}


def drop(key: str) -> dict[str, str]:
    ext = header()
    del ext[key]
    return ext


Setup = Callable[[BrokerController], None]


def read_only_topic(b: BrokerController) -> None:
    b.topics.put(TopicConfigData("ReadOnly", 4, 4, 4))


def read_only_broker(b: BrokerController) -> None:
    b.config.broker_permission = 4


def no_group_auto_create(b: BrokerController) -> None:
    b.subscriptions.auto_create = False


def reject_transactions(b: BrokerController) -> None:
    b.config.reject_transaction_message = True


# (name, extFields, body, setup, expected code, text in the remark)
REFUSALS: list[tuple[str, dict[str, str], bytes, Setup | None, int, str]] = [
    ("broker not writable", header(), b"x", read_only_broker, ResponseCode.NO_PERMISSION, "forbidden"),
    ("illegal characters", header("Bad Topic"), b"x", None, ResponseCode.SYSTEM_ERROR, "characters"),
    ("trailing newline", header("Plain\n"), b"x", None, ResponseCode.SYSTEM_ERROR, "characters"),
    ("topic too long", header("T" * 128), b"x", None, ResponseCode.SYSTEM_ERROR, "127"),
    ("empty topic", header(""), b"x", None, ResponseCode.SYSTEM_ERROR, "empty"),
    ("schedule topic", header("SCHEDULE_TOPIC_XXXX"), b"x", None, ResponseCode.NO_PERMISSION, "forbidden"),
    ("half topic", header("RMQ_SYS_TRANS_HALF_TOPIC"), b"x", None, ResponseCode.NO_PERMISSION, "forbidden"),
    ("self-test topic", header("SELF_TEST_TOPIC"), b"x", None, ResponseCode.NO_PERMISSION, "forbidden"),
    ("no template", header("Fresh", c="NoSuchTemplate"), b"x", None, ResponseCode.TOPIC_NOT_EXIST, "not exist"),
    ("topic not writable", header("ReadOnly"), b"x", read_only_topic, ResponseCode.NO_PERMISSION, "forbidden"),
    ("queue id out of range", header(e="4"), b"x", None, ResponseCode.SYSTEM_ERROR, "queueId[4] is illegal"),
    ("new topic, queue id out of range", header("Fresh", e="9"), b"x", None, ResponseCode.SYSTEM_ERROR,
     "queueId[9] is illegal"),
    ("empty body", header(), b"", None, ResponseCode.MESSAGE_ILLEGAL, "body is empty"),
    ("new topic, empty body", header("Fresh"), b"", None, ResponseCode.MESSAGE_ILLEGAL, "body is empty"),
    ("body over the limit", header(), b"x" * (MAX_SIZE + 1), None, ResponseCode.MESSAGE_ILLEGAL, "maxMessageSize"),
    ("flag >= 2^31", header(h="2147483648"), b"x", None, ResponseCode.SYSTEM_ERROR, "<h>"),
    ("sysFlag >= 2^31", header(f="2147483648"), b"x", None, ResponseCode.SYSTEM_ERROR, "<f>"),
    ("reconsumeTimes >= 2^31", header(j="2147483648"), b"x", None, ResponseCode.SYSTEM_ERROR, "<j>"),
    ("queueId >= 2^31", header(e="2147483648"), b"x", None, ResponseCode.SYSTEM_ERROR, "<e>"),
    ("queueId < -2^31", header(e="-2147483649"), b"x", None, ResponseCode.SYSTEM_ERROR, "<e>"),
    ("bornTimestamp >= 2^63", header(g=str(1 << 63)), b"x", None, ResponseCode.SYSTEM_ERROR, "<g>"),
    ("defaultTopicQueueNums 10^20", header("Fresh", d="100000000000000000000"), b"x", None,
     ResponseCode.SYSTEM_ERROR, "<d>"),
    ("flag not a number", header(h="one"), b"x", None, ResponseCode.SYSTEM_ERROR, "<h>"),
    ("flag as a JSON number >= 2^31", {**header(), "h": 2**31}, b"x", None, ResponseCode.SYSTEM_ERROR, "<h>"),  # type: ignore[dict-item]
    ("missing topic field", drop("b"), b"x", None, ResponseCode.SYSTEM_ERROR, "<b> is null"),
    ("missing flag field", drop("h"), b"x", None, ResponseCode.SYSTEM_ERROR, "<h> is null"),
    ("retry topic of a missing group", header("%RETRY%Nobody"), b"x", no_group_auto_create,
     ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Nobody"),
    ("transaction message refused", header(i=properties_to_string({"TRAN_MSG": "true"})), b"x",
     reject_transactions, ResponseCode.NO_PERMISSION, "transaction"),
    ("batch to a retry topic", header("%RETRY%G", m="true"), b"x", None, ResponseCode.MESSAGE_ILLEGAL, "retry topic"),
    ("empty batch", header(m="true"), b"", None, ResponseCode.MESSAGE_ILLEGAL, "batch body is empty"),
    ("batch with flag >= 2^31", header(m="true", h="2147483648"), b"x", None, ResponseCode.SYSTEM_ERROR, "<h>"),
]


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    config = BrokerConfig(broker_name="parity", broker_ip1="127.0.0.1", default_topic_queue_nums=4)
    store_config = StoreConfig(store_path_root_dir=str(tmp_path / "store"))
    store_config.max_message_size = MAX_SIZE
    b = BrokerController(config, store_config)
    await b.store.start()
    b.topics.put(TopicConfigData("Plain", 4, 4, 6))
    yield b
    await b.table_writer.close()
    await b.store.shutdown()


def connection() -> Connection:
    conn = Connection(RequestDispatcher(), RemotingConfig())
    conn.peer = ("127.0.0.1", 5555)
    return conn


def full_path(b: BrokerController, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    try:
        answer = b.send_processor.send(conn, req)
    except Exception as exc:  # what the dispatcher answers for a processor's exception
        return RequestDispatcher._failure(req, exc)
    assert isinstance(answer, RemotingCommand), answer
    return answer


def state(b: BrokerController) -> tuple[object, ...]:
    return (dict(b.topics.table), b.topics.file.version, dict(b.subscriptions.table), b.subscriptions.file.version,
            b.store.max_phy_offset)


@pytest.mark.parametrize(("name", "ext", "body", "setup", "code", "remark"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_the_fast_path_declines_every_refusal_and_nothing_changes(
    broker: BrokerController, name: str, ext: dict[str, str], body: bytes, setup: Setup | None, code: int, remark: str
) -> None:
    if setup is not None:
        setup(broker)
    conn = connection()
    before = state(broker)
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(ext), body)
    answer = full_path(broker, conn, req)
    assert answer.code == code and remark in (answer.remark or ""), (answer.code, answer.remark)
    if native is not None:
        again = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(ext), body)
        fast = broker.send_processor._send_plain(conn, again)
        assert fast is None or (isinstance(fast, RemotingCommand) and (fast.code, fast.remark) == (code, answer.remark))
    assert state(broker) == before, "a refused send changed a table or the store"


async def test_the_fast_path_takes_a_plain_send_and_both_paths_store_it(broker: BrokerController) -> None:
    """The parity above is not vacuous: a plain send is the fast path's, and the full path
    accepts the very same request."""
    conn = connection()
    req = lambda: RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header(), b"body")  # noqa: E731
    if native is not None:
        fast = broker.send_processor._send_plain(conn, req())
        assert isinstance(fast, FieldsAnswer) and fast.code == ResponseCode.SUCCESS
    full = broker.send_processor.send(conn, req())
    assert isinstance(full, FieldsAnswer) and full.code == ResponseCode.SUCCESS


async def test_a_topic_update_is_seen_by_the_fast_path(broker: BrokerController) -> None:
    """The fast path's per-topic verdict follows the topic's config: made read-only, the
    topic's sends are declined and refused by the full path."""
    if native is None:
        pytest.skip("the fast path needs the C extension")
    conn = connection()
    send = lambda: RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header(), b"body")  # noqa: E731
    assert broker.send_processor._send_plain(conn, send()) is not None
    broker.topics.put(TopicConfigData("Plain", 4, 4, 4))
    assert broker.send_processor._send_plain(conn, send()) is None
    assert full_path(broker, conn, send()).code == ResponseCode.NO_PERMISSION
    broker.config.broker_permission = 4
    broker.topics.put(TopicConfigData("Plain", 4, 4, 6))
    assert broker.send_processor._send_plain(conn, send()) is None
