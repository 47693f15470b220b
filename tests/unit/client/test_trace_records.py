"""The trace format (apogee.client.trace.records) against RocketMQ's, and what a message's
trace is made of (apogee.client.trace.view)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.client.trace.records import (
    EndTransactionRecord,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    decode_body,
    decode_records,
    encode_record,
    pack,
)
from apogee.client.trace.view import collect_trace

SEP, END = "\x01", "\x02"


def java(*fields: str) -> str:
    return SEP.join(fields) + END


PUB = PubRecord(1700000000123, "DefaultRegion", "PG", "Orders", "MSGID1", None, "k1 k2", "127.0.0.1:10911", 11, 3, 0,
                "OFFSETID1", True)


def test_records_are_written_as_javas_encoder_writes_them() -> None:
    assert encode_record(PUB) == java(
        "Pub", "1700000000123", "DefaultRegion", "PG", "Orders", "MSGID1", "null", "k1 k2", "127.0.0.1:10911", "11",
        "3", "0", "OFFSETID1", "true",
    )
    assert encode_record(SubBeforeRecord(5, None, "CG", "REQ", "MSGID1", 2, None)) == java(
        "SubBefore", "5", "null", "CG", "REQ", "MSGID1", "2", "null"
    )
    assert encode_record(SubAfterRecord("REQ", "MSGID1", 7, False, "k1", 2, 9, "CG")) == java(
        "SubAfter", "REQ", "MSGID1", "7", "false", "k1", "2", "9", "CG"
    )
    end = EndTransactionRecord(5, "DefaultRegion", "PG", "Orders", "MSGID1", "TagA", None, "b:1", 2, "MSGID1",
                               "ROLLBACK_MESSAGE", True)
    assert encode_record(end) == java(
        "EndTransaction", "5", "DefaultRegion", "PG", "Orders", "MSGID1", "TagA", "null", "b:1", "2", "MSGID1",
        "ROLLBACK_MESSAGE", "true",
    )


def test_keys_are_the_message_id_and_its_keys() -> None:
    (batch,) = pack([PUB, SubBeforeRecord(5, None, "CG", "REQ", "M2", 0, None), PUB], 10**6, 10**6)
    assert batch.keys == ["MSGID1", "k1", "k2", "M2"]


_text = st.text(st.characters(blacklist_characters=SEP + END, blacklist_categories=("Cs",)), max_size=12)
_opt_text = st.none() | _text.filter(lambda t: t not in ("", "null"))
_ms = st.integers(0, 2**62)
_small = st.integers(0, 2**31 - 1)
_records = st.one_of(
    st.builds(PubRecord, _ms, _opt_text, _text, _text, _text, _opt_text, _opt_text, _text, _small, _small,
              st.integers(0, 3), _opt_text, st.booleans(), client_host=st.none()),  # Apogee writes no client host
    st.builds(SubBeforeRecord, _ms, _opt_text, _text, _text, _text, _small, _opt_text),
    st.builds(SubAfterRecord, _text, _text, _small, st.booleans(), _opt_text, st.integers(0, 4), _ms, _opt_text),
    st.builds(EndTransactionRecord, _ms, _opt_text, _text, _text, _text, _opt_text, _opt_text, _text,
              st.integers(0, 3), _opt_text, st.sampled_from(["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]),
              st.booleans()),
)


@given(st.lists(_records, max_size=8))
def test_decode_reads_what_encode_writes(records: list) -> None:
    decoded = decode_records("".join(encode_record(r) for r in records))
    assert decoded.records == records and decoded.malformed == decoded.unknown == 0


def test_pub_records_of_every_length_java_reads() -> None:
    base = ["Pub", "1", "R", "PG", "T", "ID", "null", "null", "h:1", "4", "2", "3"]
    twelve = decode_records(java(*base)).records[0]
    assert twelve.success is True and twelve.offset_msg_id is None and twelve.msg_type == 3
    thirteen = decode_records(java(*base, "false")).records[0]
    assert (thirteen.success, thirteen.offset_msg_id) == (False, None)
    fifteen = decode_records(java(*base, "OFF", "TRUE", "10.0.0.9")).records[0]
    assert (fifteen.offset_msg_id, fifteen.success, fifteen.client_host) == ("OFF", True, "10.0.0.9")


def test_sub_after_without_the_fields_cloud_clients_leave_out() -> None:
    (short,) = decode_records(java("SubAfter", "REQ", "ID", "3", "true", "k")).records
    assert (short.context_code, short.timestamp_ms, short.group) == (None, None, None)
    (seven,) = decode_records("SubAfter" + SEP + SEP.join(["REQ", "ID", "3", "true", "k", "1"]) + SEP).records
    assert (seven.context_code, seven.timestamp_ms) == (1, None)  # a trailing separator adds no field, as in Java


def test_malformed_and_unknown_records_are_skipped_not_fatal() -> None:
    good = encode_record(PUB)
    text = (
        java("Pub", "not-a-time", "R", "PG", "T", "ID", "a", "b", "h", "1", "1", "0", "O", "true")  # bad number
        + java("Pub", "1", "R", "PG", "T", "ID", "a", "b", "h", "1", "1", "9", "O", "true")  # no message type 9
        + java("Pub", "1", "R", "PG")  # too short
        + java("EndTransaction", "1", "R", "PG", "T", "ID", "a", "b", "h", "2", "X", "MAYBE", "false")  # bad state
        + java("Pub", "1_000", "R", "PG", "T", "ID", "a", "b", "h", "1", "1", "0", "O", "true")  # Python-only syntax
        + java("Recall", "1", "x")  # a record type of a later RocketMQ
        + good + END + END  # empty records
    )
    decoded = decode_records(text)
    assert decoded.records == [PUB] and decoded.malformed == 5 and decoded.unknown == 1
    assert decode_body(good.encode() + b"\xff\xfe").records == [PUB]  # bytes that are not UTF-8 do not stop it


def test_pack_bounds_each_message_and_keeps_every_record() -> None:
    records = [PUB._replace(msg_id=f"ID{i:02}", keys="shared") for i in range(50)]
    one = len(encode_record(records[0]).encode())
    batches = pack(records, max_body_bytes=one * 20, max_keys_chars=10_000)
    assert [len(b.body) // one for b in batches] == [20, 20, 10]
    assert batches[0].keys == ["ID00", "shared", *(f"ID{i:02}" for i in range(1, 20))]  # each key once
    assert decode_body(b"".join(b.body for b in batches)).records == records
    by_keys = pack(records, max_body_bytes=10**6, max_keys_chars=40)
    assert all(len(" ".join(b.keys)) <= 40 for b in by_keys) and sum(len(b.keys) for b in by_keys) > 50
    assert [len(b.body) for b in pack(records[:2], 10, 10)] == [one, one]  # too large: alone


def test_collect_trace_keeps_the_message_and_pairs_sub_records() -> None:
    other = PUB._replace(msg_id="OTHER")
    before = SubBeforeRecord(10, None, "CG", "R1", "MSGID1", 0, None)
    after = SubAfterRecord("R1", "MSGID1", 4, True, None, 0, 14, "CG")
    late_after = SubAfterRecord("R2", "MSGID1", 6, False, None, 4, 30, None)  # before its SubBefore, no group
    late_before = SubBeforeRecord(20, None, "CG2", "R2", "MSGID1", 1, None)
    running = SubBeforeRecord(40, None, "CG", "R3", "MSGID1", 2, None)
    body1 = "".join(encode_record(r) for r in (other, PUB, after, late_after)).encode()
    body2 = "".join(encode_record(r) for r in (before, late_before, running)).encode()
    trace = collect_trace("MSGID1", [(body1, "10.0.0.1"), (body2, "10.0.0.2")])
    assert [(s.record, s.client_host) for s in trace.sends] == [(PUB, "10.0.0.1")]
    assert sorted(trace.consumptions) == ["CG", "CG2"]
    first, third = trace.consumptions["CG"]
    assert (first.began_ms, first.finished_ms, first.cost_ms, first.success) == (10, 14, 4, True)
    assert (third.retry_times, third.finished) == (2, False)
    (second,) = trace.consumptions["CG2"]
    assert (second.began_ms, second.retry_times, second.success, second.context_code) == (20, 1, False, 4)
    assert collect_trace("NOPE", [(body1, "h")]).empty
