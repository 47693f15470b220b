"""``apogee admin`` at mqadmin parity, through the command line, against a real NameServer, a
master and a slave broker on loopback (started once for the module).

Each mqadmin 4.9 command of docs/operations.md's table is run here under its mqadmin name or
its kebab-case name, mostly with ``--json`` so the assertions read figures, not layout; the
errors name their cause (unknown topic, unknown group, no broker registered, NameServer
unreachable, a broker given as the NameServer and the reverse).  The commands whose broker
side is the 307/309 relays and codes 25, 306 and 318 are in test_admin_relay_cli.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from apogee.admin import AdminClient
from apogee.cli.admin import admin_group
from apogee.cli.admin.topics import wait_for_route
from apogee.remoting.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.consumer import UpdateConsumerOffsetRequestHeader
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.wire import wait_dispatched

T = 5000
BROKER = "broker-cli"


class Cluster:
    def __init__(self, namesrv: ServerProcess, master: ServerProcess, slave: ServerProcess, base: Path) -> None:
        self.namesrv, self.master, self.slave, self.base = namesrv, master, slave, base
        self.ns = namesrv.addr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("admincli")
    namesrv = start_namesrv(base / "ns")
    try:
        conf = f"brokerName={BROKER}\n"
        master = start_broker(namesrv.addr, base / "master", conf)
        try:
            slave = start_broker(namesrv.addr, base / "slave", conf + "brokerRole=SLAVE\nbrokerId=1\n")
            try:
                yield Cluster(namesrv, master, slave, base)
            finally:
                slave.close()
        finally:
            master.close()
    finally:
        namesrv.close()


def admin(ns: str | None, *args: str, ok: bool = True, env: dict[str, str] | None = None) -> Result:
    argv = [*args, "-n", ns] if ns else list(args)
    result = CliRunner().invoke(admin_group, argv, env=env or {"NAMESRV_ADDR": ""}, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, (argv, result.output, result.stderr)
    else:
        assert result.exit_code != 0, (argv, result.output)
    return result


def admin_json(ns: str, *args: str) -> dict[str, Any]:
    return json.loads(admin(ns, *args, "--json").stdout)  # type: ignore[no-any-return]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _call(addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext or {}, body), T)
    finally:
        await client.close()


def make_topic(c: Cluster, topic: str, *extra: str) -> None:
    admin(c.ns, "updateTopic", "-c", "DefaultCluster", "-t", topic, *extra)


def send(c: Cluster, topic: str, body: str, *extra: str) -> dict[str, Any]:
    (sent,) = admin_json(c.ns, "sendMessage", "-t", topic, "-p", body, *extra)["sent"]
    return sent  # type: ignore[no-any-return]


def test_names_and_options_answer_as_mqadmin_and_kebab_case(cluster: Cluster) -> None:
    topic = unique("Names")
    admin(cluster.ns, "updateTopic", "--clusterName", "DefaultCluster", "--topic", topic, "--readQueueNums", "2",
          "--writeQueueNums", "3")
    by_camel = admin_json(cluster.ns, "topicRoute", "-t", topic)
    by_kebab = admin_json(cluster.ns, "topic-route", "--topic", topic)
    assert by_camel == by_kebab
    (row,) = by_camel["rows"]
    assert (row["broker"], row["read queues"], row["write queues"], row["perm"]) == (BROKER, 2, 3, 6)
    assert "0:" + cluster.master.addr in row["addresses"] and "1:" + cluster.slave.addr in row["addresses"]
    # -n from NAMESRV_ADDR, as RocketMQ's tools read it.
    listed = admin(None, "topicList", "--json", env={"NAMESRV_ADDR": cluster.ns})
    assert topic in json.loads(listed.stdout)["topics"]
    missing = admin(None, "topicList", ok=False)
    assert "NAMESRV_ADDR" in missing.stderr
    assert "(mqadmin updateTopic)" in admin(None, "updateTopic", "--help").stdout


def test_cluster_list_shows_the_slave_and_runtime_figures(cluster: Cluster) -> None:
    rows = admin_json(cluster.ns, "clusterList")["brokers"]
    assert [(r["cluster"], r["broker"], r["bid"], r["addr"]) for r in rows] == [
        ("DefaultCluster", BROKER, 0, cluster.master.addr), ("DefaultCluster", BROKER, 1, cluster.slave.addr),
    ]
    assert all(r["version"] == "V4_9_8" for r in rows)
    more = admin_json(cluster.ns, "cluster-list", "-m")["brokers"]
    assert {r["bid"] for r in more} == {0, 1} and all(isinstance(r["in total today"], int) for r in more)
    human = admin(cluster.ns, "clusterList").stdout
    assert cluster.slave.addr in human and "V4_9_8" in human


def test_topic_lifecycle_and_messages(cluster: Cluster, tmp_path: Path) -> None:
    ns, topic = cluster.ns, unique("Life")
    make_topic(cluster, topic, "-q", "2")
    assert admin_json(ns, "topicClusterList", "-t", topic)["clusters"] == ["DefaultCluster"]
    sent = [send(cluster, topic, f"body-{i}", "-k", f"key-{i}", "-c", "TagA" if i % 2 else "TagB", "-b", BROKER,
                 "-i", str(i % 2)) for i in range(4)]
    assert [(s["broker"], s["queue"], s["status"]) for s in sent] == [(BROKER, i % 2, "SEND_OK") for i in range(4)]
    run(wait_dispatched_all(cluster.master.addr, topic, {0: 2, 1: 2}))

    status = admin_json(ns, "topicStatus", "-t", topic)["rows"]
    assert [(r["queue"], r["min offset"], r["max offset"]) for r in status] == [(0, 0, 2), (1, 0, 2)]

    (by_key,) = admin_json(ns, "queryMsgByKey", "-t", topic, "-k", "key-2")["messagesFound"]
    assert by_key["Body"].startswith("body-2") and by_key["Tags"] == "TagB"
    (by_id,) = admin_json(ns, "queryMsgById", "-i", sent[1]["offsetMsgId"])["messagesFound"]
    assert by_id["Body"].startswith("body-1")
    (by_uniq,) = admin_json(ns, "queryMsgByUniqueKey", "-i", sent[3]["msgId"], "-t", topic)["messagesFound"]
    assert by_uniq["Body"].startswith("body-3")
    (at,) = admin_json(ns, "queryMsgByOffset", "-t", topic, "-b", BROKER, "-i", "1", "-o", "1")["messagesFound"]
    assert at["Body"].startswith("body-3")

    printed = admin_json(ns, "printMsg", "-t", topic, "-s", "TagA")["messages"]
    assert sorted(m["body"] for m in printed) == ["body-1", "body-3"]
    by_queue = admin_json(ns, "printMsgByQueue", "-t", topic, "-a", BROKER, "-i", "0", "-p", "true", "-d", "true",
                          "-f", "true")
    assert [m["body"] for m in by_queue["messages"]] == ["body-0", "body-2"]
    assert by_queue["tags"] == [{"tag": "TagB", "count": 2}]
    consumed = admin_json(ns, "consumeMessage", "-t", topic, "-b", BROKER, "-i", "1", "-o", "1", "-c", "5")
    assert [m["body"] for m in consumed["messages"]] == ["body-3"]
    cq = admin_json(ns, "queryCq", "-t", topic, "-q", "0", "-i", "0", "-c", "5")
    assert cq["values"]["maxQueueIndex"] == 2 and len(cq["queueData"]) == 2
    allocated = admin_json(ns, "allocateMQ", "-t", topic, "-i", "c1,c2")["rows"]
    assert [(r["client"], r["queue"]) for r in allocated] == [("c1", 0), ("c2", 1)]

    # Resend by offset id: a new message with the same body and key.
    resent = admin_json(ns, "queryMsgById", "-i", sent[0]["offsetMsgId"], "-s", "true")["sendResult"]
    assert resent["sendStatus"] == "SEND_OK"
    run(wait_dispatched_all(cluster.master.addr, topic, {0: 3} if resent["queue"].endswith("/0") else {1: 3}))
    assert len(admin_json(ns, "queryMsgByKey", "-t", topic, "-k", "key-0")["messagesFound"]) == 2

    # Permission: read only, then a send says there is no writable queue; back to 6.
    admin(ns, "updateTopicPerm", "-t", topic, "-p", "4", "-c", "DefaultCluster")
    assert admin_json(ns, "topicRoute", "-t", topic)["rows"][0]["perm"] == 4
    refused = admin(ns, "sendMessage", "-t", topic, "-p", "x", ok=False)
    assert "has no writable queue" in refused.stderr
    admin(ns, "update-topic-perm", "-t", topic, "-p", "6", "-b", cluster.master.addr)
    assert admin_json(ns, "topicRoute", "-t", topic)["rows"][0]["perm"] == 6

    # Order configuration on the NameServer, set by updateTopic -o and updateOrderConf.
    admin(ns, "updateTopic", "-b", cluster.master.addr, "-t", topic, "-q", "2", "-o", "true")
    assert admin_json(ns, "updateOrderConf", "-t", topic, "-m", "get")["values"]["orderConf"] == f"{BROKER}:2"
    admin(ns, "updateOrderConf", "-t", topic, "-m", "put", "-v", f"{BROKER}:1")
    assert admin_json(ns, "updateOrderConf", "-t", topic, "-m", "get")["values"]["orderConf"] == f"{BROKER}:1"
    admin(ns, "updateOrderConf", "-t", topic, "-m", "delete")
    assert admin_json(ns, "updateOrderConf", "-t", topic, "-m", "get")["values"]["orderConf"] is None

    uses = admin_json(ns, "topicList", "-c")["rows"]
    assert {"cluster": "DefaultCluster", "topic": topic, "consumer groups": ""} in uses

    admin(ns, "deleteTopic", "-t", topic, "-c", "DefaultCluster")
    gone = admin(ns, "topicRoute", "-t", topic, ok=False)
    assert f"topic {topic!r} does not exist" in gone.stderr


async def wait_dispatched_all(addr: str, topic: str, counts: dict[int, int]) -> None:
    client = RemotingClient()
    try:
        for qid, n in counts.items():
            await wait_dispatched(client, addr, topic, qid, n)
    finally:
        await client.close()


def test_groups_offsets_and_connections(cluster: Cluster) -> None:
    ns, topic, group, dest = cluster.ns, unique("GrpTopic"), unique("Grp"), unique("GrpCopy")
    make_topic(cluster, topic, "-q", "2")
    for i in range(4):
        send(cluster, topic, f"g{i}", "-b", BROKER, "-i", str(i % 2))
    run(wait_dispatched_all(cluster.master.addr, topic, {0: 2, 1: 2}))

    # An unknown group is an error, not an empty table.
    for args in (("consumerProgress", "-g", group), ("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now"),
                 ("consumer-progress", "-g", group, "-t", topic)):
        failed = admin(ns, *args, ok=False)
        assert f"consumer group {group!r} does not exist" in failed.stderr, failed.stderr

    admin(ns, "updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "5", "-q", "2")
    (config,) = admin_json(ns, "getConsumerConfig", "-g", group)["configs"].values()
    assert (config["retryMaxTimes"], config["retryQueueNums"], config["consumeBroadcastEnable"]) == (5, 2, False)

    for qid, offset in ((0, 1), (1, 2)):
        header = UpdateConsumerOffsetRequestHeader(group, topic, qid, offset).encode()
        assert run(_call(cluster.master.addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)).code == ResponseCode.SUCCESS
    progress = admin_json(ns, "consumerProgress", "-g", group, "-t", topic)
    assert [(q["queue"], q["broker offset"], q["consumer offset"], q["diff"]) for q in progress["queues"]] == [
        (0, 2, 1, 1), (1, 2, 2, 0)]
    assert progress["values"]["diffTotal"] == 1
    human = admin(ns, "consumerProgress", "-g", group).stdout
    assert "Diff Total: 1" in human

    admin(ns, "cloneGroupOffset", "-s", group, "-d", dest, "-t", topic)
    copied = admin_json(ns, "consumerProgress", "-g", dest, "-t", topic)["queues"]
    assert [q["consumer offset"] for q in copied] == [1, 2]

    stats = admin_json(ns, "brokerConsumeStats", "-b", cluster.master.addr)
    mine = [q for q in stats["queues"] if q["group"] == group]
    assert sorted((q["queue"], q["diff"]) for q in mine) == [(0, 1), (1, 0)]
    assert stats["values"]["diffTotal"] >= 1

    reset = admin_json(ns, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")["offsets"]
    assert [(r["queue"], r["new offset"]) for r in reset] == [(0, 0), (1, 0)]
    skipped = admin_json(ns, "skipAccumulatedMessage", "-g", group, "-t", topic)["offsets"]
    assert [(r["queue"], r["new offset"]) for r in skipped] == [(0, 2), (1, 2)]

    admin(ns, "deleteSubGroup", "-b", cluster.master.addr, "-g", group)
    failed = admin(ns, "getConsumerConfig", "-g", group, ok=False)
    assert "does not exist" in failed.stderr
    assert admin_json(ns, "consumerProgress", "-g", group, "-t", topic)["queues"]  # its offsets stay
    # -r true (removeOffset): the group's committed offsets go too, so no broker knows it any more
    admin(ns, "deleteSubGroup", "-b", cluster.master.addr, "-g", dest, "-r", "true")
    gone = admin(ns, "consumerProgress", "-g", dest, ok=False)
    assert "does not exist" in gone.stderr


def test_connections_of_live_clients(cluster: Cluster) -> None:
    ns, topic, group, producer = cluster.ns, unique("ConnTopic"), unique("ConnGroup"), unique("ConnProducer")
    make_topic(cluster, topic, "-q", "1")

    async def scenario() -> None:
        client = RemotingClient()
        try:
            sub = SubscriptionData(topic=topic, sub_string="*")
            data = HeartbeatData("conn-client@1", [producer], [ConsumerData(group, subscriptions=[sub])])
            resp = await client.invoke(cluster.master.addr,
                                       RemotingCommand.request(RequestCode.HEART_BEAT, {}, data.encode()), T)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            # The heartbeat created the group's retry topic, which consumerConnection looks up:
            # the broker registers it with the NameServer a moment later.
            async with AdminClient(ns) as lookup:
                await wait_for_route(lookup, f"%RETRY%{group}")
            conns = await asyncio.to_thread(admin_json, ns, "consumerConnection", "-g", group)
            assert [c["clientId"] for c in conns["connections"]] == ["conn-client@1"]
            assert conns["subscriptions"] == [{"topic": topic, "subExpression": "*"}]
            prods = await asyncio.to_thread(admin_json, ns, "producerConnection", "-g", producer, "-t", topic)
            assert [c["clientId"] for c in prods["connections"]] == ["conn-client@1"]
            every = await asyncio.to_thread(admin_json, ns, "producer", "-b", cluster.master.addr)
            assert any(p["group"] == producer and p["clientId"] == "conn-client@1" for p in every["producers"])
            summary = await asyncio.to_thread(admin_json, ns, "consumerProgress")
            (row,) = [g for g in summary["groups"] if g["group"] == group]
            assert row["count"] == 1
        finally:
            await client.close()

    run(scenario())
    gone = admin(ns, "consumerConnection", "-g", group, ok=False)
    assert "no live consumer" in gone.stderr


def test_broker_and_namesrv_commands(cluster: Cluster, tmp_path: Path) -> None:
    ns, master = cluster.ns, cluster.master.addr
    info = admin_json(ns, "brokerStatus", "-b", master)["runtimeInfo"]
    assert info["brokerVersionDesc"] == "V4_9_8" and "msgPutTotalTodayNow" in info
    per_master = admin_json(ns, "broker-status", "-c", "DefaultCluster")
    assert set(per_master) == {master}
    config = admin_json(ns, "getBrokerConfig", "-b", master)["config"]
    assert config["brokerName"] == BROKER
    assert admin_json(ns, "getBrokerConfig", "-c", "DefaultCluster")[master]["brokerName"] == BROKER
    for command in ("cleanUnusedTopic", "deleteExpiredCommitLog"):
        assert f"{master} success" in admin(ns, command, "-c", "DefaultCluster").stdout
    nsconf = admin_json(ns, "getNamesrvConfig")
    assert nsconf[ns]["listenHost"] == "127.0.0.1"

    admin(ns, "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic", "-v", f"{BROKER}:3")
    assert admin_json(ns, "updateOrderConf", "-t", "KvTopic", "-m", "get")["values"]["orderConf"] == f"{BROKER}:3"
    admin(ns, "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic")
    assert admin_json(ns, "updateOrderConf", "-t", "KvTopic", "-m", "get")["values"]["orderConf"] is None

    topic = unique("Perm")
    make_topic(cluster, topic, "-q", "1")
    assert "OK" in admin(ns, "wipeWritePerm", "-b", BROKER).stdout
    try:
        assert admin_json(ns, "topicRoute", "-t", topic)["rows"][0]["perm"] == 4
        assert "has no writable queue" in admin(ns, "sendMessage", "-t", topic, "-p", "x", ok=False).stderr
    finally:
        admin(ns, "addWritePerm", "-b", BROKER)
    assert admin_json(ns, "topicRoute", "-t", topic)["rows"][0]["perm"] == 6

    probes = admin_json(ns, "checkMsgSendRT", "-t", topic, "-a", "3", "-s", "16")
    assert probes["values"]["sent"] == 3 and probes["values"]["avgRtMs"] > 0
    run(wait_dispatched_all(master, topic, {0: 3}))
    stats = admin_json(ns, "statsAll", "-t", topic)["rows"]
    (r,) = stats
    # Today's counts come from the broker's statistics windows, sampled every 10 s as RocketMQ's.
    assert [(r["topic"], r["consumer group"], r["out today"]) for r in stats] == [(topic, "", "NO_CONSUMER")]
    assert r["in today"] in (0, 3) and r["accumulation"] == 0

    admin(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path))
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["topicConfigTable"][topic]["readQueueNums"] == 1 and "TBW102" not in meta["topicConfigTable"]
    admin(ns, "exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path))
    configs = json.loads((tmp_path / "configs.json").read_text())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 1}
    assert configs["brokerConfigs"][BROKER]["brokerName"] == BROKER
    admin(ns, "exportMetrics", "-c", "DefaultCluster", "-f", str(tmp_path))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["evaluateReport"][BROKER]["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"

    monitoring = admin(None, "startMonitoring", ok=False)
    assert "Prometheus" in monitoring.stderr


def test_send_latency_probes_on_the_brokers_own_topic(cluster: Cluster) -> None:
    status = admin_json(cluster.ns, "sendMsgStatus", "-b", BROKER, "-c", "3", "-s", "8")
    assert status["values"]["sent"] == 3 and {s["broker"] for s in status["sends"]} == {BROKER}
    rt = admin_json(cluster.ns, "clusterRT", "-a", "2", "-s", "8")["brokers"]
    assert [(r["cluster"], r["broker"], r["success"], r["failed"]) for r in rt] == [("DefaultCluster", BROKER, 2, 0)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_errors_name_their_cause(cluster: Cluster, tmp_path: Path) -> None:
    unreachable = admin(f"127.0.0.1:{_closed_port()}", "topicList", ok=False)
    assert "cannot reach the NameServer" in unreachable.stderr
    as_namesrv = admin(cluster.master.addr, "topicRoute", "-t", "TBW102", ok=False)
    assert f"{cluster.master.addr} is a broker, not a NameServer" in as_namesrv.stderr
    as_broker = admin(cluster.ns, "brokerStatus", "-b", cluster.ns, ok=False)
    assert f"{cluster.ns} is a NameServer, not a broker" in as_broker.stderr
    unknown = admin(cluster.ns, "topicStatus", "-t", "NoSuchTopicCli", ok=False)
    assert "topic 'NoSuchTopicCli' does not exist" in unknown.stderr and unknown.stderr.startswith("error:")
    empty = start_namesrv(tmp_path / "empty-ns")
    try:
        lonely = admin(empty.addr, "topicRoute", "-t", "Anything", ok=False)
        assert "no broker is registered with the NameServer" in lonely.stderr
    finally:
        empty.close()
