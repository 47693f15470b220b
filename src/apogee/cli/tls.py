"""TLS options of the command line: a server's ports (``apogee namesrv``, ``apogee broker``)
and a client's connections (``apogee admin``).

Each is a short spelling of a RocketMQ property (``remoting/tls_config.py``); a server reads
the same keys from its configuration file, which the options override.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from apogee.remoting.tls_config import ClientAuth, TlsClientConfig, TlsMode

# option name -> the RocketMQ key it sets
_SERVER_KEYS = {
    "tls_mode": "tls.server.mode",
    "tls_cert": "tls.server.certPath",
    "tls_key": "tls.server.keyPath",
    "tls_client_auth": "tls.server.need.client.auth",
    "tls_client_ca": "tls.server.trustCertPath",
    "tls_config": "tls.config.file",
}


def tls_server_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add a server's TLS options; the command receives them as ``tls_keys``, a dict of the
    RocketMQ keys given (to apply over the configuration file's)."""

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        given = {key: kwargs.pop(name) for name, key in _SERVER_KEYS.items()}
        return fn(tls_keys={k: v for k, v in given.items() if v is not None}, **kwargs)

    file = click.Path(dir_okay=False)
    for option in reversed((
        click.option("--tls-mode", type=click.Choice([m.value for m in TlsMode]),
                     help="tls.server.mode: plain only (disabled, the default), TLS and plain on one port "
                          "(permissive), or TLS only (enforcing)."),
        click.option("--tls-cert", type=file, metavar="PEM",
                     help="tls.server.certPath: the server's certificate chain."),
        click.option("--tls-key", type=file, metavar="PEM",
                     help="tls.server.keyPath: the server's private key."),
        click.option("--tls-client-auth", type=click.Choice([a.value for a in ClientAuth]),
                     help="tls.server.need.client.auth: ask TLS clients for a certificate (mutual TLS)."),
        click.option("--tls-client-ca", type=file, metavar="PEM",
                     help="tls.server.trustCertPath: the CA certificates client certificates must chain to."),
        click.option("--tls-config", type=file, metavar="FILE",
                     help="tls.config.file: a properties file of tls.* keys, read at start and on SIGHUP."),
    )):
        wrapper = option(wrapper)
    return wrapper


def tls_client_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add a client's TLS options (each also from an APOGEE_TLS* environment variable); the
    command receives ``tls``, a ``TlsClientConfig`` or None for plain connections.  Any
    ``--tls-*`` option turns TLS on, as ``--tls`` does."""

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        on, ca, cert, key, name, insecure = (kwargs.pop(n) for n in (
            "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "tls_insecure"))
        tls = None
        if on or ca or cert or key or name or insecure:
            tls = TlsClientConfig(enable=True, ca_file=ca or "", verify=not insecure, cert_file=cert or "",
                                  key_file=key or "", server_name=name or "")
        return fn(tls=tls, **kwargs)

    file = click.Path(dir_okay=False, exists=True)
    for option in reversed((
        click.option("--tls", is_flag=True, envvar="APOGEE_TLS",
                     help="Connect with TLS, verifying the servers' certificates (tls.enable). Env: APOGEE_TLS=1."),
        click.option("--tls-ca", type=file, envvar="APOGEE_TLS_CA", metavar="PEM",
                     help="CA certificates the servers' certificates must chain to (default: the system's)."),
        click.option("--tls-cert", type=file, envvar="APOGEE_TLS_CERT", metavar="PEM",
                     help="Client certificate chain, for servers that ask for one (mutual TLS)."),
        click.option("--tls-key", type=file, envvar="APOGEE_TLS_KEY", metavar="PEM",
                     help="The client certificate's key."),
        click.option("--tls-server-name", envvar="APOGEE_TLS_SERVER_NAME", metavar="NAME",
                     help="Check the servers' certificates for NAME instead of the address's host (e.g. "
                          "'localhost' for a certificate made for it, reached as 127.0.0.1)."),
        click.option("--tls-insecure", is_flag=True, envvar="APOGEE_TLS_INSECURE",
                     help="Do not verify the servers' certificates (encrypted, but anyone can pose as the server)."),
    )):
        wrapper = option(wrapper)
    return wrapper
