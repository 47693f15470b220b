"""A producer process that sends one half message and then hangs in its local transaction,
so the test can kill it with SIGKILL before the transaction ends."""

from __future__ import annotations

import asyncio
import sys
import time

from apogee.client.transaction_producer import TransactionProducer
from apogee.common.message import Message


class Hang:
    def execute_local_transaction(self, msg, arg):
        print("half-sent", flush=True)
        time.sleep(3600)

    def check_local_transaction(self, msg):
        return None


async def main(namesrv: str, topic: str, group: str) -> None:
    producer = TransactionProducer(group, namesrv, listener=Hang(), heartbeat_broker_interval_ms=500)
    await producer.start()
    await producer.send_message_in_transaction(Message(topic, b"orphan"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
