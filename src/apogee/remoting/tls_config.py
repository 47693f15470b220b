"""TLS settings of servers and clients, under RocketMQ 4.9's property names (sans-I/O).

RocketMQ reads them from JVM system properties (``-Dtls.server.mode=enforcing``) and from
``tls.config.file``; Apogee reads the same keys from broker.conf / namesrv.conf and from the
file named by ``tls.config.file``, which, as in RocketMQ's ``TlsHelper``, wins over the
server's own file and may not set ``tls.server.mode`` or ``tls.enable``.

Where Apogee differs from RocketMQ, on purpose (docs/security.md, TLS):

* ``tls.server.mode`` defaults to ``disabled`` (RocketMQ: ``permissive`` with a self-signed
  test certificate made at start, which protects nothing: ``tls.test.mode.enable`` only
  switches verification off on a client here).
* A client verifies the server's certificate and host name unless told not to
  (``tls.client.authServer`` defaults to true; RocketMQ: false, trust anything).
* A server that asks for a client certificate verifies it against
  ``tls.server.trustCertPath`` (Python's ssl has no "ask but trust anything" mode, which is
  what RocketMQ's ``tls.server.authClient=false`` does).
* A broker's own outgoing connections (NameServer registration, a slave's calls to its
  master) use TLS when ``tls.enable=true``; RocketMQ turns that on by itself when
  ``tls.server.mode=enforcing``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any

from apogee.common.config import apply, key_map, load_file
from apogee.errors import ConfigError

# The first byte of a TLS record carrying a handshake message (a ClientHello): what
# RocketMQ's HandshakeHandler looks at to tell TLS from plain remoting frames.  A plain frame
# starts with its big-endian length, whose first byte is 0 for any frame below 16 MiB.
TLS_HANDSHAKE_RECORD = 0x16

# How long a connection may take to send its first byte and finish its handshake (Apogee's
# key; Netty's SslHandler gives a handshake 10 s, which RocketMQ keeps).
DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000


class TlsMode(enum.Enum):
    """RocketMQ's ``TlsMode``: what a server port accepts."""

    DISABLED = "disabled"  # plain only; a TLS handshake is closed as a bad frame
    PERMISSIVE = "permissive"  # TLS and plain on one port, told apart by the first byte
    ENFORCING = "enforcing"  # TLS only; a plain connection is closed


