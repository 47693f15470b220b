"""Names of topics and groups for tests that share a NameServer and broker: each test takes
names of its own, so what another test stored never shows in its assertions."""

from __future__ import annotations

import uuid


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"
