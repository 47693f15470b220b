"""The broker's ACL at run time: the rules in force, kept in step with the files, and the
dispatcher every request passes through when ``aclEnable=true``.

``PlainAcl`` loads the files at start (a broken file stops the broker: there is no last good
rule set yet), then polls them every ``POLL_S`` and reloads on any change (a file added,
removed or written: its path, mtime and size), so an edit takes effect within a second, with
no restart.  A reload that fails keeps the rules in force and logs why, once per change.

``AclDispatcher`` is the broker's ``RequestDispatcher`` when ACL is on: it judges each request
before any processor sees it (``AclRules.refusal``), so no processor and no fast path inside
one (the C single-send path, the pull path) can skip the check; a refusal is answered
SYSTEM_ERROR with RocketMQ's remark and the connection keeps serving.  A request with a large
body (a batch) is checked on a thread of its own, the connection's later requests waiting
behind it in order.  With ACL off the broker uses the plain ``RequestDispatcher``: nothing is
added to the path of a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from apogee.broker.acl import plain_file
from apogee.broker.acl.plain_file import AclFiles, Stamp
from apogee.broker.acl.rules import REMARK_PREFIX, AclConfigError, AclRules
from apogee.errors import ConfigError
from apogee.remoting.codes import ResponseCode
from apogee.remoting.command import RemotingCommand
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


# A body this large is hashed on the ACL thread (hashlib lets go of the GIL while it hashes
# one), so big batches are checked while the event loop stores the ones before them; the
# connection's later requests wait behind the check, in order, at most this many (or bytes).
OFF_LOOP_BODY = 64 * 1024
MAX_WAITING = 1024
MAX_WAITING_BYTES = 64 * 1024 * 1024
_WAITING = "apogee.acl_waiting"  # Connection.attributes key: requests behind a check off the loop


class _Waiting:
    __slots__ = ("requests", "nbytes")

    def __init__(self) -> None:
        self.requests: deque[RemotingCommand] = deque()
        self.nbytes = 0


def _size(request: RemotingCommand) -> int:
    body = request.body
    return 0 if body is None else len(body)  # a received request's body is one buffer


class AclDispatcher(RequestDispatcher):
    """A ``RequestDispatcher`` that lets a request reach its processor only if the ACL allows it."""

    def __init__(self, acl: PlainAcl) -> None:
        super().__init__()
        self.acl = acl
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="apogee-acl")

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        waiting = conn.attributes.get(_WAITING)
        if waiting is not None:
            self._wait(conn, request, waiting)  # type: ignore[arg-type]
        elif _size(request) >= OFF_LOOP_BODY:
            self._check_off_loop(conn, request, _Waiting())
        else:
            self._decide(conn, request, self.acl.rules.refusal(conn.peer[0], request.code, request.ext_fields,
                                                               request.body))

    def _decide(self, conn: Connection, request: RemotingCommand, reason: str | None) -> None:
        if reason is None:
            RequestDispatcher.dispatch(self, conn, request)
        else:
            self._reply(conn, request, self.acl.refusal(conn, request, reason))

    def _check_off_loop(self, conn: Connection, request: RemotingCommand, waiting: _Waiting) -> None:
        conn.attributes[_WAITING] = waiting
        future = asyncio.get_running_loop().run_in_executor(
            self._thread, self.acl.rules.refusal, conn.peer[0], request.code, request.ext_fields, request.body
        )
        future.add_done_callback(lambda f: self._checked(conn, request, waiting, f))

    def _checked(
        self, conn: Connection, request: RemotingCommand, waiting: _Waiting, future: asyncio.Future[str | None]
    ) -> None:
        if future.cancelled():  # the broker is stopping
            return
        exc = future.exception()
        reason = future.result() if exc is None else f"the ACL check failed: {exc}"
        del conn.attributes[_WAITING]
        if not conn.is_open:
            return
        self._decide(conn, request, reason)
        while waiting.requests and conn.is_open:  # then the requests that came behind it, in order
            request = waiting.requests.popleft()
            waiting.nbytes -= _size(request)
            if _size(request) >= OFF_LOOP_BODY:
                self._check_off_loop(conn, request, waiting)
                return
            self._decide(conn, request, self.acl.rules.refusal(conn.peer[0], request.code, request.ext_fields,
                                                               request.body))

    def _wait(self, conn: Connection, request: RemotingCommand, waiting: _Waiting) -> None:
        size = _size(request)
        if len(waiting.requests) >= MAX_WAITING or waiting.nbytes + size > MAX_WAITING_BYTES:
            self._reply(conn, request, request.response(
                ResponseCode.SYSTEM_BUSY,
                f"[REJECTREQUEST]system busy, start flow control for a while: {len(waiting.requests)} requests of "
                "this connection wait for their ACL check",
            ))
            return
        waiting.requests.append(request)
        waiting.nbytes += size

    async def cancel_all(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
        await super().cancel_all()
