"""Pure byte layouts of the store's own files: ConsumeQueue entries, IndexFile, checkpoint.

Each module states its layout in a comment block, exposes sizes as constants and offers
pack/unpack helpers; none of them touches a file.  The CommitLog record layout is shared with
the client and lives in ``apogee.common.message_codec``.
"""

from apogee.store.layout.checkpoint import CHECKPOINT_FILE_SIZE
from apogee.store.layout.cq_unit import CQ_UNIT_SIZE
from apogee.store.layout.index import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE

__all__ = [
    "CHECKPOINT_FILE_SIZE",
    "CQ_UNIT_SIZE",
    "INDEX_ENTRY_SIZE",
    "INDEX_HEADER_SIZE",
    "INDEX_SLOT_SIZE",
]
