"""ProcessQueue: the messages of one queue between pull and commit.  Pure; clock passed in.

A pulled batch is ``put`` here and handed to listeners; finished messages are ``remove``d,
and what may be committed is the smallest offset still held (or one past the largest seen
when none is held): a slow message keeps the commit point behind it, so a crash re-delivers
it instead of losing it.  The counters drive flow control (message count, bytes, offset
span) and the flags say whether the queue is still ours (``dropped``), locked on the broker
for orderly consumption (``locked``, ``last_lock_ms``) and when it was last pulled.

Orderly consumption takes messages in offset order (``take``), moves them into a consuming
set, and either ``commit``s them or puts them back (``make_messages_to_consume_again``).

Pulled batches arrive in increasing offset order, so the table is an insertion-ordered dict
plus a deque of offsets: the smallest held offset is found in amortised O(1).
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Iterable, Sequence
from itertools import islice, repeat

from apogee.common import constants as c
from apogee.common.message import MessageExt

_BODY = operator.attrgetter("body")

REBALANCE_LOCK_MAX_LIVE_MS = 30_000
PULL_MAX_IDLE_MS = 120_000


class ProcessQueue:
    __slots__ = (
        "_msgs",
        "_order",
        "_consuming",
        "msg_count",
        "msg_size",
        "queue_offset_max",
        "dropped",
        "released",
        "locked",
        "last_lock_ms",
        "last_pull_ms",
        "last_consume_ms",
        "consuming",
        "running_batches",
        "try_unlock_times",
    )

    def __init__(self, now_ms: int = 0) -> None:
        self._msgs: dict[int, MessageExt] = {}
        self._order: collections.deque[int] = collections.deque()
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.released = False  # the final offset of a dropped queue was committed: no more updates
        self.locked = False
        self.last_lock_ms = 0
        self.last_pull_ms = now_ms
        self.last_consume_ms = now_ms
        self.consuming = False
        self.running_batches = 0  # listener calls in progress (drain on hand-off)
        self.try_unlock_times = 0

    # --- pull side ----------------------------------------------------------------------------

    def put(self, msgs: Sequence[MessageExt]) -> bool:
        """Add a pulled batch; True when an orderly consumer should be woken to consume."""
        if msgs and msgs[0].queue_offset > self.queue_offset_max:
            offsets = [m.queue_offset for m in msgs]
            if all(map(operator.lt, offsets, islice(offsets, 1, None))):
                # The usual pulled batch: increasing offsets beyond everything held, so none of
                # them is in the table or being consumed; add it with C-level loops.
                self._msgs.update(zip(offsets, msgs, strict=False))  # equal lengths: no check on this path
                self._order.extend(offsets)
                self.msg_count += len(offsets)
                self.msg_size += sum(map(len, map(_BODY, msgs)))
                self.queue_offset_max = offsets[-1]
                if not self.consuming:
                    self.consuming = True
                    return True
                return False
        added = 0
        size = 0
        table = self._msgs
        order = self._order
        for msg in msgs:
            off = msg.queue_offset
            if off not in table and off not in self._consuming:
                table[off] = msg
                order.append(off)
                added += 1
                size += len(msg.body)
                if off > self.queue_offset_max:
                    self.queue_offset_max = off
        self.msg_count += added
        self.msg_size += size
        dispatch = False
        if table and not self.consuming:
            dispatch = True
            self.consuming = True
        return dispatch

    def max_span(self) -> int:
        """Distance between the smallest and largest held offsets (0 when empty)."""
        first = self._first()
        if first is None:
            return 0
        return self.queue_offset_max - first

    def _first(self) -> int | None:
        order, table = self._order, self._msgs
        while order and order[0] not in table:
            order.popleft()
        return order[0] if order else None

    # --- concurrent consumption ---------------------------------------------------------------

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget finished messages; the offset that may be committed, or -1 if none changed.

        Returns the smallest offset still held, or ``queue_offset_max + 1`` when the queue
        is now empty; -1 when the queue was already empty (nothing to commit).
        """
        table = self._msgs
        if not table:
            return -1
        if msgs.__class__ is list:
            before = len(table)
            popped = list(map(table.pop, [m.queue_offset for m in msgs], repeat(None)))
            removed = before - len(table)
            if removed == len(popped):
                size = sum(map(len, map(_BODY, msgs)))
            else:
                size = sum(len(m.body) for m in popped if m is not None)
        else:
            removed = 0
            size = 0
            for msg in msgs:
                if table.pop(msg.queue_offset, None) is not None:
                    removed += 1
                    size += len(msg.body)
        self.msg_count -= removed
        self.msg_size -= size
        first = self._first()
        return self.queue_offset_max + 1 if first is None else first

    def commit_offset(self) -> int:
        """Where consumption may resume now: smallest held offset, or one past the last seen."""
        first = self._first()
        if first is not None:
            return first
        if self._consuming:
            return min(self._consuming)
        return self.queue_offset_max + 1 if self.queue_offset_max >= 0 else -1

    def messages(self) -> list[MessageExt]:
        return list(self._msgs.values())

    def expired_messages(self, now_ms: int, timeout_ms: int, limit: int = 16) -> list[MessageExt]:
        """Held messages whose listener started more than ``timeout_ms`` ago (oldest first)."""
        out: list[MessageExt] = []
        for off in list(self._order):
            msg = self._msgs.get(off)
            if msg is None:
                continue
            started = msg.properties.get(c.PROPERTY_CONSUME_START_TIMESTAMP)
            if started is None or not started.isdigit() or now_ms - int(started) <= timeout_ms:
                break  # offsets are consumed roughly in order: the oldest is first
            out.append(msg)
            if len(out) >= limit:
                break
        return out

    # --- orderly consumption ------------------------------------------------------------------

    def take(self, batch_size: int, now_ms: int) -> list[MessageExt]:
        """The next ``batch_size`` messages in offset order, moved to the consuming set."""
        self.last_consume_ms = now_ms
        out: list[MessageExt] = []
        table = self._msgs
        order = self._order
        while order and len(out) < batch_size:
            off = order.popleft()
            msg = table.pop(off, None)
            if msg is None:
                continue
            out.append(msg)
            self._consuming[off] = msg
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """Orderly: the consuming set is done; the offset to commit (-1 if it was empty)."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        self.msg_count -= len(self._consuming)
        self.msg_size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        return offset

    def make_messages_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Orderly: put taken messages back, in front, to be consumed again in order."""
        back = sorted(
            (m for m in msgs if self._consuming.pop(m.queue_offset, None) is not None), key=lambda m: m.queue_offset
        )
        for msg in reversed(back):
            self._msgs[msg.queue_offset] = msg
            self._order.appendleft(msg.queue_offset)

    def rollback(self) -> None:
        """Orderly: put the whole consuming set back."""
        self.make_messages_to_consume_again(list(self._consuming.values()))

    @property
    def consuming_count(self) -> int:
        return len(self._consuming)

    # --- state --------------------------------------------------------------------------------

    def info(self) -> dict[str, int]:
        """The cached and (orderly) consuming offsets' bounds and counts, under RocketMQ's
        ProcessQueueInfo names (``fillProcessQueueInfo``); 0 where there are none."""
        held = [off for off in self._order if off in self._msgs]
        consuming = self._consuming
        return {
            "cached_msg_min_offset": held[0] if held else 0,
            "cached_msg_max_offset": max(held) if held else 0,
            "cached_msg_count": len(self._msgs),
            "transaction_msg_min_offset": min(consuming) if consuming else 0,
            "transaction_msg_max_offset": max(consuming) if consuming else 0,
            "transaction_msg_count": len(consuming),
        }

    def is_lock_expired(self, now_ms: int, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_MS) -> bool:
        return now_ms - self.last_lock_ms > max_live_ms

    def is_pull_expired(self, now_ms: int, max_idle_ms: int = PULL_MAX_IDLE_MS) -> bool:
        return now_ms - self.last_pull_ms > max_idle_ms

    def clear(self) -> None:
        self._msgs.clear()
        self._order.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1

    def is_empty(self) -> bool:
        return not self._msgs and not self._consuming

    def __len__(self) -> int:
        return self.msg_count
