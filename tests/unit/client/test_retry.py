"""The one retry rule of every send: each error's category, and when another attempt is made."""

from __future__ import annotations

import pytest

from apogee import errors
from apogee.client.producer import retry
from apogee.errors import (
    ApogeeError,
    ClientStateError,
    ConnectionClosedError,
    MessageValidationError,
    NoRouteError,
    RemoteError,
    RequestTimeoutError,
    Retry,
)
from apogee.remoting.codes import ResponseCode

# DefaultMQProducer.retryResponseCodes of RocketMQ 4.9.8: a send answered with one of these
# is tried again; TOPIC_NOT_EXIST is what a stale route earns, so its route is fetched first.
ROCKETMQ_RETRY_CODES = {
    ResponseCode.TOPIC_NOT_EXIST: Retry.REFRESH_ROUTE,
    ResponseCode.SERVICE_NOT_AVAILABLE: Retry.ANOTHER_BROKER,
    ResponseCode.SYSTEM_ERROR: Retry.ANOTHER_BROKER,
    ResponseCode.NO_PERMISSION: Retry.ANOTHER_BROKER,
    ResponseCode.NO_BUYER_ID: Retry.ANOTHER_BROKER,
    ResponseCode.NOT_IN_CURRENT_UNIT: Retry.ANOTHER_BROKER,
}


@pytest.mark.parametrize(("code", "expected"), sorted(ROCKETMQ_RETRY_CODES.items()))
def test_rocketmqs_retry_codes_are_retried(code: int, expected: Retry) -> None:
    assert retry.classify(RemoteError.for_code(code, "x")) is expected


@pytest.mark.parametrize(
    "code",
    [
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        ResponseCode.FLUSH_DISK_TIMEOUT,  # a stored answer: retried only by after_stored's rule
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        ResponseCode.QUERY_NOT_FOUND,
        9999,  # a code nobody registered
    ],
)
def test_other_broker_answers_are_raised(code: int) -> None:
    assert retry.classify(RemoteError.for_code(code)) is Retry.RAISE


def test_system_busy_is_apogees_one_addition() -> None:
    assert retry.classify(RemoteError.for_code(ResponseCode.SYSTEM_BUSY)) is Retry.ANOTHER_BROKER


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RequestTimeoutError("late"), Retry.ANOTHER_BROKER),  # RocketMQ's RemotingException
        (ConnectionClosedError("gone"), Retry.ANOTHER_BROKER),
        (NoRouteError("no master"), Retry.REFRESH_ROUTE),  # its MQClientException
        (MessageValidationError("bad"), Retry.RAISE),
        (ClientStateError("stopped"), Retry.RAISE),
        (ValueError("not ours"), Retry.RAISE),
        (KeyboardInterrupt(), Retry.RAISE),
    ],
)
def test_client_side_errors(error: BaseException, expected: Retry) -> None:
    assert retry.classify(error) is expected


def _all_error_classes(cls: type[ApogeeError] = ApogeeError) -> list[type[ApogeeError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _all_error_classes(sub)
    return found


def test_retriable_is_derived_from_the_category_for_every_class() -> None:
    classes = _all_error_classes()
    assert errors.SystemBusyError in classes and len(classes) > 20
    for cls in classes:
        assert cls.retriable is (cls.retry is not Retry.RAISE), cls


def test_another_attempt_needs_attempts_and_time_left() -> None:
    busy = RemoteError.for_code(ResponseCode.SYSTEM_BUSY)
    stale = RemoteError.for_code(ResponseCode.TOPIC_NOT_EXIST)
    assert retry.after_failure(busy, 1, 100) is Retry.ANOTHER_BROKER
    assert retry.after_failure(stale, 2, 1) is Retry.REFRESH_ROUTE
    assert retry.after_failure(busy, 0, 100) is Retry.RAISE
    assert retry.after_failure(busy, 1, 0) is Retry.RAISE
    assert retry.after_failure(MessageValidationError("x"), 5, 100) is Retry.RAISE


def test_stored_but_not_ok_is_retried_only_when_asked() -> None:
    assert not retry.after_stored(True, True, 2)
    assert not retry.after_stored(False, False, 2)
    assert retry.after_stored(False, True, 1)
    assert not retry.after_stored(False, True, 0)


def test_the_same_broker_is_asked_again_only_after_a_pause() -> None:
    assert retry.pause_before(False, 2) == 0.0
    assert retry.pause_before(True, 1) == retry.PAUSE_S
    assert retry.pause_before(True, 2) == 2 * retry.PAUSE_S
