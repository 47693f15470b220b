"""Listener declarations and the consume status they produce (apogee.client.app.listeners): no I/O."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

from apogee.client.app import App
from apogee.client.app.listeners import CONTEXT, MESSAGE, PAYLOAD, declare, make_listener
from apogee.client.types import ConsumeContext, ConsumeResult
from apogee.common.message import MessageExt, MessageQueue
from apogee.errors import ClientStateError, ConfigError


@dataclasses.dataclass
class Warn:
    level: int
    text: str


def msg(body: bytes, msg_id: str = "MSG1", reconsume: int = 0) -> MessageExt:
    return MessageExt("TopicTest", body, msg_id=msg_id, reconsume_times=reconsume)


def ctx() -> ConsumeContext:
    return ConsumeContext(MessageQueue("TopicTest", "b", 0))


def test_the_payload_is_decoded_by_its_annotation_beside_the_raw_message_and_context() -> None:
    seen: list[Any] = []

    def on_warn(warn: Warn, raw: MessageExt, context: ConsumeContext) -> None:
        seen.append((warn, raw.msg_id, context.message_queue.queue_id))

    spec = declare(on_warn, topic="T", group="G")
    assert spec.plan == (PAYLOAD, MESSAGE, CONTEXT) and not spec.is_async
    result = make_listener(spec, 16)([msg(b'{"level": 2, "text": "hot"}')], ctx())
    assert result is ConsumeResult.CONSUME_SUCCESS
    assert seen == [(Warn(2, "hot"), "MSG1", 0)]


def test_a_lone_message_parameter_or_none_annotated_gets_the_raw_message() -> None:
    def raw(m: MessageExt) -> None: ...

    def bare(m) -> None: ...  # type: ignore[no-untyped-def]

    for fn in (raw, bare):
        spec = declare(fn, topic="T", group="G")
        assert spec.plan == (PAYLOAD,) and spec.decode(msg(b"x")).msg_id == "MSG1"


def test_a_class_with_on_message_is_instantiated_once() -> None:
    made: list[object] = []

    class WarnConsumer:
        def __init__(self) -> None:
            made.append(self)
            self.got: list[str] = []

        def on_message(self, message: str) -> None:
            self.got.append(message)

    spec = declare(WarnConsumer, topic="TopicTest", group="warn_consumer_group")
    make_listener(spec, 16)([msg(b"sync hello world!")], ctx())
    assert len(made) == 1 and made[0].got == ["sync hello world!"]  # type: ignore[attr-defined]


def test_bad_declarations_are_refused_when_declared() -> None:
    def two_payloads(a: str, b: str) -> None: ...

    def nothing() -> None: ...

    def keyword_only(a: str, *, b: str) -> None: ...

    class NoOnMessage:
        pass

    for target in (two_payloads, nothing, keyword_only, NoOnMessage, 42):
        with pytest.raises(TypeError):
            declare(target, topic="T", group="G")
    with pytest.raises(ConfigError, match="not both"):
        declare(nothing, topic="T", group="G", tag="A", sql="a > 1")


def test_a_second_listener_for_a_group_is_refused_naming_the_first() -> None:
    app = App("svc")

    @app.listener("T1", group="G")
    def first(m: str) -> None: ...

    with pytest.raises(ConfigError, match=r"consumer group 'G' already has a listener \(.*first on T1\)"):

        @app.listener("T2", group="G")
        def second(m: str) -> None: ...

    with pytest.raises(ConfigError, match="unknown consumer options"):
        app.listener("T3", group="G3", consume_threads=4)


def test_sql_and_tag_selectors() -> None:
    def f(m: str) -> None: ...

    plain = declare(f, topic="T", group="G")
    assert (plain.expression, plain.expression_type) == ("*", "TAG")
    spec = declare(f, topic="T", group="G", sql="level > 2")
    assert (spec.expression, spec.expression_type) == ("level > 2", "SQL92")
    assert declare(f, topic="T", group="G", tag="A || B").expression == "A || B"


def test_an_undecodable_payload_is_a_failure_logged_with_the_message_id(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[Warn] = []

    def on_warn(warn: Warn) -> None:
        calls.append(warn)

    spec = declare(on_warn, topic="T", group="G")
    with caplog.at_level(logging.ERROR, "apogee.client.app"):
        result = make_listener(spec, 16)([msg(b"not json", msg_id="BADID", reconsume=3)], ctx())
    assert result is ConsumeResult.RECONSUME_LATER and calls == []
    assert "BADID" in caplog.text and "cannot be decoded as Warn" in caplog.text
    assert "%RETRY%G" in caplog.text and "reconsumed 3 of 16" in caplog.text


def test_a_raising_listener_asks_for_a_retry_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def on_warn(text: str) -> None:
        raise RuntimeError("database down")

    with caplog.at_level(logging.ERROR, "apogee.client.app"):
        result = make_listener(declare(on_warn, topic="T", group="G"), 16)([msg(b"x", msg_id="ID9")], ctx())
    assert result is ConsumeResult.RECONSUME_LATER
    assert "ID9" in caplog.text and "database down" in caplog.text


def test_in_a_batch_the_messages_before_a_failure_are_acknowledged() -> None:
    def on_warn(text: str) -> ConsumeResult | None:
        return ConsumeResult.RECONSUME_LATER if text == "bad" else None

    c = ctx()
    batch = [msg(b"ok"), msg(b"ok"), msg(b"bad"), msg(b"ok")]
    assert make_listener(declare(on_warn, topic="T", group="G"), 16)(batch, c) is ConsumeResult.CONSUME_SUCCESS
    assert c.ack_index == 1  # messages 2 and 3 go back for a retry
    orderly = declare(on_warn, topic="T", group="G", orderly=True)
    assert make_listener(orderly, 16)(batch, ctx()) is ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT


def test_async_listeners_and_async_on_message() -> None:
    got: list[str] = []

    async def on_text(text: str) -> None:
        await asyncio.sleep(0)
        got.append(text)

    class Failing:
        async def on_message(self, data: dict[str, int]) -> None:
            raise ValueError("no")

    spec = declare(on_text, topic="T", group="G")
    assert spec.is_async
    assert asyncio.run(make_listener(spec, 16)([msg(b"a"), msg(b"b")], ctx())) is ConsumeResult.CONSUME_SUCCESS
    assert got == ["a", "b"]
    failing = declare(Failing, topic="T", group="G2")
    assert failing.is_async
    assert asyncio.run(make_listener(failing, 16)([msg(b'{"a": 1}')], ctx())) is ConsumeResult.RECONSUME_LATER


def test_the_blocking_template_refuses_to_deadlock_or_to_send_before_start() -> None:
    app = App("svc")
    with pytest.raises(ClientStateError, match="not running"):
        app.template.sync.send("T", "x")

    async def on_the_loop() -> None:
        app.template.bind(object())  # type: ignore[arg-type]  # a stand-in: nothing is sent
        with pytest.raises(ClientStateError, match="own event loop"):
            app.template.sync.send_sync_msg("T", "tag", "x")

    asyncio.run(on_the_loop())
