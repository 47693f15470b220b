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
    tags: frozenset[str] | None  # None: every tag (and SQL92: the broker has filtered)
    version: int
    expression_type: str = "TAG"

    def to_data(self) -> SubscriptionData:
        tags = sorted(self.tags) if self.tags else []
        return SubscriptionData(
            topic=self.topic,
            sub_string=self.expression,
            tags_set=tags,
            code_set=[tags_code(t) for t in tags],
            sub_version=self.version,
            expression_type=self.expression_type,
        )

    def matches(self, tag: str | None) -> bool:
        return self.tags is None or tag in self.tags


def build_subscription(
    topic: str, expression: str | None, version_ms: int, expression_type: str = "TAG"
) -> Subscription:
    """Parse ``expression`` for ``topic``: a tag expression (``*``, ``TagA``, ``TagA || TagB``)
    or, with ``expression_type="SQL92"``, a SQL92 property selector.  A malformed selector
    fails here, before anything is sent (the broker checks it again at subscription)."""
    if not topic:
        raise ClientError("cannot subscribe to an empty topic")
    if expression_type == "SQL92":
        from apogee.filter import FilterExpressionError, compile_sql92

        try:
            compile_sql92(expression or "")
        except FilterExpressionError as exc:
            raise SubscriptionParseFailedError(23, str(exc)) from None
        return Subscription(topic, (expression or "").strip(), None, version_ms, "SQL92")
    if expression_type != "TAG":
        raise SubscriptionParseFailedError(23, f"unknown expression type {expression_type!r} (TAG or SQL92)")
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(topic, SUB_ALL, None, version_ms)
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    if not tags:
        raise SubscriptionParseFailedError(23, f"tag expression {expression!r} names no tag")
    if SUB_ALL in tags:
        return Subscription(topic, SUB_ALL, None, version_ms)
    return Subscription(topic, text, tags, version_ms)
