"""Listener declarations: what ``@app.listener(...)`` records, and the consumer callback it becomes.

PURE: no I/O, no event loop (an ``async def`` callback needs neither).

A listener is a function -- plain (run on the consumer's worker threads) or ``async def``
(run on the event loop) -- or a class with an ``on_message`` method (instantiated once, with
no arguments, when declared), or an object with one.  Its parameters are read from their
annotations when it is declared:

* the **payload**: the one parameter that is not one of the two below, decoded by its
  annotation (``apogee.client.app.payload``; no annotation means the raw ``MessageExt``);
* optionally a parameter annotated ``MessageExt``, which receives the raw message (its id,
  tags, keys, properties, ``reconsume_times``) beside a decoded payload;
* optionally a parameter annotated ``ConsumeContext``.

What the listener does becomes RocketMQ's consume status, message by message: returning
(anything but a failing ``ConsumeResult``) is success; raising, returning
``RECONSUME_LATER`` / ``SUSPEND_CURRENT_QUEUE_A_MOMENT``, or a payload that does not decode
are failures.  A failed message is never dropped: a concurrent listener's goes back to the
broker and returns through ``%RETRY%<group>`` (the DLQ after ``max_reconsume_times``), an
orderly listener's is retried in place.  In a batch (``consume_message_batch_max_size`` > 1)
the messages before the failed one are acknowledged (``ack_index``) and the rest retried.
Every failure is logged with the message id.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apogee.client.app.payload import Decoder, decoder_for
from apogee.client.types import ConsumeContext, ConsumeResult
from apogee.common import constants as c
from apogee.common.message import Message, MessageExt
from apogee.errors import ConfigError, PayloadDecodeError

log = logging.getLogger("apogee.client.app")

PAYLOAD, MESSAGE, CONTEXT = "payload", "message", "context"


@dataclass
class ListenerSpec:
    """One declared listener: where it consumes from and how to call it."""

    topic: str
    group: str
    handler: Callable[..., Any]
    plan: tuple[str, ...]  # what each positional argument is: PAYLOAD, MESSAGE or CONTEXT
    decode: Decoder
    payload_type: str
    is_async: bool
    expression: str = "*"
    expression_type: str = "TAG"
    orderly: bool = False
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        h = self.handler
        return f"{getattr(h, '__module__', '?')}.{getattr(h, '__qualname__', type(h).__qualname__)}"

    def describe(self) -> str:
        kind = "orderly" if self.orderly else "concurrently"
        selector = f" {self.expression_type} {self.expression!r}" if self.expression != "*" else ""
        return f"{self.group} <- {self.topic}{selector} ({kind}, {self.name})"


def declare(
    target: Any,
    *,
    topic: str,
    group: str,
    tag: str | None = None,
    sql: str | None = None,
    orderly: bool = False,
    options: dict[str, Any] | None = None,
) -> ListenerSpec:
    """Read a listener's declaration; ``ConfigError`` / ``TypeError`` say what is wrong with it."""
    if not topic or not group:
        raise ConfigError("a listener needs a topic and a consumer group")
    if tag is not None and sql is not None:
        raise ConfigError(f"listener of {group!r}: give a tag expression or an SQL92 selector, not both")
    handler = _handler_of(target)
    plan, annotation = _plan(handler)
    return ListenerSpec(
        topic=topic,
        group=group,
        handler=handler,
        plan=plan,
        decode=decoder_for(annotation),
        payload_type=getattr(annotation, "__name__", None) or str(annotation or "MessageExt"),
        is_async=_is_async(handler),
        expression=sql if sql is not None else (tag or "*"),
        expression_type="SQL92" if sql is not None else "TAG",
        orderly=orderly,
        options=dict(options or {}),
    )


def _handler_of(target: Any) -> Callable[..., Any]:
    if isinstance(target, type):
        if not callable(getattr(target, "on_message", None)):
            raise TypeError(f"listener class {target.__qualname__} has no on_message(self, message) method")
        return target().on_message  # type: ignore[no-any-return]
    on_message = getattr(target, "on_message", None)
    if callable(on_message) and not inspect.isfunction(target):
        return on_message  # type: ignore[no-any-return]
    if not callable(target):
        raise TypeError(f"a listener is a function, or a class or object with on_message, not {target!r}")
    return target  # type: ignore[no-any-return]


def _is_async(handler: Any) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


