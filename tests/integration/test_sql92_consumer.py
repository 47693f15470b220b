"""SQL92 subscriptions through Apogee's own consumers (issue 6, client side)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.client import ConsumeResult, LitePullConsumer, Message, Producer, PushConsumer
from apogee.errors import SubscriptionParseFailedError
from tests.integration.test_broker import start_broker
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import holds_for


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    namesrv = start_namesrv(tmp_path / "ns")
    broker = start_broker(
        namesrv.addr, tmp_path / "store", "enablePropertyFilter=true\nmappedFileSizeCommitLog=67108864\n"
    )
    yield namesrv, broker
    broker.close()
    namesrv.close()


async def test_push_consumer_receives_only_matching_messages(cluster) -> None:
    namesrv, _ = cluster
    got: list[str] = []
    done = asyncio.Event()

    async def listener(msgs, ctx) -> ConsumeResult:
        got.extend(m.body.decode() for m in msgs)
        if len(got) >= 4:
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    async with Producer("SqlProducer", namesrv.addr) as producer:
        for i in range(50):
            msg = Message(
                "SqlTopic", f"m{i}".encode(), properties={"amount": str(i), "region": "eu" if i % 2 else "us"}
            )
            msg.tags = "paid" if i % 5 == 0 else "created"
            await producer.send(msg)
    consumer = PushConsumer("SqlGroup", namesrv.addr, listener=listener, consume_from_where="FIRST_OFFSET")
    consumer.subscribe("SqlTopic", "amount >= 10 AND region = 'us' AND TAGS = 'paid'", expression_type="SQL92")
    async with consumer:
        await asyncio.wait_for(done.wait(), 20)
        await holds_for(lambda: len(got) == 4, 1.0, "no other message")
    assert sorted(got) == ["m10", "m20", "m30", "m40"]


def test_malformed_selector_fails_before_anything_is_sent() -> None:
    consumer = LitePullConsumer("G", "127.0.0.1:1")
    with pytest.raises(SubscriptionParseFailedError, match="column"):
        consumer.subscribe("T", "amount >= AND", expression_type="SQL92")
