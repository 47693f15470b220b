"""Consume with a push consumer until N messages arrived, then shut down gracefully.

    python examples/push_consumer.py --namesrv 127.0.0.1:9876 --topic TopicTest --expect 10

The listener is an ``async def``; a plain function would run on a worker thread pool.
Shutting down commits the offsets, so running it again continues where it stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from _topics import require_topics  # examples/_topics.py: one line when the topic does not exist

from apogee.client import ConsumeContext, ConsumeResult, MessageExt, PushConsumer


async def main(namesrv: str, topic: str, group: str, expect: int, timeout_s: float) -> int:
    received = 0
    enough = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        nonlocal received
        for msg in msgs:
            received += 1
            print(f"received {msg.msg_id} tags={msg.tags} keys={msg.keys} body={msg.body.decode(errors='replace')}")
        if received >= expect:
            enough.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(group, namesrv, listener=listener, consume_from_where="FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    async with consumer:
        try:
            await asyncio.wait_for(enough.wait(), timeout_s)
        except TimeoutError:
            print(f"timed out with {received} of {expect} messages")
            return 1
    print(f"done: {received} messages")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--group", default="example_consumer_group")
    parser.add_argument("--expect", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    require_topics(args.namesrv, args.topic)
    raise SystemExit(asyncio.run(main(args.namesrv, args.topic, args.group, args.expect, args.timeout)))
