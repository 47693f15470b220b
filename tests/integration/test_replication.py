"""Master/slave replication between real broker processes on loopback ports (issue 19).

A master and two slaves of one broker group: one slave follows from the start, one starts
after the first half of the messages.  Each slave's CommitLog files end byte-identical to
the master's and its ConsumeQueues equal; a slave refuses sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import orjson

from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_broker
from tests.support.waiting import wait_until
from tests.support.wire import send_request

T = 5000
FILE_SIZE = 1 << 20  # 1 MiB CommitLog files: the messages cross several
GROUP = "brokerName=ha-a\nmappedFileSizeCommitLog=1048576\nhaSendHeartbeatInterval=1000\n"
FIRST = 1500  # ~0.7 MiB: the late slave starts inside the master's first file ...
SECOND = 4500  # ... which it would not hold otherwise (an empty slave starts at the master's last file)
BODY = b"r" * 300


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), T)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    table: dict[str, str] = orjson.loads(resp.body_bytes())["table"]
    return table


async def send_many(client: RemotingClient, addr: str, topic: str, first: int, count: int) -> None:
    for start in range(first, first + count, 250):
        answers = await asyncio.gather(*(
            client.invoke(addr, send_request(topic, BODY, queue_id=i % 4, keys=f"k{i}", tags="TagA"), T)
            for i in range(start, min(start + 250, first + count))
        ))
        assert all(a.code == ResponseCode.SUCCESS for a in answers), answers[0].remark


async def wait_in_step(client: RemotingClient, master: ServerProcess, slave: ServerProcess) -> None:
    """Master and slave have dispatched everything, and the slave holds all the master holds."""
    target = (await runtime(client, master.addr))["commitLogMaxOffset"]

    async def caught_up() -> bool:
        info = await runtime(client, slave.addr)
        if info["commitLogMaxOffset"] != target or info["dispatchBehindBytes"] != "0":
            return False
        return (await runtime(client, master.addr))["dispatchBehindBytes"] == "0"

    await wait_until(caught_up, 30, f"slave {slave.addr} to reach the master's offset {target}", interval_s=0.05)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def log_files(root: Path) -> dict[str, bytes]:
    """The CommitLog files that hold the log: a successor pre-created ahead of the writes
    (empty, perhaps still being created when this reads it) is not part of it, so it must be
    all zeros and is left out."""
    files = tree(root)
    written = {name: data for name, data in files.items() if data.strip(b"\0")}
    last = max(written, default="")
    for name, data in files.items():
        assert name <= last or not data.strip(b"\0"), f"{root / name} is past the log's last file and not empty"
    return {name: data for name, data in files.items() if name <= last}


def differences(expected: dict[str, bytes], got: dict[str, bytes]) -> str:
    """Which files differ, and where the first differing byte is: a failure says what broke."""
    out = [f"missing {sorted(expected.keys() - got.keys())}, extra {sorted(got.keys() - expected.keys())}"]
    for name in sorted(expected.keys() & got.keys()):
        a, b = expected[name], got[name]
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            out.append(f"{name}: sizes {len(a)}/{len(b)}, first difference at byte {at}")
    return "; ".join(out)


def assert_replicas(root: Path, topic: str, slaves: tuple[str, ...]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Each slave's CommitLog files byte-identical to the master's (``root/master``) and its
    ConsumeQueues of ``topic`` equal; returns the master's (CommitLog, ConsumeQueue) files."""
    master_log = log_files(root / "master" / "commitlog")
    master_cq = tree(root / "master" / "consumequeue" / topic)
    for name in slaves:
        log = log_files(root / name / "commitlog")
        assert log == master_log, f"{name}: {differences(master_log, log)}"
        cq = tree(root / name / "consumequeue" / topic)
        assert cq == master_cq, f"{name}: {differences(master_cq, cq)}"
    return master_log, master_cq


async def test_slaves_hold_byte_identical_commitlogs_and_equal_queues(tmp_path: Path, namesrv: ServerProcess) -> None:
    master = start_broker(namesrv.addr, tmp_path / "master", GROUP)
    early = start_broker(namesrv.addr, tmp_path / "slave1", GROUP + "brokerRole=SLAVE\nbrokerId=1\n")
    late: ServerProcess | None = None
    client = RemotingClient()
    topic = unique("Replicated")
    try:
        await send_many(client, master.addr, topic, 0, FIRST)
        late = start_broker(namesrv.addr, tmp_path / "slave2", GROUP + "brokerRole=SLAVE\nbrokerId=2\n")
        await send_many(client, master.addr, topic, FIRST, SECOND)
        for slave in (early, late):
            await wait_in_step(client, master, slave)
        master_info = await runtime(client, master.addr)
        assert int(master_info["commitLogMaxOffset"]) > 2 * FILE_SIZE  # the log crossed files
        master_log, master_cq = assert_replicas(tmp_path, topic, ("slave1", "slave2"))
        assert len(master_log) >= 3 and len(master_cq) == 4

        refused = await client.invoke(early.addr, send_request(topic, b"no"), T)
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in (refused.remark or "")
    finally:
        await client.close()
        for server in (late, early, master):
            if server is not None:
                server.close()


