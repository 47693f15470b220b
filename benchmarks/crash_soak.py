"""SIGKILL soak: acknowledged messages survive a broker crash (issue 16, finding 1).

Each trial, with one shared ``apogee namesrv``:

1. ``apogee broker`` on a fresh store (broker.conf: ``flushDiskType``, ``autoCreateTopicEnable``,
   small CommitLog / ConsumeQueue / index files so that files roll every few hundred ms);
2. a producer sends to a new, auto-created topic from several threads, single sends with a batch
   now and then, and prints each key once its SendResult is OK: the RocketMQ C++ client
   (``crash_soak_cpp.py`` under ``.venv-interop``) or Apogee's own (this script, ``_produce``);
3. the broker is SIGKILLed at a random moment (a random time; right after a CommitLog roll;
   right after a ConsumeQueue roll), then the producer;
4. the broker restarts on the same store and a push consumer of a new group (same client kind)
   reads until it has every acknowledged key or ``--consume-timeout`` passes;
5. the broker stops cleanly and the store is checked offline: the CommitLog is a clean prefix
   of valid records, every ConsumeQueue entry points at the record of its topic, queue and
   queue offset, and no queue misses a record of the log.

SYNC_FLUSH passes with 0 acknowledged messages lost and every body byte-identical.  ASYNC_FLUSH
(a SIGKILL keeps the page cache, so nothing should be lost either) must at least leave the
clean prefix and valid ConsumeQueues.  On any failure the trial's directory is kept (the store
as the crash left it in ``crashed/``, as recovery left it in ``store/``) and a report prints
each lost message's queue, offset and CommitLog position, what the CommitLog, ConsumeQueue and
checkpoint hold there, and the restarted broker's recovery log.

Run (background; ~5 s a trial):

    .venv/bin/python benchmarks/crash_soak.py --trials 200 --client cpp --flush SYNC_FLUSH
    .venv/bin/python benchmarks/crash_soak.py --trials 200 --client both --flush both
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import mmap
import os
import random
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from crash_soak_cpp import add_producer_arguments, body_for, key_of, send_plan  # noqa: E402

from apogee.common import message_codec as mc  # noqa: E402
from apogee.store.layout import checkpoint as cp_layout  # noqa: E402
from apogee.store.layout.cq_unit import BLANK_SIZE, CQ_UNIT, CQ_UNIT_SIZE  # noqa: E402
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

INTEROP_PYTHON = ROOT / ".venv-interop" / "bin" / "python"
CPP_SCRIPT = ROOT / "benchmarks" / "crash_soak_cpp.py"
KILL_MOMENTS = ("time", "commitlog-roll", "cq-roll")
RECOVERY_STARTS = ("safe point", "checkpoint file", "offset 0")
LOADED = re.compile(r"store loaded and recovered in ([0-9.]+) s")


@dataclass
class Settings:
    commitlog_size: int = 256 * 1024
    cq_entries: int = 200
    index_entries: int = 4000
    threads: int = 4
    batch_every: int = 20
    batch_size: int = 8
    send_min_s: float = 0.3
    send_max_s: float = 2.0
    consume_timeout_s: float = 60.0
    same_port: bool = False  # restart the broker on the port it had
    consumer_delay_s: float = 0.0  # wait this long after the restart before consuming


@dataclass
class Trial:
    number: int
    client: str
    flush: str
    moment: str
    directory: Path
    topic: str
    acked: list[str] = field(default_factory=list)
    received: dict[str, bool] = field(default_factory=dict)  # key -> body identical
    problems: list[str] = field(default_factory=list)
    recovery_log: str = ""
    kill_after_s: float = 0.0

    @property
    def lost(self) -> list[str]:
        return [k for k in dict.fromkeys(self.acked) if k not in self.received]

    @property
    def mismatched(self) -> list[str]:
        """Keys delivered with a body other than the one sent."""
        return [k for k, ok in self.received.items() if not ok]

    @property
    def recovery_start(self) -> str:
        """Where the restarted broker's crash recovery began (RECOVERY_STARTS)."""
        if "crash recovery starts at offset" in self.recovery_log:
            return "safe point"
        if "crash recovery starts at file" in self.recovery_log:
            return "checkpoint file"
        return "offset 0"

    @property
    def recovery_s(self) -> float:
        """The restarted store's load and recovery time (its log line)."""
        match = LOADED.search(self.recovery_log)
        return float(match.group(1)) if match else float("nan")

    def summary(self) -> dict[str, object]:
        return {"trial": self.number, "client": self.client, "flush": self.flush, "moment": self.moment,
                "kill_after_s": round(self.kill_after_s, 3), "acked": len(set(self.acked)),
                "received": len(self.received), "lost": len(self.lost), "mismatched": len(self.mismatched),
                "recovery_start": self.recovery_start, "recovery_s": self.recovery_s,
                "failed": bool(self.problems)}


