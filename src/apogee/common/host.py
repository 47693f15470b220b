"""This host's address as clients and brokers should name it (the one place that asks).

Used where an address is detected rather than configured: the broker's advertised address
when it listens on a wildcard, a client's ``clientIP``, the UNIQ_KEY prefix of a producer.
"""

from __future__ import annotations

import socket


def local_ip() -> str:
    """The first non-loopback IPv4 address of this host, else ``127.0.0.1``.

    A UDP ``connect`` sends no packet: it only asks the kernel which local address routes out.
    Any failure (no network, or sockets forbidden, as in the unit tests) gives the loopback
    address, a stable value the callers can live with.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = str(s.getsockname()[0])
    except Exception:  # best effort: see the docstring
        return "127.0.0.1"
    return ip if ip and not ip.startswith("0.") else "127.0.0.1"
