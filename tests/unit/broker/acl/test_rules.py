"""The broker's ACL check (broker/acl/rules.py): RocketMQ 4.9's order, its refusal texts, the
resources each request code touches and the account perms they need."""

from __future__ import annotations

import orjson
import pytest

from apogee.broker.acl.rules import Account, AclConfigError, AclRules, signature_refusal, signature_start
from apogee.remoting.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from apogee.remoting.codes import RequestCode as R
from apogee.remoting.signing import SessionCredentials, Signer, content_head, feed, signature

DOC = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {"accessKey": "RocketMQ", "secretKey": 12345678, "whiteRemoteAddress": None, "admin": False,
         "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"],
         "groupPerms": ["groupA=DENY", "groupB=PUB|SUB", "groupC=SUB"]},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "whiteRemoteAddress": "192.168.1.*", "admin": True},
        {"accessKey": "admin3x", "secretKey": "12345678", "admin": True, "topicPerms": ["secret=DENY"]},
    ],
}
PEER = "127.0.0.1"


def lacks(resource: str, needs: str, has: str, account: str = "RocketMQ") -> str:
    return f"No default permission for {resource} (needs {needs}; accessKey={account} has {has})"


def not_admin(code: int) -> str:
    return f"Need admin permission for request code={code}, but accessKey=RocketMQ is not"


def rules(doc: object = DOC) -> AclRules:
    return AclRules.from_documents([("/conf/plain_acl.yml", doc)], now_ms=1)


def signed(access_key: str, ext: dict[str, str], body: bytes | None = None, secret: str = "12345678") -> dict[str, str]:
    return Signer(SessionCredentials(access_key, secret)).sign_ext(ext, body)


def test_the_global_whitelist_passes_anything_even_unsigned() -> None:
    assert rules().refusal("10.10.103.7", R.DELETE_TOPIC_IN_BROKER, None, None) is None
    assert rules().refusal(PEER, R.DELETE_TOPIC_IN_BROKER, None, None) == "No accessKey is configured"


def test_an_unknown_access_key_is_named() -> None:
    refusal = rules().refusal(PEER, R.SEND_MESSAGE, signed("nobody1", {"topic": "topicB"}), None)
    assert refusal == "No acl config for nobody1"


def test_the_accounts_whitelist_skips_the_signature_and_the_perms() -> None:
    ext = {"AccessKey": "rocketmq2", "Signature": "not-a-signature", "topic": "x"}
    assert rules().refusal("192.168.1.20", R.SEND_MESSAGE, ext, None) is None
    refusal = rules().refusal("192.168.2.20", R.SEND_MESSAGE, ext, None)
    assert refusal == "Check signature failed for accessKey=rocketmq2"


def test_a_wrong_secret_or_a_changed_field_or_body_fails_the_signature() -> None:
    r = rules()
    good = signed("RocketMQ", {"topic": "topicB"}, b"body")
    assert r.refusal(PEER, R.SEND_MESSAGE, good, b"body") is None
    assert r.refusal(PEER, R.SEND_MESSAGE, good, b"other") == "Check signature failed for accessKey=RocketMQ"
    assert r.refusal(PEER, R.SEND_MESSAGE, {**good, "topic": "topicC"}, b"body") is not None
    assert r.refusal(PEER, R.SEND_MESSAGE, signed("RocketMQ", {"topic": "topicB"}, b"body", "87654321"), b"body") \
        == "Check signature failed for accessKey=RocketMQ"


def test_hmac_sha256_is_accepted_when_the_request_says_so() -> None:
    ext = Signer(SessionCredentials("RocketMQ", "12345678"), "HmacSHA256").sign_ext({"topic": "topicB"}, None)
    assert rules().refusal(PEER, R.SEND_MESSAGE, ext, None) is None
    bad = {**ext, "SignatureMethod": "HmacMD5"}
    assert "SignatureMethod HmacMD5" in (rules().refusal(PEER, R.SEND_MESSAGE, bad, None) or "")


def test_a_query_signed_with_or_without_the_unique_key_flag_passes() -> None:
    ext = {"topic": "topicC", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}
    apogee_style = signed("RocketMQ", {**ext, "_UNIQUE_KEY_QUERY": "true"})
    java_style = {**ext, "_UNIQUE_KEY_QUERY": "true", "AccessKey": "RocketMQ"}
    java_style["Signature"] = signature("12345678", content_head(java_style))  # the Java client signs the flag
    assert rules().refusal(PEER, R.QUERY_MESSAGE, apogee_style, None) is None
    assert rules().refusal(PEER, R.QUERY_MESSAGE, java_style, None) is None


