"""Consume hooks (RocketMQ's ConsumeMessageHook): called before a listener gets its messages
and after it returned.

The push consumer's consume services call them around every listener call; the lite pull
consumer around every batch ``poll()`` hands out (before and at once after: the caller's
processing is not seen, as in RocketMQ 5's lite pull consumer).  A hook that raises is
logged and consumption goes on.  Message tracing is one user (``apogee.client.trace``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from apogee.client.types import ConsumeResult
from apogee.common.message import MessageExt, MessageQueue

log = logging.getLogger("apogee.client.consumer")

# How a listener call ended, by RocketMQ's ConsumeReturnType names.
SUCCESS = "SUCCESS"
TIME_OUT = "TIME_OUT"
EXCEPTION = "EXCEPTION"
FAILED = "FAILED"


@dataclass(slots=True)
class ConsumeMessageContext:
    """What consume hooks see, before the listener (``status`` empty) and after it."""

    group: str
    messages: list[MessageExt]
    queue: MessageQueue
    status: ConsumeResult | None = None  # what the listener asked for (None: it raised)
    success: bool = False  # CONSUME_SUCCESS
    return_type: str = SUCCESS  # SUCCESS, TIME_OUT, EXCEPTION or FAILED
    elapsed_ms: float = 0.0
    hook_state: Any = None  # a hook's own, from before to after (RocketMQ's mqTraceContext)


class ConsumeHook(Protocol):
    """Called around every listener call; must not block (it runs on the event loop)."""

    def before_consume(self, ctx: ConsumeMessageContext) -> None: ...
    def after_consume(self, ctx: ConsumeMessageContext) -> None: ...


def return_type(status: ConsumeResult | None, elapsed_ms: float, timeout_ms: float) -> str:
    """RocketMQ's classification of a listener call (ConsumeMessageConcurrentlyService):
    an exception, then a call longer than the consume timeout, then the status."""
    if status is None:
        return EXCEPTION
    if elapsed_ms >= timeout_ms:
        return TIME_OUT
    return SUCCESS if status is ConsumeResult.CONSUME_SUCCESS else FAILED


class ConsumeHooks:
    """The consume hooks of one consumer; ``hooks`` is tested for emptiness before each use."""

    def __init__(self, group: str, consume_timeout_ms: float) -> None:
        self.group = group
        self.consume_timeout_ms = consume_timeout_ms
        self.hooks: list[ConsumeHook] = []

    def before(self, msgs: list[MessageExt], mq: MessageQueue) -> tuple[ConsumeMessageContext, float]:
        """Run the hooks before a listener call; give the result to ``after``."""
        ctx = ConsumeMessageContext(self.group, msgs, mq)
        for hook in self.hooks:
            try:
                hook.before_consume(ctx)
            except Exception:
                log.exception("consume hook %r failed", hook)
        return ctx, time.perf_counter()

    def after(self, began: tuple[ConsumeMessageContext, float], status: ConsumeResult | None) -> None:
        """Run the hooks after the call; ``status`` None when the listener raised."""
        ctx, start = began
        ctx.elapsed_ms = (time.perf_counter() - start) * 1000
        ctx.status = status
        ctx.success = status is ConsumeResult.CONSUME_SUCCESS
        ctx.return_type = return_type(status, ctx.elapsed_ms, self.consume_timeout_ms)
        for hook in self.hooks:
            try:
                hook.after_consume(ctx)
            except Exception:
                log.exception("consume hook %r failed", hook)
