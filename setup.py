"""Build hook for the optional C speed-ups (everything else is in pyproject.toml).

``apogee._native`` is optional: if it cannot be compiled (no C compiler or zlib headers), the
install still succeeds and apogee runs on its pure-Python reference implementations
(``apogee.common.accel``).  ``make test`` sets ``APOGEE_REQUIRE_NATIVE=1`` so a missing build is
reported rather than silently measured.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "apogee._native",
            sources=["src/apogee/_native.c"],
            libraries=["z"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-function"],
            optional=True,
        )
    ]
)
