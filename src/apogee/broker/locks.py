"""Queue locks for orderly consumption (RocketMQ's RebalanceLockManager).

One client per (group, queue) holds the lock; it lapses when not renewed for
``max_live_ms`` (60 s), so a consumer that died without unlocking frees its queues.  Pure
state with the clock passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.bodies.heartbeat import QueueKey


@dataclass
class _Lock:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, max_live_ms: int = 60_000) -> None:
        self.max_live_ms = max_live_ms
        self._locks: dict[str, dict[QueueKey, _Lock]] = {}

    def try_lock_batch(self, group: str, mqs: list[QueueKey], client_id: str, now_ms: int) -> list[QueueKey]:
        """Lock (or renew) what is free or already ours; return the queues now held."""
        table = self._locks.setdefault(group, {})
        held: list[QueueKey] = []
        for mq in mqs:
            lock = table.get(mq)
            if lock is None or lock.client_id == client_id or now_ms - lock.last_update_ms > self.max_live_ms:
                table[mq] = _Lock(client_id, now_ms)
                held.append(mq)
        return held

    def unlock_batch(self, group: str, mqs: list[QueueKey], client_id: str) -> None:
        table = self._locks.get(group)
        if table is None:
            return
        for mq in mqs:
            lock = table.get(mq)
            if lock is not None and lock.client_id == client_id:
                del table[mq]

    def holder(self, group: str, mq: QueueKey, now_ms: int) -> str | None:
        lock = self._locks.get(group, {}).get(mq)
        if lock is None or now_ms - lock.last_update_ms > self.max_live_ms:
            return None
        return lock.client_id
