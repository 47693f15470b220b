"""What every page handler uses to answer: templates and the layout's context, redirects
with a one-time notice, form parsing, JSON answers, and the nav entry each page declares.

Pages render through ``render``, which fills the layout (``templates/base.html``): the nav
built from every page module's ``NAV``, the NameServer address, the banner of ``problems``
(``errors.Problem``) and the notice a redirect left (``redirect(..., notice=...)``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

import jinja2
import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from apogee.common import constants as c
from apogee.dashboard.errors import BadInput, Problem

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
NOTICE_COOKIE = "apogee_notice"
MAX_FORM_BYTES = 8 * 1024 * 1024  # a test message's body (RocketMQ's 4 MiB) url-encoded, with room


@dataclass(frozen=True)
class NavEntry:
    """A page's place in the nav: its title, path and position (lower first)."""

    title: str
    path: str
    order: int


# --- formatting (template filters) ------------------------------------------------------------


def fmt_ms(ms: int | float | None) -> str:
    """A millisecond timestamp as local time; 0 or less: "-"."""
    if not ms or ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds")


def fmt_bytes(n: int | float | None) -> str:
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def fmt_num(n: int | float | None, digits: int = 0) -> str:
    return f"{float(n or 0):,.{digits}f}" if digits else f"{int(n or 0):,}"


def fmt_perm(perm: int) -> str:
    """PermName bits as RocketMQ's tools print them: R, W, RW (and X for INHERIT)."""
    text = ("R" if perm & c.PERM_READ else "") + ("W" if perm & c.PERM_WRITE else "")
    return (text or "-") + ("X" if perm & c.PERM_INHERIT else "")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(ms=fmt_ms, bytes=fmt_bytes, num=fmt_num, perm=fmt_perm, q=lambda s: quote(str(s), safe=""))
    return env


templates = Jinja2Templates(env=_environment())


# --- answers ----------------------------------------------------------------------------------


def render(
    request: Request, template: str, context: Mapping[str, Any] | None = None, *,
    problems: Sequence[Problem] = (), status: int = 200,
) -> Response:
    """The page ``template`` inside the layout, with the banner of ``problems``."""
    notice = unquote(request.cookies.get(NOTICE_COOKIE, ""))
    full = {
        "nav": request.app.state.nav,
        "namesrv": request.app.state.ctx.settings.namesrv_addr,
        "problems": list(problems),
        "notice": notice,
        "title": "",
        **(context or {}),
    }
    response = templates.TemplateResponse(request, template, full, status_code=status)
    if notice:
        response.delete_cookie(NOTICE_COOKIE)
    return response


def redirect(path: str, notice: str = "") -> Response:
    """303 to ``path`` (after a form's POST), with a one-time notice shown by the next page."""
    response = RedirectResponse(path, status_code=303)
    if notice:
        response.set_cookie(NOTICE_COOKIE, quote(notice), max_age=60, httponly=True, samesite="strict")
    return response


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS), status,
                    media_type="application/json")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


# --- input ------------------------------------------------------------------------------------


async def form_data(request: Request) -> dict[str, str]:
    """The fields of a url-encoded form (what every form of the dashboard posts); the last
    value wins when a name repeats.  Parsed here rather than with a multipart library: the
    dashboard posts no files."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind not in ("application/x-www-form-urlencoded", ""):
        raise BadInput(f"the form must be posted as application/x-www-form-urlencoded, not {kind}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise BadInput(f"the form is larger than {MAX_FORM_BYTES} bytes")
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def int_field(form: Mapping[str, str], name: str, default: int | None = None, *, low: int | None = None,
              high: int | None = None) -> int:
    """``form[name]`` as an integer within [low, high]; a missing or bad value names the field."""
    text = (form.get(name) or "").strip()
    if not text:
        if default is None:
            raise BadInput(f"{name} is required")
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{name} must be a whole number, not {text!r}") from None
    if low is not None and value < low:
        raise BadInput(f"{name} must be at least {low}, not {value}")
    if high is not None and value > high:
        raise BadInput(f"{name} must be at most {high}, not {value}")
    return value
