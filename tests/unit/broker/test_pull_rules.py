"""suggestWhichBrokerId and what a slave answers differently (RocketMQ 4.9.8
PullMessageProcessor): the pure rules, then the pull processor applying them to a real store
as a master and as a slave."""

from __future__ import annotations

import dataclasses

import pytest

from apogee.broker.config import BrokerRole
from apogee.broker.processors.pull import PullProcessor
from apogee.broker.pull_rules import slave_corrects_offset, stores_commit_offset, suggest_broker_id
from apogee.broker.subscriptions import SubscriptionGroupConfig
from apogee.remoting.bodies.route import TopicConfigData
from apogee.remoting.codes import ResponseCode
from apogee.remoting.headers.pull import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION
from tests.unit.broker.harness import Tables, answered, connection
from tests.unit.broker.processors.test_pull import ext, pull, put


@pytest.mark.parametrize("far_behind", [False, True])
@pytest.mark.parametrize("group_id", [0, 1, 2])
def test_without_slave_read_enable_the_suggestion_is_always_the_master(far_behind: bool, group_id: int) -> None:
    assert suggest_broker_id(False, far_behind, group_id, 3) == 0


def test_with_slave_read_enable_a_slow_consumer_goes_to_which_broker_when_consume_slowly() -> None:
    assert suggest_broker_id(True, True, 0, 1) == 1
    assert suggest_broker_id(True, True, 0, 2) == 2
    # Not behind: the group's own brokerId (0 by default; a group pinned to a slave stays there).
    assert suggest_broker_id(True, False, 0, 1) == 0
    assert suggest_broker_id(True, False, 2, 1) == 2


def test_only_a_slave_without_offset_check_in_slave_keeps_the_consumers_offset() -> None:
    assert slave_corrects_offset(False, False) and slave_corrects_offset(False, True)
    assert slave_corrects_offset(True, True)
    assert not slave_corrects_offset(True, False)
    assert stores_commit_offset(False) and not stores_commit_offset(True)


def processor(t: Tables, **changes: object) -> PullProcessor:
    config = dataclasses.replace(t.config, **changes)  # type: ignore[arg-type]
    return PullProcessor(
        config=config, store=t.store, topics=t.topics, subscriptions=t.subscriptions, offsets=t.offsets,
        clients=t.clients, long_polling=t.long_polling, address=t.address, stats=t.stats,
    )


def slave(t: Tables, **changes: object) -> PullProcessor:
    return processor(t, broker_role=BrokerRole.SLAVE, broker_id=1, **changes)


@pytest.fixture
async def topic(tables: Tables) -> str:
    tables.topics.put(TopicConfigData("T", 1, 1))
    for i in range(4):
        await put(tables, "T", f"m{i}".encode())
    return "T"


async def test_a_master_with_slave_read_enable_sends_a_far_behind_consumer_to_the_slave(
    tables: Tables, topic: str
) -> None:
    tables.subscriptions.put(SubscriptionGroupConfig("CG", which_broker_when_consume_slowly=2))
    plain = await answered(processor(tables).pull, connection(), pull())
    assert ext(plain)["suggestWhichBrokerId"] == 0
    reading = processor(tables, slave_read_enable=True)
    assert ext(await answered(reading.pull, connection(), pull()))["suggestWhichBrokerId"] == 0  # in memory
    tables.store.reader.memory_limit = 0  # every byte behind the head counts as "not in memory"
    far = await answered(reading.pull, connection(), pull(offset=0))
    assert far.code == ResponseCode.SUCCESS
    assert ext(far)["suggestWhichBrokerId"] == 2
    assert ext(await answered(processor(tables).pull, connection(), pull()))["suggestWhichBrokerId"] == 0


async def test_a_slave_serves_pulls_without_slave_read_enable_and_sends_the_consumer_home(
    tables: Tables, topic: str
) -> None:
    answer = await answered(slave(tables).pull, connection(), pull(offset=1))
    assert answer.code == ResponseCode.SUCCESS
    assert ext(answer)["suggestWhichBrokerId"] == 0
    assert ext(answer)["nextBeginOffset"] == 4


async def test_a_slave_never_stores_a_pulls_commit_offset(tables: Tables, topic: str) -> None:
    flags = FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET
    await answered(slave(tables).pull, connection(), pull(offset=2, sys_flag=flags, commit_offset=2))
    assert tables.offsets.query("CG", "T", 0) == -1
    await answered(processor(tables).pull, connection(), pull(offset=2, sys_flag=flags, commit_offset=2))
    assert tables.offsets.query("CG", "T", 0) == 2


async def test_a_slave_corrects_offset_moved_only_with_offset_check_in_slave(tables: Tables, topic: str) -> None:
    tables.subscriptions.put(SubscriptionGroupConfig("CG", broker_id=1))
    assert (await answered(processor(tables).pull, connection(), pull(offset=9))).code == ResponseCode.PULL_OFFSET_MOVED
    kept = await answered(slave(tables).pull, connection(), pull(offset=9))
    assert kept.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert ext(kept)["suggestWhichBrokerId"] == 1  # the group's brokerId
    tables.store.config.offset_check_in_slave = True
    moved = await answered(slave(tables).pull, connection(), pull(offset=9))
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED
    assert ext(moved)["nextBeginOffset"] == 4  # the store's correction (the max offset)
    assert ext(kept)["nextBeginOffset"] == 9  # RocketMQ nextOffsetCorrection on a slave: unchanged
