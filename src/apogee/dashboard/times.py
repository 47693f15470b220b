"""Times in the dashboard's forms: the value of a ``datetime-local`` input and back.

A form's date and time is the dashboard's local time (the browser sends the input's text as
typed, without a zone), to the millisecond: a reset by time goes to the message stored
nearest the time, so a whole second can be the wrong message.  Pure.
"""

from __future__ import annotations

import datetime as dt

from apogee.dashboard.errors import BadInput


def local_input(ms: float) -> str:
    """A ``datetime-local`` value for ``ms`` since the epoch."""
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(timespec="milliseconds")


def parse_time(text: str, what: str = "the time") -> int:
    """Milliseconds since the epoch from a ``datetime-local`` value (local time), an ISO
    date-time with its offset, or milliseconds."""
    text = text.strip()
    if not text:
        raise BadInput(f"{what} is required")
    if text.isdigit():
        return int(text)
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise BadInput(f"{what} {text!r} is not a date and time (YYYY-MM-DDTHH:MM[:SS[.mmm]])") from None
