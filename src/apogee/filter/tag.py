"""TAG subscriptions: ``*`` or ``TagA || TagB``, as RocketMQ's ``FilterAPI`` reads them.

Rules (``FilterAPI.buildSubscriptionData`` and ``ExpressionMessageFilter.isMatchedByConsumeQueue``):

* ``None``, the empty string or exactly ``*`` subscribes to everything.  Only the exact
  string: ``" * "`` is the tag ``*`` (RocketMQ compares before trimming), and clients filter
  by the same tag set afterwards, so matching everything there would not help them anyway.
* Otherwise split on ``||``, trim each part, drop empty parts.  ``A || *`` is the tags ``A``
  and ``*``; ``||`` alone is an empty set, which matches nothing.
* The broker tests the ConsumeQueue entry's tag hash against the set of ``String.hashCode``
  values of those tags; equal hashes of different tags pass here and are told apart by the
  client, as in RocketMQ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from apogee.common.java_hash import tags_code
from apogee.common.pull_filter import TagCodeFilter

SUB_ALL: Final = "*"
_JAVA_BLANKS: Final = "".join(map(chr, range(33)))  # String.trim() drops chars <= ' '


@dataclass(frozen=True, slots=True)
class TagExpression:
    """A parsed TAG subscription: everything, or a set of tags and their hash codes."""

    sub_all: bool
    tags: frozenset[str]
    codes: frozenset[int]  # Java String.hashCode of each tag, signed 32-bit

    def to_filter(self) -> TagCodeFilter:
        """The store filter: all codes pass for ``*``, else only those of the tags."""
        return TagCodeFilter(None if self.sub_all else self.codes)

    def matches_tag(self, tag: str | None) -> bool:
        """The exact test a client applies after the hash test (``tagsSet.contains``)."""
        return self.sub_all or (tag is not None and tag in self.tags)


_ALL: Final = TagExpression(True, frozenset(), frozenset())


def parse_tag_expression(expression: str | None) -> TagExpression:
    """``FilterAPI.buildSubscriptionData``: never fails; see the module notes."""
    if not expression or expression == SUB_ALL:
        return _ALL
    tags = frozenset(t for t in (part.strip(_JAVA_BLANKS) for part in expression.split("||")) if t)
    return TagExpression(False, tags, frozenset(tags_code(t) for t in tags))
