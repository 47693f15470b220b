"""Errors of the Spark connector, and how to show them as one readable line.

Everything the connector refuses on purpose raises ``ApogeeSparkError`` with a one-line message
that starts with ``apogee:``.  Spark wraps exceptions raised in Python workers into its own
(``AnalysisException``, ``PythonException``, ``StreamingQueryException``...) whose text is the
Python traceback plus a Java stack; ``one_line(exc)`` digs our line back out of that, so a CLI
or notebook can print it alone.
"""

from __future__ import annotations

import re

from apogee.errors import ApogeeError

PREFIX = "apogee: "


class ApogeeSparkError(ApogeeError, ValueError):
    """A connector error meant for the user: bad option, unknown topic, unreachable server."""

    def __init__(self, message: str) -> None:
        if not message.startswith(PREFIX):
            message = PREFIX + message
        super().__init__(message)


class DataLossError(ApogeeSparkError):
    """Messages the query never read are gone (expired or deleted) and failOnDataLoss is true."""


_OURS = re.compile(r"(?:ApogeeSparkError|DataLossError): (apogee: [^\n]*)")
_JAVA = re.compile(r"^(?:\[[A-Z_.]+\]\s*)?([^\n]*)")


def one_line(exc: BaseException) -> str:
    """The connector's own message inside ``exc`` (however deeply Spark wrapped it), else
    the first line of ``exc``'s text."""
    if isinstance(exc, ApogeeSparkError):
        return str(exc)
    try:
        text = str(exc)
    except Exception:  # Spark's captured errors need a live JVM to print
        text = str(getattr(exc, "_desc", None) or getattr(exc, "desc", None) or type(exc).__name__)
    found = _OURS.findall(text)
    if found:
        return str(found[-1]).strip()
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        inner = one_line(cause)
        if inner.startswith(PREFIX):
            return inner
    first = _JAVA.match(text.strip())
    return (first.group(1) if first else text).strip() or type(exc).__name__
