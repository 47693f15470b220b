"""Send many messages asynchronously: backpressure, auto-batching, one result per message.

    python examples/async_producer.py --namesrv 127.0.0.1:9876 --topic TopicTest --count 10000

``send_async`` returns as soon as the message is accepted (waiting only when too many results
are outstanding); the futures resolve when the broker has stored the messages.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from apogee.client import Message, Producer, SendResult


async def main(namesrv: str, topic: str, count: int) -> None:
    failures: list[BaseException] = []

    def on_result(result: SendResult | None, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    async with Producer("example_async_group", namesrv, max_inflight_messages=5000) as producer:
        start = time.perf_counter()
        futures = [await producer.send_async(Message(topic, b"payload %d" % i), on_result) for i in range(count)]
        await producer.flush()  # every message has its result now
        elapsed = time.perf_counter() - start
        results = [f.result() for f in futures if not f.exception()]
    print(
        f"sent {len(results)} of {count} messages in {elapsed:.2f} s ({count / elapsed:,.0f} msgs/s), "
        f"{len(failures)} failed; last offset {results[-1].queue_offset if results else '-'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--count", type=int, default=10_000)
    args = parser.parse_args()
    asyncio.run(main(args.namesrv, args.topic, args.count))
