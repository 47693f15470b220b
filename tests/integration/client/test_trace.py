"""Message traces (issue 18) against a real broker: what Apogee's traced clients write is
RocketMQ's format, and ``apogee admin query-msg-trace-by-id`` shows traces written as a Java
client writes them.

The records are read here with a decoder of this file, written from the format's description
(RocketMQ's TraceDataEncoder: fields split by \\x01, each record ended by \\x02, the fields
of each record type in their order), not with ``apogee.client.trace``'s own.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

from apogee.admin import AdminClient
from apogee.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from apogee.common import constants as c
from apogee.errors import NoRouteError
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique, wait_until
from tests.support.processes import start_broker as start_processes_broker
from tests.support.processes import start_namesrv

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def records_of(body: bytes) -> list[list[str]]:
    """The records of a trace message body, each as its list of fields."""
    text = body.decode("utf-8")
    assert text.endswith("\x02"), f"a trace body ends with a record end: {text[-20:]!r}"
    return [record.split("\x01") for record in text[:-1].split("\x02")]


async def traces_of(ns: str, msg_id: str, topic: str = TRACE_TOPIC) -> list[tuple[list[str], list[str]]]:
    """(KEYS of the trace message, record) of every record about ``msg_id`` in ``topic``."""
    out = []
    async with AdminClient(ns) as admin:
        try:
            found = await admin.query_by_key(topic, msg_id, max_num=64)
        except NoRouteError:  # the trace topic is not there yet
            return []
    for f in found:
        keys = f.message.properties.get(c.KEYS, "").split(" ")
        out.extend((keys, r) for r in records_of(f.message.body) if msg_id in r)
    return out


async def wait_for_records(ns: str, msg_id: str, kinds: list[str], topic: str = TRACE_TOPIC) -> dict[str, list]:
    """Wait until records of every kind in ``kinds`` (with repeats) about ``msg_id`` are stored."""

    async def have() -> dict[str, list] | None:
        by_kind: dict[str, list] = {}
        for keys, record in await traces_of(ns, msg_id, topic):
            by_kind.setdefault(record[0], []).append((keys, record))
        ok = all(len(by_kind.get(k, [])) >= kinds.count(k) for k in kinds)
        return by_kind if ok else None

    return await wait_until(have, 20, f"trace records {kinds} of {msg_id}", interval_s=0.1)


def apogee_admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apogee", "admin", *args], capture_output=True, text=True, timeout=60)


def lines_starting(output: str, word: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.split()[:1] == [word]]


async def test_apogee_producer_and_push_consumer_write_rocketmq_traces(cluster: Cluster) -> None:
    topic, pgroup, cgroup = unique("T_traced"), unique("PG_traced"), unique("CG_traced")
    done: list[str] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        done.extend(m.msg_id for m in msgs)
        return ConsumeResult.CONSUME_SUCCESS

    async with Producer(pgroup, cluster.ns, enable_msg_trace=True, **FAST) as producer:
        msg = Message(topic, b"hello traces", properties={"TAGS": "TagA", "KEYS": "order-1 order-2"})
        sent = await producer.send(msg)
        consumer = PushConsumer(
            cgroup, cluster.ns, listener=listener, enable_msg_trace=True,
            consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST_CONSUMER,
        )
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: sent.msg_id in done, 20, "the message consumed")
            found = await wait_for_records(cluster.ns, sent.msg_id, ["Pub", "SubBefore", "SubAfter"])

    ((keys, pub),) = found["Pub"]
    assert {sent.msg_id, "order-1", "order-2"} <= set(keys)  # queryable by id and by the message's keys
    assert pub[0] == "Pub" and len(pub) == 14
    assert int(pub[1]) > 0 and pub[2] == "DefaultRegion" and pub[3] == pgroup and pub[4] == topic
    assert pub[5] == sent.msg_id and pub[6] == "TagA" and pub[7] == "order-1 order-2"
    assert pub[8] == cluster.brokers[0].addr and pub[9] == str(len(b"hello traces")) and int(pub[10]) >= 0
    assert pub[11] == "0" and pub[12] == sent.offset_msg_id and pub[13] == "true"

    ((_, before),) = found["SubBefore"]
    assert len(before) == 8 and before[0] == "SubBefore"
    assert int(before[1]) >= int(pub[1]) and before[3] == cgroup and before[4]
    assert before[5] == sent.msg_id and before[6] == "0" and before[7] == "order-1 order-2"
    ((_, after),) = found["SubAfter"]
    assert len(after) == 9 and after[0] == "SubAfter"
    assert after[1] == before[4] and after[2] == sent.msg_id and int(after[3]) >= 0 and after[4] == "true"
    assert after[5] == "order-1 order-2" and after[6] == "0" and int(after[7]) >= int(before[1]) and after[8] == cgroup

    out = apogee_admin("query-msg-trace-by-id", "-n", cluster.ns, "-i", sent.msg_id)
    assert out.returncode == 0, out.stderr
    (pub_row,) = lines_starting(out.stdout, "Pub")
    assert pub_row[1] == pgroup and pub_row[-1] == "success"
    (sub_row,) = lines_starting(out.stdout, "Sub")
    assert sub_row[1] == cgroup and sub_row[6] == "success" and sub_row[7:] == ["0", "SUCCESS"]


async def test_a_failed_consumption_and_its_redelivery_are_traced(cluster: Cluster) -> None:
    topic, cgroup = unique("T_retry_traced"), unique("CG_retry_traced")
    calls: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        calls.append(msgs[0].reconsume_times)
        if len(calls) == 1:
            ctx.delay_level_when_next_consume = 1  # redelivered after 1 s instead of 10 s
            raise RuntimeError("the first delivery fails")
        return ConsumeResult.CONSUME_SUCCESS

    async with Producer(unique("P"), cluster.ns, **FAST) as producer:  # untraced: only consumption records
        sent = await producer.send(Message(topic, b"fails once"))
    consumer = PushConsumer(
        cgroup, cluster.ns, listener=listener, enable_msg_trace=True,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST_CONSUMER,
    )
    consumer.subscribe(topic)
    async with consumer:
        await wait_until(lambda: len(calls) >= 2, 30, "the redelivery")
        found = await wait_for_records(cluster.ns, sent.msg_id, ["SubBefore", "SubBefore", "SubAfter", "SubAfter"])
    assert "Pub" not in found
    befores = sorted((r for _, r in found["SubBefore"]), key=lambda r: int(r[1]))
    assert [r[6] for r in befores] == ["0", "1"]  # retry times
    after_by_request = {r[1]: r for _, r in found["SubAfter"]}
    first, second = (after_by_request[b[4]] for b in befores)
    assert (first[4], first[6]) == ("false", "2")  # failed, EXCEPTION
    assert (second[4], second[6]) == ("true", "0")  # success, SUCCESS

    out = apogee_admin("query-msg-trace-by-id", "-n", cluster.ns, "-i", sent.msg_id)
    assert out.returncode == 0, out.stderr
    rows = lines_starting(out.stdout, "Sub")
    assert [(r[1], r[6], r[7], r[8]) for r in rows] == [
        (cgroup, "failed", "0", "EXCEPTION"), (cgroup, "success", "1", "SUCCESS"),
    ]


async def test_transaction_producer_and_lite_pull_consumer_to_a_custom_trace_topic(cluster: Cluster) -> None:
    topic, trace_topic, pgroup, cgroup = unique("T_tx_traced"), unique("MyTraces"), unique("PG_tx"), unique("CG_lite")

    class Commit:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    opts = {"enable_msg_trace": True, "custom_trace_topic": trace_topic}
    async with TransactionProducer(pgroup, cluster.ns, listener=Commit(), **opts, **FAST) as producer:
        sent = await producer.send_message_in_transaction(Message(topic, b"tx", properties={"KEYS": "tx-1"}))
    msg_id = sent.send_result.msg_id
    consumer = LitePullConsumer(
        cgroup, cluster.ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **opts, **FAST_CONSUMER
    )
    consumer.subscribe(topic)
    async with consumer:
        got: list[MessageExt] = []

        async def polled() -> bool:
            got.extend(await consumer.poll(200))
            return any(m.msg_id == msg_id for m in got)

        await wait_until(polled, 20, "the committed message polled")
        kinds = ["Pub", "EndTransaction", "SubBefore", "SubAfter"]
        found = await wait_for_records(cluster.ns, msg_id, kinds, trace_topic)
    assert await traces_of(cluster.ns, msg_id) == []  # nothing went to RMQ_SYS_TRACE_TOPIC
    ((keys, pub),) = found["Pub"]
    assert pub[3] == pgroup and pub[11] == "1" and "tx-1" in keys  # Trans_Msg_Half
    ((_, end),) = found["EndTransaction"]
    assert len(end) == 13 and end[3] == pgroup and end[4] == topic and end[5] == msg_id and end[7] == "tx-1"
    assert end[9] == "2" and end[11] == "COMMIT_MESSAGE" and end[12] == "false"
    ((_, after),) = found["SubAfter"]
    assert after[4] == "true" and after[8] == cgroup

    out = apogee_admin("query-msg-trace-by-id", "-n", cluster.ns, "-i", msg_id, "-t", trace_topic)
    assert out.returncode == 0, out.stderr
    assert lines_starting(out.stdout, "Pub")[0][1] == pgroup
    assert lines_starting(out.stdout, "Sub")[0][1] == cgroup
    (end_row,) = lines_starting(out.stdout, "EndTransaction")
    assert end_row[1] == pgroup and end_row[-2:] == ["COMMIT_MESSAGE", "false"]


def java_record(*fields: object) -> str:
    """A record as Java's TraceDataEncoder appends it (booleans and nulls as Java prints them)."""
    text = {True: "true", False: "false", None: "null"}
    return "\x01".join(text[f] if f is None or isinstance(f, bool) else str(f) for f in fields) + "\x02"