# --- the store, read offline -------------------------------------------------------------------


@dataclass
class Record:
    phys: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    key: str
    body_ok: bool


def _segments(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit())


def _map(path: Path) -> bytes:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            return mm[:]


def scan_commitlog(store: Path) -> tuple[dict[int, Record], list[str], int]:
    """Walk the CommitLog from its first file: the records of the valid prefix, problems (bytes
    after the prefix's end), and the end offset."""
    records: dict[int, Record] = {}
    problems: list[str] = []
    files = _segments(store / "commitlog")
    end = int(files[0].name) if files else 0
    done = False
    for path in files:
        start = int(path.name)
        data = _map(path)
        if done:
            if data.strip(b"\x00"):
                problems.append(f"CommitLog file {path.name} holds data after the log's end {end}")
            continue
        if start != end:
            problems.append(f"CommitLog file {path.name} does not follow offset {end}")
            break
        pos = 0
        while pos < len(data):
            size = mc.check_record(data, pos, len(data), start + pos, check_crc=True)
            if size == mc.RECORD_BLANK:
                pos = len(data)
                break
            if size <= 0:
                break
            msg = mc.decode_record(data, pos, inflate=False)
            key = key_of(msg.body)
            records[start + pos] = Record(start + pos, size, msg.topic, msg.queue_id, msg.queue_offset,
                                          key, msg.body == body_for(key))
            pos += size
        end = start + pos
        if pos < len(data):
            if data[pos:].strip(b"\x00"):
                problems.append(f"CommitLog: non-zero bytes after the log's end {end} (torn or stale data kept)")
            done = True
    return records, problems, end


def scan_consume_queues(store: Path, records: dict[int, Record]) -> list[str]:
    """Every entry points at the record of its topic, queue and offset; no hole; no record of
    the log missing from its queue."""
    problems: list[str] = []
    expected: dict[tuple[str, int], int] = {}
    for rec in records.values():
        key = (rec.topic, rec.queue_id)
        expected[key] = max(expected.get(key, 0), rec.queue_offset + 1)
    seen: dict[tuple[str, int], int] = {}
    root = store / "consumequeue"
    for topic_dir in sorted(root.iterdir()) if root.is_dir() else []:
        for qdir in sorted(topic_dir.iterdir()):
            qid = int(qdir.name)
            entries: list[tuple[int, int, int, int]] = []
            for path in _segments(qdir):
                first = int(path.name) // CQ_UNIT_SIZE
                for i, (phys, size, tags) in enumerate(CQ_UNIT.iter_unpack(_map(path))):
                    entries.append((first + i, phys, size, tags))
            while entries and entries[-1][1:3] == (0, 0):
                entries.pop()
            for qoff, phys, size, _tags in entries:
                if size == BLANK_SIZE and phys == 0:
                    continue
                rec = records.get(phys)
                where = f"ConsumeQueue {topic_dir.name}-{qid} entry {qoff} (phys {phys}, size {size})"
                if rec is None:
                    problems.append(f"{where}: no record starts there")
                elif (rec.topic, rec.queue_id, rec.queue_offset, rec.size) != (topic_dir.name, qid, qoff, size):
                    problems.append(f"{where}: points at {rec.topic}-{rec.queue_id} offset {rec.queue_offset} "
                                    f"size {rec.size}")
            seen[(topic_dir.name, qid)] = entries[-1][0] + 1 if entries else 0
    for key, n in expected.items():
        if seen.get(key, 0) < n:
            problems.append(f"ConsumeQueue {key[0]}-{key[1]} ends at {seen.get(key, 0)}, the log holds offset {n - 1}")
    return problems[:50]


