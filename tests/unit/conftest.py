"""Unit tests are pure: any attempt to open an INET socket fails the test."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

# uvloop keeps the socket class it finds when it is first imported.  Import it before any test
# patches that class: a unit test that imports it first would leave it the guard for the rest
# of the session, and a later integration test in the same session (`make check-pure` runs
# both) would fail inside uvloop's loop.
with contextlib.suppress(ImportError):
    import uvloop  # noqa: F401

_real_socket = socket.socket


class _GuardedSocket(_real_socket):
    def __init__(self, family: int = -1, *args: object, **kwargs: object) -> None:
        if family in (socket.AF_INET, socket.AF_INET6):
            raise RuntimeError("unit tests must not open network sockets")
        super().__init__(family, *args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket, "socket", _GuardedSocket)
    yield