class ClientAuth(enum.Enum):
    """``tls.server.need.client.auth`` (Netty's ``ClientAuth``)."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


@dataclass
class TlsServerConfig:
    """A server's TLS: the remoting port's mode, its certificate, client-certificate checks,
    and Apogee's TLS on the HA port (Apogee to Apogee only: RocketMQ 4.x's HA port is plain)."""

    mode: TlsMode = field(default=TlsMode.DISABLED, metadata={"key": "tls.server.mode"})
    cert_path: str = field(default="", metadata={"key": "tls.server.certPath"})
    key_path: str = field(default="", metadata={"key": "tls.server.keyPath"})
    key_password: str = field(default="", metadata={"key": "tls.server.keyPassword", "secret": True})
    need_client_auth: ClientAuth = field(default=ClientAuth.NONE, metadata={"key": "tls.server.need.client.auth"})
    # Read for compatibility with RocketMQ's files; Apogee always verifies a client
    # certificate it asks for (see the module doc).
    auth_client: bool = field(default=True, metadata={"key": "tls.server.authClient"})
    trust_cert_path: str = field(default="", metadata={"key": "tls.server.trustCertPath"})
    config_file: str = field(default="", metadata={"key": "tls.config.file"})
    handshake_timeout_ms: int = field(
        default=DEFAULT_HANDSHAKE_TIMEOUT_MS, metadata={"key": "tls.server.handshakeTimeoutMillis"}
    )
    # Apogee's: the master's HA port takes TLS only, and a slave connects to it with TLS
    # (the tls.client.* settings).  Off by default.
    ha_enable: bool = field(default=False, metadata={"key": "tls.ha.enable"})

    @property
    def needs_context(self) -> bool:
        """Whether some port of this server speaks TLS."""
        return self.mode is not TlsMode.DISABLED or self.ha_enable

    def validate(self) -> None:
        if not self.needs_context:
            return
        why = f"tls.server.mode={self.mode.value}" + (", tls.ha.enable=true" if self.ha_enable else "")
        if not self.cert_path or not self.key_path:
            raise ConfigError(f"{why} needs tls.server.certPath and tls.server.keyPath (PEM files)")
        if self.need_client_auth is not ClientAuth.NONE and not self.trust_cert_path:
            raise ConfigError(
                f"tls.server.need.client.auth={self.need_client_auth.value} needs tls.server.trustCertPath: "
                "the CA certificates client certificates are verified against"
            )
        if self.handshake_timeout_ms <= 0:
            raise ConfigError("tls.server.handshakeTimeoutMillis must be positive")


@dataclass
class TlsClientConfig:
    """A client's TLS (Apogee's clients, admin, Spark connector, and a broker's own outgoing
    connections): on or off, whom to trust, which name to check, which certificate to show."""

    enable: bool = field(default=False, metadata={"key": "tls.enable"})
    # PEM CA certificates the server's certificate must chain to; empty: the system's.
    ca_file: str = field(default="", metadata={"key": "tls.client.trustCertPath"})
    # Verify the server's certificate and host name (RocketMQ's tls.client.authServer).
    verify: bool = field(default=True, metadata={"key": "tls.client.authServer"})
    # RocketMQ's test mode on a client: trust any certificate.
    test_mode: bool = field(default=False, metadata={"key": "tls.test.mode.enable"})
    # Mutual TLS: the certificate (PEM chain) and key this client shows.
    cert_file: str = field(default="", metadata={"key": "tls.client.certPath"})
    key_file: str = field(default="", metadata={"key": "tls.client.keyPath"})
    key_password: str = field(default="", metadata={"key": "tls.client.keyPassword", "secret": True})
    # Apogee's: the name checked against the server's certificate (and sent as SNI) instead of
    # the host of the address; for a certificate made for "localhost" reached as 127.0.0.1,
    # or one certificate name for every broker of a cluster.
    server_name: str = field(default="", metadata={"key": "tls.client.serverName"})

    @property
    def verifies(self) -> bool:
        return self.verify and not self.test_mode

    def validate(self) -> None:
        if self.key_file and not self.cert_file:
            raise ConfigError("tls.client.keyPath is set without tls.client.certPath")

    def key(self) -> tuple[Any, ...]:
        """The settings as a hashable value (clients with equal settings share connections)."""
        return tuple(getattr(self, f.name) for f in fields(self))


# Keys never read from tls.config.file: RocketMQ's TlsSystemConfig says "except tlsMode and
# tlsEnable"; Apogee's tls.ha.enable decides, as they do, which ports speak TLS at all.
_NOT_IN_TLS_FILE = frozenset({"tls.server.mode", "tls.enable", "tls.config.file", "tls.ha.enable"})


def apply_tls_file(server: TlsServerConfig, client: TlsClientConfig | None) -> None:
    """Apply ``tls.config.file`` (when set) over ``server`` and ``client``: RocketMQ's order,
    the file wins.  A key neither reads, or one the file may not set, is a ConfigError."""
    path = server.config_file
    if not path:
        return
    values = load_file(path)
    refused = sorted(_NOT_IN_TLS_FILE & set(values))
    if refused:
        raise ConfigError(
            f"{path}: {', '.join(refused)} cannot be set in tls.config.file (they decide which ports speak TLS: "
            "set them in the server's own configuration)"
        )
    unknown = set(apply(server, values, strict=False))
    if client is not None:
        unknown &= set(apply(client, {k: values[k] for k in unknown}, strict=False))
    if unknown:
        raise ConfigError(f"{path}: unknown TLS keys {', '.join(sorted(unknown))}")


def secret_keys(*configs: object) -> frozenset[str]:
    """The property names of ``configs`` whose values are never printed (key passwords)."""
    return frozenset(
        key for config in configs for key, f in key_map(type(config)).items() if f.metadata.get("secret")
    )