async def test_admin_shows_a_trace_written_as_the_java_client_writes_it(cluster: Cluster) -> None:
    msg_id = "7F0000011A2B18B4AAC2" + unique("")[1:9].upper() + "0000"
    other_id = "7F0000011A2B18B4AAC20000000000FF"
    t0 = int(time.time() * 1000)
    offset_id = "7F00000100002A9F00000000000A1B2C"
    pub = java_record("Pub", t0, "DefaultRegion", "JavaProducerGroup", "JavaTopic", msg_id, None, None,
                      "127.0.0.1:10911", 11, 3, 0, offset_id, True)
    before_a = java_record("SubBefore", t0 + 10, None, "JavaConsumerA", "REQ-A1", msg_id, 0, None)
    after_a = java_record("SubAfter", "REQ-A1", msg_id, 7, False, None, 4, t0 + 17, "JavaConsumerA")
    before_a2 = java_record("SubBefore", t0 + 10_020, None, "JavaConsumerA", "REQ-A2", msg_id, 1, None)
    after_a2 = java_record("SubAfter", "REQ-A2", msg_id, 2, True, None, 0, t0 + 10_022, "JavaConsumerA")
    before_b = java_record("SubBefore", t0 + 12, None, "JavaConsumerB", "REQ-B1", msg_id, 0, None)
    after_b = java_record("SubAfter", "REQ-B1", msg_id, 5, True, None, 0, t0 + 17, "JavaConsumerB")
    # Records of other messages share the batch (and push the body past 4 KiB, which Java's trace
    # producer compresses, as Apogee's producer does).
    filler = "".join(
        java_record("Pub", t0, "DefaultRegion", "JavaProducerGroup", "JavaTopic", other_id, "TagX", f"k{i}",
                    "127.0.0.1:10911", 11, 1, 0, offset_id, True)
        for i in range(60)
    )
    body = (filler + pub + before_a + before_b + after_b + after_a + before_a2 + after_a2).encode()
    assert len(body) > 4096
    async with Producer(unique("JavaTraceWriter"), cluster.ns, **FAST) as writer:
        # The keys Java's AsyncTraceDispatcher sets: every traced message's id and keys.
        keys = " ".join([other_id, *(f"k{i}" for i in range(60)), msg_id])
        await writer.send(Message(TRACE_TOPIC, body, properties={c.KEYS: keys}))
    await wait_for_records(cluster.ns, msg_id, ["Pub"])

    out = apogee_admin("query-msg-trace-by-id", "-n", cluster.ns, "-i", msg_id)
    assert out.returncode == 0, out.stderr
    stamp = lambda ms: dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    lines = out.stdout.splitlines()
    header = lines[0].split()
    assert header == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert lines[1].split() == ["Pub", "JavaProducerGroup", "127.0.0.1", *stamp(t0).split(), "3ms", "success"]
    subs = lines_starting(out.stdout, "Sub")
    assert subs == [
        ["Sub", "JavaConsumerA", "127.0.0.1", *stamp(t0 + 17).split(), "7ms", "failed", "0", "FAILED"],
        ["Sub", "JavaConsumerA", "127.0.0.1", *stamp(t0 + 10_022).split(), "2ms", "success", "1", "SUCCESS"],
        ["Sub", "JavaConsumerB", "127.0.0.1", *stamp(t0 + 17).split(), "5ms", "success", "0", "SUCCESS"],
    ]
    assert "#ConsumerGroup" in out.stdout and other_id not in out.stdout


