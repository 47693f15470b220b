"""The real Apache RocketMQ C++ client (rocketmq==0.4.4, ``set_session_credentials``) against an
Apogee broker with ACL on: it signs, Apogee checks, and a send it may not make is refused with
RocketMQ's error and stores nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from apogee.admin import AdminClient
from tests.interop.conftest import DELAY_LEVELS, INTEROP_PYTHON, cpp, received, routed, sent
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import block_until, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ADMIN = ("adminKey01", "adminSecret1")
PUB = ("pubKey0001", "pubSecret01")
SUB = ("subKey0001", "subSecret01")
ACL = {
    "accounts": [
        {"accessKey": ADMIN[0], "secretKey": ADMIN[1], "admin": True},
        {"accessKey": PUB[0], "secretKey": PUB[1], "defaultTopicPerm": "PUB", "defaultGroupPerm": "PUB"},
        {"accessKey": SUB[0], "secretKey": SUB[1], "defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB"},
    ]
}


@dataclass
class AclCluster:
    namesrv: ServerProcess
    broker: ServerProcess

    def admin(self) -> AdminClient:
        return AdminClient(self.namesrv.addr, access_key=ADMIN[0], secret_key=ADMIN[1])

    def create_topic(self, prefix: str) -> str:
        topic = unique(prefix)

        async def create() -> None:
            async with self.admin() as admin:
                await admin.update_topic(topic, self.broker.addr, 4)
                await wait_until(lambda: routed(admin, topic), 10, f"a route for {topic}")

        asyncio.run(create())
        return topic

    def stored(self, topic: str) -> int:
        async def count() -> int:
            async with self.admin() as admin:
                return sum(o.max_offset for o in (await admin.topic_stats(topic)).values())

        return asyncio.run(count())


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    if not INTEROP_PYTHON.exists():
        pytest.fail(f"{INTEROP_PYTHON} is missing: `make test` builds it (rocketmq==0.4.4)")
    base: Path = tmp_path_factory.mktemp("interop-acl")
    (base / "broker.conf").write_text(f"messageDelayLevel={DELAY_LEVELS}\naclEnable=true\n")
    (base / "plain_acl.yml").write_text(yaml.safe_dump(ACL))  # beside broker.conf, as RocketMQ keeps it
    namesrv = start_namesrv(base / "namesrv")
    broker = None
    try:
        broker = ServerProcess(
            ["broker", "-n", namesrv.addr, "-c", str(base / "broker.conf"), "--listen", "127.0.0.1:0",
             "--store-dir", str(base / "store"), "--broker-ip", "127.0.0.1"]
        ).start()
        yield AclCluster(namesrv, broker)
    finally:
        if broker is not None:
            broker.close()
        namesrv.close()


def signed(account: tuple[str, str]) -> list[str]:
    return ["--access-key", account[0], "--secret-key", account[1]]


def test_the_cpp_client_signs_its_sends_and_its_consumer_reads_with_credentials(acl_cluster: AclCluster) -> None:
    topic = acl_cluster.create_topic("AclCpp")
    ns = acl_cluster.namesrv.addr
    results = sent(cpp("produce", ns, topic, "--count", 10, *signed(PUB)).wait())
    assert len(results) == 10 and all(r["status"] == 0 for r in results)
    got = received(cpp("consume", ns, topic, unique("G"), "--expect", 10, "--linger", 0, *signed(SUB)).wait())
    assert sorted(int(m["props"]["seq"]) for m in got) == list(range(10))
    assert acl_cluster.stored(topic) == 10


@pytest.mark.parametrize(
    ("account", "reason"),
    [
        ((PUB[0], "wrongSecret1"), "Check signature failed for accessKey=pubKey0001"),
        (("unknownKey1", "whatever01"), "No acl config for unknownKey1"),
        (SUB, "No default permission for topic:{topic} (needs PUB; accessKey=subKey0001 has SUB)"),
    ],
)
def test_a_send_the_acl_refuses_fails_in_the_cpp_client_and_stores_nothing(
    acl_cluster: AclCluster, account: tuple[str, str], reason: str
) -> None:
    topic = acl_cluster.create_topic("AclCppRefused")
    run = cpp("produce", acl_cluster.namesrv.addr, topic, "--count", 1, "--send-timeout-ms", 3000, *signed(account))
    events = run.wait(check=False)
    assert run.proc.returncode != 0 and not sent(events)
    assert "ProducerSendSyncFailed" in run.stderr
    # what the broker answered (SYSTEM_ERROR, RocketMQ's AclException text), as it logs it
    assert reason.format(topic=topic) in acl_cluster.broker.stderr()
    # then an allowed send: once it is in the queue, the queue holds it alone
    assert len(sent(cpp("produce", acl_cluster.namesrv.addr, topic, "--count", 1, *signed(PUB)).wait())) == 1
    assert wait_until_stored(acl_cluster, topic) == 1


def wait_until_stored(cluster: AclCluster, topic: str) -> int:
    return block_until(lambda: cluster.stored(topic), 10, "the allowed message to be dispatched")
