"""The RocketMQ C++ client's side of ``crash_soak.py`` (run by ``.venv-interop/bin/python``).

    produce NS TOPIC --tag T [--threads 4] [--batch-every 20] [--batch-size 8]
        send until killed; one line ``ack <key>`` per message once its SendResult is OK
    consume NS TOPIC GROUP --keys FILE [--timeout 60]
        a PushConsumer in a new group; one JSON line per message received, until every key
        of FILE (one per line) arrived or the timeout passed

Bodies are ASCII and derived from their key (``body_for``), so the driver checks every
delivered body byte for byte without keeping what was sent.  No ``apogee`` import: the C++
client's wheel lives in its own virtual environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator


def body_for(key: str) -> bytes:
    """The body sent under ``key``: the key, then 0..600 bytes of printable filler."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    length = int(digest[:4], 16) % 601
    filler = (digest * (length // len(digest) + 1))[:length]
    return f"{key}|{filler}".encode()


def key_of(body: bytes) -> str:
    return body.split(b"|", 1)[0].decode(errors="replace")


def send_plan(tag: str, thread: int, batch_every: int, batch_size: int) -> Iterator[list[str]]:
    """The keys one sending thread sends, a send at a time: one key (a single send) or, every
    ``batch_every``-th send, ``batch_size`` keys (a batch).  Both producers follow it."""
    seq = 0
    while True:
        count = batch_size if batch_every and seq % batch_every == batch_every - 1 else 1
        yield [f"{tag}-{thread}-{seq + i}" for i in range(count)]
        seq += count


_out_lock = threading.Lock()


def emit(line: str) -> None:
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def produce(args: argparse.Namespace) -> None:
    from rocketmq.client import Message, Producer, SendStatus

    producer = Producer(f"soak_producer_{args.tag}", timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    emit("started")

    def message(key: str) -> Message:
        msg = Message(args.topic)
        msg.set_keys(key)
        msg.set_tags("soak")
        msg.set_body(body_for(key))
        return msg

    def sender(thread: int) -> None:
        for keys in send_plan(args.tag, thread, args.batch_every, args.batch_size):
            try:
                if len(keys) == 1:
                    result = producer.send_sync(message(keys[0]))
                else:
                    result = producer.send_batch([message(k) for k in keys])
            except Exception as exc:  # the broker is gone: keep trying until killed
                emit(f"error {exc!s:.80}")
                time.sleep(0.01)
                continue
            if result.status == SendStatus.OK:
                emit("\n".join(f"ack {k}" for k in keys))

    threads = [threading.Thread(target=sender, args=(t,), daemon=True) for t in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def consume(args: argparse.Namespace) -> None:
    from rocketmq.client import PushConsumer, RecvMessage
    from rocketmq.ffi import dll

    with open(args.keys) as f:
        wanted = {line.strip() for line in f if line.strip()}
    lock = threading.Lock()
    missing = set(wanted)

    def on_message(_consumer: object, handle: object) -> int:
        msg = RecvMessage(handle)
        body = msg.body if isinstance(msg.body, bytes) else msg.body.encode()
        key = key_of(body)
        emit(json.dumps({"key": key, "ok": body == body_for(key), "queue": msg.queue_id,
                         "offset": msg.queue_offset}))
        with lock:
            missing.discard(key)
        return 0  # CONSUME_SUCCESS

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    dll.Subscribe(consumer._handle, args.topic.encode(), b"*")
    consumer._register_callback(on_message)
    consumer.start()
    deadline = time.time() + args.timeout
    try:
        while time.time() < deadline:
            with lock:
                if not missing:
                    break
            time.sleep(0.02)
    finally:
        consumer.shutdown()
    emit(json.dumps({"done": True, "missing": len(missing)}))


def add_producer_arguments(parser: argparse.ArgumentParser) -> None:
    """What both soak producers take (this one and ``crash_soak.py _produce``)."""
    parser.add_argument("namesrv")
    parser.add_argument("topic")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch-every", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    add_producer_arguments(p)
    p.add_argument("--send-timeout-ms", type=int, default=3000)
    c = sub.add_parser("consume")
    c.add_argument("namesrv")
    c.add_argument("topic")
    c.add_argument("group")
    c.add_argument("--keys", required=True)
    c.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    {"produce": produce, "consume": consume}[args.command](args)


if __name__ == "__main__":
    main()
