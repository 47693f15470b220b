"""One failover trial (issue 19), shared by ``test_ha_failover.py`` and
``benchmarks/ha_failover_trials.py``: a SYNC_MASTER + SYNC_FLUSH master and one slave under
load from Apogee's producer and the RocketMQ C++ producer; the master is SIGKILLed while both
send; every message acknowledged SEND_OK must then reach Apogee's push consumer and the C++
push consumer (started before the kill, never restarted) from the slave, with body, keys,
tags and properties intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from apogee.admin import AdminClient
from apogee.client import ConsumeContext, Message, MessageExt, Producer, PushConsumer, SendStatus
from apogee.errors import ApogeeError, NoRouteError
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from tests.integration.client.conftest import FAST, FAST_CONSUMER
from tests.integration.test_replication import runtime
from tests.interop.conftest import CppRun, cpp, routed
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker, start_namesrv
from tests.support.waiting import wait_until

GROUP = (
    "brokerName=ha-failover\nbrokerRole=SYNC_MASTER\nflushDiskType=SYNC_FLUSH\n"
    "mappedFileSizeCommitLog=4194304\nhaSendHeartbeatInterval=1000\n"
)
SLAVE = GROUP.replace("brokerRole=SYNC_MASTER", "brokerRole=SLAVE") + "brokerId=1\n"
BEFORE_PAUSE = 300  # acknowledged sends of each producer before the consumers pause
BACKLOG = 300  # ... and after: what the consumers can only get from the slave
PY_SENDERS = 8


@dataclass
class TrialResult:
    acked_py: int = 0
    acked_cpp: int = 0
    lost_py_consumer: list[str] = field(default_factory=list)  # acked keys Apogee's consumer never got
    lost_cpp_consumer: list[str] = field(default_factory=list)  # acked keys the C++ consumer never got
    damaged: list[str] = field(default_factory=list)  # received with another body, tags or property
    slave_gets: int = 0  # messages the slave served to pulls

    @property
    def ok(self) -> bool:
        return not (self.lost_py_consumer or self.lost_cpp_consumer or self.damaged)


class Lines:
    """A C++ script's JSON lines, read as they come (the kill waits for its sends)."""

    def __init__(self, run: CppRun) -> None:
        self.run = run
        # Lines wait_started() read before 'started' (a consumer may receive first).
        self.events: list[dict] = [json.loads(line) for line in run._early.splitlines() if line.startswith("{")]
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.run.proc.stdout is not None
        for raw in self.run.proc.stdout:
            line = raw.decode(errors="replace")
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def expected_py(i: int) -> tuple[str, bytes, str, str]:
    """key, body, tags, property ``seq`` of Apogee's i-th message."""
    return f"py-{i}", b"python body %d" % i, "TagP", str(i)


async def no_master(admin: AdminClient, topic: str) -> bool:
    """The NameServer routes ``topic`` to the slave alone: it dropped the killed master."""
    try:
        route = await admin.route(topic)
    except NoRouteError:
        return False
    return bool(route.broker_datas) and all(0 not in b.broker_addrs for b in route.broker_datas)


