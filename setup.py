"""Build hook for the optional C speed-ups (everything else is in pyproject.toml).

``apogee._native`` is optional: if it cannot be compiled (no C compiler or zlib headers), the
install still succeeds and apogee runs on its pure-Python reference implementations
(``apogee.common.accel``).  ``make test`` sets ``APOGEE_REQUIRE_NATIVE=1`` so a missing build is
reported rather than silently measured.  Its sources are split by domain under
``src/apogee/_native/`` (module.c says which file holds what); ``make check-native`` builds the
same sources with sanitizers (``APOGEE_NATIVE_CFLAGS`` adds compiler flags).
"""

import os
import shlex

from setuptools import Extension, setup

NATIVE_DIR = "src/apogee/_native"
NATIVE_SOURCES = [f"{NATIVE_DIR}/{name}.c"
                  for name in ("module", "hashes", "records", "client", "frames", "reads", "dispatch", "flusher",
                               "crc32")]
NATIVE_HEADERS = [f"{NATIVE_DIR}/native.h"]
EXTRA_FLAGS = shlex.split(os.environ.get("APOGEE_NATIVE_CFLAGS", ""))

setup(
    # The C sources are the extension's, not package data of a wheel.
    exclude_package_data={"apogee._native": ["*.c", "*.h"]},
    ext_modules=[
        Extension(
            "apogee._native",
            sources=NATIVE_SOURCES,
            depends=NATIVE_HEADERS,
            libraries=["z"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-function", *EXTRA_FLAGS],
            extra_link_args=EXTRA_FLAGS,
            optional=True,
        )
    ]
)
