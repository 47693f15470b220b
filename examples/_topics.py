"""What an example says when its topic does not exist yet: one line naming the command that
creates it, instead of a timeout or a (Spark) traceback.  Shared by the examples."""

from __future__ import annotations

import asyncio
import sys

from apogee.admin.client import AdminClient
from apogee.errors import ApogeeError, NoRouteError, TopicNotExistError


def missing_topic_line(topic: str, namesrv: str) -> str:
    return (
        f"topic {topic} does not exist yet: create it with `apogee admin update-topic -n {namesrv} -t {topic}` "
        f"or send to it first (python examples/producer.py --namesrv {namesrv} --topic {topic})"
    )


async def topic_exists(namesrv: str, topic: str) -> bool:
    """Whether the NameServer has a route for ``topic`` (a broker serves it)."""
    try:
        async with AdminClient(namesrv) as admin:
            await admin.route(topic)
    except (NoRouteError, TopicNotExistError):
        return False
    return True


def require_topics(namesrv: str, *topics: str) -> None:
    """Exit with the one-line hint (status 2) unless every topic exists."""
    for topic in topics:
        try:
            exists = asyncio.run(topic_exists(namesrv, topic))
        except ApogeeError as exc:
            sys.exit(f"cannot reach the NameServer {namesrv}: {exc}")
        if not exists:
            sys.exit(missing_topic_line(topic, namesrv))
