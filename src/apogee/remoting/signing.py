"""RocketMQ ACL 1.0 request signing: the one definition, shared by clients and the broker.

A signed request carries three more extFields: ``AccessKey``, ``Signature`` and, when the
credentials have one, ``SecurityToken`` (RocketMQ's ``AclClientRPCHook``).  What is signed
(``AclUtils.combineRequestContent``) is the *values* of every extField but ``Signature``, in
the Java ``String`` order of their keys (a ``TreeMap``), concatenated with no separator and
encoded UTF-8, followed by the body's raw bytes.  The signature is the HMAC of that content
keyed by the UTF-8 secret key, in standard padded Base64 (``AclSigner``): HmacSHA1 by default.

The broker recomputes it over what arrived (``PlainAccessValidator.parse``), leaving out
``Signature`` and ``_UNIQUE_KEY_QUERY``; a client therefore signs after every other field is
set, and the AccessKey and SecurityToken are signed with the rest.  Apogee's signer leaves
``_UNIQUE_KEY_QUERY`` out as the broker does (RocketMQ's Java client from 4.9.4 signs it, so
its queries by unique key fail on a RocketMQ 4.9.8 broker with ACL; Apogee's broker accepts
either content, see ``broker/acl/rules.py``).

HmacSHA256: RocketMQ's ``SigningAlgorithm`` has it, but no 4.9 client or broker puts the
algorithm on the wire.  Apogee reads an optional ``SignatureMethod`` extField (the name the C++
client declares; it is signed like any other field): ``HmacSHA256`` selects SHA-256, absent
or ``HmacSHA1`` SHA-1.  Apogee's clients sign with HmacSHA1 unless told otherwise.

Pure: no I/O; the HMAC objects are keyed once per secret and copied per request.
"""

from __future__ import annotations

import hashlib
import hmac
from binascii import b2a_base64
from collections.abc import Iterable, Mapping
from typing import Any

from apogee.remoting.command import Body
from apogee.remoting.fields import parse_text

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE_METHOD = "SignatureMethod"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG: the broker leaves it out of the content

HMAC_SHA1 = "HmacSHA1"
HMAC_SHA256 = "HmacSHA256"
_DIGESTS = {HMAC_SHA1: hashlib.sha1, HMAC_SHA256: hashlib.sha256}
ALGORITHMS = tuple(_DIGESTS)

# What the broker leaves out of the content it recomputes.
SERVER_UNSIGNED = frozenset((SIGNATURE, UNIQUE_KEY_QUERY))


class SessionCredentials:
    """An AccessKey, its SecretKey and an optional SecurityToken (RocketMQ's names).

    The secret never appears in ``repr`` (configs and errors get logged)."""

    __slots__ = ("access_key", "secret_key", "security_token")

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token or None

    def __repr__(self) -> str:
        token = ", security_token=***" if self.security_token else ""
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key=***{token})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionCredentials):
            return NotImplemented
        return (self.access_key, self.secret_key, self.security_token) == (
            other.access_key, other.secret_key, other.security_token
        )

    def __hash__(self) -> int:
        return hash((self.access_key, self.secret_key, self.security_token))


def java_order(keys: Iterable[str]) -> list[str]:
    """``keys`` in Java ``String.compareTo`` order (UTF-16 code units), as a ``TreeMap`` holds
    them: Python's code-point order, but for keys that are not all ASCII (where characters
    above U+FFFF sort before U+E000-U+FFFF in UTF-16)."""
    keys = list(keys)
    if all(k.isascii() for k in keys):
        keys.sort()
    else:
        keys.sort(key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    return keys


_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}


