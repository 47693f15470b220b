"""Address patterns of plain_acl.yml (``globalWhiteRemoteAddresses``, ``whiteRemoteAddress``).

RocketMQ's ``RemoteAddressStrategyFactory`` decides what a pattern means, in this order:

* blank (absent, empty): matches nothing;
* ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches everything;
* ending in ``}``: a list written as a prefix and choices, ``192.168.1.{1,2,3}`` (IPv6:
  ``1050::0005:{1,2}``): exactly those addresses;
* containing ``,``: a list of addresses, ``192.168.1.1,192.168.1.2``;
* containing ``*`` or ``-``: a range in one part, ``192.168.1.*``, ``192.168.*.*``,
  ``192.168.1.10-100``, ``10.*.*.*`` (IPv6 the same with hex groups): the parts before the range
  must be equal, the range part within its bounds, and the parts after it are not looked at
  (RocketMQ's rule: ``192.168.*.5`` matches any 192.168.x.y);
* otherwise one address.

A pattern that is none of these (``10.1.1``, ``1-5.1.1.1``, ``abc``) is refused when the file
is read (``AddressPatternError``), so a broken file never half-loads.  Pure.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


class AddressPatternError(ValueError):
    """A pattern RocketMQ would refuse; the message names it."""


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def canonical(address: str) -> str:
    """The form addresses are compared in: IPv4 as written (dotted quad), IPv6 fully expanded
    upper-case (RocketMQ's ``expandIP``), an IPv4-mapped IPv6 peer as its IPv4."""
    ip = _ip(address)
    if ip is None:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return ip.exploded.upper()
    return str(ip)


def _one(text: str, pattern: str) -> str:
    if _ip(text) is None:
        raise AddressPatternError(f"Netaddress examine Exception netaddress is {text} (in pattern {pattern!r})")
    return canonical(text)


@dataclass(frozen=True)
class _Range:
    """Fixed leading parts, then one part within [low, high]; IPv4 or IPv6."""

    v6: bool
    head: tuple[str, ...]
    low: int
    high: int

    def match(self, address: str) -> bool:
        ip = _ip(address)
        if ip is None or isinstance(ip, ipaddress.IPv6Address) != self.v6:
            return False
        parts = ip.exploded.upper().split(":") if self.v6 else str(ip).split(".")
        n = len(self.head)
        if tuple(parts[:n]) != self.head:
            return False
        return self.low <= int(parts[n], 16 if self.v6 else 10) <= self.high


def _range(pattern: str) -> _Range:
    v6 = ":" in pattern
    bad = AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception netaddress is {pattern}")
    if v6:
        if "*" in pattern and not pattern.endswith("*"):
            raise bad
        if "::" in pattern:  # abbreviated zero groups: expand to 8 groups
            left, _, right = pattern.partition("::")
            lp, rp = (left.split(":") if left else []), (right.split(":") if right else [])
            parts = [p.strip() for p in lp + ["0"] * (8 - len(lp) - len(rp)) + rp]
        else:
            parts = [p.strip() for p in pattern.split(":")]
        width, base, top = 8, 16, 0xFFFF
    else:
        parts = [p.strip() for p in pattern.split(".")]
        width, base, top = 4, 10, 255
    if len(parts) != width:
        raise bad
    for i, part in enumerate(parts):
        if i == 0:
            continue  # RocketMQ looks for the range from the second part on
        if part == "*":
            low, high = 0, top
        elif "-" in part:
            lo, sep, hi = part.partition("-")
            try:
                low, high = int(lo, base), int(hi, base)
            except ValueError:
                raise bad from None
            if not sep or not 0 <= low <= high <= top:
                raise bad
        else:
            continue
        head = parts[:i]
        try:
            values = [int(h, base) for h in head]
        except ValueError:
            raise bad from None
        if any(not 0 <= v <= top for v in values):
            raise bad
        text = tuple(f"{v:04X}" for v in values) if v6 else tuple(str(v) for v in values)
        return _Range(v6, text, low, high)
    raise bad


@dataclass(frozen=True)
class AddressPattern:
    """One parsed pattern; ``match(address)`` with a peer's IP text."""

    text: str
    everything: bool = False
    addresses: frozenset[str] = frozenset()
    span: _Range | None = None

    def match(self, address: str) -> bool:
        if self.everything:
            return True
        if self.span is not None:
            return self.span.match(address)
        return canonical(address) in self.addresses


def parse_pattern(pattern: str | None) -> AddressPattern:
    """RocketMQ's reading of one pattern (see the module); ``AddressPatternError`` when it
    refuses it."""
    if pattern is None or not pattern.strip():
        return AddressPattern("")  # blank: matches nothing
    text = pattern
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return AddressPattern(text, everything=True)
    if text.endswith("}"):
        brace = text.rfind("{")
        last = text.split(":" if ":" in text else ".")[-1]
        if brace < 0 or not last.startswith("{") or (":" not in text and len(text.split(".")) < 4):
            raise AddressPatternError(
                f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {text}"
            )
        prefix = text[:brace]
        choices = [c for c in text[brace + 1 : -1].split(",") if c]
        return AddressPattern(text, addresses=frozenset(_one(prefix + c, text) for c in choices))
    if "," in text:
        return AddressPattern(text, addresses=frozenset(_one(a, text) for a in text.split(",") if a))
    if "*" in text or "-" in text:
        return AddressPattern(text, span=_range(text))
    return AddressPattern(text, addresses=frozenset((_one(text, text),)))
