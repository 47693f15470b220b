"""A store writer process for the SIGKILL crash tests (not a test module).

    python writer.py ROOT --flush SYNC_FLUSH --writers 16 --seed 1

Opens the store at ROOT with small files, prints ``ready <recovered end>``, then appends from
``--writers`` concurrent tasks until killed, printing ``ack <phys> <size> <topic> <qid>
<queue offset> <key> <reps>`` for every put that returned PUT_OK (after its fsync under
SYNC_FLUSH).  The body of key K is ``(K + "|") * reps``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from apogee.store import FlushDiskType, InnerMessage, MessageStore, StoreConfig

CRASH_CONFIG = {
    "mapped_file_size_commitlog": 256 * 1024,
    "mapped_file_size_consume_queue": 64 * 20,
    "max_hash_slot_num": 64,
    "max_index_num": 2000,
    "flush_interval_commitlog_ms": 20,
    "flush_interval_consume_queue_ms": 100,
    "flush_consume_queue_thorough_interval_ms": 300,
    "populate_ahead_bytes": 0,
}
TOPICS = ("CrashA", "CrashB", "%RETRY%crash")


def config(root: str, flush: str) -> StoreConfig:
    cfg = StoreConfig(store_path_root_dir=root, flush_disk_type=FlushDiskType[flush])
    for key, value in CRASH_CONFIG.items():
        setattr(cfg, key, value)
    return cfg


def body_of(key: str, reps: int) -> bytes:
    return (key + "|").encode() * reps


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--flush", default="SYNC_FLUSH")
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    store = MessageStore(config(args.root, args.flush))
    await store.start()
    out = sys.stdout
    out.write(f"ready {store.max_phy_offset}\n")
    out.flush()

    async def writer(w: int) -> None:
        topic, qid = TOPICS[w % len(TOPICS)], w % 4
        i = 0
        while True:
            key = f"s{args.seed}w{w}i{i}"
            reps = 1 + (i * 7 + w * 13) % 60
            props = f"KEYS\x01{key}\x02UNIQ_KEY\x01U{key}\x02TAGS\x01t{i % 3}"
            msg = InnerMessage(topic, qid, body_of(key, reps), properties=props,
                               born_host=("127.0.0.1", 40000 + w), store_host=("127.0.0.1", 10911))
            r = await store.put_message(msg)
            if r.ok:
                out.write(f"ack {r.wrote_offset} {r.wrote_bytes} {topic} {qid} {r.logics_offset} {key} {reps}\n")
            i += 1
            await asyncio.sleep(0)  # one put per loop turn, as a broker handles requests

    async def flusher() -> None:
        while True:
            await asyncio.sleep(0.005)
            out.flush()

    await asyncio.gather(flusher(), *(writer(w) for w in range(args.writers)))


if __name__ == "__main__":
    asyncio.run(main())
