"""Why an admin operation failed, one class per cause an operator acts on differently.

"No route" alone does not tell an operator what to do; these do: create the topic, start or
register a broker, start the NameServer or fix ``-n``, give back write permission.  Each is an
``apogee.errors`` class, so callers that catch ``NoRouteError`` or ``ClientError`` still do.
"""

from __future__ import annotations

from apogee.errors import ClientError, NoRouteError


class TopicNotFoundError(NoRouteError):
    """The NameServer answers but knows no route for the topic (it was never created)."""

    retriable = False


class NoBrokerRegisteredError(NoRouteError):
    """The NameServer answers but no broker (or no master of the topic) is registered with it."""

    retriable = False


class NoWritableQueueError(NoRouteError):
    """The topic exists but none of its queues accepts writes (perm without PERM_WRITE)."""

    retriable = False


class WrongServerError(ClientError):
    """The address given is the other kind of server: a broker where a NameServer is expected,
    or the reverse (it answers the other one's request codes)."""


class GroupNotFoundError(ClientError):
    """No broker knows the consumer (or producer) group: no subscription config, no offsets,
    no live client."""
