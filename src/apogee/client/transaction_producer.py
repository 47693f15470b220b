"""TransactionProducer: two-phase (half) messages, as RocketMQ's work.

1. ``send_message_in_transaction(msg, arg)`` sends ``msg`` as a *half* message: stored by the
   broker, invisible to consumers.
2. The listener's ``execute_local_transaction(msg, arg)`` runs the local transaction and
   answers COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW.
3. The producer sends END_TRANSACTION with that decision; commit makes the message visible,
   rollback discards it.  UNKNOW (or an exception, or a crash before step 3) leaves the half
   pending: after the transaction timeout the broker asks a live producer of the same group
   through ``check_local_transaction(msg)``, as often as it must, up to its check limit.

Listeners may be plain functions (run on a worker thread, so a blocking database call does
not stall the event loop) or coroutine functions (run on the loop).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable
from typing import Any, NamedTuple, Protocol

from apogee.client.producer.hooks import EndTransactionContext, run_end_transaction_hooks
from apogee.client.producer.producer import Producer
from apogee.client.types import SendResult, SendStatus
from apogee.common import constants as c
from apogee.common.message import Message, MessageExt
from apogee.common.message_id import decode_offset_msg_id
from apogee.errors import ApogeeError, ClientError
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.send import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger("apogee.client.transaction_producer")


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = c.TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = c.TRANSACTION_ROLLBACK_TYPE
    UNKNOW = c.TRANSACTION_NOT_TYPE  # RocketMQ's spelling, kept for familiarity

    @classmethod
    def coerce(cls, value: object) -> LocalTransactionState:
        """Accept the enum, its name, or True/False/None (commit / rollback / unknown)."""
        if isinstance(value, cls):
            return value
        if value is True:
            return cls.COMMIT_MESSAGE
        if value is False:
            return cls.ROLLBACK_MESSAGE
        if value is None:
            return cls.UNKNOW
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        raise ClientError(f"a transaction listener returned {value!r}, not a LocalTransactionState")


class TransactionListener(Protocol):
    """What a transaction producer calls; each method may be sync or ``async``."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any: ...

    def check_local_transaction(self, msg: MessageExt) -> Any: ...


class TransactionSendResult(NamedTuple):
    send_result: SendResult
    local_state: LocalTransactionState


class TransactionProducer(Producer):
    """A producer whose messages become visible only when their local transaction commits.

    ``listener`` provides ``execute_local_transaction(msg, arg)`` and
    ``check_local_transaction(msg)``.  Every producer of the same group must be able to
    answer checks: the broker asks any live one, so a half left by a crashed process is
    decided by its successor.
    """

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        listener: TransactionListener,
        check_topics: tuple[str, ...] = (c.TBW102,),
        **options: Any,
    ) -> None:
        """``check_topics``: topics whose brokers must know this producer from the start, so
        it can answer the checks of halves left by a crashed predecessor before it sends
        anything itself (brokers only ask producers that heartbeat them).  TBW102 reaches
        every broker that auto-creates topics, as in RocketMQ's own producer."""
        super().__init__(group, namesrv_addr, **options)
        self._check_topics = tuple(check_topics)
        if not callable(getattr(listener, "execute_local_transaction", None)) or not callable(
            getattr(listener, "check_local_transaction", None)
        ):
            raise TypeError("listener needs execute_local_transaction(msg, arg) and check_local_transaction(msg)")
        self.listener = listener
        self._checks: set[asyncio.Task[None]] = set()

    async def start(self) -> TransactionProducer:
        await super().start()
        instance = self._check_running()
        for topic in self._check_topics:
            try:
                if await instance.update_topic_route(topic):
                    self._topics.add(topic)
            except ApogeeError as exc:
                log.warning("route of %s for transaction checks unavailable: %s", topic, exc)
        await instance.heartbeat_all()
        return self

    async def shutdown(self, timeout_ms: int | None = None) -> None:
        for task in list(self._checks):
            task.cancel()
        await asyncio.gather(*self._checks, return_exceptions=True)
        await super().shutdown(timeout_ms)

    @staticmethod
    async def _call(fn: Any, *args: Any) -> LocalTransactionState:
        if inspect.iscoroutinefunction(fn):
            value = await fn(*args)
        else:
            value = await asyncio.to_thread(fn, *args)
            if inspect.isawaitable(value):
                value = await value
        return LocalTransactionState.coerce(value)

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end the transaction.

        Raises what ``send`` raises when the half cannot be stored; then the local
        transaction does not run.  An exception from ``execute_local_transaction`` is logged
        and leaves the transaction UNKNOW, to be settled by a check.
        """
        msg.properties[c.TRAN_MSG] = "true"
        msg.properties[c.PGROUP] = self.group
        result = await self.send(msg)
        state = LocalTransactionState.ROLLBACK_MESSAGE
        if result.status is SendStatus.SEND_OK:
            try:
                state = await self._call(self.listener.execute_local_transaction, msg, arg)
            except Exception:
                log.exception("execute_local_transaction failed for %s; the broker will check it", result.msg_id)
                state = LocalTransactionState.UNKNOW
        await self._end(msg, result, state)
        return TransactionSendResult(result, state)

    async def _end(self, msg: Message, result: SendResult, state: LocalTransactionState) -> None:
        instance = self._check_running()
        mq = result.message_queue
        addr = instance.master_addr(mq.broker_name) or await instance.find_master_addr(mq.broker_name, mq.topic)
        if self.end_transaction_hooks:
            run_end_transaction_hooks(self.end_transaction_hooks, EndTransactionContext(
                self.group, msg, result.msg_id, result.msg_id, addr, state.name, False,
            ))
        _, _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=result.msg_id,
            from_transaction_check=False,
            transaction_id=result.msg_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.encode(), oneway=True)
        try:
            await instance.remoting.invoke_oneway(addr, request)
        except ApogeeError as exc:
            # The decision is lost, not the message: the broker will check this half back.
            log.warning("END_TRANSACTION for %s not delivered (%s); the broker will check it", result.msg_id, exc)

    # --- broker check-back (called by the client instance) ------------------------------------

    def check_transaction_state(self, addr: str, msg: MessageExt, ext: dict[str, str]) -> Awaitable[None]:
        return self._spawn_check(addr, msg, ext)

    def _spawn_check(self, addr: str, msg: MessageExt, ext: dict[str, str]) -> Awaitable[None]:
        task = asyncio.ensure_future(self._answer_check(addr, msg, ext))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)
        return task

    async def _answer_check(self, addr: str, msg: MessageExt, ext: dict[str, str]) -> None:
        header = CheckTransactionStateRequestHeader.decode(ext)
        uniq = msg.properties.get(c.UNIQ_KEY) or header.msg_id or ""
        if uniq:
            msg.msg_id = uniq
        try:
            state = await self._call(self.listener.check_local_transaction, msg)
        except Exception:
            log.exception("check_local_transaction failed for %s; answering UNKNOW", uniq)
            state = LocalTransactionState.UNKNOW
        end = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=header.msg_id or uniq,
            from_transaction_check=True,
            transaction_id=header.transaction_id or uniq,
        )
        if self.end_transaction_hooks:
            run_end_transaction_hooks(self.end_transaction_hooks, EndTransactionContext(
                self.group, msg, end.msg_id, end.transaction_id or "", addr, state.name, True,
            ))
        try:
            await self._check_running().remoting.invoke_oneway(
                addr, RemotingCommand.request(RequestCode.END_TRANSACTION, end.encode(), oneway=True)
            )
        except ApogeeError as exc:
            log.warning("answer to the check of %s not delivered: %s", uniq, exc)