def describe(store: Path, topic: str, queue_id: int, queue_offset: int, phys: int) -> list[str]:
    """What the files of ``store`` hold for one message."""
    out = []
    try:
        cp = cp_layout.unpack((store / "checkpoint").read_bytes())
        out.append(f"checkpoint physic={cp[0]} logics={cp[1]} index={cp[2]}")
    except OSError as exc:
        out.append(f"checkpoint: {exc}")
    qdir = store / "consumequeue" / topic / str(queue_id)
    pos = queue_offset * CQ_UNIT_SIZE
    for path in _segments(qdir):
        start = int(path.name)
        data = _map(path)
        if start <= pos < start + len(data):
            out.append(f"ConsumeQueue entry {queue_offset}: {CQ_UNIT.unpack_from(data, pos - start)} "
                       f"(file {path.name})")
            break
    else:
        out.append(f"ConsumeQueue entry {queue_offset}: no file holds it ({[p.name for p in _segments(qdir)]})")
    for path in _segments(store / "commitlog"):
        start = int(path.name)
        data = _map(path)
        if start <= phys < start + len(data):
            rel = phys - start
            size = mc.check_record(data, rel, len(data), phys)
            head = struct.unpack_from(">iiiiiqq", data, rel) if rel + 36 <= len(data) else None
            out.append(f"CommitLog at {phys}: check_record={size} head(size,magic,crc,qid,flag,qoff,phys)={head}")
            break
    else:
        out.append(f"CommitLog at {phys}: no file holds it")
    return out


# --- producers and consumers -------------------------------------------------------------------


def start_producer(trial: Trial, namesrv: str, s: Settings) -> subprocess.Popen[str]:
    common = [namesrv, trial.topic, "--tag", f"t{trial.number}", "--threads", str(s.threads),
              "--batch-every", str(s.batch_every), "--batch-size", str(s.batch_size)]
    if trial.client == "cpp":
        cmd = [str(INTEROP_PYTHON), str(CPP_SCRIPT), "produce", *common]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "_produce", *common]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=tempfile.gettempdir(), start_new_session=True)


async def _apogee_produce(args: argparse.Namespace) -> None:
    from apogee.client import Message, Producer, SendStatus

    producer = Producer(f"soak_producer_{args.tag}", args.namesrv, send_timeout_ms=3000)
    await producer.start()
    print("started", flush=True)

    def message(key: str) -> Message:
        msg = Message(args.topic, body_for(key))
        msg.tags = "soak"
        msg.keys = [key]
        return msg

    async def sender(thread: int) -> None:
        for keys in send_plan(args.tag, thread, args.batch_every, args.batch_size):
            try:
                if len(keys) == 1:
                    results = [await producer.send(message(keys[0]))]
                else:
                    results = await producer.send_batch([message(k) for k in keys])
            except Exception:  # the broker is gone: keep trying until killed
                await asyncio.sleep(0.01)
                continue
            if all(r.status is SendStatus.SEND_OK for r in results):
                print("\n".join(f"ack {k}" for k in keys), flush=True)

    await asyncio.gather(*(sender(t) for t in range(args.threads)))


