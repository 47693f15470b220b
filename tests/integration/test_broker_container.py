"""``apogee broker-container --brokers 2``: two brokers, one process each, under one cluster.

A real NameServer and a real container on loopback, started once for the module (the tests
run in order: the last one stops the container).  What users rely on: both brokers register
under the cluster; a topic created cluster-wide has queues on both; a producer spreads its
sends over both and a consumer gets every message; a broker killed with SIGKILL is started
again at its address with its messages, while the other one keeps serving; SIGTERM stops
every broker and the container exits 0.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from apogee.admin.client import AdminClient
from apogee.cli.admin import admin_group
from apogee.cli.container import container_command
from apogee.client import ConsumeContext, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from apogee.errors import ApogeeError
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from tests.integration.client.conftest import FAST, FAST_CONSUMER
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import wait_until
from tests.support.wire import send_request, wait_caught_up, wait_cluster_caught_up

CLUSTER = "ContainerCluster"
QUEUES = 4
MESSAGES = 200


@dataclass
class Child:
    name: str
    addr: str
    pid: int


@dataclass
class Container:
    namesrv: ServerProcess
    process: ServerProcess
    children: dict[str, Child]

    @property
    def ns(self) -> str:
        return self.namesrv.addr


def children_of(ready_line: str) -> dict[str, Child]:
    """``... (2 brokers: mc-0 127.0.0.1:P pid N; mc-1 127.0.0.1:P pid N)`` -> name -> Child."""
    found = re.findall(r"(\S+) (\S+:\d+) pid (\d+)", ready_line.split("brokers: ", 1)[1])
    return {name: Child(name, addr, int(pid)) for name, addr, pid in found}


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    base = tmp_path_factory.mktemp("container")
    conf = base / "container.conf"
    conf.write_text(f"brokerClusterName={CLUSTER}\nbrokerName=mc\n")
    namesrv = start_namesrv(base / "ns")
    try:
        process = ServerProcess([
            "broker-container", "--brokers", "2", "-c", str(conf), "-n", namesrv.addr, "--listen", "127.0.0.1:0",
            "--broker-ip", "127.0.0.1", "--store-dir", str(base / "stores"), "--log-level", "WARNING",
        ], ready_timeout_s=40).start()
        try:
            yield Container(namesrv, process, children_of(process.ready_line))
        finally:
            process.close()
    finally:
        namesrv.close()


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def send_to(addr: str, topic: str) -> int:
    """One SEND_MESSAGE_V2 straight to a broker: its response code, -1 when it cannot be reached."""
    client = RemotingClient()
    try:
        return (await client.invoke(addr, send_request(topic), 3000)).code
    except (OSError, ApogeeError):
        return -1
    finally:
        await client.close()


async def max_offset(addr: str, topic: str, queue_id: int) -> int:
    client = RemotingClient()
    try:
        req = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
        return int(((await client.invoke(addr, req, 3000)).ext_fields or {}).get("offset", "-1"))
    finally:
        await client.close()


# --- the plan, checked before anything starts (no process: `-p` prints it) --------------------------------


def container_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(container_command, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_listed_brokers_as_in_rocketmqs_two_container_layout(tmp_path: Path) -> None:
    """RocketMQ 5's 2container-2m-2s: each container holds one group's master and the other's
    slave, each broker in its own file (RocketMQ 4.9 keys), listed by brokerConfigPaths."""
    a = tmp_path / "broker-a-in-container1.conf"
    a.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerRole=SYNC_MASTER\n"
                 f"storePathRootDir={tmp_path}/broker-a/store\nlistenPort=10911\nhaListenPort=10912\n")
    b = tmp_path / "broker-b-in-container1.conf"
    b.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-b\nbrokerId=1\nbrokerRole=SLAVE\n"
                 f"storePathRootDir={tmp_path}/broker-b/store\nlistenPort=20911\nhaListenPort=20912\n")
    conf = tmp_path / "broker-container1.conf"
    conf.write_text(f"listenPort=10811\nnamesrvAddr=127.0.0.1:9876\nfetchNamesrvAddrByAddressServer=false\n"
                    f"brokerConfigPaths={a}:{b}\n")
    code, out = container_cli("-c", str(conf), "-p")
    assert code == 0, out
    assert f"# broker-a: {a}, store {tmp_path}/broker-a/store, ports [10911, 10912]" in out
    assert f"# broker-b/1: {b}, store {tmp_path}/broker-b/store, ports [20911, 20912]" in out


def test_brokers_that_would_collide_are_refused_before_any_starts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    a.write_text(f"brokerName=a\nlistenPort=10911\nstorePathRootDir={tmp_path}/a\n")
    b.write_text(f"brokerName=b\nlistenPort=10912\nstorePathRootDir={tmp_path}/a\n")
    code, out = container_cli("-b", f"{a}:{b}", "-p")
    assert code == 3
    assert "a and b both use port 10912" in out and f"a and b both use store {tmp_path}/a" in out
    b.write_text("brokerName=b\nlistenPrt=20911\n")
    code, out = container_cli("-b", f"{a}:{b}", "-p")
    assert code == 3 and f"unknown key in {b}: listenPrt (did you mean 'listenPort'?)" in out
    code, out = container_cli("-b", str(a), "--listen", "127.0.0.1:0", "-p")
    assert code == 3 and "--listen and --store-dir are for --brokers" in out
    code, out = container_cli("--brokers", "2", "--store-dir", str(tmp_path), "-p")
    assert code == 0 and f"{tmp_path}/" in out and "-1.conf" in out


def test_a_broker_that_cannot_start_stops_the_container_with_its_status(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "apogee", "broker-container", "--brokers", "1", "--listen", f"127.0.0.1:{port}",
             "--broker-ip", "127.0.0.1", "--store-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=60,
        )
    assert out.returncode == 4, out.stderr  # the broker's own status: UNAVAILABLE
    name = next(p.stem for p in tmp_path.glob("*.conf"))
    assert f"[{name}] error: cannot start" in out.stderr
    assert f"broker {name} exited with status 4 before it was ready: the container stops" in out.stderr
    assert out.stdout == ""  # no ready line


# --- a running container ----------------------------------------------------------------------------------


def test_both_brokers_register_under_one_cluster(container: Container) -> None:
    assert sorted(container.children) == ["mc-0", "mc-1"]
    assert container.process.addr == container.children["mc-0"].addr

    async def masters() -> dict[str, str]:
        async with AdminClient(container.ns) as admin:
            return await admin.cluster_masters(CLUSTER)

    assert asyncio.run(masters()) == {c.name: c.addr for c in container.children.values()}


def test_a_cluster_topic_gets_queues_on_both_and_sends_spread_over_them(container: Container) -> None:
    topic = unique("T_container")
    result = CliRunner().invoke(
        admin_group, ["updateTopic", "-n", container.ns, "-c", CLUSTER, "-t", topic, "-q", str(QUEUES)],
        env={"NAMESRV_ADDR": ""}, catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output

    async def scenario() -> None:
        async with AdminClient(container.ns) as admin:
            route = await admin.route(topic)
        assert sorted((q.broker_name, q.write_queue_nums) for q in route.queue_datas) == [
            ("mc-0", QUEUES), ("mc-1", QUEUES)]
        by_broker: collections.Counter[str] = collections.Counter()
        async with Producer(unique("P"), container.ns, **FAST) as producer:
            for i in range(MESSAGES):
                sent = await producer.send(Message(topic, str(i).encode()))
                by_broker[sent.message_queue.broker_name] += 1
        assert by_broker["mc-0"] == by_broker["mc-1"] == MESSAGES // 2  # round robin over all 8 queues
        await wait_cluster_caught_up(container.ns)
        got: collections.Counter[int] = collections.Counter()

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
            got.update(int(m.body) for m in msgs)

        consumer = PushConsumer(unique("G"), container.ns, listener=listener,
                                consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST_CONSUMER)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(got) >= MESSAGES, 20, f"{MESSAGES} messages from both brokers")
        assert sorted(got) == list(range(MESSAGES))

    asyncio.run(scenario())


def test_an_auto_created_topic_is_created_on_every_broker_its_first_sends_reach(container: Container) -> None:
    """RocketMQ's rule: a producer's unknown topic takes TBW102's route (4 queues on every
    broker) until its next route poll, so each broker creates the topic on a send."""
    topic = unique("T_auto")

    async def scenario() -> list[tuple[str, int]]:
        async with Producer(unique("P"), container.ns) as producer:  # the default 30 s route poll
            brokers = {(await producer.send(Message(topic, b"x"))).message_queue.broker_name for _ in range(8)}
        assert brokers == {"mc-0", "mc-1"}
        async with AdminClient(container.ns) as admin:

            async def both() -> list[tuple[str, int]] | None:
                queues = sorted((q.broker_name, q.write_queue_nums) for q in (await admin.route(topic)).queue_datas)
                return queues if len(queues) == 2 else None

            return await wait_until(both, 10, "both brokers to register the topic")

    assert asyncio.run(scenario()) == [("mc-0", 4), ("mc-1", 4)]


def test_a_killed_broker_is_started_again_at_its_address_while_the_other_serves(container: Container) -> None:
    victim, other = container.children["mc-1"], container.children["mc-0"]
    topic = unique("T_restart")

    async def sent(addr: str) -> bool:
        return await send_to(addr, topic) == 0

    async def scenario() -> None:
        for _ in range(5):
            assert await send_to(victim.addr, topic) == 0
        await wait_caught_up(victim.addr)  # the ConsumeQueue trails the send's answer
        before = sum([await max_offset(victim.addr, topic, q) for q in range(QUEUES)])
        assert before == 5
        os.kill(victim.pid, signal.SIGKILL)
        await wait_until(lambda: not alive(victim.pid), 10, "the killed broker to be reaped")
        assert await send_to(other.addr, topic) == 0  # the other broker never stopped serving
        await wait_until(lambda: sent(victim.addr), 30, "the restarted broker to take a send at its old address",
                         interval_s=0.1)
        await wait_caught_up(victim.addr)
        after = sum([await max_offset(victim.addr, topic, q) for q in range(QUEUES)])
        assert after == before + 1  # what it had acknowledged before the kill is still there

    asyncio.run(scenario())
    assert alive(other.pid)
    assert f"broker mc-1 is back on {victim.addr}" in container.process.stderr()


def test_sigterm_stops_every_broker_and_the_container_exits_0(container: Container) -> None:
    pids = [c.pid for c in container.children.values() if alive(c.pid)]
    pids += [int(m) for m in re.findall(r"broker mc-1 is back on \S+ \(pid (\d+)", container.process.stderr())]
    assert container.process.stop() == 0
    assert not any(alive(pid) for pid in pids)