@pytest.mark.parametrize(
    ("code", "ext", "refusal"),
    [
        (R.SEND_MESSAGE, {"topic": "topicB"}, None),
        (R.SEND_MESSAGE, {"topic": "topicC"}, lacks("topic:topicC", "PUB", "SUB")),
        (R.SEND_MESSAGE, {"topic": "topicA"}, lacks("topic:topicA", "PUB", "DENY")),
        (R.SEND_MESSAGE, {"topic": "other"}, lacks("topic:other", "PUB", "DENY")),
        (R.SEND_MESSAGE_V2, {"b": "topicB", "a": "PG"}, None),
        (R.SEND_BATCH_MESSAGE, {"b": "topicC", "a": "PG"}, lacks("topic:topicC", "PUB", "SUB")),
        # a send to a retry topic needs SUB on the group: the header's group (10) or producer group (310)
        (R.SEND_MESSAGE, {"topic": "%RETRY%groupA", "group": "groupA"}, lacks("group:groupA", "SUB", "DENY")),
        (R.SEND_MESSAGE_V2, {"b": "%RETRY%groupC", "a": "groupC"}, None),
        (R.SEND_MESSAGE_V2, {"b": "%RETRY%x", "a": "groupA"}, lacks("group:groupA", "SUB", "DENY")),
        (R.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupC"}, None),
        (R.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "other"}, None),  # defaultGroupPerm SUB
        (R.PULL_MESSAGE, {"topic": "topicA", "consumerGroup": "groupC"}, lacks("topic:topicA", "SUB", "DENY")),
        (R.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupA"}, lacks("group:groupA", "SUB", "DENY")),
        (R.QUERY_MESSAGE, {"topic": "topicB"}, None),
        (R.QUERY_MESSAGE, {"topic": "topicA"}, lacks("topic:topicA", "SUB", "DENY")),
        (R.UPDATE_CONSUMER_OFFSET, {"topic": "topicC", "consumerGroup": "groupA"},
         lacks("group:groupA", "SUB", "DENY")),
        (R.CONSUMER_SEND_MSG_BACK, {"group": "groupB"}, None),
        (R.CONSUMER_SEND_MSG_BACK, {"group": "groupA"}, lacks("group:groupA", "SUB", "DENY")),
        (R.UNREGISTER_CLIENT, {"consumerGroup": "groupA", "clientID": "c"}, lacks("group:groupA", "SUB", "DENY")),
        (R.UNREGISTER_CLIENT, {"producerGroup": "PG", "clientID": "c"}, None),  # a producer: no group resource
        (R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "groupA"}, lacks("group:groupA", "SUB", "DENY")),
        (R.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicA"}, None),  # touches no resource
        (R.END_TRANSACTION, {"producerGroup": "PG"}, None),
        (R.UPDATE_AND_CREATE_TOPIC, {"topic": "topicB"}, not_admin(17)),
        (R.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "evil0001"}, not_admin(50)),
        (R.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "topicB", "group": "groupB"}, not_admin(222)),
        # a trace record passes whatever the account's perms (RocketMQ skips the check)
        (R.SEND_MESSAGE_V2, {"b": "RMQ_SYS_TRACE_TOPIC", "a": "PG"}, None),
    ],
)
def test_resources_and_perms_of_each_code(code: int, ext: dict[str, str], refusal: str | None) -> None:
    assert rules().refusal(PEER, code, signed("RocketMQ", ext), None) == refusal


def test_a_heartbeat_needs_sub_on_every_consumer_group_and_subscribed_topic() -> None:
    def beat(group: str, topic: str) -> bytes:
        return HeartbeatData("cid", [], [ConsumerData(group, subscriptions=[SubscriptionData(topic)])]).encode()

    r = rules()
    ok = beat("groupC", "topicC")
    assert r.refusal(PEER, R.HEART_BEAT, signed("RocketMQ", {}, ok), ok) is None
    bad = beat("groupC", "topicA")
    assert r.refusal(PEER, R.HEART_BEAT, signed("RocketMQ", {}, bad), bad) == (
        lacks("topic:topicA", "SUB", "DENY")
    )
    producer_only = HeartbeatData("cid", ["PG"], []).encode()
    assert r.refusal(PEER, R.HEART_BEAT, signed("RocketMQ", {}, producer_only), producer_only) is None
    broken = b"{not json"
    assert "heartbeat body is not JSON" in (r.refusal(PEER, R.HEART_BEAT, signed("RocketMQ", {}, broken), broken) or "")


def test_an_admin_that_names_no_resource_may_do_everything_one_that_names_some_is_checked() -> None:
    r = rules()
    assert r.refusal(PEER, R.DELETE_TOPIC_IN_BROKER, signed("rocketmq2", {"topic": "x"}), None) is None
    assert r.refusal(PEER, R.SEND_MESSAGE, signed("rocketmq2", {"topic": "anything"}), None) is None
    # admin3x names topic "secret": its defaults (absent: DENY) apply to the rest
    assert r.refusal(PEER, R.UPDATE_AND_CREATE_TOPIC, signed("admin3x", {"topic": "t"}), None) is None
    refusal = r.refusal(PEER, R.SEND_MESSAGE, signed("admin3x", {"topic": "t"}), None)
    assert refusal == lacks("topic:t", "PUB", "DENY", "admin3x")


