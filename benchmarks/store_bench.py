"""Message store throughput: appends, dispatch, reads; and resident memory over a long write.

Run:
    .venv/bin/python benchmarks/store_bench.py                 # the full matrix, 3 runs each
    .venv/bin/python benchmarks/store_bench.py --runs 5 --count 200000
    .venv/bin/python benchmarks/store_bench.py --rss --rss-gib 5   # RSS while writing 5 GiB

Each case runs in a fresh store directory (under --dir, default /work/.bench-store) and
prints the median of the runs.  Cases:

* append: one writer calling ``put_message_nowait`` in a loop (the broker's fast path; the
  dispatcher runs when the writer yields, here after the timed loop) and ``await put_message``
  from 1 or 64 concurrent writer tasks, where each task yields to the loop after every put, so
  dispatch and flushing run interleaved, as in the broker.
* dispatch: building ConsumeQueue and index entries for the appended messages.
* synclong: one SYNC_FLUSH writer for 64,000 puts of 1 KiB, long enough that page-cache
  folio sizes would have grown (``MappedFile.advise_random``); "KiB dirtied/fsync" shows
  what each fdatasync writes back.  One-writer SYNC_FLUSH cases also print put -> durable
  percentiles.
* read: ``get_message`` over every queue in batches of 32 (zero-copy slices).
* batch: client batch bodies of 256 messages put as the broker puts SEND_BATCH_MESSAGE, through
  the pure-Python path and, when built, the C path (``apogee._native``), then dispatched.
* populate: ``MappedFile.populate`` of a fresh 1 GiB file, CPU per KiB, first from free
  memory as it is, then right after deleting a file (pages just freed): the cost the broker's
  I/O thread pays per byte stored, which on a VM with free page reporting is mostly the host's.
* single: (C path) single messages stored as the broker stores a SEND_MESSAGE_V2 of a client
  that does not batch (``put_plain_nowait``), 1, 4 or 16 per loop turn, each turn followed
  by a dispatch pass (hints, or from ``dispatch.SCAN_SINGLES_FROM`` on one scan).

Rates are wall-clock; ``/cpu-s`` rates divide by the CPU time of the event-loop thread only
(``time.thread_time``), which stays meaningful when other processes share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from apogee.common.accel import native
from apogee.common.message_codec import decode_batch, encode_batch_py
from apogee.common.uniq_id import UniqIdGenerator
from apogee.store import FlushDiskType, InnerBatch, InnerMessage, MessageStore, PlainMessage, StoreConfig
from apogee.store.mapped_file import MappedFile

QUEUES = 8
TOPIC = "BenchTopic"


def make_config(root: Path, flush: FlushDiskType, **kw: object) -> StoreConfig:
    cfg = StoreConfig(store_path_root_dir=str(root), flush_disk_type=flush)
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def make_messages(count: int, size: int) -> list[InnerMessage]:
    gen = UniqIdGenerator("127.0.0.1")
    body = os.urandom(size)
    msgs = []
    for i in range(count):
        props = f"TAGS\x01TagA\x02KEYS\x01order-{i}\x02UNIQ_KEY\x01{gen.next_id()}\x02CLUSTER\x01DefaultCluster"
        msgs.append(InnerMessage(TOPIC, i % QUEUES, body, 0, props, 0, 1_700_000_000_000,
                                 ("10.0.0.2", 50000), ("10.0.0.1", 10911)))
    return msgs


def fresh(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)


async def bench_append_nowait(root: Path, msgs: list[InnerMessage]) -> dict[str, float]:
    fresh(root)
    async with MessageStore(make_config(root, FlushDiskType.ASYNC_FLUSH)) as store:
        put = store.put_message_nowait
        # warm up: the first file is created (and fallocated) inline on the first put
        put(msgs[0])
        t0, c0 = time.perf_counter(), time.thread_time()
        for m in msgs:
            put(m)
        t1, c1 = time.perf_counter(), time.thread_time()
        await store.wait_dispatched()
        t2, c2 = time.perf_counter(), time.thread_time()
        n = len(msgs)
        nbytes = sum(len(m.body) for m in msgs)
        return {"append/s": n / (t1 - t0), "MB/s": nbytes / (t1 - t0) / 1e6,
                "append/cpu-s": n / (c1 - c0), "dispatch/s": n / (t2 - t1),
                "dispatch/cpu-s": n / (c2 - c1)}


async def bench_singles(root: Path, msgs: list[InnerMessage], turn: int) -> dict[str, float]:
    """Single messages stored as the broker stores a Java/C++ client's SEND_MESSAGE_V2
    (``put_plain_nowait``, the C path), ``turn`` puts per loop turn and then the turn's
    dispatch pass, as a broker serving that many pipelined requests per socket read does;
    the CPU of the loop thread per message covers both."""
    fresh(root)
    extra = b"CLUSTER\x01DefaultCluster"
    plain = []
    for m in msgs:
        sent = ("WAIT\x01true\x02" + m.properties).replace("\x02CLUSTER\x01DefaultCluster", "").encode()  # type: ignore[operator]
        size = native.scan_single(sent, extra)
        assert size is not None
        plain.append(PlainMessage(m.topic, m.queue_id, m.body, sent, extra, size, 0, 0, 77, ("10.0.0.2", 50000),
                                  ("10.0.0.1", 10911), 0))
    async with MessageStore(make_config(root, FlushDiskType.ASYNC_FLUSH)) as store:
        put = store.put_plain_nowait
        put(plain[0])  # the first file is created (and fallocated) inline on the first put
        await store.wait_dispatched()
        t0, c0 = time.perf_counter(), time.thread_time()
        for start in range(1, len(plain), turn):
            for m in plain[start : start + turn]:
                put(m)
            await store.wait_dispatched()  # the turn's dispatch pass
        await store.wait_dispatched()
        t1, c1 = time.perf_counter(), time.thread_time()
        n = len(plain) - 1
        return {"put+dispatch/s": n / (t1 - t0), "loop CPU ns/msg": (c1 - c0) / n * 1e9}


def bench_populate(root: Path, mib: int = 1024) -> dict[str, float]:
    """What ``MappedFile.populate`` (the I/O thread faulting a CommitLog's next pages in)
    costs per KiB, in CPU time of the populating thread: for a file whose pages come from free
    memory as it is, then for a second one made right after the first was deleted, whose
    pages the kernel takes from the ones just freed.  On a VM that returns free memory to its
    host (free page reporting) the first pays the host's faults and the second does not."""
    fresh(root)
    size = mib << 20
    out: dict[str, float] = {}
    time.sleep(3)  # Linux reports freed memory to the host after 2 s: the last run's is gone
    for name in ("first file", "after a delete"):
        mf = MappedFile.create(root / f"{name.replace(' ', '-')}.bin", 0, size)
        c0 = time.thread_time()
        mf.populate(0, size)
        out[f"{name} us/KiB"] = (time.thread_time() - c0) / (size >> 10) * 1e6
        mf.destroy()
    return out


def make_batches(msgs: list[InnerMessage], per_batch: int) -> list[tuple[int, bytes]]:
    """Client batch bodies (as a producer's auto-batching sends them), one queue each."""
    out = []
    for start in range(0, len(msgs), per_batch):
        chunk = msgs[start : start + per_batch]
        props = [m.properties.replace("\x02CLUSTER\x01DefaultCluster", "") for m in chunk]  # type: ignore[union-attr]
        out.append((chunk[0].queue_id, encode_batch_py([(0, m.body, p) for m, p in zip(chunk, props, strict=True)])))
    return out


async def bench_batches(root: Path, batches: list[tuple[int, bytes]], native_path: bool) -> dict[str, float]:
    """SEND_BATCH_MESSAGE bodies into the store, as the broker puts them: through the C path
    (the body written as is) or the pure-Python one (decoded into items first)."""
    fresh(root)
    async with MessageStore(make_config(root, FlushDiskType.ASYNC_FLUSH)) as store:
        props = "CLUSTER\x01DefaultCluster"
        hosts = {"born_host": ("10.0.0.2", 50000), "store_host": ("10.0.0.1", 10911)}
        t0, c0 = time.perf_counter(), time.thread_time()
        n = 0
        for qid, body in batches:
            if native_path:
                scan = native.scan_batch(body, props.encode(), 4 << 20)
                batch = InnerBatch(TOPIC, qid, [], props, raw=body, raw_scan=scan, **hosts)  # type: ignore[arg-type]
            else:
                batch = InnerBatch(TOPIC, qid, decode_batch(body), props, **hosts)  # type: ignore[arg-type]
            result, _ = store.put_messages_nowait(batch)
            n += result.msg_num
        t1, c1 = time.perf_counter(), time.thread_time()
        await store.wait_dispatched()
        t2, c2 = time.perf_counter(), time.thread_time()
        return {"append/s": n / (t1 - t0), "append/cpu-s": n / (c1 - c0),
                "dispatch/s": n / (t2 - t1), "dispatch/cpu-s": n / (c2 - c1)}


async def bench_writers(root: Path, msgs: list[InnerMessage], flush: FlushDiskType,
                        writers: int, yield_each: bool) -> dict[str, float]:
    fresh(root)
    async with MessageStore(make_config(root, flush)) as store:
        await store.put_message(msgs[0])
        chunks = [msgs[i::writers] for i in range(writers)]

        waits: list[int] = []  # one writer's put -> answered (SYNC_FLUSH: put -> durable), ns

        async def writer(chunk: list[InnerMessage]) -> None:
            put = store.put_message
            clock = time.perf_counter_ns
            for m in chunk:
                began = clock()
                r = await put(m)
                waits.append(clock() - began)
                if not r.ok:
                    raise RuntimeError(r)
                if yield_each:
                    await asyncio.sleep(0)  # as a broker: one put per loop turn

        fsyncs0 = float(store.runtime_info()["commitLogFsyncs"])
        t0, c0, w0 = time.perf_counter(), time.thread_time(), written_bytes()
        await asyncio.gather(*(writer(c) for c in chunks))
        t1, c1, w1 = time.perf_counter(), time.thread_time(), written_bytes()
        await store.wait_dispatched()
        t2 = time.perf_counter()
        n = len(msgs)
        nbytes = sum(len(m.body) for m in msgs)
        fsyncs = float(store.runtime_info()["commitLogFsyncs"]) - fsyncs0
        out = {"append/s": n / (t1 - t0), "MB/s": nbytes / (t1 - t0) / 1e6,
               "append/cpu-s": n / (c1 - c0), "end-to-end/s": n / (t2 - t0), "fsyncs": fsyncs}
        if flush is FlushDiskType.SYNC_FLUSH and fsyncs:
            out["KiB dirtied/fsync"] = (w1 - w0) / 1024 / fsyncs
        if flush is FlushDiskType.SYNC_FLUSH and writers == 1:
            waits.sort()
            for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                out[f"put->durable {name} us"] = waits[int(len(waits) * q)] / 1000
        return out


def written_bytes() -> int:
    """This process's ``write_bytes`` (/proc/self/io): what it made dirty, counted a whole
    page-cache folio at a time -- so it shows what each fdatasync has to write back."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


async def bench_read(root: Path, msgs: list[InnerMessage]) -> dict[str, float]:
    fresh(root)
    async with MessageStore(make_config(root, FlushDiskType.ASYNC_FLUSH)) as store:
        for m in msgs:
            store.put_message_nowait(m)
        await store.wait_dispatched()
        total = 0
        t0, c0 = time.perf_counter(), time.thread_time()
        for qid in range(QUEUES):
            offset = 0
            while True:
                res = store.get_message("g", TOPIC, qid, offset, 32)
                if not res.buffers:
                    break
                total += len(res.buffers)
                offset = res.next_begin_offset
                res.release()
        t1, c1 = time.perf_counter(), time.thread_time()
        assert total == len(msgs), (total, len(msgs))
        return {"read/s": total / (t1 - t0), "read/cpu-s": total / (c1 - c0)}


async def bench_dispatch_placement(root: Path, msgs: list[InnerMessage], threaded: bool) -> dict[str, float]:
    """Why dispatch runs on the event loop: the same work with the dispatcher in a second thread.

    Appends run on this thread; the dispatcher either runs on the same thread after every 256
    appends (what the event loop does while writers yield), or concurrently in a thread
    (creating its files inline).  Measured: time until everything is appended and dispatched.
    """
    import threading

    from apogee.store.dispatch import DONE, MORE

    fresh(root)
    async with MessageStore(make_config(root, FlushDiskType.ASYNC_FLUSH)) as store:
        put = store.put_message_nowait
        put(msgs[0])
        await store.wait_dispatched()
        clog, disp = store.commitlog, store.dispatcher
        stop = threading.Event()

        def run_dispatcher() -> None:
            while True:
                r = disp.dispatch(clog.max_offset, 2048, notify=False)
                if r == DONE:
                    if stop.is_set() and disp.offset >= clog.max_offset:
                        return
                    time.sleep(0.0005)
                elif r != MORE:
                    r.attach(r.create())

        t0 = time.perf_counter()
        worker = threading.Thread(target=run_dispatcher) if threaded else None
        if worker is not None:
            worker.start()
        if threaded:
            for m in msgs:
                put(m)
        else:
            for i, m in enumerate(msgs):
                put(m)
                if i & 255 == 255:
                    disp.dispatch_all_inline(clog.max_offset)
        t1 = time.perf_counter()
        if worker is not None:
            stop.set()
            worker.join()
        else:
            disp.dispatch_all_inline(clog.max_offset)
        t2 = time.perf_counter()
        n = len(msgs)
        return {"append/s": n / (t1 - t0), "total/s": n / (t2 - t0)}


def median_of(runs: int, fn: Callable[[], dict[str, float]]) -> dict[str, float]:
    results = [fn() for _ in range(runs)]
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def fmt(d: dict[str, float]) -> str:
    return "  ".join(f"{k}={v:,.0f}" if abs(v) >= 100 else f"{k}={v:.2f}" for k, v in d.items())


def rss_kib() -> tuple[int, int]:
    anon = file = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1])
            elif line.startswith("RssFile:"):
                file = int(line.split()[1])
    return anon, file


async def bench_rss(root: Path, gib: float) -> None:
    fresh(root)
    msgs = make_messages(4096, 1024)
    target = int(gib * (1 << 30))
    async with MessageStore(make_config(root, FlushDiskType.ASYNC_FLUSH)) as store:
        written = 0
        i = 0
        samples: list[tuple[float, int, int]] = []
        next_sample = 0
        t0 = time.perf_counter()
        while written < target:
            for _ in range(256):
                r, _ = store.put_message_nowait(msgs[i % len(msgs)])
                written += r.wrote_bytes
                i += 1
            await asyncio.sleep(0)
            if written >= next_sample:
                anon, file = rss_kib()
                samples.append((written / (1 << 30), anon, file))
                print(f"  {written / (1 << 30):5.2f} GiB  RssAnon {anon / 1024:7.1f} MiB  "
                      f"RssFile {file / 1024:7.1f} MiB", flush=True)
                next_sample += 256 << 20
        await store.wait_dispatched()
        elapsed = time.perf_counter() - t0
        anon, file = rss_kib()
        samples.append((written / (1 << 30), anon, file))
    base = samples[1][1] if len(samples) > 1 else samples[0][1]
    peak = max(s[1] for s in samples[1:]) if len(samples) > 1 else base
    print(f"wrote {written / (1 << 30):.2f} GiB ({i:,} msgs) in {elapsed:.1f} s; RssAnon after "
          f"the first 256 MiB {base / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, "
          f"growth {(peak - base) / 1024:.1f} MiB")
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=200_000, help="messages per ASYNC case")
    ap.add_argument("--sync-count", type=int, default=60_000, help="messages per SYNC case")
    ap.add_argument("--sync-long", type=int, default=64_000,
                    help="messages of the long SYNC case: past the ~40 MiB after which the kernel's fault "
                         "readahead would make 2 MiB page-cache folios (MappedFile.advise_random)")
    ap.add_argument("--dir", default="/work/.bench-store")
    ap.add_argument("--rss", action="store_true", help="only the resident-memory run")
    ap.add_argument("--rss-gib", type=float, default=5.0)
    ap.add_argument("--only", default="", help="comma list of cases: batch,nowait,async,sync,synclong,read,placement")
    args = ap.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    root = Path(args.dir)
    if args.rss:
        asyncio.run(bench_rss(root, args.rss_gib))
        return
    only = set(filter(None, args.only.split(",")))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.runs} runs")
    for size in (1024, 100):
        msgs = make_messages(args.count, size)
        sync_msgs = msgs[: args.sync_count]
        sync_one = msgs[: max(1, args.sync_count // 10)]
        batches = make_batches(msgs, 256)
        cases: list[tuple[str, str, Callable[[], dict[str, float]]]] = [
            ("batch", "ASYNC_FLUSH batches of 256, pure Python path ",
             lambda b=batches: asyncio.run(bench_batches(root, b, False))),
        ]
        if native is not None:
            cases.append(("batch", "ASYNC_FLUSH batches of 256, C path (_native) ",
                          lambda b=batches: asyncio.run(bench_batches(root, b, True))))
            for turn in (1, 4, 16):
                cases.append(("single", f"ASYNC_FLUSH single sends, C path, {turn:>2}/turn  ",
                              lambda msgs=msgs, t=turn: asyncio.run(bench_singles(root, msgs, t))))
        if size == 1024:
            cases.append(("populate", "page-cache population, 1 GiB, CPU per KiB   ",
                          lambda: bench_populate(root)))
        cases += [
            ("nowait", "ASYNC_FLUSH  1 writer  put_message_nowait        ",
             lambda msgs=msgs: asyncio.run(bench_append_nowait(root, msgs))),
            ("async", "ASYNC_FLUSH  1 writer  await put_message        ",
             lambda msgs=msgs: asyncio.run(bench_writers(root, msgs, FlushDiskType.ASYNC_FLUSH, 1, False))),
            ("async", "ASYNC_FLUSH 64 writers await put_message, yield",
             lambda msgs=msgs: asyncio.run(bench_writers(root, msgs, FlushDiskType.ASYNC_FLUSH, 64, True))),
            ("sync", "SYNC_FLUSH   1 writer  await put_message        ",
             lambda one=sync_one: asyncio.run(bench_writers(root, one, FlushDiskType.SYNC_FLUSH, 1, False))),
            ("sync", "SYNC_FLUSH  64 writers await put_message        ",
             lambda many=sync_msgs: asyncio.run(bench_writers(root, many, FlushDiskType.SYNC_FLUSH, 64, False))),
            ("read", "read get_message x32                          ",
             lambda msgs=msgs: asyncio.run(bench_read(root, msgs))),
            ("placement", "dispatch on the same thread every 256 puts   ",
             lambda msgs=msgs: asyncio.run(bench_dispatch_placement(root, msgs, False))),
            ("placement", "dispatch concurrently in a second thread     ",
             lambda msgs=msgs: asyncio.run(bench_dispatch_placement(root, msgs, True))),
        ]
        if size == 1024:
            long_run = msgs[: args.sync_long]
            cases.append(("synclong", "SYNC_FLUSH   1 writer, 64 MiB and on          ",
                          lambda r=long_run: asyncio.run(bench_writers(root, r, FlushDiskType.SYNC_FLUSH, 1, False))))
        for key, label, fn in cases:
            if only and key not in only:
                continue
            fn()  # warm-up run, discarded (first touch of fresh VM memory is slow)
            print(f"{size:>5} B {label}: {fmt(median_of(args.runs, fn))}", flush=True)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
