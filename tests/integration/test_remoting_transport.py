"""The asyncio transport over real loopback sockets: invocation styles, correlation, failures."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from apogee.errors import ConnectionClosedError, HeaderError, RequestTimeoutError
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.server import RemotingServer, RequestDispatcher

ECHO, SLOW, NEVER, BAD_HEADER, CRASH, ONEWAY_SINK, CALL_BACK = 1001, 1002, 1003, 1004, 1005, 1006, 1007


class Fixture:
    def __init__(self) -> None:
        self.oneway_seen: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.server_conns: list[Connection] = []


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Fixture, RemotingServer]]:
    fx = Fixture()
    dispatcher = RequestDispatcher()

    def echo(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, ext_fields=req.ext_fields, body=req.body)

    async def slow(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float((req.ext_fields or {}).get("sleep", "0.2")))
        return req.response(ResponseCode.SUCCESS, ext_fields=req.ext_fields)

    async def never(conn: Connection, req: RemotingCommand) -> None:
        await asyncio.sleep(3600)

    def bad_header(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        raise HeaderError("the custom field <topic> is null")

    def crash(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        raise ZeroDivisionError("boom")

    def sink(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        fx.oneway_seen.put_nowait(req)
        return req.response(ResponseCode.SUCCESS)  # must be swallowed: the request is oneway

    async def call_back(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        # The server asks the client something over the same connection (like a broker's
        # CHECK_TRANSACTION_STATE) and returns what the client said.
        answer = await conn.invoke(RemotingCommand.request(ECHO, {"from": "server"}), 2000)
        return req.response(ResponseCode.SUCCESS, ext_fields=answer.ext_fields)

    for code, fn in {ECHO: echo, SLOW: slow, NEVER: never, BAD_HEADER: bad_header, CRASH: crash,
                     ONEWAY_SINK: sink, CALL_BACK: call_back}.items():
        dispatcher.register(code, fn)
    srv = RemotingServer(dispatcher, RemotingConfig(channel_max_idle_time_s=2))
    host, port = await srv.start("127.0.0.1", 0)
    yield f"{host}:{port}", fx, srv
    await srv.close()


async def test_sync_invoke_and_correlation_of_concurrent_requests(server) -> None:
    addr, _, _ = server
    client = RemotingClient()
    try:
        # Replies come back out of order (different sleeps); each lands on its own request.
        calls = [
            client.invoke(addr, RemotingCommand.request(SLOW, {"sleep": str(0.05 * (10 - i)), "i": str(i)}), 3000)
            for i in range(10)
        ]
        responses = await asyncio.gather(*calls)
        assert [r.ext_fields["i"] for r in responses] == [str(i) for i in range(10)]
        assert all(r.is_response for r in responses)
    finally:
        await client.close()


async def test_async_invoke_with_callback(server) -> None:
    addr, _, _ = server
    client = RemotingClient()
    loop = asyncio.get_running_loop()
    done: asyncio.Future[tuple[object, object]] = loop.create_future()
    try:
        await client.invoke_async(
            addr, RemotingCommand.request(ECHO, {"x": "1"}, b"body"), 2000,
            lambda resp, err: done.set_result((resp, err)),
        )
        resp, err = await done
        assert err is None and resp.body == b"body" and resp.ext_fields == {"x": "1"}
    finally:
        await client.close()


async def test_oneway_gets_no_response(server) -> None:
    addr, fx, _ = server
    client = RemotingClient()
    try:
        await client.invoke_oneway(addr, RemotingCommand.request(ONEWAY_SINK, {"n": "1"}))
        seen = await asyncio.wait_for(fx.oneway_seen.get(), 2)
        assert seen.is_oneway
        # The next request's response is the first frame back: nothing was sent for the oneway.
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"n": "2"}), 2000)
        assert resp.ext_fields == {"n": "2"}
    finally:
        await client.close()


async def test_timeout_raises_request_timeout(server) -> None:
    addr, _, _ = server
    client = RemotingClient()
    try:
        with pytest.raises(RequestTimeoutError, match=r"within \d+ ms"):
            await client.invoke(addr, RemotingCommand.request(NEVER), 100)
        # The connection is still good for the next request.
        assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
    finally:
        await client.close()


async def test_each_request_times_out_on_its_own_deadline(server) -> None:
    """One timer per connection serves requests with different timeouts: a short request sent
    after a long one still fails on time, the long one keeps waiting, and answered requests
    in between are not disturbed."""
    addr, _, _ = server
    client = RemotingClient()
    try:
        loop = asyncio.get_running_loop()
        assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0  # connected
        long = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(NEVER), 1500))
        await asyncio.sleep(0.05)
        start = loop.time()
        with pytest.raises(RequestTimeoutError, match="within 200 ms"):
            await client.invoke(addr, RemotingCommand.request(NEVER), 200)
        assert 0.15 <= loop.time() - start < 0.6
        assert (await client.invoke(addr, RemotingCommand.request(SLOW, {"sleep": "0.1"}), 1000)).code == 0
        assert not long.done()
        with pytest.raises(RequestTimeoutError, match="within 1500 ms"):
            await long
        assert 1.3 <= loop.time() - start < 2.2
    finally:
        await client.close()


async def test_pending_requests_fail_at_once_when_the_connection_closes(server) -> None:
    addr, _, srv = server
    client = RemotingClient()
    try:
        pending = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(NEVER), 30_000))
        await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for conn in list(srv.connections):
            conn.close("test closes it")
        with pytest.raises(ConnectionClosedError):
            await pending
        assert loop.time() - started < 1.0
    finally:
        await client.close()


async def test_unreachable_address_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connection refused
        client = RemotingClient()
        try:
            with pytest.raises(ConnectionClosedError, match="cannot connect"):
                await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 2000)
        finally:
            await client.close()


async def test_errors_become_responses_and_the_connection_survives(server) -> None:
    addr, _, _ = server
    client = RemotingClient()
    try:
        resp = await client.invoke(addr, RemotingCommand.request(4242), 2000)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 4242 not supported"
        resp = await client.invoke(addr, RemotingCommand.request(BAD_HEADER), 2000)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
        resp = await client.invoke(addr, RemotingCommand.request(CRASH), 2000)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "boom" in (resp.remark or "")
        assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
    finally:
        await client.close()


async def test_server_can_call_the_client_back_on_the_same_connection(server) -> None:
    addr, _, _ = server
    dispatcher = RequestDispatcher()
    dispatcher.register(ECHO, lambda conn, req: req.response(0, ext_fields={"client": "answered"}))
    client = RemotingClient(dispatcher=dispatcher)
    try:
        resp = await client.invoke(addr, RemotingCommand.request(CALL_BACK), 3000)
        assert resp.ext_fields == {"client": "answered"}
    finally:
        await client.close()


async def test_idle_connections_are_closed(server) -> None:
    addr, _, srv = server
    client = RemotingClient()
    try:
        await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
        conn = await client.connection(addr)
        await asyncio.wait_for(conn.closed_future, 6)  # server idle limit is 2 s
        assert not conn.is_open
        # A new request transparently opens a new connection.
        assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
    finally:
        await client.close()
