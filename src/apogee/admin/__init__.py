"""Administration as a library (what ``apogee admin`` and tests call): topics, groups,
messages and offsets, brokers and NameServers, cluster reports (mqadmin's operations)."""

from apogee.admin.client import AdminClient, FoundMessage

__all__ = ["AdminClient", "FoundMessage"]
