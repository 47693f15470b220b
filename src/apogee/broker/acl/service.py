"""The broker's ACL at run time: the rules in force, kept in step with the files, and the
dispatcher every request passes through when ``aclEnable=true``.

``PlainAcl`` loads the files at start (a broken file stops the broker: there is no last good
rule set yet), then polls them every ``POLL_S`` and reloads on any change (a file added,
removed or written: its path, mtime and size), so an edit takes effect within a second, with
no restart.  A reload that fails keeps the rules in force and logs why, once per change.

``AclDispatcher`` is the broker's ``RequestDispatcher`` when ACL is on: it judges each request
before any processor sees it (``AclRules.refusal``), so no processor and no fast path inside
one (the C single-send path, the pull path) can skip the check; a refusal is answered
SYSTEM_ERROR with RocketMQ's remark and the connection keeps serving.  With ACL off the broker
uses the plain ``RequestDispatcher``: nothing is added to the path of a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, cast

from apogee.broker.acl import plain_file
from apogee.broker.acl.plain_file import AclFiles, Stamp
from apogee.broker.acl.rules import (
    REMARK_PREFIX,
    Account,
    AclConfigError,
    AclRules,
    signature_refusal,
    signature_start,
)
from apogee.errors import ConfigError
from apogee.remoting.body_hasher import BACKGROUND_MIN_BYTES, HASHER
from apogee.remoting.codec import body_size
from apogee.remoting.codes import ResponseCode
from apogee.remoting.command import Body, RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.server import RequestDispatcher

log = logging.getLogger("apogee.broker.acl")

POLL_S = 0.5  # how often the files are looked at (RocketMQ: every 5 s)
_REFUSAL_LOGGED = "apogee.acl_refusal_logged"  # Connection.attributes key


def _now_ms() -> int:
    return int(time.time() * 1000)


class PlainAcl:
    """The rules in force and the files they come from."""

    def __init__(self, files: AclFiles) -> None:
        self.files = files
        if files.ensure_default():
            log.warning("ACL: created the empty %s (RocketMQ does): add accounts to it", files.default_file)
        try:
            self.rules = files.load(_now_ms())
        except AclConfigError as exc:
            raise ConfigError(f"aclEnable=true but the ACL files cannot be used: {exc}") from None
        self._stamp = files.stamp()
        self._bad_stamp: Stamp | None = None
        self._task: asyncio.Task[None] | None = None
        self.edit_lock = asyncio.Lock()
        self.refused = 0  # requests refused so far (runtime info: aclRefused)
        self.reloads = 0
        self._report(self.rules, "loaded")

    def _report(self, rules: AclRules, what: str) -> None:
        for warning in rules.warnings:
            log.warning("ACL: %s", warning)
        log.info(
            "ACL %s from %s: %d account(s), %d global whitelist pattern(s)",
            what, plain_file.describe_location(self.files), len(rules.accounts), len(rules.global_white),
        )
        if not rules.accounts and not rules.global_white:
            log.warning("ACL: no account and no whitelisted address: every request is refused")

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self.reload_if_changed()
            except Exception:  # the watcher must outlive any surprise
                log.exception("ACL: checking the ACL files failed")

    async def reload_if_changed(self) -> bool:
        """Reload when the files changed since the last look; True if new rules are in force."""
        stamp = await asyncio.to_thread(self.files.stamp)
        if stamp == self._stamp:
            return False
        return await self.reload(stamp)

    async def reload(self, stamp: Stamp | None = None) -> bool:
        """Load the files again; False (and one log line per change) when they are refused."""
        return await self.reload_problem(stamp) is None

    async def reload_problem(self, stamp: Stamp | None = None) -> str | None:
        """``reload``, giving why the files were refused (None: the new rules are in force)."""
        if stamp is None:
            stamp = await asyncio.to_thread(self.files.stamp)
        try:
            rules = await asyncio.to_thread(self.files.load, _now_ms())
        except AclConfigError as exc:
            if stamp != self._bad_stamp:
                log.error("ACL: the changed files are refused, the rules in force stay: %s", exc)
                self._bad_stamp = stamp
            return str(exc)
        self.rules, self._stamp, self._bad_stamp = rules, stamp, None
        self.reloads += 1
        self._report(rules, "reloaded")
        return None

    def refusal(self, conn: Connection, request: RemotingCommand, reason: str) -> RemotingCommand:
        """The answer refusing ``request`` for ``reason`` (counted; logged once per connection)."""
        self.refused += 1
        attrs = conn.attributes
        if _REFUSAL_LOGGED not in attrs:  # one line per connection: a flood leaves one
            attrs[_REFUSAL_LOGGED] = True
            log.warning(
                "ACL refused request code %d from %s:%d: %s (later refusals on this connection are not logged)",
                request.code, *conn.peer, reason,
            )
        return request.response(ResponseCode.SYSTEM_ERROR, REMARK_PREFIX + reason)


class _Checked:
    """A request that waits for its turn: judged (``reason``, or ``error`` when its hash
    failed) once ``ready``."""

    __slots__ = ("request", "ready", "reason", "error")

    def __init__(self, request: RemotingCommand, ready: bool, reason: str | None) -> None:
        self.request = request
        self.ready = ready
        self.reason = reason
        self.error: BaseException | None = None


class _Backlog:
    """A connection's requests from the first one still being hashed on: processed in order."""

    __slots__ = ("entries", "bytes", "holding")

    def __init__(self) -> None:
        self.entries: deque[_Checked] = deque()
        self.bytes = 0  # of the large bodies waiting
        self.holding = False  # the connection is not read (hold_reading)


