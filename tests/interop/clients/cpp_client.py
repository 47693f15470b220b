"""Drive the real Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) from the command line.

Runs inside its own virtual environment (``.venv-interop``): its import name ``rocketmq``
clashes with other packages, so the tests call this file as a subprocess.  Every result is
one JSON line on stdout; the tests parse them.

    (every command: [--access-key AK --secret-key SK [--channel C]] signs requests, ACL)
    produce  NS TOPIC --count N --mode sync|async|oneway|orderly|batch [--batch-size B] [--tags T] [--keys-prefix K]
             [--delay-level L] [--prop k=v] [--body-size B]
    consume  NS TOPIC GROUP --expect N|--expect-file F [--tags EXPR] [--orderly] [--broadcast] [--fail-first]
             [--timeout S] [--instance NAME]
    pull     NS TOPIC GROUP --expect N [--timeout S]
    bench-send     NS TOPIC --count N --mode sync|async [--body-size B] [--warmup N]   (one summary line)
    bench-consume  NS TOPIC GROUP --expect N                              (one summary line)
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage
from rocketmq.ffi import MessageModel, dll

CONSUME_SUCCESS = 0
RECONSUME_LATER = 1


_emit_lock = threading.Lock()


def emit(**fields: object) -> None:
    """One JSON line on stdout; the C++ client calls listeners on several threads, and a
    long line written by two threads at once would interleave."""
    line = json.dumps(fields) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def shut_down(client) -> None:
    """Shut ``client`` down, first saying whether its work ended without an exception: the
    C++ client 0.4.4 sometimes aborts inside its own shutdown (an uncaught
    ``boost::thread_interrupted`` from a thread it interrupts, a known race of the library),
    and the harness accepts that abort only once the work was finished and reported."""
    if sys.exc_info()[0] is None:
        emit(event="finished")
    client.shutdown()


def message_fields(msg) -> dict:
    props = {}
    for name in ("color", "seq", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "UNIQ_KEY",
                 "CLUSTER", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL"):
        value = msg.get_property(name)
        if value:
            props[name] = value.decode() if isinstance(value, bytes) else value

    def text(v):
        return v.decode() if isinstance(v, bytes) else v

    return {
        "id": text(msg.id),
        "topic": text(msg.topic),
        "tags": text(msg.tags),
        "keys": text(msg.keys),
        "body": text(msg.body),
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
        "received_ms": int(time.time() * 1000),
        "props": props,
    }


def build(topic: str, i: int, args) -> Message:
    msg = Message(topic)
    if args.tags:
        msg.set_tags(args.tags.split(",")[i % len(args.tags.split(","))])
    msg.set_keys(f"{args.keys_prefix}{i}")
    body = f"body-{i}"
    if args.body_size:
        body = body.ljust(args.body_size, "x")
    msg.set_body(body)
    msg.set_property("seq", str(i))
    for kv in args.prop or []:
        k, _, v = kv.partition("=")
        msg.set_property(k, v)
    if args.delay_level:
        msg.set_delay_time_level(args.delay_level)
    return msg


def credentials(client, args) -> None:
    """ACL: sign every request with --access-key/--secret-key (the C++ client's channel
    defaults to ALIYUN; it is signed as any other field)."""
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, args.channel)


def warm_up(producer, args) -> None:
    """One message to --warmup-topic until it is stored (at most 10 tries): the client's first
    request to a new broker can fail at once when its heartbeat thread is connecting to that
    broker at the same moment (rocketmq-client-cpp 1.2.x), and with one broker group it has no
    other to retry on.  The measured messages then go over the connection made here."""
    for attempt in range(10):
        try:
            producer.send_sync(build(args.warmup_topic, attempt, args))
            return
        except Exception as exc:  # noqa: BLE001 - the client raises one class per status
            emit(event="warmup_failed", attempt=attempt, error=type(exc).__name__)
            time.sleep(0.1 * (attempt + 1))
    raise SystemExit(f"the warm-up send to {args.warmup_topic} kept failing")


def produce(args) -> None:
    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    credentials(producer, args)
    producer.start()
    done = threading.Semaphore(0)
    try:
        if args.warmup_topic:
            warm_up(producer, args)
        if args.mode == "batch":  # --batch-size messages per request (all of them by default)
            size = args.batch_size or args.count
            for start in range(0, args.count, size):
                msgs = [build(args.topic, i, args) for i in range(start, min(start + size, args.count))]
                result = producer.send_batch(msgs)
                emit(event="sent", mode="batch", count=len(msgs), status=int(result.status), msg_id=result.msg_id,
                     offset=result.offset)
            return
        for i in range(args.count):
            msg = build(args.topic, i, args)
            sent_ms = int(time.time() * 1000)
            if args.mode in ("sync", "orderly"):
                shard = {"shard": i % args.shards} if args.mode == "orderly" else {}
                result = producer.send_orderly(msg, i % args.shards) if shard else producer.send_sync(msg)
                emit(event="sent", i=i, status=int(result.status), msg_id=result.msg_id, offset=result.offset,
                     **shard, sent_ms=sent_ms)
            elif args.mode == "oneway":
                producer.send_oneway(msg)
                emit(event="sent", i=i, sent_ms=sent_ms)
            elif args.mode == "async":
                def ok(result, i=i):
                    emit(event="sent", i=i, status=int(result.status), msg_id=result.msg_id, offset=result.offset)
                    done.release()

                def fail(exc, i=i):
                    emit(event="error", i=i, error=str(exc))
                    done.release()

                producer.send_async(msg, ok, fail)
        if args.mode == "async":
            for _ in range(args.count):
                if not done.acquire(timeout=30):
                    emit(event="error", error="async send callbacks missing")
                    break
    finally:
        shut_down(producer)
    emit(event="done")


def consume(args) -> None:
    model = MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    credentials(consumer, args)
    if args.instance:
        consumer.set_instance_name(args.instance)
    lock = threading.Lock()
    seen: list[dict] = []
    failed_once: set[str] = set()

    def on_message(_consumer, handle) -> int:
        # Return the C status ourselves: the wheel's own wrapper re-raises listener
        # exceptions inside the ctypes callback, which then reports CONSUME_SUCCESS.
        fields = message_fields(RecvMessage(handle))
        key = fields["keys"]
        if args.fail_first and fields["reconsume_times"] == 0 and key not in failed_once:
            failed_once.add(key)
            emit(event="failing", **fields)
            return RECONSUME_LATER
        with lock:
            seen.append(fields)
        emit(event="received", **fields)
        return CONSUME_SUCCESS

    dll.Subscribe(consumer._handle, args.topic.encode(), (args.tags or "*").encode())
    consumer._register_callback(on_message)
    consumer.start()
    emit(event="started")
    deadline = time.time() + args.timeout
    try:
        while time.time() < deadline:
            with lock:
                if args.expect_file:  # the count is known later (failover): distinct keys
                    try:
                        with open(args.expect_file) as f:
                            wanted = int(f.read().strip() or "-1")
                    except (OSError, ValueError):
                        wanted = -1
                    if 0 <= wanted <= len({m["keys"] for m in seen}):
                        break
                elif len(seen) >= args.expect:
                    break
            time.sleep(0.05)
        # Linger a little so late duplicates or unwanted tags would show up.
        time.sleep(args.linger)
    finally:
        shut_down(consumer)
    emit(event="done", count=len(seen))


def pull(args) -> None:
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    credentials(consumer, args)
    consumer.start()
    count = 0
    deadline = time.time() + args.timeout
    try:
        while count < args.expect and time.time() < deadline:
            for msg in consumer.pull(args.topic, args.tags or "*"):
                emit(event="received", **message_fields(msg))
                count += 1
            time.sleep(0.1)
    finally:
        shut_down(consumer)
    emit(event="done", count=count)


def bench_send(args) -> None:
    """Send --count messages as fast as the mode allows; print one summary line (benchmarks)."""
    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    credentials(producer, args)
    producer.start()
    body = b"x" * args.body_size
    latencies = []
    done = threading.Semaphore(0)
    errors = []
    try:
        for _ in range(args.warmup):
            warm = Message(args.topic)
            warm.set_body(body)
            producer.send_sync(warm)
        start = time.perf_counter()
        for _ in range(args.count):
            msg = Message(args.topic)
            msg.set_tags("TagA")
            msg.set_body(body)
            if args.mode == "sync":
                t0 = time.perf_counter()
                producer.send_sync(msg)
                latencies.append(time.perf_counter() - t0)
            else:
                producer.send_async(
                    msg, lambda result: done.release(), lambda exc: (errors.append(exc), done.release())
                )
        if args.mode == "async":
            for _ in range(args.count):
                done.acquire(timeout=60)
        elapsed = time.perf_counter() - start
    finally:
        shut_down(producer)
    latencies.sort()
    summary = {"event": "bench", "mode": args.mode, "count": args.count, "rate": args.count / elapsed,
               "errors": len(errors)}
    if latencies:
        summary["p50_ms"] = latencies[len(latencies) // 2] * 1000
        summary["p99_ms"] = latencies[int(len(latencies) * 0.99)] * 1000
    emit(**summary)


def bench_consume(args) -> None:
    """Consume --expect messages with a push consumer; print one summary line (benchmarks)."""
    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    lock = threading.Lock()
    count = [0, 0.0]

    def on_message(_consumer, handle) -> int:
        with lock:
            if count[0] == 0:
                count[1] = time.perf_counter()
            count[0] += 1
        return CONSUME_SUCCESS

    dll.Subscribe(consumer._handle, args.topic.encode(), b"*")
    consumer._register_callback(on_message)
    started = time.perf_counter()
    consumer.start()
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        with lock:
            if count[0] >= args.expect:
                break
        time.sleep(0.01)
    elapsed = time.perf_counter() - (count[1] or started)
    shut_down(consumer)
    emit(event="bench", count=count[0], rate=count[0] / elapsed if elapsed > 0 else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("namesrv")
    p.add_argument("topic")
    p.add_argument("--group", default="cpp_producer_group")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--mode", default="sync", choices=["sync", "async", "oneway", "orderly", "batch"])
    p.add_argument("--tags", default="TagA")
    p.add_argument("--keys-prefix", default="key-")
    p.add_argument("--delay-level", type=int, default=0)
    p.add_argument("--prop", action="append")
    p.add_argument("--body-size", type=int, default=0)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=0)
    p.add_argument("--send-timeout-ms", type=int, default=5000)
    p.add_argument("--warmup-topic", default="", help="first send one message here, retried (see warm_up)")
    c = sub.add_parser("consume")
    c.add_argument("namesrv")
    c.add_argument("topic")
    c.add_argument("group")
    c.add_argument("--expect", type=int, default=0)
    c.add_argument("--expect-file", default="", help="stop at the distinct keys this file counts, once written")
    c.add_argument("--tags", default="*")
    c.add_argument("--orderly", action="store_true")
    c.add_argument("--broadcast", action="store_true")
    c.add_argument("--fail-first", action="store_true")
    c.add_argument("--timeout", type=float, default=60)
    c.add_argument("--linger", type=float, default=1.0)
    c.add_argument("--instance", default="")
    q = sub.add_parser("pull")
    q.add_argument("namesrv")
    q.add_argument("topic")
    q.add_argument("group")
    q.add_argument("--expect", type=int, required=True)
    q.add_argument("--tags", default="*")
    q.add_argument("--timeout", type=float, default=30)
    bs = sub.add_parser("bench-send")
    bs.add_argument("namesrv")
    bs.add_argument("topic")
    bs.add_argument("--group", default="cpp_bench_producer")
    bs.add_argument("--count", type=int, default=10000)
    bs.add_argument("--mode", default="sync", choices=["sync", "async"])
    bs.add_argument("--body-size", type=int, default=1024)
    bs.add_argument("--send-timeout-ms", type=int, default=5000)
    bs.add_argument("--warmup", type=int, default=1, help="sync sends before the clock starts")
    bc = sub.add_parser("bench-consume")
    bc.add_argument("namesrv")
    bc.add_argument("topic")
    bc.add_argument("group")
    bc.add_argument("--expect", type=int, required=True)
    bc.add_argument("--timeout", type=float, default=300)
    for command in (p, c, q, bs):
        command.add_argument("--access-key", default="", help="ACL AccessKey (set_session_credentials)")
        command.add_argument("--secret-key", default="")
        command.add_argument("--channel", default="ALIYUN", help="the C++ client's OnsChannel field")
    args = parser.parse_args()
    {"produce": produce, "consume": consume, "pull": pull, "bench-send": bench_send,
     "bench-consume": bench_consume}[args.command](args)


if __name__ == "__main__":
    main()
