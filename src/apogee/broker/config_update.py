"""Which broker settings change at runtime (UPDATE_BROKER_CONFIG 25; GET_BROKER_CONFIG 26
reads them), and where a change persists.

Only the keys in ``LIVE_BROKER_KEYS`` change at runtime: each is read from the config object
on every use, so the next request or pass sees the new value.  Everything else is refused
with the reason (``common.config_update``).  A change is persisted into the broker.conf given
with ``-c``, or, without one, ``<storePathRootDir>/config/broker.properties`` (RocketMQ's
default, ``~/store/config/broker.properties``, is under its default store root too), which
``apogee broker`` applies at start when started without ``-c``.
"""

from __future__ import annotations

from pathlib import Path

# Keys whose readers look at the config object on every use: the send, pull, reply and
# end-transaction processors, the transaction checker's pass, the store's reader (maxTransfer*)
# and its cleaner (each pass reads its settings).
LIVE_BROKER_KEYS = frozenset({
    # BrokerConfig
    "brokerPermission", "longPollingEnable", "shortPollingTimeMills", "transactionTimeOut",
    "transactionCheckMax", "enablePropertyFilter", "rejectTransactionMessage", "storeReplyMessageEnable",
    "traceOn", "regionId",
    # MessageStoreConfig
    "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "diskSpaceCleanForciblyRatio",
    "diskSpaceWarningLevelRatio", "cleanFileForciblyEnable", "cleanUnconsumedFileEnable",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk",
})


def default_config_path(store_root: str | Path) -> Path:
    """Where runtime changes persist when the broker was started without ``-c``."""
    return Path(store_root) / "config" / "broker.properties"
