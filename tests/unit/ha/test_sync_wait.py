"""SYNC_MASTER's pieces without sockets: the waiter table shared with the group commit, the
slave-available rule, the WAIT rules, how the store combines flush and replica waits, the
log tail the divergence check compares, and the ha-status view."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from apogee.admin.replication import group_view
from apogee.broker.send_rules import plain_waits_unclear, waits_for_store
from apogee.common.message_codec import properties_to_string
from apogee.store import MessageStore
from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.ha.protocol import lag_ms, slave_ok
from apogee.store.ha.tail import log_tail
from apogee.store.inner import InnerMessage
from apogee.store.results import PutStatus
from apogee.store.waiters import OffsetWaiters


async def test_waiters_resolve_in_offset_order_and_time_out_with_their_status() -> None:
    waiters = OffsetWaiters(asyncio.get_running_loop(), 50, PutStatus.FLUSH_SLAVE_TIMEOUT, "held")
    first, second, third = waiters.add(100), waiters.add(200), waiters.add(300)
    waiters.resolve(250)
    assert first.result() is PutStatus.PUT_OK and second.result() is PutStatus.PUT_OK
    assert not third.done() and len(waiters) == 1
    assert await third is PutStatus.FLUSH_SLAVE_TIMEOUT  # one timer, the oldest deadline
    late = waiters.add(400)
    waiters.close()
    assert late.result() is PutStatus.SERVICE_NOT_AVAILABLE


@pytest.mark.parametrize(("links", "end", "acked", "ok"), [
    (0, 100, 0, False),  # no slave: SLAVE_NOT_AVAILABLE at once
    (1, 100, 0, True),
    (1, 1000, 1000 - 256, False),  # haSlaveFallbehindMax (256 here) behind or more
    (1, 1000, 1000 - 255, True),
])
def test_a_slave_is_available_when_linked_and_not_too_far_behind(links: int, end: int, acked: int, ok: bool) -> None:
    assert slave_ok(links, end, acked, 256) is ok


def test_wait_is_javas_parse_boolean_and_absent_means_wait() -> None:
    assert waits_for_store(None) and waits_for_store("true") and waits_for_store("TRUE")
    assert not waits_for_store("false") and not waits_for_store("yes")
    assert not plain_waits_unclear("KEYS\x01k\x02WAIT\x01true\x02")
    assert not plain_waits_unclear("KEYS\x01k\x02")
    for unclear in ("WAIT\x01false\x02", "KEYS\x01k\x02WAIT\x01true", "XWAIT\x01true\x02WAIT\x01false\x02",
                    "WAIT\x01true\x02WAIT\x01false\x02"):
        assert plain_waits_unclear(unclear), unclear


def test_lag_is_zero_when_caught_up_and_the_age_of_the_first_missing_record_otherwise() -> None:
    assert lag_ms(500, 500, 1_000, 5_000) == 0
    assert lag_ms(400, 500, 1_000, 5_000) == 4_000
    assert lag_ms(400, 500, None, 5_000) == 0


def message(i: int, wait: str | None = None) -> InnerMessage:
    props = {"KEYS": f"k{i}"} | ({"WAIT": wait} if wait else {})
    return InnerMessage("T", 0, b"body-%d" % i, properties=properties_to_string(props), born_timestamp=1)


async def test_store_combines_flush_and_replica_waits_replica_last(tmp_path: Path) -> None:
    store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path / "s"), flush_disk_type=FlushDiskType.SYNC_FLUSH,
                                     mapped_file_size_commitlog=1 << 20))
    await store.start()
    try:
        asked: list[int] = []

        def replica(end: int) -> asyncio.Future[PutStatus]:
            asked.append(end)
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)
            return fut

        store.replica_request = replica
        result, waits = store.put_message_nowait(message(1))
        assert waits is not None and await waits is PutStatus.FLUSH_SLAVE_TIMEOUT
        assert asked == [result.wrote_offset + result.wrote_bytes]
        result, waits = store.put_message_nowait(message(2, "false"), wait=False)
        assert waits is None and result.status is PutStatus.PUT_OK and len(asked) == 1
        third = await store.put_message(message(3))
        assert third.status is PutStatus.FLUSH_SLAVE_TIMEOUT and third.msg_id  # stored all the same
        assert store.max_phy_offset == third.wrote_offset + third.wrote_bytes
    finally:
        store.replica_request = None
        await store.shutdown()


async def test_log_tail_is_the_last_whole_record_and_the_start_of_an_unfinished_one(tmp_path: Path) -> None:
    config = {"mapped_file_size_commitlog": 1 << 20, "flush_disk_type": FlushDiskType.ASYNC_FLUSH}
    master = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path / "m"), **config))
    slave = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path / "s"), **config))
    await master.start()
    await slave.start()
    try:
        offsets = [master.put_message_nowait(message(i))[0] for i in range(5)]
        slave.serve_as_slave()
        mf = master.commitlog.mfq.find(0)
        assert mf is not None
        cut = offsets[-1].wrote_offset + 10  # the link broke 10 bytes into the last record
        slave.append_replica(0, bytes(mf.view[:cut]))
        tail = log_tail(slave.commitlog.mfq, slave.max_phy_offset)
        last_whole = offsets[-2]
        start, end = last_whole.wrote_offset, offsets[-1].wrote_offset
        assert tail.record == (start, bytes(mf.view[start:end]))
        assert tail.partial == (offsets[-1].wrote_offset, bytes(mf.view[offsets[-1].wrote_offset:cut]))
        assert log_tail(master.commitlog.mfq, master.max_phy_offset).partial is None
    finally:
        await slave.shutdown()
        await master.shutdown()


def test_ha_status_view_of_a_group() -> None:
    links = [{"addr": "10.0.0.2:5555", "ackOffset": 900, "lagBytes": 100, "lagMs": 40, "state": "connected",
              "reason": ""},
             {"addr": "10.0.0.3:6666", "ackOffset": 2000, "lagBytes": 0, "lagMs": 0, "state": "diverged",
              "reason": "longer"}]
    infos: dict[str, dict[str, str] | str] = {
        "10.0.0.1:10911": {"haRole": "SYNC_MASTER", "commitLogMaxOffset": "1000",
                           "haSlaves": orjson.dumps(links).decode()},
        "10.0.0.2:10911": {"haRole": "SLAVE", "commitLogMaxOffset": "900", "haLinkState": "connected",
                           "haDivergedReason": ""},
        "10.0.0.3:10911": "connection refused",
    }
    group = group_view("g", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911", 2: "10.0.0.3:10911"}, infos)
    master, slave, gone = group.brokers
    assert (master.state, master.max_offset, master.role) == ("master", 1000, "SYNC_MASTER")
    assert (slave.state, slave.lag_bytes, slave.lag_ms) == ("connected", 100, 40)
    assert (gone.state, gone.reason) == ("unreachable", "connection refused")
    assert group.links == links
