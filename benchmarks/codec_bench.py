"""Frames encoded and decoded per second for a typical SEND_MESSAGE request, both serialize types.

Run: .venv/bin/python benchmarks/codec_bench.py [--seconds 1.0] [--runs 5]
Prints the median of several timed runs; compare ratios within one run (the machine is noisy).

Then BODYCRC (the CRC-32 the broker computes over every stored body): zlib's against the
extension's carry-less multiplication (``native.crc32``), per body of 100 B, 1 KiB and 64 KiB.

``--large``: instead, a producer's auto-batch (one 563 KB SEND_BATCH_MESSAGE frame) read in
64 KiB pieces, as the broker reads it, in microseconds per frame -- with the allocator
thresholds the servers set (``cli/allocator.py``), or glibc's defaults with
``--default-allocator`` (run both: the setting is process-wide).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import zlib

from apogee.cli.allocator import keep_large_blocks
from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.remoting.codec import FrameDecoder, encode, encode_bytes
from apogee.remoting.codes import RequestCode, SerializeType
from apogee.remoting.command import RemotingCommand


def send_request(serialize_type: int) -> RemotingCommand:
    # What a producer sends for one 1 KiB message (SendMessageRequestHeader, code 10).
    ext = {
        "producerGroup": "please_rename_unique_group_name",
        "topic": "TopicTest",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "3",
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": (
            "KEYS\x01order-42\x02TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x017F000001A1B2C3D4E5F60718293A4B5C\x02"
        ),
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    return RemotingCommand(
        RequestCode.SEND_MESSAGE, opaque=12345, ext_fields=ext, body=b"x" * 1024,
        serialize_type=serialize_type,
    )


def rate(fn, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(1000):
            fn()
        n += 1000
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--large", action="store_true", help="large frames read in pieces (see above)")
    parser.add_argument("--default-allocator", action="store_true", help="with --large: glibc's defaults")
    args = parser.parse_args()
    if args.large:
        large_frames(args)
        return
    print(f"{'serialize':<10}{'op':<22}{'frames/s (median)':>20}{'MB/s':>10}")
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
        cmd = send_request(stype)
        frame = encode_bytes(cmd)
        batch = frame * 64

        def enc(cmd: RemotingCommand = cmd) -> None:
            encode(cmd)

        def dec(frame: bytes = frame) -> None:
            FrameDecoder().feed(frame)

        def dec_stream(batch: bytes = batch) -> None:
            FrameDecoder().feed(batch)

        ops = (("encode", enc, 1), ("decode (1 frame/read)", dec, 1), ("decode (64 frames/read)", dec_stream, 64))
        for label, fn, per_call in ops:
            runs = [rate(fn, args.seconds) * per_call for _ in range(args.runs)]
            med = statistics.median(runs)
            print(f"{stype.name:<10}{label:<22}{med:>20,.0f}{med * len(frame) / 1e6:>10.1f}")
    pull_body_decode(args)
    body_crc(args)


def body_crc(args: argparse.Namespace) -> None:
    """BODYCRC per body: zlib.crc32 beside native.crc32 (the broker's record writers call the
    latter's C function directly; through Python each call adds ~50 ns to both)."""
    print(f"\n{'BODYCRC':<10}{'body':>8}{'zlib ns':>10}{'native ns':>11}{'native GB/s':>13}")
    crcs = [("zlib", zlib.crc32)] + ([("native", native.crc32)] if native is not None else [])
    for size in (100, 1024, 65536):
        data = os.urandom(size)
        ns = {}
        for label, crc in crcs:
            runs = [rate(lambda crc=crc, data=data: crc(data), args.seconds / 2) for _ in range(args.runs)]
            ns[label] = 1e9 / statistics.median(runs)
        nat = ns.get("native", float("nan"))
        print(f"{'':<10}{size:>8}{ns['zlib']:>10,.0f}{nat:>11,.0f}{size / nat:>13.1f}")


def large_frames(args: argparse.Namespace) -> None:
    allocator = "glibc defaults" if args.default_allocator else "the servers' thresholds"
    if not args.default_allocator and not keep_large_blocks():
        allocator = "glibc defaults (mallopt unavailable)"
    cmd = send_request(SerializeType.JSON)
    cmd.code = RequestCode.SEND_BATCH_MESSAGE
    cmd.body = b"x" * 563_000
    stream = encode_bytes(cmd) * 20
    pieces = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]

    def once() -> float:
        decoder = FrameDecoder(max_frame_size=16 << 20)
        frames = 0
        t0 = time.perf_counter()
        for _ in range(5):
            for piece in pieces:
                frames += len(decoder.feed(piece))
        return (time.perf_counter() - t0) / frames * 1e6

    once()  # warm-up
    runs = [once() for _ in range(args.runs)]
    print(f"563 KB frames read in 64 KiB pieces, {allocator}: {statistics.median(runs):,.1f} us per frame "
          f"(median of {args.runs})")


def pull_body_decode(args: argparse.Namespace) -> None:
    """A PULL response body of 32 stored 1 KiB records decoded into messages (the consumer's
    hot path): the C decoder (apogee._native) next to the pure-Python reference."""
    body = b"".join(
        mc.encode_record(topic="BenchTopic", body=b"x" * 1024, queue_offset=i, physical_offset=i * 1200,
                         properties=f"TAGS\x01TagA\x02UNIQ_KEY\x01{i:032X}\x02CLUSTER\x01DefaultCluster")
        for i in range(32)
    )
    print(f"\n{'PULL body of 32 x 1 KiB records':<32}{'messages/s (median)':>20}")
    decoders = [("pure Python", mc._decode_records_fast_py)]
    if native is not None:
        decoders.append(("C (_native)", mc.decode_records_fast))
    for label, decode in decoders:
        runs = [rate(lambda decode=decode: decode(body), args.seconds) * 32 for _ in range(args.runs)]
        print(f"  {label:<30}{statistics.median(runs):>20,.0f}")


if __name__ == "__main__":
    main()
