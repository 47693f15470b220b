"""Transactional messages on the broker: END_TRANSACTION and the check-back service.

How it works (RocketMQ's two-phase design, its TransactionalMessageService):

* A producer's half message is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real
  topic and queue in ``REAL_TOPIC``/``REAL_QID`` (``rewrite.to_half``, from the send processor), so no
  consumer sees it.
* END_TRANSACTION commit re-puts it to the real topic with the COMMIT transaction type;
  commit and rollback both write an *op* record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` whose body
  is the half message's queue offset: a half with an op is decided and never checked again.
* The check service walks the half queue from its progress offset.  A half older than the
  transaction timeout without an op is re-put at the end of the half queue with
  ``TRANSACTION_CHECK_TIMES`` + 1 and a CHECK_TRANSACTION_STATE is sent to a live producer of
  its group; the producer answers with END_TRANSACTION for that new copy.  After
  ``transactionCheckMax`` checks the half is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC``.
* A transaction has one undecided half at a time: END_TRANSACTION refuses a half the check
  has passed (below the progress: decided, or superseded by the copy it put back), so a late
  commit of the original (or a late answer about an older copy) cannot commit the message a
  second time next to the copy's check-back.  RocketMQ 4.x commits it again there; a producer
  whose END_TRANSACTION is refused this way has its transaction decided by the copy's check.

State that must survive a restart is the half queue's progress and the op queue's progress,
kept as consumer offsets of the internal group ``CID_RMQ_SYS_TRANS`` (consumerOffset.json).
The op progress only moves past ops whose half offset is below the half progress, so after
a restart every op that can still matter is read again: a half decided before the restart is
never checked or committed twice.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from apogee.broker import rewrite
from apogee.broker.clients import ClientManager
from apogee.broker.config import BrokerAddress, BrokerConfig
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.records import message_at
from apogee.broker.reput import reput
from apogee.common import constants as c
from apogee.common.java_hash import tags_code
from apogee.common.message import MessageExt
from apogee.common.message_codec import encode_record, properties_to_string
from apogee.common.message_id import create_offset_msg_id
from apogee.errors import ApogeeError
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.send import CheckTransactionStateRequestHeader
from apogee.store.inner import InnerMessage
from apogee.store.message_store import MessageStore
from apogee.store.results import PutResult

log = logging.getLogger("apogee.broker.transaction")

SYSTEM_GROUP = c.CID_RMQ_SYS_TRANS
OP_TAG = "d"
HALF_QUEUE = rewrite.HALF_QUEUE


class TransactionService:
    """Half messages decided (``end``) and checked back (``check_once``).  ``max_delay_level``:
    the highest delay level, for a committed message that asks for a delay."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        address: BrokerAddress,
        max_delay_level: int,
    ) -> None:
        self._config = config
        self._store = store
        self._offsets = offsets
        self._clients = clients
        self._address = address
        self._max_delay_level = max_delay_level
        # half queue offset -> op queue offset, for ops whose half offset >= the half progress
        self._done: dict[int, int] = {}
        self._op_read_offset = -1
        self._task: asyncio.Task[None] | None = None
        self._random = random.Random()
        self._wake = asyncio.Event()

    # --- progress (consumer offsets of the internal group) ------------------------------------

    @property
    def half_progress(self) -> int:
        return max(0, self._offsets.query(SYSTEM_GROUP, c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE))

    def _set_half_progress(self, offset: int) -> None:
        self._offsets.commit(SYSTEM_GROUP, c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE, offset)
        for half in [h for h in self._done if h < offset]:
            del self._done[half]
        self._save_op_progress()

    def _save_op_progress(self) -> None:
        end = self._store.get_max_offset_in_queue(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        start = min(self._done.values(), default=max(self._op_read_offset, 0))
        self._offsets.commit(SYSTEM_GROUP, c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, min(start, end))

    def _read_ops(self) -> None:
        """Learn the ops written since the last read (by us or before a restart)."""
        store = self._store
        if self._op_read_offset < 0:
            self._op_read_offset = max(0, self._offsets.query(SYSTEM_GROUP, c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0))
        queue = store.consume_queues.get(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        if queue is None:
            return
        end = store.get_max_offset_in_queue(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        progress = self.half_progress
        offset = max(self._op_read_offset, store.get_min_offset_in_queue(c.RMQ_SYS_TRANS_OP_HALF_TOPIC, 0))
        while offset < end:
            entry = queue.get_entry(offset)
            if entry is None:
                break
            record = store.look_message_by_offset(entry[0], entry[1])
            if record is not None:
                try:
                    half = int(record.body.decode("ascii"))
                except ValueError:
                    half = -1
                if half >= progress:
                    self._done.setdefault(half, offset)
            offset += 1
        self._op_read_offset = offset

    # --- END_TRANSACTION ----------------------------------------------------------------------

    def _put_op(self, half: MessageExt) -> PutResult:
        msg = InnerMessage(
            topic=c.RMQ_SYS_TRANS_OP_HALF_TOPIC,
            queue_id=0,
            body=str(half.queue_offset).encode("ascii"),
            properties=properties_to_string({c.TAGS: OP_TAG, c.CLUSTER: self._config.broker_cluster_name}),
            born_timestamp=int(time.time() * 1000),
            born_host=half.store_host,
            store_host=self._address.store_host,
            tags_code=tags_code(OP_TAG),
        )
        result, _ = self._store.put_message_nowait(msg)
        if result.ok:
            self._done[half.queue_offset] = result.logics_offset
        return result

    def end(
        self, producer_group: str, half_queue_offset: int, commit_log_offset: int, commit: bool
    ) -> str | None:
        """Commit or roll back one half message; returns an error text, None on success."""
        half = message_at(self._store, commit_log_offset)  # a record must start there
        if half is None:
            return f"no half message at commit log offset {commit_log_offset}"
        if half.topic != c.RMQ_SYS_TRANS_HALF_TOPIC:
            return f"the message at offset {commit_log_offset} is not a half message"
        if half.properties.get(c.PGROUP) not in (producer_group, None):
            return f"the producer group {producer_group} does not own this half message"
        if half.queue_offset != half_queue_offset:
            return f"tranStateTableOffset {half_queue_offset} does not match the half message's {half.queue_offset}"
        if half.queue_offset < self.half_progress:
            # The check passed it: decided already, or checked back, and then the copy it put
            # back is the transaction's one undecided half now.  Committing this one as well
            # would deliver the message twice (once more when the copy's check is answered).
            return (
                f"half message {half.queue_offset} was already decided or checked back "
                "(its check-back copy decides the transaction now)"
            )
        self._read_ops()
        if half.queue_offset in self._done:
            return None  # already decided (a late or repeated answer): nothing to do twice
        if commit:
            placed = rewrite.committed(rewrite.Placement.of(half), self._max_delay_level)
            if placed is None:
                return "the half message has no REAL_TOPIC/REAL_QID"
            real = reput(half, placed, self._address.store_host, prepared_transaction_offset=half.commit_log_offset)
            result, _ = self._store.put_message_nowait(real)
            if not result.ok:
                return f"committing the half message failed: {result.status.name}"
        result = self._put_op(half)
        if not result.ok:
            return f"writing the transaction op failed: {result.status.name}"
        return None

    # --- check-back ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        interval = self._config.transaction_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.check_once(int(time.time() * 1000))
            except Exception:
                log.exception("transaction check failed; retrying at the next interval")

    def check_once(self, now_ms: int) -> int:
        """One pass over the half queue; returns how many halves were checked back."""
        store = self._store
        queue = store.consume_queues.get(c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE)
        if queue is None:
            return 0
        self._read_ops()
        timeout_ms = self._config.transaction_time_out_ms
        check_max = self._config.transaction_check_max
        offset = max(self.half_progress, store.get_min_offset_in_queue(c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE))
        # Only halves that existed when the pass began: re-put copies wait for the next pass.
        end = store.get_max_offset_in_queue(c.RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE)
        checked = 0
        while offset < end:
            if offset in self._done:
                offset += 1
                continue
            entry = queue.get_entry(offset)
            if entry is None:
                break
            half = store.look_message_by_offset(entry[0], entry[1])
            if half is None:
                offset += 1
                continue
            immunity = half.properties.get(c.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            wait_ms = int(immunity) * 1000 if immunity and immunity.isdigit() else timeout_ms
            if now_ms - half.store_timestamp < wait_ms:
                break  # this one and every later half are too young
            times = rewrite.check_times(rewrite.Placement.of(half))
            if times >= check_max:
                self._discard(half)
            else:
                channel = self._producer_channel(half.properties.get(c.PGROUP, ""))
                if channel is None:
                    log.info("no live producer of group %s to check half %d; keeping it",
                             half.properties.get(c.PGROUP), half.queue_offset)
                    break
                copy = self._put_back(half, times + 1)
                if copy is None:
                    break
                self._send_check(channel, copy)
                checked += 1
            offset += 1
        if offset != self.half_progress:
            self._set_half_progress(offset)
        return checked

    def _producer_channel(self, group: str) -> Connection | None:
        live = [ch.conn for ch in self._clients.producer_channels(group)
                if isinstance(ch.conn, Connection) and ch.conn.is_open]
        return self._random.choice(live) if live else None

    def _put_back(self, half: MessageExt, check_times: int) -> MessageExt | None:
        placed = rewrite.checked(rewrite.Placement.of(half), check_times)
        msg = reput(half, placed, self._address.store_host)
        result, _ = self._store.put_message_nowait(msg)
        if not result.ok:
            log.warning("re-putting half message failed: %s", result.status.name)
            return None
        half.properties = dict(placed.properties)
        half.queue_offset = result.logics_offset
        half.commit_log_offset = result.wrote_offset
        half.store_timestamp = result.store_timestamp
        return half

    def _send_check(self, conn: Connection, half: MessageExt) -> None:
        uniq = half.properties.get(c.UNIQ_KEY)
        offset_id = create_offset_msg_id(self._address.ip, self._address.port, half.commit_log_offset)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            msg_id=uniq or offset_id,
            transaction_id=uniq or offset_id,
            offset_msg_id=offset_id,
        )
        props = dict(half.properties)
        body = encode_record(
            topic=props.get(c.REAL_TOPIC, half.topic),
            body=half.body,
            queue_id=int(props.get(c.REAL_QID, "0") or 0),
            flag=half.flag,
            queue_offset=half.queue_offset,
            physical_offset=half.commit_log_offset,
            sysflag=half.sys_flag,
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
            store_timestamp=half.store_timestamp,
            store_host=self._address.store_host,
            reconsume_times=half.reconsume_times,
            properties=props,
        )
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.encode(), body, oneway=True
        )
        try:
            conn.send(request)
        except ApogeeError as exc:
            log.info("check of half %d not sent: %s", half.queue_offset, exc)

    def _discard(self, half: MessageExt) -> None:
        props = dict(half.properties)
        log.warning(
            "half message %s of group %s discarded after %s checks (topic %s)",
            props.get(c.UNIQ_KEY), props.get(c.PGROUP), props.get(c.TRANSACTION_CHECK_TIMES),
            props.get(c.REAL_TOPIC),
        )
        msg = reput(half, rewrite.discarded(rewrite.Placement.of(half)), self._address.store_host)
        self._store.put_message_nowait(msg)
        self._put_op(half)

