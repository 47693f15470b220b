"""The message store: CommitLog, ConsumeQueues, IndexFiles, flushing, recovery and expiry.

No networking here.  The broker constructs a ``MessageStore`` from a ``StoreConfig``, awaits
``start()`` on its event loop and ``shutdown()`` on exit; see ``docs/store.md``.
"""

from apogee.store.config import FlushDiskType, StoreConfig
from apogee.store.dispatch import ArrivalListener
from apogee.store.inner import InnerBatch, InnerMessage, PlainMessage
from apogee.store.message_store import MessageStore
from apogee.store.results import (
    GetResult,
    GetStatus,
    MessageFilter,
    PutResult,
    PutStatus,
    QueryResult,
    TagCodeFilter,
)

__all__ = [
    "ArrivalListener",
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "InnerBatch",
    "InnerMessage",
    "PlainMessage",
    "MessageFilter",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "QueryResult",
    "StoreConfig",
    "TagCodeFilter",
]