def ha_port(master: ServerProcess) -> int:
    match = re.search(r"HA port listening on 127\.0\.0\.1:(\d+)", master.stderr())
    assert match, master.stderr()
    return int(match.group(1))


async def closed_by_master(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    """True once the master has closed the link (EOF or reset) within ``timeout_s``."""
    try:
        while await asyncio.wait_for(reader.read(65536), timeout_s):
            pass
    except ConnectionError:
        return True
    return True


async def bad_peers(port: int, batch: int) -> None:
    """100 links, one bad report each: past the end, negative, a partial one and an
    oversized 1 MiB blob of junk, in turn."""
    kinds = (struct.pack(">q", 1 << 60), b"\xff" * 8, b"\x01\x02\x03", b"\x7f" * (1 << 20))
    for i in range(100):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(kinds[(batch + i) % len(kinds)])
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def drip(writer: asyncio.StreamWriter) -> None:
    """A slowloris: a valid report one byte at a time, too slow to finish in haHousekeepingInterval."""
    with contextlib.suppress(ConnectionError):
        for byte in struct.pack(">q", 0)[:7]:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.3)


async def test_bad_ha_peers_lose_only_their_own_link(tmp_path: Path, namesrv: ServerProcess) -> None:
    conf = GROUP + "haHousekeepingInterval=1500\n"
    master = start_broker(namesrv.addr, tmp_path / "master", conf)
    # The real slave reports every 200 ms: on a loaded machine a 1 s heartbeat may come later
    # than the 1.5 s housekeeping this test uses for the hostile peers.
    slave = start_broker(namesrv.addr, tmp_path / "slave",
                         conf + "brokerRole=SLAVE\nbrokerId=1\nhaSendHeartbeatInterval=200\n")
    client = RemotingClient()
    topic = unique("Hostile")
    try:
        await send_many(client, master.addr, topic, 0, 200)
        await wait_in_step(client, master, slave)
        port = ha_port(master)
        peers = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        (r_past, w_past), (r_neg, w_neg), (r_silent, _), (r_junk, w_junk) = peers
        w_past.write(struct.pack(">q", 1 << 60))  # past the master's end
        w_neg.write(b"\xff" * 8)  # a negative offset
        for _ in range(1000):  # 1,000 malformed reports, the last one past the end
            w_junk.write(b"\x7f\xee\xdd\xcc\xbb\xaa\x99\x88")
        for _, writer in peers:
            with contextlib.suppress(ConnectionError):  # the master may have closed it already
                await writer.drain()
        assert await closed_by_master(r_past, 10)
        assert await closed_by_master(r_neg, 10)
        assert await closed_by_master(r_junk, 10)
        assert await closed_by_master(r_silent, 10)  # haHousekeepingInterval: nothing read for 1.5 s
        for _, writer in peers:
            writer.close()
        assert "past the master's max offset" in master.stderr()
        assert "haHousekeepingInterval" in master.stderr()
        # 1,000 more bad reports, each on its own link, and a slowloris, while sends go on.
        drip_reader, drip_writer = await asyncio.open_connection("127.0.0.1", port)
        barrage = asyncio.gather(*(bad_peers(port, batch) for batch in range(10)))
        await asyncio.gather(send_many(client, master.addr, topic, 200, 1000), drip(drip_writer), barrage)
        assert await closed_by_master(drip_reader, 10)
        drip_writer.close()
        assert "no report for 1500 ms" in master.stderr()
        # The real slave kept its one link (it never had to reconnect) and followed everything.
        await wait_in_step(client, master, slave)
        assert (await runtime(client, master.addr))["haConnectionCount"] == "1"
        assert slave.stderr().count("connected to the master's HA port") == 1, slave.stderr()
        assert_replicas(tmp_path, topic, ("slave",))
    finally:
        await client.close()
        slave.close()
        master.close()


async def test_a_restarted_slave_resumes_from_its_own_store(tmp_path: Path, namesrv: ServerProcess) -> None:
    master = start_broker(namesrv.addr, tmp_path / "master", GROUP)
    slave_conf = GROUP + "brokerRole=SLAVE\nbrokerId=1\n"
    slave = start_broker(namesrv.addr, tmp_path / "slave", slave_conf)
    client = RemotingClient()
    topic = unique("Resumed")
    try:
        await send_many(client, master.addr, topic, 0, 1000)
        await wait_in_step(client, master, slave)
        slave.close()
        await send_many(client, master.addr, topic, 1000, 2000)  # into the next file
        slave = start_broker(namesrv.addr, tmp_path / "slave", slave_conf)
        await wait_in_step(client, master, slave)
        assert_replicas(tmp_path, topic, ("slave",))
    finally:
        await client.close()
        slave.close()
        master.close()


