"""The message rewrites (``broker/rewrite.py``): where each one sends a message and what it
notes in its properties -- the properties Apache RocketMQ 4.9.8 stores on each path."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from apogee.broker import rewrite
from apogee.broker.rewrite import Placement
from apogee.common import constants as c

CLUSTER = "C"
MAX_LEVEL = 18


def sent(props: dict[str, str], topic: str = "T", queue_id: int = 2, sysflag: int = 0) -> Placement:
    return Placement(topic, queue_id, props, sysflag)


# --- sends --------------------------------------------------------------------------------------


def test_a_plain_send_loses_wait_and_gains_the_cluster() -> None:
    placed = rewrite.received(sent({"KEYS": "k", "WAIT": "true"}), cluster=CLUSTER, half=False,
                              max_delay_level=MAX_LEVEL)
    assert placed == Placement("T", 2, {"KEYS": "k", "CLUSTER": CLUSTER}, 0)


def test_a_delayed_send_waits_in_the_schedule_topic_with_its_wait() -> None:
    placed = rewrite.received(sent({"DELAY": "3", "WAIT": "true"}), cluster=CLUSTER, half=False,
                              max_delay_level=MAX_LEVEL)
    assert (placed.topic, placed.queue_id) == (c.SCHEDULE_TOPIC, 2)
    assert placed.properties == {"DELAY": "3", "WAIT": "true", "CLUSTER": CLUSTER, "REAL_TOPIC": "T", "REAL_QID": "2"}


def test_a_send_whose_delay_does_not_apply_is_stored_as_a_plain_one() -> None:
    placed = rewrite.received(sent({"DELAY": "0", "WAIT": "true"}), cluster=CLUSTER, half=False,
                              max_delay_level=MAX_LEVEL)
    assert placed == Placement("T", 2, {"DELAY": "0", "CLUSTER": CLUSTER}, 0)


def test_a_delay_above_the_highest_level_is_the_highest() -> None:
    placed = rewrite.delayed(sent({"DELAY": "99"}), 4)
    assert placed.queue_id == 3 and placed.properties["DELAY"] == "4"


def test_no_delay_for_a_level_that_is_not_positive_or_not_a_number_or_an_undecided_transaction() -> None:
    undecided = (({"DELAY": "1"}, c.TRANSACTION_PREPARED_TYPE), ({"DELAY": "1"}, c.TRANSACTION_ROLLBACK_TYPE))
    for props, sysflag in (({"DELAY": "0"}, 0), ({"DELAY": "-2"}, 0), ({"DELAY": "x"}, 0), ({}, 0), *undecided):
        placed = sent(props, sysflag=sysflag)
        assert rewrite.delayed(placed, MAX_LEVEL) is placed
    assert rewrite.delayed(sent({"DELAY": "1"}, sysflag=c.TRANSACTION_COMMIT_TYPE), MAX_LEVEL).topic == c.SCHEDULE_TOPIC


def test_a_half_message_waits_in_the_half_topic_without_a_transaction_type() -> None:
    props = {"TRAN_MSG": "true", "PGROUP": "pg", "DELAY": "2", "WAIT": "true"}
    assert rewrite.is_half(props, c.TRANSACTION_PREPARED_TYPE) and rewrite.is_half(props, 0)
    assert not rewrite.is_half(props, c.TRANSACTION_COMMIT_TYPE)
    assert not rewrite.is_half({}, c.TRANSACTION_PREPARED_TYPE)
    placed = rewrite.received(sent(props, sysflag=c.TRANSACTION_PREPARED_TYPE | c.COMPRESSED_FLAG), cluster=CLUSTER,
                              half=True, max_delay_level=MAX_LEVEL)
    assert (placed.topic, placed.queue_id) == (c.RMQ_SYS_TRANS_HALF_TOPIC, 0)  # its delay waits for the commit
    assert placed.sysflag == c.COMPRESSED_FLAG
    assert placed.properties == {"TRAN_MSG": "true", "PGROUP": "pg", "DELAY": "2", "WAIT": "true", "CLUSTER": CLUSTER,
                                 "REAL_TOPIC": "T", "REAL_QID": "2"}


# --- delivery and commit ------------------------------------------------------------------------


def test_a_due_message_goes_back_where_it_was_sent_with_what_it_waited_with() -> None:
    scheduled = rewrite.delayed(sent({"KEYS": "k", "DELAY": "2", "WAIT": "true"}, queue_id=5), MAX_LEVEL)
    assert rewrite.due(scheduled) == Placement(
        "T", 5, {"KEYS": "k", "DELAY": "2", "WAIT": "true", "REAL_TOPIC": "T", "REAL_QID": "5"}, 0)


def test_a_message_that_does_not_say_where_it_goes_cannot_be_delivered_or_committed() -> None:
    for props in ({}, {"REAL_TOPIC": "T"}, {"REAL_QID": "1"}, {"REAL_TOPIC": "", "REAL_QID": "1"},
                  {"REAL_TOPIC": "T", "REAL_QID": "one"}):
        assert rewrite.due(sent(props, topic=c.SCHEDULE_TOPIC)) is None
        assert rewrite.committed(sent(props, topic=c.RMQ_SYS_TRANS_HALF_TOPIC), MAX_LEVEL) is None


def test_a_committed_half_goes_to_its_topic_with_the_commit_type_and_what_the_half_held() -> None:
    half = rewrite.received(sent({"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "u", "WAIT": "true"}, queue_id=3,
                                 sysflag=c.TRANSACTION_PREPARED_TYPE), cluster=CLUSTER, half=True, max_delay_level=4)
    assert rewrite.committed(half, MAX_LEVEL) == Placement("T", 3, {
        "TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "u", "WAIT": "true", "CLUSTER": CLUSTER, "REAL_TOPIC": "T",
        "REAL_QID": "3"}, c.TRANSACTION_COMMIT_TYPE)
    placed = rewrite.committed(rewrite.checked(half, 2), MAX_LEVEL)
    assert placed is not None and placed.properties["TRANSACTION_CHECK_TIMES"] == "2"


def test_a_committed_half_that_asks_for_a_delay_is_delayed_then() -> None:
    half = rewrite.to_half(sent({"TRAN_MSG": "true", "DELAY": "2", "WAIT": "true"}, queue_id=3))
    placed = rewrite.committed(half, MAX_LEVEL)
    assert placed is not None and (placed.topic, placed.queue_id) == (c.SCHEDULE_TOPIC, 1)
    assert rewrite.due(placed) == Placement(
        "T", 3, {"DELAY": "2", "WAIT": "true", "REAL_TOPIC": "T", "REAL_QID": "3"}, c.TRANSACTION_COMMIT_TYPE)


def test_check_backs_are_counted_in_the_copy() -> None:
    half = rewrite.to_half(sent({"TRAN_MSG": "true"}))
    assert rewrite.check_times(half) == 0
    copy = rewrite.checked(half, 1)
    assert (copy.topic, copy.queue_id) == (c.RMQ_SYS_TRANS_HALF_TOPIC, 0) and rewrite.check_times(copy) == 1
    assert rewrite.discarded(copy) == Placement(c.TRANS_CHECK_MAX_TIME_TOPIC, 0, copy.properties, copy.sysflag)
    for bad in ("x", "", "-3"):
        assert rewrite.check_times(rewrite.checked(half, 1)._replace(properties={"TRANSACTION_CHECK_TIMES": bad})) == 0


# --- retry and DLQ ------------------------------------------------------------------------------


def test_the_dlq_takes_a_message_past_the_max_or_when_asked() -> None:
    assert not rewrite.to_dlq(2, 3, 0) and rewrite.to_dlq(3, 3, 0) and rewrite.to_dlq(0, 3, -1)


def test_a_message_handed_back_is_delayed_into_the_retry_topic() -> None:
    original = sent({"KEYS": "k", "UNIQ_KEY": "u", "CLUSTER": CLUSTER}, queue_id=1)
    placed = rewrite.sent_back(original, group="G", dlq=False, queue_id=0, delay_level=0, reconsume_times=2,
                               origin_msg_id="ORIGIN", max_delay_level=MAX_LEVEL)
    assert (placed.topic, placed.queue_id) == (c.SCHEDULE_TOPIC, 4)  # level 3 + 2
    assert placed.properties == {"KEYS": "k", "UNIQ_KEY": "u", "CLUSTER": CLUSTER, "RETRY_TOPIC": "T", "WAIT": "false",
                                 "DELAY": "5", "ORIGIN_MESSAGE_ID": "ORIGIN", "REAL_TOPIC": "%RETRY%G", "REAL_QID": "0"}
    delivered = rewrite.due(placed)
    assert delivered is not None and (delivered.topic, delivered.queue_id) == ("%RETRY%G", 0)
    assert delivered.properties == placed.properties
    chosen = rewrite.sent_back(original, group="G", dlq=False, queue_id=0, delay_level=1, reconsume_times=2,
                               origin_msg_id="ORIGIN", max_delay_level=MAX_LEVEL)
    assert chosen.queue_id == 0 and chosen.properties["DELAY"] == "1"


def test_a_retry_message_handed_back_again_keeps_its_first_topic_and_id() -> None:
    again = sent({"RETRY_TOPIC": "T", "ORIGIN_MESSAGE_ID": "FIRST"}, topic="%RETRY%G")
    placed = rewrite.sent_back(again, group="G", dlq=False, queue_id=0, delay_level=0, reconsume_times=1,
                               origin_msg_id="SECOND", max_delay_level=MAX_LEVEL)
    assert placed.properties["RETRY_TOPIC"] == "T" and placed.properties["ORIGIN_MESSAGE_ID"] == "FIRST"
    blank = sent({"ORIGIN_MESSAGE_ID": " "})  # blank, as Java's UtilAll.isBlank: replaced
    placed = rewrite.sent_back(blank, group="G", dlq=True, queue_id=0, delay_level=0, reconsume_times=1,
                               origin_msg_id="SECOND", max_delay_level=MAX_LEVEL)
    assert placed.properties["ORIGIN_MESSAGE_ID"] == "SECOND"


def test_a_message_handed_back_to_the_dlq_is_not_delayed_and_says_delay_0() -> None:
    placed = rewrite.sent_back(sent({"DELAY": "4", "WAIT": "true"}), group="G", dlq=True, queue_id=0, delay_level=-1,
                               reconsume_times=16, origin_msg_id="ORIGIN", max_delay_level=MAX_LEVEL)
    assert placed == Placement(
        "%DLQ%G", 0, {"DELAY": "0", "WAIT": "false", "RETRY_TOPIC": "T", "ORIGIN_MESSAGE_ID": "ORIGIN"}, 0)


def test_a_retry_message_dead_lettered_keeps_where_its_delay_sent_it() -> None:
    retried = sent({"RETRY_TOPIC": "T", "WAIT": "false", "DELAY": "3", "ORIGIN_MESSAGE_ID": "FIRST",
                    "REAL_TOPIC": "%RETRY%G", "REAL_QID": "0"}, topic="%RETRY%G", queue_id=0)
    placed = rewrite.sent_back(retried, group="G", dlq=True, queue_id=0, delay_level=0, reconsume_times=16,
                               origin_msg_id="SECOND", max_delay_level=MAX_LEVEL)
    assert placed == Placement("%DLQ%G", 0, {**retried.properties, "DELAY": "0"}, 0)


def test_a_message_of_an_undecided_transaction_type_is_retried_without_waiting() -> None:
    """RocketMQ's CommitLog delays only messages without a transaction type or committed."""
    placed = rewrite.sent_back(sent({}, sysflag=c.TRANSACTION_PREPARED_TYPE), group="G", dlq=False, queue_id=0,
                               delay_level=2, reconsume_times=0, origin_msg_id="O", max_delay_level=MAX_LEVEL)
    assert (placed.topic, placed.properties["DELAY"]) == ("%RETRY%G", "2")


