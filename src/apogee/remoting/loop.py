"""Event-loop choice: uvloop where it is installed, the standard loop otherwise."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> type[asyncio.AbstractEventLoop] | None:
    """uvloop's loop class, unless absent or disabled with APOGEE_NO_UVLOOP=1."""
    if os.environ.get("APOGEE_NO_UVLOOP") == "1":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.Loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the fastest available loop."""
    factory = loop_factory()
    if factory is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
