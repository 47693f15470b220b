from __future__ import annotations

import base64

import pytest
from starlette.datastructures import Headers

from apogee.dashboard.auth import credentials_match, cross_site


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("header", "ok"), [
    (basic("admin:s3cret"), True), (basic("admin:s3cret:x"), False), (basic("root:s3cret"), False),
    (basic("admin:"), False), (basic("admin"), False), ("Basic !!!", False), ("Bearer x", False), (None, False),
    (basic("admin:s3cret").replace("Basic", "basic"), True),
])
def test_basic_credentials(header: str | None, ok: bool) -> None:
    assert credentials_match(header, "admin", "s3cret") is ok


@pytest.mark.parametrize(("headers", "refused"), [
    ({"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:8080"}, False),
    ({"host": "127.0.0.1:8080", "referer": "http://127.0.0.1:8080/topics/+new"}, False),
    ({"host": "127.0.0.1:8080"}, False),  # curl, scripts: no browser to trick
    ({"host": "127.0.0.1:8080", "origin": "http://elsewhere.example"}, True),
    ({"host": "127.0.0.1:8080", "referer": "http://127.0.0.1:9090/"}, True),
    ({"host": "127.0.0.1:8080", "origin": "null"}, True),  # sandboxed frames, data: pages
])
def test_writes_from_other_sites(headers: dict[str, str], refused: bool) -> None:
    assert cross_site(Headers(headers)) is refused
