"""The tables a slave copies from its master read a RocketMQ 4.9 master's fastjson answers
(unquoted integer map keys, Java field names) as well as Apogee's own."""

from __future__ import annotations

from apogee.common.lenient_json import loads
from apogee.remoting.bodies.route import DataVersion
from tests.unit.broker.harness import Tables

# As a RocketMQ 4.9.8 master answers 21, 43, 45 and 201 (fastjson, Java field names).
JAVA_TOPICS = (
    b'{"dataVersion":{"counter":7,"timestamp":1700000000000},"topicConfigTable":{"JavaTopic":{"order":false,'
    b'"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"JavaTopic","topicSysFlag":0,'
    b'"writeQueueNums":4}}}'
)
JAVA_OFFSETS = b'{"offsetTable":{"JavaTopic@jg":{0:12,1:34},"%RETRY%jg@jg":{0:0}}}'
JAVA_DELAY = b'{"offsetTable":{1:5,3:9}}'
JAVA_GROUPS = (
    b'{"dataVersion":{"counter":2,"timestamp":1700000000001},"subscriptionGroupTable":{"jg":{"brokerId":0,'
    b'"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"groupName":"jg",'
    b'"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":2}}}'
)


def test_a_java_masters_tables_replace_the_slaves(tables: Tables) -> None:
    assert tables.topics.replace_from_master(loads(JAVA_TOPICS), "m")
    assert set(tables.topics.table) == {"JavaTopic"}  # the whole table, as RocketMQ's clear + putAll
    assert tables.topics.data_version == DataVersion(1700000000000, 7)
    assert not tables.topics.replace_from_master(loads(JAVA_TOPICS), "m")  # same version: nothing to do

    tables.offsets.commit("mine", "Local", 0, 3)  # committed here while the master was away: kept
    assert tables.offsets.merge_from_master(loads(JAVA_OFFSETS))
    assert tables.offsets.offsets_of("jg", "JavaTopic") == {0: 12, 1: 34}
    assert tables.offsets.query("mine", "Local", 0) == 3
    assert not tables.offsets.merge_from_master(loads(JAVA_OFFSETS))

    assert tables.schedule.replace_from_master(loads(JAVA_DELAY))
    assert tables.schedule.offsets == {1: 5, 3: 9}

    assert tables.subscriptions.replace_from_master(loads(JAVA_GROUPS))
    group = tables.subscriptions.get("jg")
    assert group is not None and group.retry_max_times == 3 and group.which_broker_when_consume_slowly == 2


def test_the_slaves_copies_are_written_to_its_files(tables: Tables) -> None:
    tables.topics.replace_from_master(loads(JAVA_TOPICS), "m")
    tables.offsets.merge_from_master(loads(JAVA_OFFSETS))
    for f in (tables.topics.file, tables.offsets.file):
        f.persist()
        assert f.path is not None and b"JavaTopic" in f.path.read_bytes()
