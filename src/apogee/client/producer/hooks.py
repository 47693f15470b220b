"""Send hooks (RocketMQ's SendMessageHook): called before and after every send attempt."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from apogee.client.types import SendResult
from apogee.common.message import Message, MessageQueue

log = logging.getLogger("apogee.client.producer")


@dataclass(slots=True)
class SendContext:
    """What send hooks see: before the send (no result yet) and after it."""

    group: str
    message: Message
    mode: str  # "SYNC", "ASYNC", "ONEWAY" or "BATCH"
    queue: MessageQueue | None = None
    broker_addr: str = ""
    result: SendResult | None = None
    exception: BaseException | None = None
    elapsed_ms: float = 0.0


class SendHook(Protocol):
    """Called around every send (RocketMQ's SendMessageHook); must not block."""

    def before_send(self, ctx: SendContext) -> None: ...
    def after_send(self, ctx: SendContext) -> None: ...


class SendHooks:
    """The hooks of one producer; a hook that raises is logged and the send goes on."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.hooks: list[SendHook] = []  # tested for emptiness on the hot paths

    def before(self, messages: Sequence[Message], mode: str, mq: MessageQueue | None, addr: str) -> list[SendContext]:
        ctxs = [SendContext(self.group, msg, mode, mq, addr) for msg in messages]
        for ctx in ctxs:
            for hook in self.hooks:
                try:
                    hook.before_send(ctx)
                except Exception:
                    log.exception("send hook %r failed", hook)
        return ctxs

    def after(
        self,
        ctxs: list[SendContext],
        results: Sequence[SendResult | None] | None,
        exc: BaseException | None,
        start: float,
    ) -> None:
        elapsed_ms = (time.perf_counter() - start) * 1000
        for i, ctx in enumerate(ctxs):
            ctx.result = results[i] if results is not None else None
            ctx.exception = exc
            ctx.elapsed_ms = elapsed_ms
            for hook in self.hooks:
                try:
                    hook.after_send(ctx)
                except Exception:
                    log.exception("send hook %r failed", hook)


@dataclass(slots=True)
class EndTransactionContext:
    """What end-transaction hooks see when a transaction producer sends its decision."""

    group: str
    message: Message
    msg_id: str  # the half message's UNIQ_KEY
    transaction_id: str
    broker_addr: str
    state: str  # COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW
    from_check: bool  # the answer to a broker's check, not the end of send_message_in_transaction


class EndTransactionHook(Protocol):
    """Called when a transaction producer sends END_TRANSACTION (RocketMQ's EndTransactionHook)."""

    def end_transaction(self, ctx: EndTransactionContext) -> None: ...


def run_end_transaction_hooks(hooks: Sequence[EndTransactionHook], ctx: EndTransactionContext) -> None:
    for hook in hooks:
        try:
            hook.end_transaction(ctx)
        except Exception:
            log.exception("end-transaction hook %r failed", hook)