# --- every rewrite is pure ----------------------------------------------------------------------

names = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=12)
values = st.text(min_size=0, max_size=6)
property_maps = st.dictionaries(
    st.one_of(names, st.sampled_from([c.DELAY, c.WAIT, c.REAL_TOPIC, c.REAL_QID, c.TRAN_MSG, c.RETRY_TOPIC,
                                      c.ORIGIN_MESSAGE_ID, c.TRANSACTION_CHECK_TIMES])),
    st.one_of(values, st.sampled_from(["1", "3", "true", "-1", "T"])),
    max_size=8,
)


@given(property_maps, st.sampled_from([0, c.TRANSACTION_PREPARED_TYPE, c.TRANSACTION_COMMIT_TYPE]))
def test_no_rewrite_changes_what_it_was_given(props: dict[str, str], sysflag: int) -> None:
    before = dict(props)
    placed = sent(props, sysflag=sysflag)
    rewrite.received(placed, cluster=CLUSTER, half=False, max_delay_level=MAX_LEVEL)
    rewrite.received(placed, cluster=CLUSTER, half=True, max_delay_level=MAX_LEVEL)
    rewrite.delayed(placed, MAX_LEVEL)
    rewrite.due(placed)
    rewrite.committed(placed, MAX_LEVEL)
    rewrite.checked(placed, 1)
    rewrite.discarded(placed)
    rewrite.sent_back(placed, group="G", dlq=False, queue_id=0, delay_level=0, reconsume_times=0,
                      origin_msg_id="O", max_delay_level=MAX_LEVEL)
    assert props == before


def test_the_module_is_pure() -> None:
    """No I/O, no event loop, no threads: the rewrites are decisions only."""
    source = Path(rewrite.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert imported <= {"__future__", "collections.abc", "typing", "apogee.common", "apogee.common.message"}, imported