def apogee_admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apogee", "admin", *args], capture_output=True, text=True, timeout=60)


async def test_a_diverged_slave_is_refused_and_says_why_on_both_sides(tmp_path: Path, namesrv: ServerProcess) -> None:
    """A master that lost its store (an unclean restart at worst) wrote other records at the
    offsets the slave holds: the slave never splices them, both logs say why with the
    offset, ``apogee admin ha-status`` shows it, and a fresh slave store is the way out."""
    slave_conf = GROUP + "brokerRole=SLAVE\nbrokerId=1\n"
    master = start_broker(namesrv.addr, tmp_path / "master1", GROUP)
    slave = start_broker(namesrv.addr, tmp_path / "slave", slave_conf)
    client = RemotingClient()
    topic = unique("Diverged")
    try:
        await send_many(client, master.addr, topic, 0, 300)
        await wait_in_step(client, master, slave)
        slave_max = int((await runtime(client, slave.addr))["commitLogMaxOffset"])
        slave.close()
        master.close()
        # Another history at the same offsets: same record sizes, other timestamps and ids.
        master = start_broker(namesrv.addr, tmp_path / "master2", GROUP)
        await send_many(client, master.addr, topic, 0, 400)
        slave = start_broker(namesrv.addr, tmp_path / "slave", slave_conf)

        async def slave_says() -> bool:
            return (await runtime(client, slave.addr))["haLinkState"] == "diverged"

        await wait_until(slave_says, 20, "the slave to find its log diverged", interval_s=0.05)
        reason = (await runtime(client, slave.addr))["haDivergedReason"]
        assert "differs from the slave's last record" in reason and "offset" in reason, reason
        assert "refusing to follow master" in slave.stderr()
        await wait_until(lambda: "the slave found its log diverged" in master.stderr(), 10, "the master's log")
        assert int((await runtime(client, slave.addr))["commitLogMaxOffset"]) == slave_max  # nothing spliced
        assert (await runtime(client, master.addr))["haConnectionCount"] == "0"

        shown = apogee_admin("ha-status", "-n", namesrv.addr, "--json")
        assert shown.returncode == 0, shown.stderr
        (group,) = [g for g in orjson.loads(shown.stdout)["groups"] if g["broker_name"] == "ha-a"]
        row = next(b for b in group["brokers"] if b["broker_id"] == 1 and b["addr"] == slave.addr)
        assert row["state"] == "diverged" and "differs" in row["reason"]
        assert any(link["state"] == "diverged" and "differs" in link["reason"] for link in group["links"])
        table = apogee_admin("ha-status", "-n", namesrv.addr)
        assert table.returncode == 0 and "diverged" in table.stdout, table.stderr

        # The operator's way out: a fresh store for the slave (docs/replication.md).
        slave.close()
        shutil.rmtree(tmp_path / "slave")
        slave = start_broker(namesrv.addr, tmp_path / "slave", slave_conf)
        await wait_in_step(client, master, slave)
        assert (await runtime(client, slave.addr))["haLinkState"] == "connected"
    finally:
        await client.close()
        slave.close()
        master.close()


async def test_a_slave_switched_to_master_by_hand_continues_the_queues(tmp_path: Path, namesrv: ServerProcess) -> None:
    """docs/replication.md's manual switch: stop the master, restart the slave on its own
    store as ASYNC_MASTER with brokerId 0; it takes sends, queue offsets continue."""
    master = start_broker(namesrv.addr, tmp_path / "master", GROUP)
    slave = start_broker(namesrv.addr, tmp_path / "slave", GROUP + "brokerRole=SLAVE\nbrokerId=1\n")
    client = RemotingClient()
    topic = unique("Switched")
    try:
        await send_many(client, master.addr, topic, 0, 400)  # 100 in each of 4 queues
        await wait_in_step(client, master, slave)
        master.close()
        slave.close()
        slave = start_broker(namesrv.addr, tmp_path / "slave", GROUP + "brokerRole=ASYNC_MASTER\nbrokerId=0\n")
        info = await runtime(client, slave.addr)
        assert info["haRole"] == "ASYNC_MASTER"
        for queue in range(4):
            answer = await client.invoke(slave.addr, send_request(topic, BODY, queue_id=queue), T)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert answer.ext_fields["queueOffset"] == "100", answer.ext_fields
    finally:
        await client.close()
        slave.close()
        master.close()
