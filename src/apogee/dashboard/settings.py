"""What a dashboard is configured with: command-line options over a properties file.

The file uses the same ``key=value`` form and loader as broker.conf (``common/config.py``):
``namesrvAddr``, ``listen``, ``username``, ``password``, ``cacheTtlSeconds``,
``sampleIntervalSeconds``.  An unknown key
stops the start with one line naming it, as for the servers.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apogee.common.config import apply, key_map, load_file, unknown_keys_error
from apogee.remoting.config import parse_listen

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_PORT = 8080
PASSWORD_ENV = "APOGEE_DASHBOARD_PASSWORD"


@dataclass
class DashboardSettings:
    namesrv_addr: str = ""
    listen: str = DEFAULT_LISTEN
    # Optional login (HTTP basic): off while ``password`` is empty.
    username: str = "admin"
    password: str = ""
    # How long expensive cluster-wide reads (topic list, cluster view) are reused.
    cache_ttl_seconds: float = 5.0
    # How often the sampler asks the brokers for the live charts and the group list (sampler.py).
    sample_interval_seconds: float = 5.0
    # Passed through to every ``AdminClient(namesrv_addr, **admin_options)`` the dashboard
    # opens (credentials and TLS options of the admin layer); not a file key.
    admin_options: dict[str, Any] = field(default_factory=dict)

    @property
    def host_port(self) -> tuple[str, int]:
        return parse_listen(self.listen, DEFAULT_PORT)

    @property
    def login_required(self) -> bool:
        return bool(self.password)

    def exposed_without_login(self) -> bool:
        """Listening beyond loopback with no password: anyone who reaches the port may
        create and delete topics.  The server says so at start."""
        return not self.login_required and not is_loopback(self.host_port[0])


FILE_KEYS = frozenset(k for k, f in key_map(DashboardSettings).items() if f.name != "admin_options")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_settings(path: str | Path | None = None, **overrides: Any) -> DashboardSettings:
    """The file's settings (when given), then every override that is not None."""
    settings = DashboardSettings()
    if path is not None:
        values = load_file(path)
        unknown = set(values) - FILE_KEYS
        if unknown:
            raise unknown_keys_error(str(path), unknown, FILE_KEYS)
        apply(settings, values)
    for name, value in overrides.items():
        if value is not None:
            setattr(settings, name, value)
    return settings
