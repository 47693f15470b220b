"""Who may use the dashboard: optional HTTP basic login, and same-origin writes.

Login is HTTP basic (``username``/``password`` of the settings; off while the password is
empty) rather than a session cookie and a login form: it needs no secret to generate or keep
across restarts and no extra library, works the same for the pages, the JSON endpoints and
``curl``, and the browser remembers it.  It is sent with every request, so a dashboard
reachable beyond loopback belongs behind TLS (a reverse proxy).

Writes (POST) are refused when the browser says they come from another site (an ``Origin``
or ``Referer`` naming another host): a page elsewhere cannot make the browser of a logged-in
operator delete a topic.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

REALM = "Apogee dashboard"
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))


def credentials_match(header: str | None, username: str, password: str) -> bool:
    """Whether an ``Authorization: Basic ...`` header carries ``username:password``
    (compared in constant time)."""
    if not header or not header.lower().startswith("basic "):
        return False
    try:
        given = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, sep, secret = given.partition(":")
    return bool(sep) and hmac.compare_digest(user.encode(), username.encode()) & hmac.compare_digest(
        secret.encode(), password.encode()
    )


def cross_site(headers: Headers) -> bool:
    """A write whose ``Origin`` (else ``Referer``) names a host other than ``Host``."""
    source = headers.get("origin") or headers.get("referer")
    if not source or source == "null":
        return source == "null"
    return urlsplit(source).netloc.lower() != headers.get("host", "").lower()


class AccessMiddleware:
    """Basic login (when a password is set) and the same-origin rule for writes."""

    def __init__(self, app: ASGIApp, username: str, password: str) -> None:
        self.app = app
        self.username = username
        self.password = password

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.password and not credentials_match(headers.get("authorization"), self.username, self.password):
            response = PlainTextResponse(
                "login required", 401, headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}
            )
        elif scope["method"] not in SAFE_METHODS and cross_site(headers):
            response = PlainTextResponse("refused: a write from another site", 403)
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)
