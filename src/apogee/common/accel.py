"""The optional C speed-ups (``apogee._native``), picked once at import.

Pattern from aiokafka (``NO_EXTENSIONS``): every function of the extension has a pure-Python
reference elsewhere in apogee, which stays the specification and the fallback; tests run both
and compare.  ``native`` is the extension module, or None when it is not built or
``APOGEE_NO_EXTENSIONS=1`` is set (useful to measure or debug the pure path).
``APOGEE_REQUIRE_NATIVE=1`` (set by ``make test``) turns a missing build into an ImportError,
so a broken compile is reported instead of silently benchmarked.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

native: Any = None  # the module, untyped: its functions are documented in _native.c

if not os.environ.get("APOGEE_NO_EXTENSIONS"):
    try:
        native = importlib.import_module("apogee._native")
    except ImportError:
        if os.environ.get("APOGEE_REQUIRE_NATIVE"):
            raise