async def run_trial(base: Path, *, log: bool = False) -> TrialResult:
    namesrv = start_namesrv(base / "namesrv")
    master: ServerProcess | None = start_broker(namesrv.addr, base / "master", GROUP)
    slave: ServerProcess | None = None
    result = TrialResult()
    topic, group = unique("Failover"), unique("failover_py")
    received: dict[str, MessageExt] = {}
    client = RemotingClient()
    cpp_consumer: CppRun | None = None
    cpp_producer: CppRun | None = None
    try:
        assert master is not None
        async with AdminClient(namesrv.addr) as admin:
            await admin.update_topic(topic, master.addr, 4)
            await wait_until(lambda: routed(admin, topic), 10, f"a route for {topic}")
        # The C++ consumer starts before the slave.  RocketMQ's C++ client refreshes its routes
        # 3 s after it starts, then every 30 s; the slave copies the topic 3 s after it starts,
        # which the kill waits for.  So the consumer's first refresh falls due while it is
        # stopped (below) and runs when it resumes after the kill, finding the slave at once.
        expect_file = base / "expect"
        cpp_consumer = cpp("consume", namesrv.addr, topic, unique("failover_cpp"), "--expect-file", expect_file,
                           "--timeout", "120", "--linger", "0")
        await asyncio.to_thread(cpp_consumer.wait_started)
        cpp_events = Lines(cpp_consumer)
        slave = start_broker(namesrv.addr, base / "slave", SLAVE)

        async def slave_knows_topic() -> bool:  # copied 3 s after the slave starts
            resp = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5000)
            return topic.encode() in (resp.body_bytes() if resp.body else b"")

        # While the gate is shut the listener holds its messages; with a small cache per queue
        # the consumer then stops pulling, so what is sent meanwhile waits on the brokers.
        gate = asyncio.Event()
        gate.set()

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
            await gate.wait()
            for m in msgs:
                received.setdefault(m.properties.get("KEYS", ""), m)

        consumer = PushConsumer(group, namesrv.addr, listener=listener, pull_threshold_for_queue=40, **FAST_CONSUMER)
        consumer.subscribe(topic)
        async with consumer:
            async with Producer(unique("P"), namesrv.addr, **FAST) as producer:
                acked: list[int] = []
                stop = asyncio.Event()
                # Apogee's eight senders ack about ten times as fast as the C++ producer (one
                # sync send at a time): they idle while it catches up, so the brokers and both
                # consumers are not fed thousands of extra messages, and they run again at
                # full speed for their part of the backlog, up to the kill.
                py_go = asyncio.Event()
                py_go.set()

                async def sender(worker: int) -> None:
                    i = worker
                    while not stop.is_set():
                        await py_go.wait()
                        key, body, tags, seq = expected_py(i)
                        try:
                            sent = await producer.send(Message(topic, body, properties={
                                "KEYS": key, "TAGS": tags, "seq": seq}))
                        except ApogeeError:
                            await asyncio.sleep(0.05)  # the master is gone: nothing to do but stop
                            continue
                        if sent.status is SendStatus.SEND_OK:
                            acked.append(i)
                        i += PY_SENDERS

                cpp_producer = cpp("produce", namesrv.addr, topic, "--count", "1000000", "--mode", "sync",
                                   "--keys-prefix", "cpp-", "--tags", "TagC", "--send-timeout-ms", "3000")
                cpp_sent = Lines(cpp_producer)
                senders = [asyncio.create_task(sender(w)) for w in range(PY_SENDERS)]

                def cpp_acked() -> int:
                    return sum(1 for e in cpp_sent.events if e.get("event") == "sent" and e["status"] == 0)

                await wait_until(lambda: len(acked) >= BEFORE_PAUSE, 60, "Apogee's producer sending")
                py_go.clear()
                await wait_until(lambda: cpp_acked() >= BEFORE_PAUSE, 60, "the C++ producer sending")
                gate.clear()  # both consumers fall behind: a backlog only the slave will serve
                os.kill(cpp_consumer.proc.pid, signal.SIGSTOP)
                py_mark, cpp_mark = len(acked), cpp_acked()
                await wait_until(lambda: cpp_acked() >= cpp_mark + BACKLOG, 60, "a backlog from the C++ producer")
                await wait_until(slave_knows_topic, 15, "the topic on the slave", interval_s=0.2)
                py_go.set()  # the C++ producer keeps sending meanwhile
                await wait_until(lambda: len(acked) >= py_mark + BACKLOG, 60, "a backlog from Apogee's producer")
                master.kill()  # while both producers send
                # The C++ consumer resumes once the NameServer has dropped the master.
                async with AdminClient(namesrv.addr) as admin:
                    await wait_until(lambda: no_master(admin, topic), 10, "a route without the master")
                os.kill(cpp_consumer.proc.pid, signal.SIGCONT)
                gate.set()
                master.close()
                master = None
                await wait_until(lambda: cpp_producer.proc.poll() is not None, 60, "the C++ producer to give up")
                stop.set()
                await asyncio.gather(*senders)
                cpp_sent.join(10)
            cpp_keys = {
                e["i"]: f"cpp-{e['i']}" for e in cpp_sent.events if e.get("event") == "sent" and e["status"] == 0
            }
            result.acked_py, result.acked_cpp = len(acked), len(cpp_keys)
            wanted = {expected_py(i)[0] for i in acked} | set(cpp_keys.values())
            expect_file.write_text(str(len(wanted)))
            with contextlib.suppress(AssertionError):  # what is missing is reported below
                await wait_until(lambda: wanted <= set(received), 60, "every acknowledged message, in Python")
            result.lost_py_consumer = sorted(wanted - set(received))
            for i in acked:
                key, body, tags, seq = expected_py(i)
                m = received.get(key)
                if m is not None and (m.body != body or m.tags != tags or m.properties.get("seq") != seq):
                    result.damaged.append(f"python consumer: {key}")
            for i, key in cpp_keys.items():
                m = received.get(key)
                if m is not None and (m.body != f"body-{i}".encode() or m.tags != "TagC"
                                      or m.properties.get("seq") != str(i)):
                    result.damaged.append(f"python consumer: {key}")
            t_wait = asyncio.get_running_loop().time()
            await asyncio.to_thread(cpp_consumer.proc.wait, 130)
            if log:
                print(f"  C++ consumer done after {asyncio.get_running_loop().time() - t_wait:.1f}s", flush=True)
            cpp_events.join(10)
        assert slave is not None
        result.slave_gets = int((await runtime(client, slave.addr))["msgGetTotalTodayNow"])
        got = {e["keys"]: e for e in cpp_events.events if e.get("event") == "received"}
        result.lost_cpp_consumer = sorted(wanted - set(got))
        for i in acked:
            key, body, tags, seq = expected_py(i)
            e = got.get(key)
            if e is not None and (e["body"] != body.decode() or e["tags"] != tags or e["props"].get("seq") != seq):
                result.damaged.append(f"C++ consumer: {key}")
        for i, key in cpp_keys.items():
            e = got.get(key)
            if e is not None and (e["body"] != f"body-{i}" or e["tags"] != "TagC" or e["props"].get("seq") != str(i)):
                result.damaged.append(f"C++ consumer: {key}")
        if log:
            print(f"acked python {result.acked_py} C++ {result.acked_cpp}; lost by the python consumer "
                  f"{len(result.lost_py_consumer)}, by the C++ consumer {len(result.lost_cpp_consumer)}; "
                  f"damaged {len(result.damaged)}; the slave served {result.slave_gets}", flush=True)
        return result
    finally:
        await client.close()
        for run in (cpp_producer, cpp_consumer):
            if run is None:
                continue
            if run.proc.poll() is None:
                run.proc.kill()
            run.proc.wait()
            for pipe in (run.proc.stdout, run.proc.stderr):
                if pipe is not None:
                    pipe.close()
        for server in (slave, master, namesrv):
            if server is not None:
                server.close()
