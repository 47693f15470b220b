"""Poll messages with the lite pull consumer, Kafka style, committing by hand.

    python examples/lite_pull.py --namesrv 127.0.0.1:9876 --topic TopicTest --expect 10

``poll`` returns fetched batches; ``commit_sync`` stores the position after what was processed.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from _topics import require_topics  # examples/_topics.py: one line when the topic does not exist

from apogee.client import LitePullConsumer


async def main(namesrv: str, topic: str, group: str, expect: int) -> int:
    consumer = LitePullConsumer(group, namesrv, auto_commit=False, consume_from_where="FIRST_OFFSET")
    consumer.subscribe(topic)
    got = 0
    async with consumer:
        for _ in range(300):
            msgs = await consumer.poll(timeout_ms=200)
            for msg in msgs:
                print(f"polled queue {msg.queue_id} offset {msg.queue_offset}: {msg.body.decode(errors='replace')}")
            got += len(msgs)
            if msgs:
                await consumer.commit_sync()
            if got >= expect:
                break
        positions = {mq.queue_id: consumer.position(mq) for mq in sorted(consumer.assignment())}
    print(f"polled {got} messages; committed positions {positions}")
    return 0 if got >= expect else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--group", default="example_lite_group")
    parser.add_argument("--expect", type=int, default=10)
    args = parser.parse_args()
    require_topics(args.namesrv, args.topic)
    raise SystemExit(asyncio.run(main(args.namesrv, args.topic, args.group, args.expect)))
