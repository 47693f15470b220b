"""``apogee admin``: mqadmin's commands, grouped by noun, over ``apogee.admin``."""

from apogee.cli.admin import replication as _replication  # noqa: F401  registers ha-status
from apogee.cli.admin import status as _status  # noqa: F401  registers broker-status, topic-status
from apogee.cli.admin import topics as _topics  # noqa: F401  registers update-topic
from apogee.cli.admin import trace as _trace  # noqa: F401  registers query-msg-trace-by-id
from apogee.cli.admin.commands import admin_group

__all__ = ["admin_group"]
