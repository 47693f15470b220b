"""The ``apogee`` command line."""

from apogee.cli.main import main

__all__ = ["main"]
