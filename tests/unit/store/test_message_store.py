from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from apogee.common import message_codec as mc
from apogee.errors import StoreError
from apogee.store import FlushDiskType, GetStatus, InnerBatch, MessageStore, PutStatus, StoreConfig

from .conftest import bodies, make_msg


async def test_lifecycle_abort_and_lock(store_config: Callable[..., StoreConfig]) -> None:
    cfg = store_config()
    store = MessageStore(cfg)
    assert store.put_message_nowait(make_msg())[0].status is PutStatus.SERVICE_NOT_AVAILABLE
    with pytest.raises(StoreError):
        store.get_message("g", "T", 0, 0, 1)
    await store.start()
    assert cfg.abort_path.exists() and cfg.lock_path.read_text() == "lock"
    with pytest.raises(StoreError):
        await store.start()
    second = MessageStore(cfg)
    with pytest.raises(StoreError, match="locked"):
        await second.start()
    assert (await store.put_message(make_msg())).ok
    await store.shutdown()
    assert not cfg.abort_path.exists() and (cfg.root / "checkpoint").stat().st_size == 4096
    assert (await store.put_message(make_msg())).status is PutStatus.SERVICE_NOT_AVAILABLE
    await store.shutdown()  # idempotent
    async with MessageStore(cfg) as again:
        assert again.recovery is not None and again.recovery.clean_shutdown
        assert again.get_max_offset_in_queue("T", 0) == 1


@pytest.mark.parametrize("flush", list(FlushDiskType))
async def test_put_get_restart(open_store, flush: FlushDiskType) -> None:
    store = await open_store(flush)
    for i in range(40):
        r = await store.put_message(make_msg("T", i % 2, f"m{i}".encode()))
        assert r.ok and r.logics_offset == i // 2
    await store.wait_dispatched()
    assert bodies(store, "T", 0) == [f"m{i}".encode() for i in range(0, 40, 2)]
    assert store.next_queue_offset("T", 1) == 20 and store.dispatch_behind_bytes == 0
    end = store.max_phy_offset
    await store.shutdown()
    again = await open_store(flush)
    assert bodies(again, "T", 1) == [f"m{i}".encode() for i in range(1, 40, 2)]
    r = await again.put_message(make_msg("T", 1, b"next"))
    assert r.logics_offset == 20 and r.wrote_offset == end


async def test_sync_flush_exposes_only_flushed_messages(open_store) -> None:
    store = await open_store(FlushDiskType.SYNC_FLUSH)
    result, durable = store.put_message_nowait(make_msg("S", 0, b"one"))
    assert result.ok and durable is not None and not durable.done()
    await store.wait_dispatched()
    assert store.get_max_offset_in_queue("S", 0) == 0  # not on disk yet: not visible
    assert await durable is PutStatus.PUT_OK
    assert store.flushed_phy_offset >= result.wrote_offset + result.wrote_bytes
    await store.wait_dispatched()
    assert store.get_max_offset_in_queue("S", 0) == 1


async def test_group_commit_shares_fsyncs(open_store) -> None:
    store = await open_store(FlushDiskType.SYNC_FLUSH)
    results = await asyncio.gather(*(store.put_message(make_msg("G", i % 4)) for i in range(200)))
    assert all(r.ok for r in results)
    assert store.runtime_info()["commitLogFsyncs"] < 50


async def test_batch_put(open_store) -> None:
    store = await open_store()
    batch = InnerBatch("B", 1, [mc.BatchItem(0, f"b{i}".encode(), "") for i in range(5)])
    r = await store.put_messages(batch)
    assert r.ok and r.msg_num == 5 and r.logics_offset == 0
    await store.wait_dispatched()
    assert bodies(store, "B", 1) == [f"b{i}".encode() for i in range(5)]
    r2, _ = store.put_messages_nowait(InnerBatch("B", 1, []))
    assert r2.status is PutStatus.MESSAGE_ILLEGAL


async def test_arrival_listener_runs_on_the_loop(open_store) -> None:
    store = await open_store()
    seen: list[tuple] = []
    loop_thread = threading.current_thread()

    def listener(*args: object) -> None:
        assert threading.current_thread() is loop_thread
        seen.append(args)

    store.add_arrival_listener(listener)
    await store.put_message(make_msg("A", 3, tags="x"))
    await store.wait_dispatched()
    assert seen and seen[0][:3] == ("A", 3, 1)
    store.remove_arrival_listener(listener)
    await store.put_message(make_msg("A", 3))
    await store.wait_dispatched()
    assert len(seen) == 1


async def test_dispatch_runs_by_itself(open_store) -> None:
    store = await open_store()
    store.put_message_nowait(make_msg("D", 0))
    for _ in range(100):
        if store.get_max_offset_in_queue("D", 0) == 1:
            break
        await asyncio.sleep(0.01)
    assert store.get_max_offset_in_queue("D", 0) == 1


async def test_periodic_flush_and_checkpoint(open_store) -> None:
    store = await open_store(flush_interval_commitlog_ms=10, flush_commitlog_least_pages=0,
                             flush_interval_consume_queue_ms=20, flush_consume_queue_thorough_interval_ms=0)
    r = await store.put_message(make_msg("P", 0))
    for _ in range(200):
        if store.checkpoint.logics_msg_timestamp and store.flushed_phy_offset > r.wrote_offset:
            break
        await asyncio.sleep(0.01)
    assert store.flushed_phy_offset >= r.wrote_offset + r.wrote_bytes
    assert store.checkpoint.physic_msg_timestamp == r.store_timestamp
    assert store.checkpoint.logics_msg_timestamp == r.store_timestamp


async def test_get_message_async_and_info(open_store) -> None:
    store = await open_store()
    await store.put_message(make_msg("Q", 0, b"body"))
    await store.wait_dispatched()
    res = await store.get_message_async("g", "Q", 0, 0, 8)
    assert res.status is GetStatus.FOUND and res.message_count == 1
    res.release()
    info = store.runtime_info()
    assert info["consumeQueues"] == 1 and info["writable"] and info["flushDiskType"] == "ASYNC_FLUSH"
    assert await store.flush() == store.max_phy_offset
