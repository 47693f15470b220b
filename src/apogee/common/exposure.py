"""Whether a server is reachable from other machines without access control (issue 22, item 4).

``apogee dev`` and a broker on loopback stay open; a broker or NameServer listening on any other
address without ACL says so once at start, since anyone who reaches the port can then read
every topic, delete topics, reset offsets or change the configuration.  (RocketMQ 4.9 checks
ACL on brokers only: a NameServer always warns when it is not on loopback.)  Pure.
"""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = frozenset(("localhost", "localhost.localdomain", "ip6-localhost"))


def is_loopback(host: str) -> bool:
    """True for an address or name that only this machine can reach; a wildcard ("", 0.0.0.0,
    ::) or any other name is not (names are not resolved)."""
    host = host.strip().strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_port_warning(role: str, listen_host: str, *, acl: bool) -> str | None:
    """The warning a ``role`` ("broker" or "NameServer") listening on ``listen_host`` logs at
    start, or None (loopback, or ACL on)."""
    if acl or is_loopback(listen_host):
        return None
    where = listen_host or "0.0.0.0"
    if role == "broker":
        return (
            f"the broker listens on {where}, beyond this machine, with ACL off: anyone who reaches the port can "
            "read and write every topic, delete topics, reset offsets and change the configuration. Set "
            "aclEnable=true with a plain_acl.yml (docs/security.md), or listen on 127.0.0.1, or firewall the port"
        )
    return (
        f"the {role} listens on {where}, beyond this machine, and has no access control (RocketMQ's NameServer "
        "has none): anyone who reaches the port can read routes, change KV config and wipe brokers' write "
        "permission. Listen on 127.0.0.1 or a private network, or firewall the port (docs/security.md)"
    )
