"""Certificates for TLS tests and benchmarks, made with the ``openssl`` command in a directory.

A test CA signs a server certificate for ``localhost`` and ``127.0.0.1`` and a client
certificate (mutual TLS); ``issue_server`` makes another server certificate (a reload).
P-256 keys: each certificate takes milliseconds.
"""

from __future__ import annotations

import itertools
import secrets
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from apogee.remoting.codec import FrameDecoder, encode
from apogee.remoting.command import RemotingCommand

_serials = itertools.count(1)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _key(name: str, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name, cwd=cwd)


@dataclass
class Certs:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def issue(self, name: str, cn: str, sans: str, usage: str) -> tuple[Path, Path]:
        """A certificate for ``cn`` (subjectAltName ``sans``, extendedKeyUsage ``usage``)
        signed by the test CA: (certificate, key)."""
        cwd = self.dir
        _key(f"{name}.key", cwd)
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={cn}", "-out", f"{name}.csr", cwd=cwd)
        ext = cwd / f"{name}.ext"
        ext.write_text(f"subjectAltName={sans}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n")
        serial = str(secrets.randbits(63) + next(_serials))
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", serial,
                 "-days", "2", "-extfile", ext.name, "-out", f"{name}.pem", cwd=cwd)
        return cwd / f"{name}.pem", cwd / f"{name}.key"

    def issue_server(self, name: str) -> tuple[Path, Path]:
        return self.issue(name, "localhost", "DNS:localhost,IP:127.0.0.1", "serverAuth")

    def client_context(self, *, with_cert: bool = False, server_name_check: bool = True) -> ssl.SSLContext:
        """Python's ssl client context trusting the test CA (and showing the client certificate)."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.check_hostname = server_name_check
        if with_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    _key("ca.key", directory)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=Apogee Test CA", "-days", "2",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-out", "ca.pem", cwd=directory)
    certs = Certs(directory, directory / "ca.pem", Path(), Path(), Path(), Path())
    certs.server_cert, certs.server_key = certs.issue_server("server")
    certs.client_cert, certs.client_key = certs.issue("client", "apogee-client", "DNS:apogee-client", "clientAuth")
    return certs


def server_conf(certs: Certs, mode: str, *, client_auth: str = "none") -> str:
    """broker.conf / namesrv.conf lines of a TLS server port with the test certificates."""
    lines = [f"tls.server.mode={mode}", f"tls.server.certPath={certs.server_cert}",
             f"tls.server.keyPath={certs.server_key}"]
    if client_auth != "none":
        lines += [f"tls.server.need.client.auth={client_auth}", f"tls.server.trustCertPath={certs.ca}"]
    return "\n".join(lines) + "\n"


def call(sock: socket.socket, request: RemotingCommand, timeout_s: float = 5.0) -> RemotingCommand:
    """One remoting request over a blocking socket (plain or ``ssl``); its answer, or
    ConnectionError when the server closes the connection first."""
    sock.settimeout(timeout_s)
    request.opaque = 1
    sock.sendall(b"".join(bytes(part) for part in encode(request)))
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed by the server")
        for cmd in decoder.feed(data):
            if cmd.opaque == request.opaque:
                return cmd


