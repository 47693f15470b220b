"""Administration as a library (what ``apogee admin`` and tests call): message queries,
offsets and rewind, topics and clusters."""

from apogee.admin.client import AdminClient, FoundMessage

__all__ = ["AdminClient", "FoundMessage"]