def consume_cpp(trial: Trial, namesrv: str, s: Settings) -> None:
    keys_file = trial.directory / "acked.txt"
    keys_file.write_text("\n".join(dict.fromkeys(trial.acked)) + "\n")
    proc = subprocess.run(
        [str(INTEROP_PYTHON), str(CPP_SCRIPT), "consume", namesrv, trial.topic, f"soak_consumer_{trial.number}",
         "--keys", str(keys_file), "--timeout", str(s.consume_timeout_s)],
        capture_output=True, text=True, cwd=tempfile.gettempdir(), timeout=s.consume_timeout_s + 60,
    )
    for line in proc.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if "key" in event:
            trial.received[event["key"]] = trial.received.get(event["key"], True) and event["ok"]


async def _consume_apogee(trial: Trial, namesrv: str, s: Settings) -> None:
    from apogee.client import ConsumeResult, PushConsumer

    wanted = set(trial.acked)
    all_in = asyncio.Event()
    if not wanted:
        return

    async def listener(msgs: list, _ctx: object) -> ConsumeResult:
        for msg in msgs:
            key = key_of(msg.body)
            trial.received[key] = trial.received.get(key, True) and msg.body == body_for(key)
            wanted.discard(key)
        if not wanted:
            all_in.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(f"soak_consumer_{trial.number}", namesrv, listener=listener)
    consumer.subscribe(trial.topic, "*")
    async with consumer:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_in.wait(), s.consume_timeout_s)


# --- one trial -----------------------------------------------------------------------------------


def broker_conf(path: Path, flush: str, s: Settings) -> None:
    path.write_text("\n".join([
        f"flushDiskType={flush}",
        "autoCreateTopicEnable=true",
        f"mappedFileSizeCommitLog={s.commitlog_size}",
        f"mappedFileSizeConsumeQueue={s.cq_entries * CQ_UNIT_SIZE}",
        f"maxIndexNum={s.index_entries}",
        f"maxHashSlotNum={max(1, s.index_entries // 4)}",
        "flushIntervalConsumeQueue=200",
        "",
    ]))


def start_broker(namesrv: str, store: Path, conf: Path, port: int = 0) -> ServerProcess:
    return ServerProcess(["broker", "-n", namesrv, "--listen", f"127.0.0.1:{port}", "--store-dir", str(store),
                          "--broker-ip", "127.0.0.1", "-c", str(conf)], ready_timeout_s=120).start()


def _newest(directory: Path) -> str:
    names = [p.name for p in directory.rglob("*") if p.is_file() and p.name.isdigit()] if directory.exists() else []
    return f"{len(names)}:{max(names, default='')}"


def wait_kill_moment(trial: Trial, store: Path, acks_seen: threading.Event, rng: random.Random, s: Settings) -> None:
    """Return at the moment to kill the broker (see KILL_MOMENTS)."""
    acks_seen.wait(30)
    start = time.monotonic()
    limit = rng.uniform(s.send_min_s, s.send_max_s)
    if trial.moment == "time":
        time.sleep(limit)
        trial.kill_after_s = time.monotonic() - start
        return
    watched = store / ("commitlog" if trial.moment == "commitlog-roll" else "consumequeue")
    time.sleep(limit)
    before = _newest(watched)
    while time.monotonic() - start < limit + s.send_max_s:
        if _newest(watched) != before:
            break
        time.sleep(0.0005)
    trial.kill_after_s = time.monotonic() - start


