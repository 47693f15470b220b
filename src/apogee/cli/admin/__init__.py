"""``apogee admin``: mqadmin's commands, grouped by noun, over ``apogee.admin``."""

from apogee.cli.admin import acl as _acl  # noqa: F401  registers the ACL commands
from apogee.cli.admin import brokers as _brokers  # noqa: F401  registers cluster, broker, NameServer commands
from apogee.cli.admin import groups as _groups  # noqa: F401  registers group and offset commands
from apogee.cli.admin import messages as _messages  # noqa: F401  registers message commands
from apogee.cli.admin import replication as _replication  # noqa: F401  registers ha-status
from apogee.cli.admin import topics as _topics  # noqa: F401  registers topic commands
from apogee.cli.admin import trace as _trace  # noqa: F401  registers query-msg-trace-by-id
from apogee.cli.admin.commands import admin_group

__all__ = ["admin_group"]
