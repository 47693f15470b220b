"""What a pull's filter answers, as the store asks it (RocketMQ's ``MessageFilter``).

The store reads ConsumeQueue entries and records and asks the pull's filter about each; the
filters (``apogee.filter``: TAG and SQL92) build one from a subscription.  The interface lives
here, between them, so that neither the filters import the store nor the store the filters.
"""

from __future__ import annotations

from typing import Protocol


class MessageFilter(Protocol):
    """Decides which messages a pull returns; the broker's tag and SQL92 filters implement it."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """Cheap first test on the ConsumeQueue entry's tag hash."""
        ...

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        """Second test on the whole stored record (properties), for SQL92."""
        ...


class TagCodeFilter:
    """Match a set of tag hash codes (``None`` = every message, the ``*`` subscription)."""

    __slots__ = ("codes",)

    def __init__(self, codes: set[int] | frozenset[int] | None) -> None:
        self.codes = codes

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self.codes is None or tags_code in self.codes

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        return True
