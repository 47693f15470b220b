"""The one mapping from an exception to what a person reads in the page.

Every failure a page can meet becomes a ``Problem``: a short title that names the cause, the
detail (the admin layer's message, which already says what to do, or RocketMQ's code and
remark), and the HTTP status of the answer.  Pages show it in the layout's banner
(``templates/base.html``), the JSON endpoints as ``{"error": {...}}``; nobody sees a stack
trace (an unexpected exception is shown as "Internal error" and its traceback logged by the
server).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from apogee.admin.errors import GroupNotFoundError, NoBrokerRegisteredError, TopicNotFoundError, WrongServerError
from apogee.admin.messages import InvalidIdError
from apogee.errors import (
    ApogeeError,
    ConnectionClosedError,
    NameServerUnreachableError,
    NoRouteError,
    RemoteError,
    RequestCodeNotSupportedError,
    RequestTimeoutError,
)
from apogee.remoting.codes import ResponseCode

T = TypeVar("T")


class BadInput(ValueError):
    """A form or query value the dashboard refuses before sending anything; the message
    names the field and what is expected."""


@dataclass(frozen=True)
class Problem:
    title: str
    detail: str
    status: int
    # What part of a page failed, when the rest of it could still be shown ("consumer groups").
    where: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _code_name(code: int) -> str:
    try:
        return f"{code} {ResponseCode(code).name}"
    except ValueError:
        return str(code)


def describe(exc: BaseException, where: str = "") -> Problem:
    """The ``Problem`` a page shows for ``exc`` (most specific class first)."""
    text = str(exc)
    if isinstance(exc, BadInput):
        return Problem("Invalid input", text, 400, where)
    if isinstance(exc, NameServerUnreachableError):
        return Problem("The NameServer cannot be reached", text, 503, where)
    if isinstance(exc, WrongServerError):
        return Problem("Wrong kind of server", text, 502, where)
    if isinstance(exc, (ConnectionClosedError, RequestTimeoutError)):
        return Problem("A broker is down or not answering", text, 502, where)
    if isinstance(exc, NoBrokerRegisteredError):
        return Problem("No broker available", text, 503, where)
    if isinstance(exc, (TopicNotFoundError, GroupNotFoundError)):
        return Problem("Not found", text, 404, where)
    if isinstance(exc, InvalidIdError):
        return Problem("Invalid input", text, 400, where)
    if isinstance(exc, RequestCodeNotSupportedError):
        return Problem("Not supported by the server", exc.remark or text, 501, where)
    if isinstance(exc, RemoteError):
        remark = exc.remark or "(no remark)"
        return Problem("The request was refused", f"code {_code_name(exc.code)}: {remark}", 409, where)
    if isinstance(exc, NoRouteError):
        return Problem("No route", text, 409, where)
    if isinstance(exc, ApogeeError):
        return Problem("The operation failed", text, 500, where)
    return Problem("Internal error", f"{type(exc).__name__}: {text}", 500, where)


async def attempt(problems: list[Problem], where: str, step: Awaitable[T]) -> T | None:
    """``await step``; on an Apogee failure note it in ``problems`` (shown in the banner,
    named by ``where``) and return None, so the rest of the page is still shown."""
    try:
        return await step
    except (ApogeeError, BadInput) as exc:
        problems.append(describe(exc, where))
        return None
