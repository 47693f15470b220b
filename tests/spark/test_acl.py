"""The Spark connector against a broker with ACL on: the options accessKey/secretKey sign the
driver's requests and the executors' sends and pulls; without them the broker refuses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from apogee.remoting.signing import SessionCredentials
from apogee.spark import runtime
from tests.spark.conftest import BROKER_CONF, Apogee, start_broker, unique, wait_for_queues
from tests.support.processes import start_namesrv
from tests.support.waiting import block_until

pytestmark = pytest.mark.spark

ADMIN = SessionCredentials("adminKey01", "adminSecret1")
APP = {"accessKey": "appKey0001", "secretKey": "appSecret01"}


@pytest.fixture(scope="module")
def acl_apogee(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apogee]:
    base = tmp_path_factory.mktemp("spark-acl")
    accounts = [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {**APP, "defaultTopicPerm": "PUB|SUB", "defaultGroupPerm": "PUB|SUB"},
    ]
    (base / "plain_acl.yml").write_text(yaml.safe_dump({"accounts": accounts}))  # beside store.conf
    namesrv = start_namesrv(base / "ns")
    try:
        broker = start_broker(namesrv.addr, base / "store", BROKER_CONF + "aclEnable=true\n")
    except BaseException:
        namesrv.close()
        raise
    try:
        yield Apogee(namesrv, broker)
    finally:
        broker.close()
        namesrv.close()


def test_reads_and_writes_sign_with_the_options(spark: Any, acl_apogee: Apogee) -> None:
    topic = unique("SparkAcl")
    runtime.run(runtime.runtime().api_for(credentials=ADMIN).create_topic(acl_apogee.broker.addr, topic, 2), 10)
    wait_for_queues(acl_apogee.ns, topic, 2)  # a NameServer question: not checked
    rows = [(f"m{i}",) for i in range(20)]
    spark.createDataFrame(rows, "body string").write.format("apogee").option("namesrv", acl_apogee.ns) \
        .option("topic", topic).options(**APP).mode("append").save()

    def bodies(**options: str) -> list[str]:
        df = spark.read.format("apogee").option("namesrv", acl_apogee.ns).option("topic", topic).options(**options)
        return sorted(bytes(r.body).decode() for r in df.load().collect())

    def all_rows() -> list[str] | None:
        got = bodies(**APP)
        return got if len(got) == len(rows) else None

    got = block_until(all_rows, 30, "the rows to be readable")
    assert got == sorted(body for (body,) in rows)
    with pytest.raises(Exception, match="No accessKey is configured"):
        bodies()