def _plan(handler: Callable[..., Any]) -> tuple[tuple[str, ...], Any]:
    """What to pass for each parameter, and the payload's annotation (None: the raw message)."""
    try:
        signature = inspect.signature(handler, eval_str=True)
    except NameError as exc:
        raise TypeError(f"listener {handler!r}: an annotation cannot be resolved: {exc}") from None
    params = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    extra = [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if extra:
        raise TypeError(f"listener {handler!r}: keyword-only parameters {extra} would never be given")

    def kind(p: inspect.Parameter) -> str:
        if p.annotation is ConsumeContext:
            return CONTEXT
        if p.annotation in (MessageExt, Message):
            return MESSAGE
        return PAYLOAD

    kinds = [kind(p) for p in params]
    if any(kinds.count(k) > 1 for k in (PAYLOAD, MESSAGE, CONTEXT)):
        raise TypeError(
            f"listener {handler!r}: parameters {[p.name for p in params]} are ambiguous; take one payload "
            "(decoded by its annotation), optionally one MessageExt and one ConsumeContext"
        )
    if PAYLOAD not in kinds:
        if MESSAGE not in kinds:
            raise TypeError(f"listener {handler!r} takes no message: give it a parameter for the payload")
        # A lone MessageExt parameter is the payload itself: the raw message.
        kinds[kinds.index(MESSAGE)] = PAYLOAD
        return tuple(kinds), None
    payload = params[kinds.index(PAYLOAD)]
    return tuple(kinds), (None if payload.annotation is payload.empty else payload.annotation)


# --- the consumer's callback --------------------------------------------------------------------


def make_listener(spec: ListenerSpec, max_reconsume_times: int) -> Callable[[list[MessageExt], ConsumeContext], Any]:
    """The ``PushConsumer`` listener calling ``spec``'s handler once per message."""
    handler, plan, decode = spec.handler, spec.plan, spec.decode
    failing = ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT if spec.orderly else ConsumeResult.RECONSUME_LATER
    then = "retried in place" if spec.orderly else f"retried through {c.retry_topic(spec.group)}"

    def arguments(msg: MessageExt, ctx: ConsumeContext) -> list[Any] | None:
        try:
            payload = decode(msg)
        except PayloadDecodeError as exc:
            log.error(
                "%s: message %s of %s cannot be decoded as %s for %s: %s; it will be %s (reconsumed %d of %d times)",
                spec.group, msg.msg_id, msg.topic, spec.payload_type, spec.name, exc, then,
                msg.reconsume_times, max_reconsume_times,
            )  # fmt: skip
            return None
        return [payload if k == PAYLOAD else msg if k == MESSAGE else ctx for k in plan]

    def failed(msgs: list[MessageExt], i: int, ctx: ConsumeContext, exc: BaseException | None) -> ConsumeResult:
        msg = msgs[i]
        if exc is not None:
            log.error(
                "%s: %s failed on message %s of %s; it will be %s (reconsumed %d of %d times)",
                spec.group, spec.name, msg.msg_id, msg.topic, then, msg.reconsume_times, max_reconsume_times,
                exc_info=exc,
            )  # fmt: skip
        if i == 0 or spec.orderly:
            return failing
        ctx.ack_index = i - 1  # the ones before succeeded; this one and the rest go back
        return ConsumeResult.CONSUME_SUCCESS

    if spec.is_async:

        async def consume_async(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
            for i, msg in enumerate(msgs):
                args = arguments(msg, ctx)
                if args is None:
                    return failed(msgs, i, ctx, None)
                try:
                    result = await handler(*args)
                except Exception as exc:
                    return failed(msgs, i, ctx, exc)
                if isinstance(result, ConsumeResult) and result is not ConsumeResult.CONSUME_SUCCESS:
                    return failed(msgs, i, ctx, None)
            return ConsumeResult.CONSUME_SUCCESS

        return consume_async

    def consume(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for i, msg in enumerate(msgs):
            args = arguments(msg, ctx)
            if args is None:
                return failed(msgs, i, ctx, None)
            try:
                result = handler(*args)
            except Exception as exc:
                return failed(msgs, i, ctx, exc)
            if isinstance(result, ConsumeResult) and result is not ConsumeResult.CONSUME_SUCCESS:
                return failed(msgs, i, ctx, None)
        return ConsumeResult.CONSUME_SUCCESS

    return consume
