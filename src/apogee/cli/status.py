"""Exit statuses of the ``apogee`` command."""

from enum import IntEnum


class ExitStatus(IntEnum):
    SUCCESS = 0
    ERROR = 1
    USAGE = 2  # click's own code for bad flags
    CONFIG = 3
    UNAVAILABLE = 4  # a server could not be reached or could not bind
    CTRL_C = 130