async def test_tracing_off_writes_nothing(cluster: Cluster) -> None:
    topic = unique("T_untraced")
    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        sent = await producer.send(Message(topic, b"untraced"))
    # Shut down: a traced producer would have stored its records by now.  A traced send after
    # it shows that traces of this topic are stored and found.
    async with Producer(unique("P_marker"), cluster.ns, enable_msg_trace=True, **FAST) as marker:
        later = await marker.send(Message(topic, b"traced"))
    await wait_for_records(cluster.ns, later.msg_id, ["Pub"])
    assert await traces_of(cluster.ns, sent.msg_id) == []


async def test_a_trace_topic_that_refuses_writes_fails_no_send(cluster: Cluster) -> None:
    topic, trace_topic = unique("T_sends"), unique("ReadOnlyTraces")
    async with AdminClient(cluster.ns) as admin:
        await admin.update_topic(trace_topic, cluster.brokers[0].addr, queues=1, perm=4)  # read only
    async with Producer(unique("P"), cluster.ns, enable_msg_trace=True, custom_trace_topic=trace_topic,
                        **FAST) as producer:
        results = [await producer.send(Message(topic, b"m%d" % i)) for i in range(20)]
        dispatcher = producer.trace_dispatcher
        assert dispatcher is not None
        await wait_until(lambda: dispatcher.failed_messages >= 1, 20, "the refused trace send counted")
    assert all(r.status.name == "SEND_OK" for r in results) and dispatcher.sent_messages == 0


