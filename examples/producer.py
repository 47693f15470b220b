"""Send messages from a plain script with the blocking facade.

    python examples/producer.py --namesrv 127.0.0.1:9876 --topic TopicTest --count 10

Each message carries a tag, keys and a user property; the script prints one line per result.
"""

from __future__ import annotations

import argparse
import os

from apogee.client import Message
from apogee.client.sync import SyncProducer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namesrv", default=os.environ.get("APOGEE_NAMESRV", "127.0.0.1:9876"))
    parser.add_argument("--topic", default="TopicTest")
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()

    with SyncProducer("example_producer_group", args.namesrv) as producer:
        for i in range(args.count):
            msg = Message(args.topic, f"Hello Apogee {i}".encode(), properties={"source": "example"})
            msg.tags = "TagA"
            msg.keys = [f"order-{i}"]
            result = producer.send(msg)
            print(
                f"sent {i}: {result.status.name} msg_id={result.msg_id} queue={result.message_queue.queue_id} "
                f"offset={result.queue_offset}"
            )


if __name__ == "__main__":
    main()
