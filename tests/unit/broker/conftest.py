"""The ``tables`` fixture: a broker's collaborators around a real store (``harness``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.store import FlushDiskType
from tests.unit.broker.harness import Tables, close_tables, make_tables


@pytest.fixture
async def tables(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Tables]:
    """``indirect`` parametrization may name the store's flush type."""
    t = await make_tables(tmp_path, getattr(request, "param", FlushDiskType.ASYNC_FLUSH))
    yield t
    await close_tables(t)