def run_trial(trial: Trial, namesrv: str, s: Settings, rng: random.Random) -> None:
    trial.directory.mkdir(parents=True)
    store = trial.directory / "store"
    conf = trial.directory / "broker.conf"
    broker_conf(conf, trial.flush, s)
    broker = start_broker(namesrv, store, conf)
    producer = start_producer(trial, namesrv, s)
    acks_seen = threading.Event()
    lines: list[str] = []

    def read_acks() -> None:
        assert producer.stdout is not None
        for line in producer.stdout:
            lines.append(line)
            if line.startswith("ack "):
                acks_seen.set()

    reader = threading.Thread(target=read_acks, daemon=True)
    reader.start()
    try:
        wait_kill_moment(trial, store, acks_seen, rng, s)
        broker.kill()
        os.killpg(producer.pid, signal.SIGKILL)
        producer.wait()
        reader.join(10)
    finally:
        if producer.poll() is None:
            os.killpg(producer.pid, signal.SIGKILL)
            producer.wait()
        broker.close()
    trial.acked = [ln.split()[1] for ln in lines
                   if ln.startswith("ack ") and ln.endswith("\n") and len(ln.split()) == 2]
    shutil.copytree(store, trial.directory / "crashed")
    broker = start_broker(namesrv, store, conf, broker.port if s.same_port else 0)
    if s.consumer_delay_s:
        time.sleep(s.consumer_delay_s)
    try:
        if trial.client == "cpp":
            consume_cpp(trial, namesrv, s)
        else:
            asyncio.run(_consume_apogee(trial, namesrv, s))
    finally:
        broker.stop()
        trial.recovery_log = "\n".join(
            ln for ln in broker.stderr().splitlines() if "apogee.store" in ln or "Traceback" in ln or "Error" in ln
        )
        broker.close()
    records, problems, _end = scan_commitlog(store)
    trial.problems = problems + scan_consume_queues(store, records)
    bad_bodies = trial.mismatched
    if bad_bodies:
        trial.problems.append(f"{len(bad_bodies)} bodies differ from what was sent, e.g. {bad_bodies[:5]}")
    if trial.lost:
        trial.problems.append(f"{len(trial.lost)} of {len(set(trial.acked))} acknowledged messages not delivered")
        by_key = {r.key: r for r in records.values() if r.topic == trial.topic}
        for key in trial.lost[:20]:
            rec = by_key.get(key)
            if rec is None:
                trial.problems.append(f"  {key}: not in the recovered CommitLog")
                continue
            trial.problems.append(f"  {key}: {trial.topic}-{rec.queue_id} offset {rec.queue_offset} at CommitLog "
                                  f"{rec.phys} (size {rec.size})")
            for label, d in (("after recovery", store), ("as crashed", trial.directory / "crashed")):
                for line in describe(d, trial.topic, rec.queue_id, rec.queue_offset, rec.phys):
                    trial.problems.append(f"    {label}: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="trials per client and flush mode")
    parser.add_argument("--client", choices=["cpp", "apogee", "both"], default="both")
    parser.add_argument("--flush", choices=["SYNC_FLUSH", "ASYNC_FLUSH", "both"], default="SYNC_FLUSH")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=None, help="where trials run (kept on failure)")
    parser.add_argument("--threads", type=int, default=Settings.threads)
    parser.add_argument("--commitlog-size", type=int, default=Settings.commitlog_size)
    parser.add_argument("--cq-entries", type=int, default=Settings.cq_entries)
    parser.add_argument("--send-min", type=float, default=Settings.send_min_s, help="shortest send phase (s)")
    parser.add_argument("--send-max", type=float, default=Settings.send_max_s, help="longest send phase (s)")
    parser.add_argument("--batch-every", type=int, default=Settings.batch_every,
                        help="every Nth send of a thread is a batch (0: single sends only)")
    parser.add_argument("--moments", default=",".join(KILL_MOMENTS), help="kill moments to draw from")
    parser.add_argument("--same-port", action="store_true", help="restart the broker on the port it had")
    parser.add_argument("--consumer-delay", type=float, default=0.0, help="seconds between restart and consumer")
    parser.add_argument("--stop-on-failure", action="store_true")
    args = parser.parse_args()
    if args.client != "apogee" and not INTEROP_PYTHON.exists():
        sys.exit(f"{INTEROP_PYTHON} is missing: run `make interop`")
    s = Settings(commitlog_size=args.commitlog_size, cq_entries=args.cq_entries, threads=args.threads,
                 send_min_s=args.send_min, send_max_s=args.send_max, batch_every=args.batch_every,
                 same_port=args.same_port, consumer_delay_s=args.consumer_delay)
    moments = args.moments.split(",")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="apogee-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    clients = ["cpp", "apogee"] if args.client == "both" else [args.client]
    flushes = ["SYNC_FLUSH", "ASYNC_FLUSH"] if args.flush == "both" else [args.flush]
    print(f"seed {seed}, workdir {workdir}", flush=True)
    namesrv = start_namesrv(workdir / "namesrv")
    totals: dict[tuple[str, str], Totals] = {}
    number = 0
    try:
        for flush in flushes:
            for client in clients:
                tot = totals.setdefault((client, flush), Totals())
                for _ in range(args.trials):
                    number += 1
                    trial = Trial(number, client, flush, rng.choice(moments), workdir / f"trial-{number}",
                                  f"Soak{number}_{rng.randrange(1 << 24):06x}")
                    t0 = time.monotonic()
                    run_trial(trial, namesrv.addr, s, rng)
                    tot.add(trial)
                    status = "FAILED" if trial.problems else "ok"
                    print(f"trial {number} {client} {flush} kill={trial.moment}@{trial.kill_after_s:.2f}s "
                          f"acked={len(set(trial.acked))} received={len(trial.received)} "
                          f"lost={len(trial.lost)} mismatched={len(trial.mismatched)} {status} "
                          f"({time.monotonic() - t0:.1f} s) recovery={trial.recovery_start} "
                          f"in {trial.recovery_s:.3f} s", flush=True)
                    with open(workdir / "results.jsonl", "a") as f:
                        f.write(json.dumps(trial.summary()) + "\n")
                    if trial.problems:
                        print("\n".join("  " + p for p in trial.problems), flush=True)
                        print("  recovery log:\n" + "\n".join("    " + ln for ln in trial.recovery_log.splitlines()),
                              flush=True)
                        print(f"  kept {trial.directory}", flush=True)
                        if args.stop_on_failure:
                            return
                    else:
                        shutil.rmtree(trial.directory, ignore_errors=True)
    finally:
        namesrv.close()
        print()
        print(summary_table(totals))


