"""Broadcasting: every consumer of the group sees every message; a restarted consumer resumes
from the offsets in its local file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from apogee.client import ConsumeContext, Message, MessageExt, MessageModel, Producer, PushConsumer
from tests.integration.client.conftest import FAST, FAST_CONSUMER, Cluster, unique, wait_until
from tests.support.waiting import holds_for


async def test_everyone_gets_everything_and_restart_resumes_locally(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("T_bcast")
    group = unique("G")
    seen: dict[str, list[int]] = {"a": [], "b": []}

    def make(name: str) -> PushConsumer:
        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
            seen[name].extend(int(m.properties["i"]) for m in msgs)

        c = PushConsumer(
            group,
            cluster.ns,
            listener=listener,
            message_model=MessageModel.BROADCASTING,
            instance_name=f"bcast-{name}",
            offset_store_dir=str(tmp_path),
            **FAST_CONSUMER,
        )
        c.subscribe(topic)
        return c

    def ready(c: PushConsumer) -> bool:
        return c.rebalancer is not None and len(c.rebalancer.process_queues) == 4

    async with Producer(unique("P"), cluster.ns, **FAST) as producer:
        await producer.send(Message(topic, b"create", properties={"i": "-1"}))
        a, b = make("a"), make("b")
        await a.start()
        await b.start()
        await wait_until(lambda: ready(a) and ready(b), 20, "both consumers own every queue")

        async def send(start: int, n: int) -> None:
            await asyncio.gather(
                *[
                    await producer.send_async(Message(topic, b"x", properties={"i": str(i)}))
                    for i in range(start, start + n)
                ]
            )

        await send(0, 100)
        await wait_until(lambda: all(len([i for i in v if i >= 0]) >= 100 for v in seen.values()), 20, "100 each")
        await b.shutdown()
        assert (tmp_path / b.client_id / group / "offsets.json").exists()
        await send(100, 50)
        await wait_until(lambda: len([i for i in seen["a"] if i >= 0]) >= 150, 20, "a got 150")
        b_before = list(seen["b"])
        b2 = make("b")
        await b2.start()
        await wait_until(lambda: len(seen["b"]) >= len(b_before) + 50, 20, "b resumed")
        counts = (len(seen["a"]), len(seen["b"]))
        await holds_for(lambda: (len(seen["a"]), len(seen["b"])) == counts, 0.5, "no message repeated")
        await a.shutdown()
        await b2.shutdown()
    a_ids = sorted(i for i in seen["a"] if i >= 0)
    b_ids = [i for i in seen["b"] if i >= 0]
    assert a_ids == list(range(150))
    assert sorted(b_ids) == list(range(150))  # the restart missed nothing and repeated nothing
