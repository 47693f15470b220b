"""The ACL dispatcher (broker/acl/service.py) for requests whose body is hashed off the loop:
judged as the inline check judges them, processed in the order they came, and a connection
that sends on behind such a request stops being read past ``HELD_LIMIT`` held requests and is
read again once they have gone.  A recording transport stands in for the socket."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from apogee.broker.acl import service
from apogee.broker.acl.rules import AclRules
from apogee.broker.acl.service import AclDispatcher
from apogee.remoting.body_hasher import LARGE_BODY_BYTES
from apogee.remoting.codes import RequestCode as R
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.limits import ServerLimits
from apogee.remoting.signing import SessionCredentials, Signer
from tests.support.transport import frames_written
from tests.unit.remoting.test_limits import PausableTransport

SIGNER = Signer(SessionCredentials("RocketMQ", "12345678"))
RULES = AclRules.from_documents([("/plain_acl.yml", {"accounts": [
    {"accessKey": "RocketMQ", "secretKey": "12345678", "defaultTopicPerm": "PUB", "defaultGroupPerm": "PUB"},
]})], now_ms=1)
BIG = b"b" * LARGE_BODY_BYTES


@pytest.fixture(autouse=True)
def _off_the_loop_whatever_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker hashes large bodies off the loop only with 2 cores or more: here, always."""
    monkeypatch.setattr(service, "BACKGROUND_MIN_BYTES", LARGE_BODY_BYTES)


def request(code: int, opaque: int, body: bytes, tamper: bool = False) -> RemotingCommand:
    ext = SIGNER.sign_ext({"a": "PG", "b": "TopicA"}, body)
    cmd = RemotingCommand.request(code, ext, body[:-1] + b"!" if tamper else body)
    cmd.opaque = opaque
    return cmd


def refusing(conn: Connection, req: RemotingCommand, reason: str) -> RemotingCommand:
    return req.response(1, reason)


async def connected(seen: list[int]) -> tuple[AclDispatcher, Connection, PausableTransport]:
    dispatcher = AclDispatcher(SimpleNamespace(rules=RULES, refusal=refusing))  # type: ignore[arg-type]

    def processor(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        seen.append(req.opaque)
        return req.response(0)

    for code in (R.SEND_BATCH_MESSAGE, R.SEND_MESSAGE_V2):
        dispatcher.register(code, processor)
    conn = Connection(dispatcher, RemotingConfig(), limits=ServerLimits(1 << 20, 30))
    transport = PausableTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.peer = ("127.0.0.1", 5555)
    return dispatcher, conn, transport


def test_requests_behind_a_large_one_wait_in_order_and_reading_stops_past_the_limit() -> None:
    async def main() -> None:
        seen: list[int] = []
        dispatcher, conn, transport = await connected(seen)
        behind = AclDispatcher.HELD_LIMIT + 5
        dispatcher.dispatch(conn, request(R.SEND_BATCH_MESSAGE, 0, BIG))
        for i in range(1, behind + 1):
            dispatcher.dispatch(conn, request(R.SEND_MESSAGE_V2, i, b"small"))
        assert seen == [] and not transport.reading  # the large one is being hashed
        answers = await frames_written(transport.writes, behind + 1)
        assert seen == list(range(behind + 1)) and [a.code for a in answers] == [0] * (behind + 1)
        assert transport.reading

    asyncio.run(main())


def test_reading_stops_while_too_many_bytes_of_large_bodies_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        monkeypatch.setattr(AclDispatcher, "HELD_BYTES", 3 * LARGE_BODY_BYTES)
        seen: list[int] = []
        dispatcher, conn, transport = await connected(seen)
        for i in range(2):
            dispatcher.dispatch(conn, request(R.SEND_BATCH_MESSAGE, i, BIG))
        assert transport.reading
        dispatcher.dispatch(conn, request(R.SEND_BATCH_MESSAGE, 2, BIG))
        assert not transport.reading and seen == []
        await frames_written(transport.writes, 3)
        assert seen == [0, 1, 2] and transport.reading

    asyncio.run(main())


def test_a_large_request_tampered_in_its_body_is_refused_and_those_behind_it_still_served() -> None:
    async def main() -> None:
        seen: list[int] = []
        dispatcher, conn, transport = await connected(seen)
        dispatcher.dispatch(conn, request(R.SEND_BATCH_MESSAGE, 0, BIG, tamper=True))
        dispatcher.dispatch(conn, request(R.SEND_MESSAGE_V2, 1, b"small", tamper=True))  # refused inline
        dispatcher.dispatch(conn, request(R.SEND_BATCH_MESSAGE, 2, BIG))
        dispatcher.dispatch(conn, request(R.SEND_MESSAGE_V2, 3, b"small"))
        answers = await frames_written(transport.writes, 4)
        assert [(a.opaque, a.code, a.remark) for a in answers] == [
            (0, 1, "Check signature failed for accessKey=RocketMQ"),
            (1, 1, "Check signature failed for accessKey=RocketMQ"),
            (2, 0, None),
            (3, 0, None),
        ]
        assert seen == [2, 3]

    asyncio.run(main())


def test_reading_held_by_the_acl_and_by_a_write_pause_restarts_when_neither_holds_it() -> None:
    async def main() -> None:
        _, conn, transport = await connected([])
        conn.hold_reading(True)
        conn.pause_writing()
        conn.resume_writing()
        assert not transport.reading  # the ACL still holds it
        conn.hold_reading(False)
        assert transport.reading
        conn.pause_writing()
        conn.hold_reading(True)
        conn.hold_reading(False)
        assert not transport.reading  # the peer still does not read its answers
        conn.resume_writing()
        assert transport.reading

    asyncio.run(main())