@pytest.mark.parametrize(
    ("account", "problem"),
    [
        ({"accessKey": "short", "secretKey": "12345678"}, "longer than 6"),
        ({"accessKey": "longenough", "secretKey": "123456"}, "longer than 6"),
        ({"accessKey": "longenough"}, "cannot be null"),
        ({"accessKey": "longenough", "secretKey": "12345678", "topicPerms": ["a=ALL"]}, "expected permissions"),
        ({"accessKey": "longenough", "secretKey": "12345678", "groupPerms": ["nogroup"]}, "Res=Perm"),
        ({"accessKey": "longenough", "secretKey": "12345678", "whiteRemoteAddress": "1.2.3"}, "netaddress"),
        ({"accessKey": "longenough", "secretKey": "12345678", "topicPerm": ["a=PUB"]}, "unknown account key"),
    ],
)
def test_a_broken_account_is_refused_with_its_reason_and_no_secret(account: dict[str, object], problem: str) -> None:
    with pytest.raises(AclConfigError, match=problem) as info:
        rules({"accounts": [account]})
    assert "12345678" not in str(info.value) and "123456 " not in str(info.value)


def test_an_access_key_defined_twice_keeps_the_first_with_a_warning() -> None:
    first = {"accessKey": "twice001", "secretKey": "first0001", "admin": True}
    second = {"accessKey": "twice001", "secretKey": "second001"}
    r = AclRules.from_documents([("/a.yml", {"accounts": [first]}), ("/b.yml", {"accounts": [second]})], now_ms=1)
    assert r.accounts["twice001"].admin and r.accounts["twice001"].path == "/a.yml"
    assert r.warnings and "twice001" in r.warnings[0]


def test_data_versions_come_from_each_file() -> None:
    r = AclRules.from_documents(
        [("/a.yml", {"dataVersion": [{"counter": 4, "timestamp": 99}]}), ("/b.yml", None)], now_ms=7
    )
    assert (r.versions["/a.yml"].counter, r.versions["/a.yml"].timestamp) == (4, 99)
    assert (r.versions["/b.yml"].counter, r.versions["/b.yml"].timestamp) == (0, 7)


def test_the_distribution_example_file_loads() -> None:
    r = rules()
    assert set(r.accounts) == {"RocketMQ", "rocketmq2", "admin3x"}
    assert orjson.dumps(sorted(r.versions)) == b'["/conf/plain_acl.yml"]'


def judged_in_steps(r: AclRules, ip: str, code: int, ext: dict[str, str] | None, body: bytes | None) -> str | None:
    """The check as the broker runs it for a large body: the hash fed between the steps."""
    account = r.account_to_verify(ip, ext)
    if not isinstance(account, Account):
        return account
    assert ext is not None
    started = signature_start(account, ext)
    if isinstance(started, str):
        return started
    feed(started[0], body)
    return signature_refusal(account, ext, body, *started) or r.permission_refusal(account, code, ext, body)


@pytest.mark.parametrize("ip", [PEER, "10.10.103.7", "192.168.1.20"])
def test_the_check_in_steps_judges_as_the_check_in_one_call(ip: str) -> None:
    r = rules()
    body = b"b" * 5000
    good = signed("RocketMQ", {"b": "topicB", "a": "PG"}, body)
    cases = [
        (R.SEND_BATCH_MESSAGE, good, body),
        (R.SEND_BATCH_MESSAGE, good, body[:-1] + b"c"),  # the body changed after signing
        (R.SEND_BATCH_MESSAGE, {**good, "b": "topicA"}, body),
        (R.SEND_BATCH_MESSAGE, signed("RocketMQ", {"b": "topicA", "a": "PG"}, body), body),  # DENY on topicA
        (R.DELETE_TOPIC_IN_BROKER, signed("RocketMQ", {"topic": "topicB"}, body), body),
        (R.SEND_BATCH_MESSAGE, {**good, "SignatureMethod": "HmacMD5"}, body),
        (R.SEND_BATCH_MESSAGE, signed("nobody1", {"b": "topicB"}, body), body),
        (R.SEND_BATCH_MESSAGE, None, body),
        (R.SEND_BATCH_MESSAGE, {**signed("rocketmq2", {"b": "topicB"}, body), "Signature": "x"}, body),
    ]
    answers = [r.refusal(ip, code, ext, b) for code, ext, b in cases]
    assert answers == [judged_in_steps(r, ip, code, ext, b) for code, ext, b in cases]
    if ip == PEER:  # each step is reached: a pass, a bad body, perms, admin, method, key, unsigned
        assert answers[0] is None and answers[1] == answers[2] == "Check signature failed for accessKey=RocketMQ"
        assert answers[3] == lacks("topic:topicA", "PUB", "DENY") and answers[4] == not_admin(215)
        assert "SignatureMethod HmacMD5" in (answers[5] or "") and answers[6] == "No acl config for nobody1"
        assert answers[7] == "No accessKey is configured"