@dataclass
class Totals:
    """The figures of one (client, flush) pair over its trials."""

    trials: int = 0
    failed: int = 0
    acked: int = 0
    lost: int = 0
    mismatched: int = 0
    moments: Counter[str] = field(default_factory=Counter)
    starts: Counter[str] = field(default_factory=Counter)
    recovery_s: list[float] = field(default_factory=list)

    def add(self, trial: Trial) -> None:
        self.trials += 1
        self.failed += bool(trial.problems)
        self.acked += len(set(trial.acked))
        self.lost += len(trial.lost)
        self.mismatched += len(trial.mismatched)
        self.moments[trial.moment] += 1
        self.starts[trial.recovery_start] += 1
        self.recovery_s.append(trial.recovery_s)


def summary_table(totals: dict[tuple[str, str], Totals]) -> str:
    """A Markdown table of the figures (docs/store.md, "The SIGKILL soak")."""
    rows = ["| client | flush | trials | failed | acknowledged | lost | bodies differing | kill moments "
            "(time / CommitLog roll / CQ roll) | recovery from a safe point / checkpoint file / offset 0 "
            "| median recovery |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for (client, flush), t in totals.items():
        moments = " / ".join(str(t.moments[m]) for m in KILL_MOMENTS)
        starts = " / ".join(str(t.starts[k]) for k in RECOVERY_STARTS)
        median = statistics.median(t.recovery_s) if t.recovery_s else 0.0
        rows.append(f"| {client} | {flush} | {t.trials} | {t.failed} | {t.acked} | {t.lost} | {t.mismatched} "
                    f"| {moments} | {starts} | {median * 1000:.0f} ms |")
    return "\n".join(rows)


def _produce_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    add_producer_arguments(parser)
    asyncio.run(_apogee_produce(parser.parse_args(argv)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_produce":
        _produce_main(sys.argv[2:])
    else:
        main()
