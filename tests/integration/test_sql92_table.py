"""The SQL92 table of tests/unit/filter/test_sql92_table.py, end to end: the same messages are
sent to a real broker and every expression is pulled with a SQL92 subscription."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from apogee.common.message_codec import decode_records
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import ResponseCode
from tests.integration.test_broker import start_broker
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.wire import pull_request, send_request, wait_dispatched
from tests.unit.filter.test_sql92_table import MESSAGES, TABLE

TOPIC = "Sql92Table"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("sql92")
    namesrv = start_namesrv(base / "ns")
    server = start_broker(namesrv.addr, base / "store", "enablePropertyFilter=true\nmappedFileSizeCommitLog=67108864\n")
    yield server
    server.close()
    namesrv.close()


def test_table_has_at_least_40_expressions() -> None:
    assert len(TABLE) >= 40


async def test_every_expression_matches_the_expected_messages_on_the_broker(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        for name, props in MESSAGES.items():
            user = {k: v for k, v in props.items() if k != "TAGS"}
            resp = await client.invoke(
                broker.addr, send_request(TOPIC, name.encode(), tags=props.get("TAGS"), props=user), 5000
            )
            assert resp.code == 0, resp.remark
        await wait_dispatched(client, broker.addr, TOPIC, 0, len(MESSAGES))

        async def matches(expression: str) -> set[str]:
            resp = await client.invoke(
                broker.addr, pull_request(TOPIC, 0, 0, subscription=expression, expression_type="SQL92"), 5000
            )
            if resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY:  # scanned, nothing matched
                return set()
            assert resp.code == ResponseCode.SUCCESS, (expression, resp.code, resp.remark)
            return {m.body.decode() for m in decode_records(resp.body_bytes())}

        results = await asyncio.gather(*(matches(expr) for expr, _, _ in TABLE))
        wrong = [
            (expr, expected, got) for (expr, expected, _), got in zip(TABLE, results, strict=True) if got != expected
        ]
        assert not wrong, wrong
    finally:
        await client.close()


async def test_malformed_expression_is_rejected_with_a_readable_message(broker: ServerProcess) -> None:
    client = RemotingClient()
    try:
        topic = "Sql92Malformed"  # a topic of its own: the test does not depend on the one above
        assert (await client.invoke(broker.addr, send_request(topic, b"x"), 5000)).code == 0
        bad = pull_request(topic, 0, 0, subscription="a > 1 AND (b = 2", expression_type="SQL92")
        resp = await client.invoke(broker.addr, bad, 5000)
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "expected ')'" in resp.remark and "column" in resp.remark
    finally:
        await client.close()
