"""Restart time of a broker after a crash, for a CommitLog of many GiB (issue 16).

1. A writer process fills a store (default settings: 1 GiB CommitLog files) with client
   batches through the C path (``native.write_batch``): 256 messages of 1 KiB per batch, each
   with KEYS and UNIQ_KEY (so the index is built too), over 8 queues, letting the dispatcher
   catch up every 64 batches (as the broker's loop interleaves it), until ``--gib`` GiB are
   written; it keeps writing at full speed and is SIGKILLed ``--kill-after`` s later.
2. ``apogee broker`` (with an ``apogee namesrv``) starts on that store; the time from launch to
   its ready line is the restart time, recovery included.  The broker's recovery lines are shown.
3. The broker is stopped cleanly and started again: the same figure for a clean restart.

Run (needs --gib + 2 GiB of disk under --dir):

    .venv/bin/python benchmarks/recovery_bench.py --gib 5
    .venv/bin/python benchmarks/recovery_bench.py --gib 5 --src /path/to/other/src   # another version's broker

Every server binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

BATCH = 256
BODY = 1024
QUEUES = 8


async def _write(root: Path, gib: float) -> None:
    """The writer: fill, report, then trickle until killed."""
    from apogee.common import message_codec as mc
    from apogee.common.accel import native
    from apogee.store import InnerBatch, MessageStore, StoreConfig

    assert native is not None, "the C extension is needed (make install)"
    store = MessageStore(StoreConfig(store_path_root_dir=str(root)))
    await store.start()
    body = os.urandom(BODY)
    props = "CLUSTER\x01DefaultCluster"
    target = int(gib * (1 << 30))
    n = 0
    t0 = time.perf_counter()

    def batch() -> InnerBatch:
        nonlocal n
        items = [(0, body, f"TAGS\x01TagA\x02KEYS\x01k{n + i}\x02UNIQ_KEY\x01U{n + i:016d}") for i in range(BATCH)]
        n += BATCH
        raw = mc.encode_batch(items)
        scan = native.scan_batch(raw, props.encode(), 4 << 20)
        return InnerBatch("RecoveryBench", n // BATCH % QUEUES, [], props, born_host=("127.0.0.1", 1),
                          store_host=("127.0.0.1", 10911), raw=raw, raw_scan=scan)

    reported = False
    while True:
        result, _ = store.put_messages_nowait(batch())
        assert result.ok, result
        if n % (BATCH * 64) == 0:
            await store.wait_dispatched()
        if not reported and store.max_phy_offset >= target:
            took = time.perf_counter() - t0
            print(f"wrote {store.max_phy_offset / (1 << 30):.2f} GiB ({n} messages) in {took:.1f} s", flush=True)
            print("writing on", flush=True)
            reported = True


def restart(namesrv: str, store: Path, src: Path | None) -> tuple[float, ServerProcess]:
    env = {"PYTHONPATH": str(src)} if src else None
    broker = ServerProcess(["broker", "-n", namesrv, "--listen", "127.0.0.1:0", "--store-dir", str(store),
                            "--broker-ip", "127.0.0.1"], ready_timeout_s=600, env=env)
    t0 = time.perf_counter()
    broker.start()
    return time.perf_counter() - t0, broker


def recovery_lines(broker: ServerProcess) -> str:
    return "\n".join("    " + ln for ln in broker.stderr().splitlines()
                     if "apogee.store" in ln or "ready" in ln or "apogee.cli" in ln)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=5.0)
    ap.add_argument("--dir", type=Path, default=Path("/work/.bench-recovery"))
    ap.add_argument("--src", type=Path, default=None, help="run the restarted broker from this src directory")
    ap.add_argument("--kill-after", type=float, default=0.5, help="seconds of writing past --gib before SIGKILL")
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards")
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    store = args.dir / "store"
    store.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, __file__, "_write", str(store), str(args.gib)],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    for line in writer.stdout:
        print("writer:", line.rstrip(), flush=True)
        if line.startswith("writing on"):
            break
    time.sleep(args.kill_after)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    size = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
    print(f"SIGKILLed the writer; CommitLog files: {size / (1 << 30):.2f} GiB", flush=True)
    namesrv = start_namesrv(args.dir / "namesrv")
    try:
        took, broker = restart(namesrv.addr, store, args.src)
        print(f"restart after the crash: {took:.2f} s to ready\n{recovery_lines(broker)}", flush=True)
        broker.close()
        took, broker = restart(namesrv.addr, store, args.src)
        print(f"clean restart: {took:.2f} s to ready\n{recovery_lines(broker)}", flush=True)
        broker.close()
    finally:
        namesrv.close()
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_write":
        asyncio.run(_write(Path(sys.argv[2]), float(sys.argv[3])))
    else:
        main()
