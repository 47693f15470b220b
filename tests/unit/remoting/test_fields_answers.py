"""Frames written straight from header fields (``codec.fields_frame``): a client's
``invoke_fields`` and a processor's ``FieldsAnswer`` must put on the wire exactly what the
command-building path puts there, and behave the same (opaque matching, oneway, binary headers).

A recording transport stands in for the socket: no network here."""

from __future__ import annotations

import asyncio

from apogee.remoting.codec import FrameDecoder, encode_bytes, fields_frame_py, request_command
from apogee.remoting.codes import SerializeType
from apogee.remoting.command import RemotingCommand
from apogee.remoting.server import Deferred, FieldsAnswer, RequestDispatcher
from tests.support.transport import recorded_connection

KEYS = ("msgId", "queueId", "queueOffset", "MSG_REGION")
VALUES = ("7F00000100002A9F0000000000001000", 3, 41, None)


def _decode(data: bytes) -> list[RemotingCommand]:
    return FrameDecoder().feed(data)


def test_invoke_fields_writes_the_command_and_matches_its_answer() -> None:
    async def main() -> None:
        conn, transport = recorded_connection()
        first = conn.invoke_fields(310, ("a", "e", "i"), ("group", 3, "KEYS\x01k"), b"body", 3000)
        second = conn.invoke_fields(310, ("a", "e"), ("group", 4), b"other", 3000)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        (req1,) = _decode(transport.writes[0])  # the first of the turn, at once
        (req2,) = _decode(transport.writes[1])  # the second, when the turn ended
        keys, values = ("a", "e", "i"), ("group", 3, "KEYS\x01k")
        assert transport.writes[0] == fields_frame_py(310, req1.opaque, 0, keys, values, b"body")
        assert req1.ext_fields == {"a": "group", "e": "3", "i": "KEYS\x01k"} and req1.body == b"body"
        assert req2.ext_fields == {"a": "group", "e": "4"} and req2.opaque != req1.opaque
        # answers arrive in the other order and still find their requests
        conn.data_received(encode_bytes(req2.response(0, "two")) + encode_bytes(req1.response(0, "one")))
        assert (await first).remark == "one"
        assert (await second).remark == "two"
        assert conn.pending_count == 0

    asyncio.run(main())


def _answered(request: RemotingCommand, answer: RemotingCommand | FieldsAnswer) -> bytes:
    async def main() -> bytes:
        dispatcher = RequestDispatcher()
        dispatcher.register(request.code, lambda conn, req: answer)
        conn, transport = recorded_connection(dispatcher)
        conn.data_received(encode_bytes(request))
        await asyncio.sleep(0)
        return b"".join(transport.writes)

    return asyncio.run(main())


def _request(serialize_type: int = SerializeType.JSON, oneway: bool = False) -> RemotingCommand:
    req = RemotingCommand.request(310, {"a": "g"}, b"x", oneway=oneway)
    req.opaque = 77
    req.serialize_type = serialize_type
    return req


def test_a_fields_answer_is_the_bytes_of_the_equal_response() -> None:
    fields = FieldsAnswer(0, KEYS, VALUES)
    via_fields = _answered(_request(), fields)
    ext = request_command(0, KEYS, VALUES, None).ext_fields
    via_command = _answered(_request(), _request().response(0, ext_fields=ext))
    assert via_fields == via_command
    (resp,) = _decode(via_fields)
    assert resp.opaque == 77 and resp.is_response and resp.remark is None
    assert resp.ext_fields == {"msgId": VALUES[0], "queueId": "3", "queueOffset": "41"}


def test_a_fields_answer_with_a_body_is_the_bytes_of_the_equal_response() -> None:
    """A pull's answer: its head written from the fields, its records after it unjoined (one
    buffer or several, bytes or views), to a JSON or a binary-header request."""
    records = b"R" * 300
    for body in (records, memoryview(records), bytearray(records), [memoryview(records)[:100], records[100:]]):
        for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
            via_fields = _answered(_request(serialize_type), FieldsAnswer(0, KEYS, VALUES, body))
            ext = request_command(0, KEYS, VALUES, None).ext_fields
            via_command = _answered(_request(serialize_type), _request(serialize_type).response(0, ext_fields=ext,
                                                                                                 body=records))
            assert via_fields == via_command, (type(body), serialize_type)
            (resp,) = _decode(via_fields)
            assert resp.body == records and resp.opaque == 77


def test_a_fields_answer_to_a_binary_header_request_is_binary() -> None:
    (resp,) = _decode(_answered(_request(SerializeType.ROCKETMQ), FieldsAnswer(0, KEYS, VALUES)))
    assert resp.serialize_type == SerializeType.ROCKETMQ
    assert resp.opaque == 77 and resp.is_response
    assert resp.ext_fields == {"msgId": VALUES[0], "queueId": "3", "queueOffset": "41"}


def test_a_oneway_request_gets_no_fields_answer() -> None:
    assert _answered(_request(oneway=True), FieldsAnswer(0, KEYS, VALUES)) == b""


def test_a_deferred_answer_is_written_when_its_future_completes_and_errors_become_answers() -> None:
    """``Deferred``: the processor's future (a group commit's, a slave's) decides when; its
    result becomes the answer; a failed future is an error answer; a cancelled one (the
    server stopping) writes nothing."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = []

        def processor(conn: object, req: RemotingCommand) -> Deferred:
            fut: asyncio.Future[int] = loop.create_future()
            futures.append(fut)
            return Deferred(fut, lambda n: FieldsAnswer(0, ("queueOffset",), (n,)))

        dispatcher = RequestDispatcher()
        dispatcher.register(310, processor)
        conn, transport = recorded_connection(dispatcher)
        for opaque in (1, 2, 3):
            req = _request()
            req.opaque = opaque
            conn.data_received(encode_bytes(req))
        await asyncio.sleep(0)
        assert transport.writes == [] and len(futures) == 3  # nothing before the futures complete
        futures[1].set_result(41)
        futures[0].set_exception(RuntimeError("disk gone"))
        futures[2].cancel()
        for _ in range(3):  # the callbacks, then the connection's end-of-turn write
            await asyncio.sleep(0)
        answers = {r.opaque: r for r in _decode(b"".join(transport.writes))}
        assert set(answers) == {1, 2}
        assert answers[2].code == 0 and answers[2].ext_fields == {"queueOffset": "41"}
        assert answers[1].code == 1 and "disk gone" in (answers[1].remark or "")

    asyncio.run(main())
