"""Response -> value conversions of ClientAPI, without a network."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.client.api import PULL_KEYS, _pull_values, build_pull_result, parse_send_response, send_result
from apogee.client.types import PullStatus, SendStatus
from apogee.common import constants as c
from apogee.common.message import MessageQueue
from apogee.common.message_codec import encode_record, properties_to_string
from apogee.errors import RemoteError, SubscriptionParseFailedError, SystemBusyError
from apogee.remoting.codec import decode_frame, encode_bytes, fields_frame, fields_frame_py
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.headers.pull import PullMessageRequestHeader

MQ = MessageQueue("T", "b", 1)


def resp(
    code: int, ext: dict[str, str] | None = None, body: bytes | None = None, remark: str | None = None
) -> RemotingCommand:
    return RemotingCommand(code, flag=1, ext_fields=ext, body=body, remark=remark)


def test_single_send_result() -> None:
    (r,) = parse_send_response(
        resp(0, {"msgId": "AB", "queueId": "1", "queueOffset": "42", "MSG_REGION": "R", "TRACE_ON": "true"}),
        MQ,
        ["UNIQ"],
    )
    assert r.status is SendStatus.SEND_OK and r.msg_id == "UNIQ" and r.offset_msg_id == "AB"
    assert r.queue_offset == 42 and r.message_queue == MQ and r.region_id == "R" and r.trace_on


@pytest.mark.parametrize(
    "response",
    [
        resp(0, {"msgId": "AB", "queueId": "1", "queueOffset": "42", "MSG_REGION": "R", "TRACE_ON": "true"}),
        resp(0, {"msgId": "AB", "queueId": "5", "queueOffset": "0"}),  # another queue than asked
        resp(0, {"msgId": "A,B", "queueId": "1", "queueOffset": "3"}),  # two ids for one message
        resp(0, {"msgId": "AB", "queueId": "x", "queueOffset": "3"}),  # a broken number
        resp(0, {"queueId": "1"}),
        resp(0, None),
        resp(10, {"msgId": "AB", "queueId": "1", "queueOffset": "9"}),
        resp(12, {"msgId": "AB", "queueId": "1", "queueOffset": "9"}),
    ],
)
@pytest.mark.parametrize("uniq", ["UNIQ", ""])
def test_single_send_result_is_parse_send_response_of_one(response: RemotingCommand, uniq: str) -> None:
    assert send_result(response, MQ, uniq) == parse_send_response(response, MQ, [uniq])[0]


def test_single_send_result_raises_as_parse_send_response() -> None:
    with pytest.raises(SystemBusyError):
        send_result(resp(2, remark="busy"), MQ, "u")


def test_batch_send_results_are_consecutive() -> None:
    results = parse_send_response(
        resp(10, {"msgId": "A,B,C", "queueId": "3", "queueOffset": "7"}), MQ, ["u1", "u2", "u3"]
    )
    assert [r.offset_msg_id for r in results] == ["A", "B", "C"]
    assert [r.queue_offset for r in results] == [7, 8, 9]
    assert {r.status for r in results} == {SendStatus.FLUSH_DISK_TIMEOUT}
    assert results[0].message_queue.queue_id == 3


def test_send_error_codes_become_exceptions() -> None:
    with pytest.raises(SystemBusyError) as info:
        parse_send_response(resp(2, remark="busy"), MQ, ["u"])
    assert info.value.code == 2 and info.value.remark == "busy" and info.value.retriable
    with pytest.raises(RemoteError) as other:
        parse_send_response(resp(13, remark="too big"), MQ, ["u"])
    assert other.value.code == 13


def record(offset: int, tags: str | None) -> bytes:
    props = {c.UNIQ_KEY: f"U{offset}"}
    if tags:
        props[c.TAGS] = tags
    return encode_record(
        topic="T",
        body=b"b%d" % offset,
        queue_offset=offset,
        physical_offset=100 * offset,
        store_host=("127.0.0.1", 10911),
        properties=properties_to_string(props),
    )


def test_pull_found_decodes_and_filters_by_tag_string() -> None:
    body = record(0, "A") + record(1, "B") + record(2, None) + record(3, "A")
    ext = {"nextBeginOffset": "4", "minOffset": "0", "maxOffset": "9", "suggestWhichBrokerId": "0"}
    result = build_pull_result(resp(0, ext, body), frozenset({"A"}))
    assert result.status is PullStatus.FOUND and result.next_begin_offset == 4 and result.max_offset == 9
    assert [m.queue_offset for m in result.messages] == [0, 3]
    assert result.messages[0].msg_id == "U0" and result.messages[0].body == b"b0"
    every = build_pull_result(resp(0, ext, body), None)
    assert len(every.messages) == 4


@pytest.mark.parametrize(
    ("code", "status"), [(19, PullStatus.NO_NEW_MSG), (20, PullStatus.NO_MATCHED_MSG), (21, PullStatus.OFFSET_ILLEGAL)]
)
def test_pull_statuses(code: int, status: PullStatus) -> None:
    result = build_pull_result(resp(code, {"nextBeginOffset": "5", "minOffset": "1", "maxOffset": "5"}), None)
    assert result.status is status and result.next_begin_offset == 5 and result.messages == []


def test_pull_errors() -> None:
    with pytest.raises(SubscriptionParseFailedError):
        build_pull_result(resp(23, remark="bad"), None)


@given(
    st.builds(
        PullMessageRequestHeader,
        consumer_group=st.text(min_size=1, max_size=20),
        topic=st.text(min_size=1, max_size=20),
        queue_id=st.integers(0, 2**31 - 1),
        queue_offset=st.integers(0, 2**63 - 1),
        max_msg_nums=st.integers(1, 2**31 - 1),
        sys_flag=st.integers(0, 15),
        commit_offset=st.integers(0, 2**63 - 1),
        suspend_timeout_millis=st.integers(0, 2**40),
        sub_version=st.integers(0, 2**63 - 1),
        subscription=st.none() | st.text(max_size=40),  # SQL92 text: quotes, escapes, any script
        expression_type=st.none() | st.sampled_from(["TAG", "SQL92"]),
    ),
    st.integers(0, 2**31 - 1),
)
def test_a_pull_is_written_as_its_header_encodes(header: PullMessageRequestHeader, opaque: int) -> None:
    # ClientAPI.pull_request writes the frame from the header's values (no extFields dict):
    # the bytes are those of the request built from header.encode().
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.encode())
    request.opaque = opaque
    values = _pull_values(header)
    assert fields_frame(RequestCode.PULL_MESSAGE, opaque, 0, PULL_KEYS, values, None) == encode_bytes(request)
    assert decode_frame(fields_frame_py(RequestCode.PULL_MESSAGE, opaque, 0, PULL_KEYS, values, None)[4:]).ext_fields \
        == header.encode()