class AclDispatcher(RequestDispatcher):
    """A ``RequestDispatcher`` that lets a request reach its processor only if the ACL allows it.

    The check runs on the loop, but for a request with a large body (an auto-batch): that
    body is fed to the HMAC on the hasher thread (``remoting/body_hasher.py``) while the loop
    goes on, and the request is judged -- signature, then permissions, by the rules in force
    when it arrived -- once that is done.  A connection's requests reach their processors in
    the order they came: from a request being hashed on, those that follow are judged as they
    arrive (large ones start hashing at once: the thread's queue stays full) and wait their
    turn in the connection's backlog; past ``HELD_LIMIT`` requests or ``HELD_BYTES`` of
    bodies waiting, the connection is not read until the backlog shrinks."""

    HELD_LIMIT = 64
    HELD_BYTES = 32 << 20

    def __init__(self, acl: PlainAcl) -> None:
        super().__init__()
        self.acl = acl
        self._backlogs: dict[Connection, _Backlog] = {}

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        rules = self.acl.rules
        ext = request.ext_fields
        account = rules.account_to_verify(conn.peer[0], ext)
        if isinstance(account, Account):
            assert ext is not None
            body = request.body
            size = body_size(body)
            if size >= BACKGROUND_MIN_BYTES:
                started = signature_start(account, ext)
                if not isinstance(started, str):
                    self._hash_off_loop(conn, request, rules, account, ext, body, size, *started)
                    return
                reason: str | None = started
            else:
                reason = rules.signed_refusal(account, request.code, ext, body)
        else:
            reason = account
        backlogs = self._backlogs
        if backlogs and conn in backlogs:  # behind a request being hashed: wait its turn
            self._queue(conn, backlogs[conn], _Checked(request, True, reason), 0)
        else:
            self._judged(conn, request, reason)

    def _judged(self, conn: Connection, request: RemotingCommand, reason: str | None) -> None:
        if reason is None:
            RequestDispatcher.dispatch(self, conn, request)
        else:
            self._reply(conn, request, self.acl.refusal(conn, request, reason))

    def _hash_off_loop(
        self, conn: Connection, request: RemotingCommand, rules: AclRules, account: Account,
        ext: Mapping[str, str], body: Body, size: int, mac: Any, method: str,
    ) -> None:
        backlog = self._backlogs.get(conn)
        if backlog is None:
            backlog = self._backlogs[conn] = _Backlog()
        checked = _Checked(request, False, None)
        self._queue(conn, backlog, checked, size)

        def hashed(error: BaseException | None) -> None:
            if error is None:
                checked.reason = signature_refusal(account, ext, body, mac, method) or rules.permission_refusal(
                    account, request.code, ext, body
                )
            checked.error = error
            checked.ready = True
            backlog.bytes -= size
            self._release(conn, backlog)

        HASHER.submit(mac, body, asyncio.get_running_loop(), hashed)

    def _queue(self, conn: Connection, backlog: _Backlog, checked: _Checked, size: int) -> None:
        backlog.entries.append(checked)
        backlog.bytes += size
        if not backlog.holding and (len(backlog.entries) >= self.HELD_LIMIT or backlog.bytes >= self.HELD_BYTES):
            backlog.holding = True
            conn.hold_reading(True)

    def _release(self, conn: Connection, backlog: _Backlog) -> None:
        """Process, in order, the judged requests at the head of the backlog."""
        entries = backlog.entries
        while entries and entries[0].ready:
            checked = entries.popleft()
            if checked.error is not None:
                self._reply(conn, checked.request, self._failure(checked.request, cast(Exception, checked.error)))
            else:
                self._judged(conn, checked.request, checked.reason)
        if not entries:
            del self._backlogs[conn]
        if backlog.holding and len(entries) < self.HELD_LIMIT and backlog.bytes < self.HELD_BYTES:
            backlog.holding = False
            conn.hold_reading(False)