def signed_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``keys`` in Java order without those the broker leaves out (``SERVER_UNSIGNED``),
    remembered per key tuple: a client sends the same few header shapes again and again."""
    order = _ORDERS.get(keys)
    if order is None:
        if len(_ORDERS) >= 1024:  # a peer inventing shapes cannot make it grow
            _ORDERS.clear()
        order = _ORDERS[keys] = tuple(k for k in java_order(keys) if k not in SERVER_UNSIGNED)
    return order


def content_head(ext: Mapping[str, str], skip: frozenset[str] | tuple[str, ...] = SERVER_UNSIGNED) -> bytes:
    """The signed content before the body: the values of ``ext`` but ``skip``, in key order."""
    if skip is SERVER_UNSIGNED:
        order: Iterable[str] = signed_order(tuple(ext))
    else:
        order = [k for k in java_order(ext) if k not in skip]
    return "".join([ext[k] for k in order]).encode("utf-8", "replace")


class Keyed:
    """HMAC (RFC 2104) keyed by one secret, for each algorithm: the inner and outer hashes of
    the padded key are computed once and copied per request.  (The ``hmac`` module's objects
    give the same digests -- the tests compare them -- but copying one costs twice as much,
    and a request's signature is on the send path of client and broker.)"""

    __slots__ = ("_pads",)

    def __init__(self, secret: str) -> None:
        key = secret.encode("utf-8")
        self._pads = {}
        for name, digest in _DIGESTS.items():
            block = digest().block_size
            padded = (digest(key).digest() if len(key) > block else key).ljust(block, b"\0")
            inner = digest(bytes(b ^ 0x36 for b in padded))
            outer = digest(bytes(b ^ 0x5C for b in padded))
            self._pads[name] = (inner, outer)

    def sign(self, head: bytes, body: Body, algorithm: str = HMAC_SHA1) -> str:
        """Base64 of the HMAC of ``head`` followed by the body's bytes (a buffer, a sequence of
        buffers or None).  ``KeyError`` for an algorithm that is not HmacSHA1/HmacSHA256."""
        mac = self.begin(head, algorithm)
        feed(mac, body)
        return self.finish(mac, algorithm)

    def begin(self, head: bytes, algorithm: str = HMAC_SHA1) -> Any:
        """The inner hash fed with ``head``: ``sign`` in three steps (``begin``, ``feed`` the
        body, ``finish``), so that the body's part -- nearly all the work for a batch -- can
        run elsewhere (hashlib lets other threads run while it hashes a large buffer)."""
        mac = self._pads[algorithm][0].copy()
        mac.update(head)
        return mac

    def finish(self, mac: Any, algorithm: str = HMAC_SHA1) -> str:
        """The signature once ``mac`` (from ``begin``) has been fed the whole body."""
        result = self._pads[algorithm][1].copy()
        result.update(mac.digest())
        return b2a_base64(result.digest(), newline=False).decode("ascii")


def feed(mac: Any, body: Body) -> None:
    """Hash the body's bytes into ``mac`` (a buffer, a sequence of buffers, or None), each
    buffer as it is: never joined or copied."""
    if body is not None:
        if isinstance(body, (bytes, bytearray, memoryview)):
            mac.update(body)
        else:
            for part in body:
                mac.update(part)


def signature(secret: str, head: bytes, body: Body = None, algorithm: str = HMAC_SHA1) -> str:
    """``Keyed(secret).sign(head, body, algorithm)``, for one-off use."""
    return Keyed(secret).sign(head, body, algorithm)


def matches(expected: str, given: str | None) -> bool:
    """The broker's comparison of a recomputed signature with the request's, in constant time."""
    return given is not None and hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace"))


SIGNING_FIELDS = frozenset((ACCESS_KEY, SIGNATURE, SECURITY_TOKEN, SIGNATURE_METHOD))


def without_signing(ext: Mapping[str, str] | None) -> dict[str, str]:
    """A copy of ``ext`` without the signing fields: what a broker relays to a client (the
    requester's AccessKey and signature are no business of the client's)."""
    return {k: v for k, v in (ext or {}).items() if k not in SIGNING_FIELDS}


class Signer:
    """Signs a client's requests with one set of credentials, as ``AclClientRPCHook`` does."""

    __slots__ = ("credentials", "algorithm", "_keyed", "_extra_keys", "_extra_values", "_orders")

    def __init__(self, credentials: SessionCredentials, algorithm: str = HMAC_SHA1) -> None:
        if algorithm not in _DIGESTS:
            raise ValueError(f"signature algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
        self.credentials = credentials
        self.algorithm = algorithm
        self._keyed = Keyed(credentials.secret_key)
        extra = [(ACCESS_KEY, credentials.access_key)]
        if credentials.security_token:
            extra.append((SECURITY_TOKEN, credentials.security_token))
        if algorithm != HMAC_SHA1:
            extra.append((SIGNATURE_METHOD, algorithm))
        self._extra_keys = tuple(k for k, _ in extra)
        self._extra_values = tuple(v for _, v in extra)
        # keys tuple -> the positions of (keys + extra keys) in Java order: a producer sends
        # with the same few key tuples, so the sort is done once per tuple.
        self._orders: dict[tuple[str, ...], tuple[int, ...]] = {}

    def sign_ext(self, ext: Mapping[str, Any] | None, body: Body) -> dict[str, str]:
        """A copy of ``ext`` (values as on the wire) with AccessKey, SecurityToken and
        Signature set; a Signature already there (a retried request) is replaced."""
        signed = self.unsigned_ext(ext)
        signed[SIGNATURE] = self._keyed.sign(content_head(signed, SERVER_UNSIGNED), body, self.algorithm)
        return signed

    def unsigned_ext(self, ext: Mapping[str, Any] | None) -> dict[str, str]:
        """``sign_ext`` without the Signature yet: the fields the signature covers, for
        ``begin``; ``finish`` gives the Signature once the body is hashed."""
        signed = {k: parse_text(v) for k, v in ext.items() if v is not None and k != SIGNATURE} if ext else {}
        for key, value in zip(self._extra_keys, self._extra_values, strict=True):
            signed[key] = value
        return signed

    def begin(self, unsigned: Mapping[str, str]) -> Any:
        """The HMAC of ``unsigned_ext``'s fields, before the body (see ``Keyed.begin``)."""
        return self._keyed.begin(content_head(unsigned, SERVER_UNSIGNED), self.algorithm)

    def finish(self, mac: Any) -> str:
        """The Signature of a request whose body ``mac`` (from ``begin``) has been fed."""
        return self._keyed.finish(mac, self.algorithm)

    def sign_fields(
        self, keys: tuple[str, ...], values: tuple[str | int | None, ...], body: bytes | None
    ) -> tuple[tuple[str, ...], tuple[str | int | None, ...]]:
        """``keys``/``values`` (``codec.request_command``'s form: None left out) with the
        signing fields added.  The keys must not already hold them."""
        order = self._orders.get(keys)
        all_keys = keys + self._extra_keys
        if order is None:
            if len(self._orders) > 256:  # only a handful of shapes exist; never grow without bound
                self._orders.clear()
            order = self._orders[keys] = tuple(
                all_keys.index(k) for k in java_order(all_keys) if k not in SERVER_UNSIGNED
            )
        all_values = values + self._extra_values
        head = "".join(
            [v if v.__class__ is str else parse_text(v) for i in order if (v := all_values[i]) is not None]
        ).encode("utf-8", "replace")
        return all_keys + (SIGNATURE,), all_values + (self._keyed.sign(head, body, self.algorithm),)
