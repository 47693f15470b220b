"""Subscriptions: tag expressions parsed once into what the broker and the client filter on.

RocketMQ's FilterAPI.buildSubscriptionData: ``*`` (or empty) takes everything; otherwise the
expression is split on ``||`` and each tag trimmed.  The broker filters by the tags' Java hash
codes, the client again by the tag strings (hashes may collide).  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.common.java_hash import tags_code
from apogee.errors import ClientError, SubscriptionParseFailedError
from apogee.remoting.bodies.heartbeat import SubscriptionData

SUB_ALL = "*"


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str
    expression: str
    tags: frozenset[str] | None  # None: every tag
    version: int

    def to_data(self) -> SubscriptionData:
        tags = sorted(self.tags) if self.tags else []
        return SubscriptionData(
            topic=self.topic,
            sub_string=self.expression,
            tags_set=tags,
            code_set=[tags_code(t) for t in tags],
            sub_version=self.version,
            expression_type="TAG",
        )

    def matches(self, tag: str | None) -> bool:
        return self.tags is None or tag in self.tags


def build_subscription(topic: str, expression: str | None, version_ms: int) -> Subscription:
    """Parse ``expression`` (``*``, ``TagA``, ``TagA || TagB``) for ``topic``."""
    if not topic:
        raise ClientError("cannot subscribe to an empty topic")
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(topic, SUB_ALL, None, version_ms)
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    if not tags:
        raise SubscriptionParseFailedError(23, f"tag expression {expression!r} names no tag")
    if SUB_ALL in tags:
        return Subscription(topic, SUB_ALL, None, version_ms)
    return Subscription(topic, text, tags, version_ms)
