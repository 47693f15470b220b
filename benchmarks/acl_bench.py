"""What ACL signing and checking cost per request, in process (no sockets): the client's
signing (``Signer.sign_fields`` for a send, ``sign_ext`` for a batch) and the broker's
``AclRules.refusal`` for a W1-shaped send (1 KiB, one SEND_MESSAGE_V2) and a W2-shaped batch
(SEND_BATCH_MESSAGE, 512 x 1 KiB), beside the cost of what a send does anyway (framing the
request).  For the batch, also the part left on each side's event loop when its body is
hashed on the hasher thread (``remoting/body_hasher.py``).  Best of --repeat timings, so that
a loaded machine disturbs it less than an end-to-end run; ``client_bench.py --acl`` measures
the whole.

Run:  .venv/bin/python benchmarks/acl_bench.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apogee.broker.acl.rules import Account, AclRules, signature_start  # noqa: E402
from apogee.client.producer.sender import SEND_KEYS  # noqa: E402
from apogee.remoting.codec import fields_frame  # noqa: E402
from apogee.remoting.header_json import wire_value  # noqa: E402
from apogee.remoting.signing import SessionCredentials, Signer  # noqa: E402

ACCOUNT = {"accessKey": "benchKey01", "secretKey": "benchSecret1", "defaultTopicPerm": "PUB|SUB",
           "defaultGroupPerm": "PUB|SUB"}
PROPERTIES = "KEYS\x01k1\x02TAGS\x01TagA\x02UNIQ_KEY\x010A0B0C0D0E0F0A0B0C0D0E0F0A0B0C0D\x02WAIT\x01true\x02"
# The producer's values (sender.fields): no bool (the C frame writer declines them), None for
# what it leaves out; a batch says "true" in its last field.
VALUES = ("bench_w1", "BenchW1", "TBW102", "8", 3, 0, 1_700_000_000_000, 0, PROPERTIES, None, None, None)
BATCH_VALUES = (*VALUES[:-1], "true")


def best_us(fn: object, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6  # type: ignore[arg-type]


def loop_part_of_sign(signer: Signer, unsigned_ext: dict[str, str]) -> str:
    """What the client's loop does for a batch whose body is hashed on the hasher thread."""
    fields = signer.unsigned_ext(unsigned_ext)
    return signer.finish(signer.begin(fields))


def loop_part_of_check(rules: AclRules, code: int, ext: dict[str, str], body: bytes) -> str | None:
    """What the broker's loop does for such a batch (the same steps as ``AclDispatcher``)."""
    account = rules.account_to_verify("127.0.0.1", ext)
    assert isinstance(account, Account)
    started = signature_start(account, ext)
    assert not isinstance(started, str)
    account.keyed.finish(started[0], started[1])
    return rules.permission_refusal(account, code, ext, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    signer = Signer(SessionCredentials(ACCOUNT["accessKey"], ACCOUNT["secretKey"]))
    rules = AclRules.from_documents([("/plain_acl.yml", {"accounts": [ACCOUNT]})], now_ms=0)
    print(f"{'':28}{'frame (us)':>12}{'sign (us)':>12}{'check (us)':>12}{'sign on loop':>14}{'check on loop':>15}")
    for name, body, code, number, fields in (
        ("W1: 1 send, 1 KiB", b"x" * 1024, 310, 20_000, VALUES),
        ("W2: 1 batch, 512 x 1 KiB", b"x" * (512 * 1100), 320, 200, BATCH_VALUES),
    ):
        keys, values = signer.sign_fields(SEND_KEYS, fields, body)
        ext = {k: wire_value(v) for k, v in zip(keys, values, strict=True) if v is not None}
        unsigned = {k: wire_value(v) for k, v in zip(SEND_KEYS, fields, strict=True) if v is not None}
        assert rules.refusal("127.0.0.1", code, ext, body) is None
        frame = best_us(lambda: fields_frame(code, 1, 0, SEND_KEYS, fields, body), number, args.repeat)  # noqa: B023
        if code == 310:  # a single send is signed from its fields, on the loop
            sign = best_us(lambda: signer.sign_fields(SEND_KEYS, fields, body), number, args.repeat)  # noqa: B023
            on_loop = f"{'(all)':>14}{'(all)':>15}"
        else:  # a batch is a command: signed from its extFields, the body hashed off the loop
            sign = best_us(lambda: signer.sign_ext(unsigned, body), number, args.repeat)  # noqa: B023
            sign_loop = best_us(lambda: loop_part_of_sign(signer, unsigned), number, args.repeat)  # noqa: B023
            check_loop = best_us(lambda: loop_part_of_check(rules, code, ext, body), number, args.repeat)  # noqa: B023
            on_loop = f"{sign_loop:>14.2f}{check_loop:>15.2f}"
        check = best_us(lambda: rules.refusal("127.0.0.1", code, ext, body), number, args.repeat)  # noqa: B023
        print(f"{name:<28}{frame:>12.2f}{sign:>12.2f}{check:>12.2f}{on_loop}")


if __name__ == "__main__":
    main()
