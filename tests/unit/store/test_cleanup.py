from __future__ import annotations

import os

from apogee.common import message_codec as mc
from apogee.store import GetStatus, MessageStore, PutStatus
from apogee.store.cleanup import count_expired, disk_used_percent

from .conftest import make_msg

HOUR = 3_600_000


class Env:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000
        self.hour = 12
        self.usage = 10.0

    def kwargs(self) -> dict:
        return {"clock": lambda: self.now, "hour_of_day": lambda ms: self.hour,
                "disk_usage": lambda path: self.usage}


async def filled(open_store, env: Env, n: int = 120) -> MessageStore:  # type: ignore[no-untyped-def]
    store = await open_store(store_kwargs=env.kwargs(), file_reserved_time_h=72,
                             max_hash_slot_num=8, max_index_num=40)
    for i in range(n):
        await store.put_message(make_msg("C", i % 2, b"x" * 100, keys=f"k{i}"))
    await store.wait_dispatched()
    return store


def age_files(store: MessageStore, env: Env, hours: int) -> None:
    old = (env.now - hours * HOUR) / 1000
    for mf in store.commitlog.mfq.files:
        os.utime(mf.path, (old, old))


async def test_deletes_expired_files_at_the_delete_hour(open_store) -> None:
    env = Env()
    store = await filled(open_store, env)
    files = list(store.commitlog.mfq.files)
    index_files = len(store.index.files)
    assert len(files) >= 5 and index_files >= 3
    age_files(store, env, 100)
    assert await store.run_cleanup() == 0  # not the delete hour, disk fine
    env.hour = 4
    deleted = await store.run_cleanup()
    assert deleted == len(files) - 1  # never the newest file
    assert store.min_phy_offset == files[-1].start and not files[0].path.exists()
    cq = store.consume_queues.get("C", 0)
    res = store.get_message("g", "C", 0, 0, 32)
    assert res.status is GetStatus.OFFSET_TOO_SMALL and res.next_begin_offset == cq.min_offset > 0
    first = store.get_message("g", "C", 0, cq.min_offset, 1)
    assert first.status is GetStatus.FOUND
    assert mc.decode_record(first.buffers[0]).commit_log_offset >= store.min_phy_offset
    first.release()
    assert cq.mfq.files[0].start > 0  # ConsumeQueue files below the new minimum are gone
    assert len(store.index.files) < index_files
    assert store.cleaner.deleted_files == deleted


async def test_keeps_young_files_and_manual_request(open_store) -> None:
    env = Env()
    store = await filled(open_store, env)
    env.hour = 4
    assert await store.run_cleanup() == 0  # nothing older than 72 h
    age_files(store, env, 100)
    env.hour = 12
    store.request_delete_files()
    assert await store.run_cleanup() > 0


async def test_disk_guard_refuses_and_resumes_writes(open_store) -> None:
    env = Env()
    store = await filled(open_store, env, n=10)
    env.usage = 95.0
    await store.run_cleanup()
    r = await store.put_message(make_msg("C", 0))
    assert r.status is PutStatus.DISK_FULL and store.runtime_info()["diskFull"]
    assert store.get_message("g", "C", 0, 0, 1).status is GetStatus.FOUND  # reads still work
    env.usage = 50.0
    await store.run_cleanup()
    assert (await store.put_message(make_msg("C", 0))).ok


async def test_forced_cleaning_deletes_young_files(open_store) -> None:
    env = Env()
    store = await filled(open_store, env)
    n = len(store.commitlog.mfq.files)
    env.usage = 88.0  # above the forcibly ratio (85): age does not matter
    assert await store.run_cleanup() == min(n - 1, 10)
    assert store.cleaner.clean_immediately and not store.cleaner.disk_full


async def test_deleting_a_file_with_live_slices(open_store, monkeypatch) -> None:
    env = Env()
    store = await filled(open_store, env)
    # The pure loop's zero-copy slices (the C path copies the records: nothing pins a file).
    monkeypatch.setattr("apogee.store.reads.native", None)
    held = store.get_message("g", "C", 0, 0, 4)
    before = [bytes(b) for b in held.buffers]
    age_files(store, env, 100)
    store.request_delete_files()
    assert await store.run_cleanup() > 0
    assert [bytes(b) for b in held.buffers] == before  # still mapped, still readable
    assert store.commitlog.mfq.zombies
    held.release()
    await store.run_cleanup()
    assert not store.commitlog.mfq.zombies


async def test_never_deletes_undispatched_files(open_store) -> None:
    env = Env()
    store = await filled(open_store, env)
    files = list(store.commitlog.mfq.files)
    store.dispatcher.offset = files[1].start  # pretend dispatch is behind
    assert count_expired(files, env.now, 0, True, store.dispatcher.offset) == 1


def test_disk_used_percent(tmp_path) -> None:
    assert 0 <= disk_used_percent(str(tmp_path)) <= 100
    assert disk_used_percent(str(tmp_path / "missing")) == -1.0


async def test_clean_expired_consume_queues_destroys_queues_whose_messages_are_gone(open_store) -> None:
    """CLEAN_EXPIRED_CONSUMEQUEUE (RocketMQ's cleanExpiredConsumerQueue): a queue whose every
    message was deleted with its CommitLog file goes, files and all, and starts again at 0; a
    queue with messages still stored stays; the schedule topic's queues stay."""
    env = Env()
    store = await open_store(store_kwargs=env.kwargs(), file_reserved_time_h=72)
    for i in range(40):
        await store.put_message(make_msg("Old", i % 2, b"x" * 100))
    await store.put_message(make_msg("SCHEDULE_TOPIC_XXXX", 0, b"x" * 100))
    await store.wait_dispatched()
    for _ in range(40):
        await store.put_message(make_msg("New", 0, b"y" * 100))
    await store.wait_dispatched()
    old_dir = store.consume_queues.get("Old", 0).mfq.directory
    age_files(store, env, 100)
    store.request_delete_files()
    assert await store.run_cleanup() > 0
    assert store.min_phy_offset > store.consume_queues.get("Old", 1).max_phys_end
    new_min = store.get_min_offset_in_queue("New", 0)

    assert await store.clean_expired_consume_queues() == 2
    assert store.consume_queues.get("Old", 0) is None and store.consume_queues.get("Old", 1) is None
    assert not old_dir.exists() and not old_dir.parent.exists()
    assert store.consume_queues.get("SCHEDULE_TOPIC_XXXX", 0) is not None
    assert store.get_max_offset_in_queue("New", 0) == 40 and store.get_min_offset_in_queue("New", 0) == new_min
    assert (await store.put_message(make_msg("Old", 0, b"again"))).logics_offset == 0
    await store.wait_dispatched()
    res = store.get_message("g", "Old", 0, 0, 4)
    assert res.status is GetStatus.FOUND and [mc.decode_record(b).body for b in res.buffers] == [b"again"]
    res.release()
    assert await store.clean_expired_consume_queues() == 0
