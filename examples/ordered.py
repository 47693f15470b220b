"""Ordered messages: a hash selector keeps each order's messages on one queue, an orderly
consumer delivers each queue's messages one batch at a time, in order.

    python examples/ordered.py --namesrv 127.0.0.1:9876 --topic OrderTopic --orders 5 --steps 4

Prints the steps of each order as consumed and checks they arrived in sequence.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os

from apogee.client import ConsumeContext, ConsumeResult, Message, MessageExt, Producer, PushConsumer, SelectByHash

STEPS = ["created", "paid", "shipped", "delivered", "reviewed"]


async def main(namesrv: str, topic: str, orders: int, steps: int) -> int:
    seen: dict[str, list[int]] = collections.defaultdict(list)
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for msg in msgs:
            order, step = msg.keys[0], int(msg.properties["step"])
            seen[order].append(step)
            print(f"queue {ctx.message_queue.queue_id}: {order} {STEPS[step % len(STEPS)]}")
        if sum(len(v) for v in seen.values()) >= orders * steps:
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        "example_orderly_group", namesrv, listener=listener, orderly=True, consume_from_where="FIRST_OFFSET"
    )
    consumer.subscribe(topic)
    async with Producer("example_orderly_producer", namesrv) as producer, consumer:
        selector = SelectByHash()
        for step in range(steps):
            for n in range(orders):
                order = f"order-{n}"
                msg = Message(topic, f"{order} step {step}".encode(), properties={"step": str(step)})
                msg.keys = [order]
                # A sync send per message: the next step of an order leaves only after this one is stored.
                await producer.send(msg, selector=selector, arg=order)
        await asyncio.wait_for(done.wait(), 60)
    in_order = all(v == sorted(v) for v in seen.values())
    print(f"{len(seen)} orders, every order in sequence: {in_order}")
    return 0 if in_order else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="OrderTopic")
    parser.add_argument("--orders", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.namesrv, args.topic, args.orders, args.steps)))
