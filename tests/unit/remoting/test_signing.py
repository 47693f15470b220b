"""RocketMQ ACL 1.0 signing (remoting/signing.py) against signatures computed by OpenSSL
(``printf CONTENT | openssl dgst -sha1 -hmac SECRET -binary | base64``) over the content
written out by hand from RocketMQ's rule: the values in Java key order, then the body."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.remoting.codec import request_command
from apogee.remoting.signing import (
    ACCESS_KEY,
    SIGNATURE,
    Keyed,
    SessionCredentials,
    Signer,
    content_head,
    feed,
    java_order,
    signature,
    without_signing,
)

# A SEND_MESSAGE_V2 header as the Java client sends it.
SEND_V2 = {
    "a": "PG", "b": "TopicA", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
    "i": "KEYS\x01k1\x02UNIQ_KEY\x01ID\x02", "j": "0", "k": "false", "m": "false",
}
BODY = b"hello"
CREDS = SessionCredentials("RocketMQ", "12345678")
# openssl over "RocketMQ" + the values a..m + "hello" (AccessKey sorts first: 'A' < 'a').
SEND_V2_SIGNATURE = "x2ZsC8JlW+Zz7jwpyJTbs2UA5ZY="


def test_a_send_is_signed_as_rocketmq_signs_it() -> None:
    signed = Signer(CREDS).sign_ext(SEND_V2, BODY)
    assert signed[ACCESS_KEY] == "RocketMQ"
    assert signed[SIGNATURE] == SEND_V2_SIGNATURE
    assert {k: v for k, v in signed.items() if k not in (ACCESS_KEY, SIGNATURE)} == SEND_V2


def test_the_security_token_is_sent_and_signed() -> None:
    signed = Signer(SessionCredentials("RocketMQ", "12345678", "tok")).sign_ext(SEND_V2, BODY)
    assert signed["SecurityToken"] == "tok"
    assert signed[SIGNATURE] == "dIm6gkV4gfI9NJSTJk8oX6EjRNw="  # "RocketMQ" + "tok" + values + body


def test_hmac_sha256_is_named_in_a_signed_signature_method_field() -> None:
    signed = Signer(CREDS, "HmacSHA256").sign_ext(SEND_V2, BODY)
    assert signed["SignatureMethod"] == "HmacSHA256"
    assert signed[SIGNATURE] == "gyE2+9zmr1oj415fZJWEmUkjxladIhDxUqir/SSn1so="


def test_values_are_utf8_and_numbers_and_booleans_are_written_as_on_the_wire() -> None:
    signer = Signer(SessionCredentials("ak00001", "sk0000001"))
    signed = signer.sign_ext({"x": "café", "n": 1, "b": False, "z": None}, None)
    assert signed == {"x": "café", "n": "1", "b": "false", ACCESS_KEY: "ak00001", SIGNATURE: signed[SIGNATURE]}
    # order: AccessKey, b, n, x -> "ak00001" "false" "1" "café"
    assert signed[SIGNATURE] == signature("sk0000001", "ak00001false1café".encode())
    assert signature("sk0000001", "ak00001café".encode()) == "RURAQ1sYkh0uwj6lOr+A4sXre8M="  # openssl


def test_signing_fields_gives_the_same_frame_fields_as_signing_the_command() -> None:
    keys = tuple(SEND_V2)
    values = tuple(SEND_V2.values())
    signer = Signer(CREDS)
    signed_keys, signed_values = signer.sign_fields(keys, values, BODY)
    assert dict(zip(signed_keys, signed_values, strict=True)) == signer.sign_ext(SEND_V2, BODY)
    # None values are left out of the frame and of the content alike
    keys2, values2 = signer.sign_fields(("topic", "gone", "queueId"), ("T", None, 3), b"")
    assert request_command(1, keys2, values2, None).ext_fields == signer.sign_ext({"topic": "T", "queueId": 3}, b"")


def test_a_retried_request_is_signed_again_not_twice() -> None:
    signer = Signer(CREDS)
    once = signer.sign_ext(SEND_V2, BODY)
    assert signer.sign_ext(once, BODY) == once


def test_the_unique_key_query_flag_is_left_out_as_the_broker_leaves_it_out() -> None:
    signed = Signer(CREDS).sign_ext({**SEND_V2, "_UNIQUE_KEY_QUERY": "true"}, BODY)
    assert signed["_UNIQUE_KEY_QUERY"] == "true"
    assert signed[SIGNATURE] == SEND_V2_SIGNATURE


def test_a_body_in_parts_is_signed_as_one() -> None:
    signer = Signer(CREDS)
    assert signer.sign_ext(SEND_V2, [b"he", memoryview(b"llo")])[SIGNATURE] == SEND_V2_SIGNATURE


def test_keys_sort_as_java_strings_do() -> None:
    assert java_order(["b", "B", "a", "AccessKey", "_x"]) == ["AccessKey", "B", "_x", "a", "b"]
    # UTF-16 order: a character above U+FFFF (a surrogate pair, D83D DE00) sorts before U+E000
    assert java_order(["\ue000", "\U0001f600", "z"]) == ["z", "\U0001f600", "\ue000"]
    assert content_head({"\ue000": "1", "\U0001f600": "2"}) == b"21"


def test_the_secret_never_shows_in_repr() -> None:
    text = repr(SessionCredentials("RocketMQ", "12345678", "t0k3nValue"))
    assert "12345678" not in text and "t0k3nValue" not in text and "RocketMQ" in text


def test_unknown_algorithms_are_refused() -> None:
    with pytest.raises(ValueError, match="HmacMD5"):
        Signer(CREDS, "HmacMD5")


def test_what_a_broker_relays_carries_no_signing_fields() -> None:
    signed = Signer(SessionCredentials("RocketMQ", "12345678", "tok")).sign_ext({"group": "G"}, None)
    assert without_signing(signed) == {"group": "G"}


@given(secret=st.text(max_size=100), content=st.binary(max_size=300), body=st.binary(max_size=300))
def test_the_keyed_hmac_is_the_hmac_module_s_for_any_key_length(secret: str, content: bytes, body: bytes) -> None:
    for name, digest in (("HmacSHA1", hashlib.sha1), ("HmacSHA256", hashlib.sha256)):
        want = base64.b64encode(hmac.new(secret.encode(), content + body, digest).digest()).decode()
        assert Keyed(secret).sign(content, [body[:7], body[7:]], name) == want


@given(head=st.binary(max_size=200), parts=st.lists(st.binary(max_size=3000), max_size=5))
def test_a_signature_made_in_steps_is_the_one_shot_signature(head: bytes, parts: list[bytes]) -> None:
    """begin / feed / finish (the body hashed elsewhere) give what sign gives, any split of the body."""
    keyed = Keyed("12345678")
    for name in ("HmacSHA1", "HmacSHA256"):
        mac = keyed.begin(head, name)
        feed(mac, parts)
        assert keyed.finish(mac, name) == keyed.sign(head, b"".join(parts), name)


def test_a_signer_s_steps_give_sign_ext_s_fields() -> None:
    signer = Signer(SessionCredentials("RocketMQ", "12345678", "tok"))
    unsigned = signer.unsigned_ext({**SEND_V2, SIGNATURE: "stale"})  # a retried request's old one goes
    assert SIGNATURE not in unsigned
    mac = signer.begin(unsigned)
    feed(mac, memoryview(BODY))
    assert {**unsigned, SIGNATURE: signer.finish(mac)} == signer.sign_ext(SEND_V2, BODY)
