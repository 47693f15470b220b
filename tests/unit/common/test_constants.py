from __future__ import annotations

import pytest

from apogee.common import constants as c


def test_delay_levels() -> None:
    levels = c.parse_delay_levels()
    assert len(levels) == 18
    assert levels[0] == 1000 and levels[4] == 60_000 and levels[-1] == 7_200_000
    with pytest.raises(ValueError):
        c.parse_delay_levels("1s 5x")


def test_sysflag_helpers_and_values() -> None:
    assert c.transaction_type(0x4 | 0x1) == c.TRANSACTION_PREPARED_TYPE
    assert c.reset_transaction_type(0xD, c.TRANSACTION_COMMIT_TYPE) == 0x9
    assert c.MessageSysFlag.TRANSACTION_ROLLBACK_TYPE == 0xC
    assert c.MessageSysFlag.COMPRESSION_ZLIB == 0x300


def test_names_and_perms() -> None:
    assert c.retry_topic("g") == "%RETRY%g" and c.dlq_topic("g") == "%DLQ%g"
    assert c.is_readable(6) and c.is_writeable(6) and not c.is_inherited(6)
    assert c.TBW102 == "TBW102" and c.SCHEDULE_TOPIC_XXXX == "SCHEDULE_TOPIC_XXXX"
