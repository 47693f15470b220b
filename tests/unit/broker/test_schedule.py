"""ScheduleService against a real store: a due delayed message goes back to its real topic
and queue, one not due yet stays, progress moves only past what was delivered.  (The test
tables' delay level 1 is 0 s, so nothing here waits for a clock.)"""

from __future__ import annotations

import orjson

from apogee.common import constants as c
from apogee.common.message_codec import properties_to_string
from apogee.remoting.bodies.route import TopicConfigData
from apogee.store.inner import InnerMessage
from tests.support.wire import send_request
from tests.unit.broker.harness import Tables, call, connection
from tests.unit.broker.processors.test_send import processor as send_processor


async def delayed(t: Tables, body: bytes, level: int, queue_id: int = 1) -> None:
    t.topics.put(TopicConfigData("T", 2, 2))
    await call(send_processor(t).send, connection(), send_request("T", body, queue_id=queue_id, delay_level=level,
                                                                  tags="A"))
    await t.store.wait_dispatched()


async def test_a_due_message_goes_back_to_its_topic_and_queue(tables: Tables) -> None:
    await delayed(tables, b"now", level=1)
    [scheduled] = await tables.messages(c.SCHEDULE_TOPIC, 0)
    wait_s = await tables.schedule._deliver_due(1, 0)
    assert wait_s == 3600.0  # nothing more in the level: sleep until a new one arrives
    [real] = await tables.messages("T", 1)
    assert real.body == b"now" and real.flag == scheduled.flag
    # Delivered with what it waited with, as RocketMQ's messageTimeup: DELAY, REAL_TOPIC, REAL_QID, WAIT.
    assert real.properties == scheduled.properties == {
        "TAGS": "A", "DELAY": "1", "WAIT": "true", "CLUSTER": "UnitCluster", "REAL_TOPIC": "T", "REAL_QID": "1"}
    assert real.born_timestamp == scheduled.born_timestamp and real.store_host == tables.address.store_host
    assert tables.schedule.offsets == {1: 1} and tables.schedule.file.dirty
    assert orjson.loads(tables.schedule.encode()) == {"offsetTable": {"1": 1}}
    assert await tables.schedule._deliver_due(1, 0) == 3600.0  # delivered once, not twice
    assert len(await tables.messages("T", 1)) == 1


async def test_a_message_not_due_yet_stays(tables: Tables) -> None:
    await delayed(tables, b"later", level=2)
    wait_s = await tables.schedule._deliver_due(2, 1)
    assert 0 < wait_s <= 1.0
    assert await tables.messages("T", 1) == [] and tables.schedule.offsets.get(2, 0) == 0


async def test_a_scheduled_message_that_does_not_say_where_it_goes_is_skipped(tables: Tables) -> None:
    stray = InnerMessage(topic=c.SCHEDULE_TOPIC, queue_id=0, body=b"stray",
                         properties=properties_to_string({"DELAY": "1"}))
    assert (await tables.store.put_message(stray)).ok
    await delayed(tables, b"after", level=1)
    await tables.schedule._deliver_due(1, 0)
    assert [m.body for m in await tables.messages("T", 1)] == [b"after"]
    assert tables.schedule.offsets == {1: 2}
