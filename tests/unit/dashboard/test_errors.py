from __future__ import annotations

import pytest

from apogee.admin.errors import GroupNotFoundError, NoBrokerRegisteredError, TopicNotFoundError, WrongServerError
from apogee.dashboard.errors import BadInput, Problem, attempt, describe
from apogee.errors import (
    ConnectionClosedError,
    NameServerUnreachableError,
    RemoteError,
    RequestCodeNotSupportedError,
    RequestTimeoutError,
)


@pytest.mark.parametrize(("exc", "title", "status"), [
    (NameServerUnreachableError("cannot reach the NameServer at x"), "The NameServer cannot be reached", 503),
    (ConnectionClosedError("cannot reach the broker at y"), "A broker is down or not answering", 502),
    (RequestTimeoutError("cannot reach the broker at y: timeout"), "A broker is down or not answering", 502),
    (WrongServerError("x is a broker, not a NameServer"), "Wrong kind of server", 502),
    (NoBrokerRegisteredError("no broker"), "No broker available", 503),
    (TopicNotFoundError("topic 'T' does not exist"), "Not found", 404),
    (GroupNotFoundError("consumer group 'G' does not exist"), "Not found", 404),
    (BadInput("perm must be 2, 4 or 6"), "Invalid input", 400),
    (ValueError("boom"), "Internal error", 500),
])
def test_each_failure_has_a_title_that_names_its_cause(exc: Exception, title: str, status: int) -> None:
    problem = describe(exc)
    assert (problem.title, problem.status) == (title, status)
    assert str(exc) in problem.detail


def test_a_refusal_shows_rocketmqs_code_by_name_and_its_remark() -> None:
    problem = describe(RemoteError.for_code(1, "readQueueNums and writeQueueNums must be between 1 and 1024"))
    assert problem == Problem("The request was refused",
                              "code 1 SYSTEM_ERROR: readQueueNums and writeQueueNums must be between 1 and 1024", 409)
    assert describe(RequestCodeNotSupportedError(3, "the broker at a does not serve 351")).detail == (
        "the broker at a does not serve 351")


async def test_attempt_notes_a_failure_and_lets_the_page_go_on() -> None:
    problems: list[Problem] = []

    async def fails() -> int:
        raise TopicNotFoundError("topic 'T' does not exist")

    async def works() -> int:
        return 7

    assert await attempt(problems, "queue status", fails()) is None
    assert await attempt(problems, "route", works()) == 7
    assert [(p.where, p.status) for p in problems] == [("queue status", 404)]

    async def bug() -> int:
        raise KeyError("not an Apogee failure")

    with pytest.raises(KeyError):  # a bug is not a banner: it fails the request (and is logged)
        await attempt(problems, "x", bug())
