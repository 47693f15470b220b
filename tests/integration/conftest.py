from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess, start_namesrv


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_namesrv(tmp_path / "namesrv")
    yield server
    server.close()


@pytest.fixture
def fast_expiring_namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_namesrv(
        tmp_path / "namesrv", "--expire-ms", "1500", "--scan-interval-ms", "200"
    )
    yield server
    server.close()
