"""Message queue selectors for ordered sends: pick the queue from the message and an argument.

Messages that must stay in order (one order, one account, one key) go to the same queue; the
selector maps the caller's ``arg`` to a queue.  ``SelectByHash`` uses Java's
``String.hashCode`` for strings, so Apogee producers and Java producers with
``SelectMessageQueueByHash`` put the same key on the same queue.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any, Protocol

from apogee.common.java_hash import java_string_hash
from apogee.common.message import Message, MessageQueue


class MessageQueueSelector(Protocol):
    """``select(queues, msg, arg)`` -> one of ``queues`` (a non-empty, stable-ordered list)."""

    def select(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def java_hash_code(arg: Any) -> int:
    """The ``hashCode()`` a Java caller would get for ``arg`` (str, int or bool)."""
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(2**31) <= arg < 2**31:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    return java_string_hash(str(arg))


class SelectByHash:
    """``abs(hashCode(arg)) % len(queues)``, as RocketMQ's SelectMessageQueueByHash."""

    def select(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        value = java_hash_code(arg)
        if value < 0:
            value = abs(value)  # Math.abs; MIN_VALUE stays negative in Java, and % keeps it in range here
        return queues[value % len(queues)]


class SelectRoundRobin:
    """Each call takes the next queue (ignores ``arg``)."""

    def __init__(self, start: int | None = None) -> None:
        self._counter = itertools.count(random.randrange(1 << 16) if start is None else start)

    def select(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return queues[next(self._counter) % len(queues)]


class SelectRandom:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return queues[self._rng.randrange(len(queues))]