async def test_a_decision_given_to_a_broker_check_is_traced(tmp_path: Path) -> None:
    """UNKNOW at the end of the local transaction, COMMIT_MESSAGE when the broker checks: two
    EndTransaction records, the second from the check (a broker of its own, checking fast)."""
    namesrv = start_namesrv(tmp_path / "ns")
    fast_checks = "transactionCheckInterval=300\ntransactionTimeOut=1000\n"
    broker = start_processes_broker(namesrv.addr, tmp_path / "store", fast_checks)
    checked: list[str] = []

    class LaterCommit:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            checked.append(msg.msg_id)
            return LocalTransactionState.COMMIT_MESSAGE

    try:
        group = unique("PG_tx_check")
        async with TransactionProducer(group, namesrv.addr, listener=LaterCommit(), enable_msg_trace=True,
                                       **FAST) as producer:
            topic = unique("T_tx_check")
            sent = await producer.send_message_in_transaction(Message(topic, b"later"))
            msg_id = sent.send_result.msg_id
            await wait_until(lambda: checked, 20, "the broker's check")
            # The producer stays up: the check's answer, and its trace record, leave after the
            # listener returns (a producer closed at that moment may never send them).
            found = await wait_for_records(namesrv.addr, msg_id, ["EndTransaction", "EndTransaction"])
    finally:
        broker.close()
        namesrv.close()
    ends = sorted((r for _, r in found["EndTransaction"]), key=lambda r: r[12])
    assert [(r[3], r[4], r[5], r[11], r[12]) for r in ends] == [
        (group, topic, msg_id, "UNKNOW", "false"), (group, topic, msg_id, "COMMIT_MESSAGE", "true"),
    ]
