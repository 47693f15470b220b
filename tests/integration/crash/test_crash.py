"""SIGKILL a real writer process in the middle of heavy appends, restart, and check:

* SYNC_FLUSH: every append that returned is present and readable;
* ASYNC_FLUSH: the CommitLog is a clean prefix (every record valid, no torn one), every
  ConsumeQueue entry and index hit points to a valid message (after a kill the page cache
  survives, so acknowledged appends are there too; only an OS crash could lose them);
* the next appends continue where the recovered log ends.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apogee.common import message_codec as mc
from apogee.store import FlushDiskType, InnerMessage, MessageStore

from .writer import TOPICS, body_of, config

WRITER = Path(__file__).with_name("writer.py")
pytestmark = [pytest.mark.crash, pytest.mark.slow]


def run_and_kill(root: Path, flush: str, seed: int, seconds: float) -> list[tuple]:
    """Start the writer, let it append for ``seconds``, SIGKILL it; return its acks."""
    env = dict(os.environ, PYTHONUNBUFFERED="0")
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root), "--flush", flush, "--seed", str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    acks: list[tuple] = []
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("ready"), ready + proc.stderr.read()
        deadline = time.monotonic() + seconds
        for line in proc.stdout:
            acks.append(line)
            if time.monotonic() > deadline and len(acks) >= 500:
                break
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)  # acks already in the pipe still count
        acks.extend(rest.splitlines())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    out = []
    for line in acks:
        parts = line.split()
        if len(parts) == 8 and parts[0] == "ack":  # a line cut by the kill is not an ack
            out.append((int(parts[1]), int(parts[2]), parts[3], int(parts[4]), int(parts[5]), parts[6], int(parts[7])))
    return out


async def verify(root: Path, flush: str, acks: list[tuple]) -> None:
    store = MessageStore(config(str(root), flush))
    await store.start()
    try:
        assert not store.recovery.clean_shutdown
        end = store.max_phy_offset
        # 1. every acknowledged append is there, byte for byte
        for phys, size, topic, qid, qoff, key, reps in acks:
            rec = store.select_one_message_by_offset(phys, size)
            assert rec is not None, f"acked append at {phys} lost"
            f = mc.read_dispatch_fields(rec, 0)
            body = body_of(key, reps)
            assert (f.topic, f.queue_id, f.queue_offset) == (topic, qid, qoff)
            assert rec[mc.OFF_BODY : mc.OFF_BODY + len(body)] == body
            rec.release()
        # 2. the CommitLog is a clean prefix: walk it record by record
        pos, count = store.min_phy_offset, 0
        while pos < end:
            mf = store.commitlog.mfq.find(pos)
            rel = pos - mf.start
            size = mc.check_record(mf.mm, rel, mf.wrote, pos, check_crc=True)
            if size == mc.RECORD_BLANK:
                pos = mf.end
                continue
            assert size > 0, f"bad record at {pos} inside the recovered log (end {end})"
            pos += size
            count += 1
        assert pos == end and count >= len(acks)
        # 3. every ConsumeQueue entry points at a valid record of its queue
        for (topic, qid), cq in store.consume_queues.queues.items():
            n = 0
            for qoff, phys, size, _tags in cq.iter_entries():
                rec = store.select_one_message_by_offset(phys, size)
                assert rec is not None and phys + size <= end
                f = mc.read_dispatch_fields(rec, 0)
                assert mc.check_record(rec, 0, size, phys) == size
                assert (f.topic, f.queue_id, f.queue_offset) == (topic, qid, qoff)
                rec.release()
                n += 1
            assert n == cq.max_offset == store.next_queue_offset(topic, qid)
        # 4. index hits resolve to the right message
        for phys, _size, topic, _qid, _qoff, key, _reps in random.Random(1).sample(acks, min(200, len(acks))):
            q = store.query_message(topic, key, 64, 0, 1 << 62)
            assert q.phys_offsets == [phys], key
            q.release()
        # 5. the next appends continue from the recovered end
        before = {key: store.get_max_offset_in_queue(*key) for key in store.consume_queues.queues}
        first = True
        for topic in TOPICS:
            r = await store.put_message(InnerMessage(topic, 0, b"after crash", properties="KEYS\x01after"))
            assert r.ok and r.logics_offset == before.get((topic, 0), 0)
            if first:
                assert r.wrote_offset == end or r.wrote_offset % store.commitlog.file_size == 0
                first = False
        await store.wait_dispatched()
        for topic in TOPICS:
            assert store.get_max_offset_in_queue(topic, 0) == before.get((topic, 0), 0) + 1
    finally:
        await store.shutdown()


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH.name, FlushDiskType.ASYNC_FLUSH.name])
def test_sigkill_during_heavy_writes(tmp_path: Path, flush: str) -> None:
    root = tmp_path / "store"
    seconds = 3.0 if flush == "SYNC_FLUSH" else 1.5  # ASYNC acks ~3x faster: similar counts
    acks = run_and_kill(root, flush, seed=1, seconds=seconds)
    assert len(acks) >= 500
    asyncio.run(verify(root, flush, acks))
    # a second life: recover, write more, get killed again, recover again
    more = run_and_kill(root, flush, seed=2, seconds=seconds / 2)
    asyncio.run(verify(root, flush, acks + more))
