"""The optional C speed-ups (``apogee._native``), picked once at import.

Pattern from aiokafka (``NO_EXTENSIONS``): every function of the extension has a pure-Python
reference elsewhere in apogee, which stays the specification and the fallback; tests run both
and compare.  ``native`` is the extension module, or None when it is not built or
``APOGEE_NO_EXTENSIONS=1`` is set (useful to measure or debug the pure path).
``APOGEE_REQUIRE_NATIVE=1`` (set by ``make test``) turns a missing build into an ImportError,
so a broken compile is reported instead of silently benchmarked.  ``APOGEE_NATIVE_FILE`` loads
the extension from another build of the same sources instead of the installed one, and fails
the import if it cannot (``make check-native`` points it at its AddressSanitizer build).

For mypy, ``native`` has the module's type from ``apogee/_native.pyi`` (the signatures of
``src/apogee/_native/*.c``), so every call through it is checked; callers test
``native is not None`` before using it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import TYPE_CHECKING


def _load(path: str) -> object:
    """The extension built at ``path``, registered as ``apogee._native``."""
    spec = importlib.util.spec_from_file_location("apogee._native", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"APOGEE_NATIVE_FILE={path} is not an extension module")
    module = importlib.util.module_from_spec(spec)
    sys.modules["apogee._native"] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from apogee import _native

    native = _native
else:
    native = None
    if os.environ.get("APOGEE_NO_EXTENSIONS"):
        pass
    elif os.environ.get("APOGEE_NATIVE_FILE"):
        native = _load(os.environ["APOGEE_NATIVE_FILE"])  # asked for by name: failing to load is an error
    else:
        try:
            native = importlib.import_module("apogee._native")
        except ImportError:
            if os.environ.get("APOGEE_REQUIRE_NATIVE"):
                raise
