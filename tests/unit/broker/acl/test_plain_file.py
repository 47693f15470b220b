"""Where plain_acl.yml is, what is merged with it, and the file edits of codes 50, 51 and 53."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apogee.broker.acl import plain_file
from apogee.broker.acl.plain_file import AclFiles
from apogee.broker.acl.rules import AclConfigError
from apogee.remoting.headers.acl import CreateAccessConfigRequestHeader as AccountEdit

ADMIN = {"accessKey": "adminKey1", "secretKey": "adminSecret1", "admin": True}


def files_in(tmp_path: Path) -> AclFiles:
    return AclFiles.locate("", "", tmp_path / "conf" / "broker.conf", tmp_path / "store")


def test_the_files_are_found_where_rocketmq_looks(tmp_path: Path) -> None:
    home = AclFiles.locate(str(tmp_path / "home"), "", tmp_path / "etc" / "broker.conf", "/store")
    assert home.default_file == (tmp_path / "home" / "conf" / "plain_acl.yml").resolve()
    assert home.directory == (tmp_path / "home" / "conf" / "acl").resolve()
    beside = AclFiles.locate("", "", tmp_path / "etc" / "broker.conf", "/store")
    assert beside.default_file == (tmp_path / "etc" / "plain_acl.yml").resolve()
    store = AclFiles.locate("", "", None, tmp_path / "store")
    assert store.default_file == (tmp_path / "store" / "conf" / "plain_acl.yml").resolve()
    named = AclFiles.locate(str(tmp_path / "home"), "conf/other.yml", None, "/store")
    assert named.default_file == (tmp_path / "home" / "conf" / "other.yml").resolve()


def test_files_under_conf_acl_are_merged_first_and_tools_yml_is_not(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    (files.directory / "team").mkdir(parents=True)
    files.default_file.write_text(yaml.safe_dump({"accounts": [ADMIN]}))
    (files.directory / "team" / "a.yaml").write_text(yaml.safe_dump({"globalWhiteRemoteAddresses": ["10.0.0.*"]}))
    (files.directory / "b.yml").write_text(
        yaml.safe_dump({"accounts": [{"accessKey": "teamKey1", "secretKey": "teamSecret1"}]})
    )
    (files.directory / "tools.yml").write_text("accessKey: x\nsecretKey: y\n")  # mqadmin's, not an ACL file
    (files.directory / "notes.txt").write_text("ignored")
    assert [p.name for p in files.paths()] == ["b.yml", "a.yaml", "plain_acl.yml"]
    rules = files.load(now_ms=1)
    assert set(rules.accounts) == {"adminKey1", "teamKey1"}
    assert rules.refusal("10.0.0.9", 17, None, None) is None


def test_a_broken_file_says_which_and_why(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    files.ensure_default()
    files.default_file.write_text("accounts: [ {accessKey: adminKey1, secretKey: ")
    with pytest.raises(AclConfigError, match="plain_acl.yml: not valid YAML"):
        files.load(now_ms=1)


def test_updating_an_account_rewrites_its_file_and_bumps_its_version(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    files.ensure_default()
    doc = {"accounts": [ADMIN], "dataVersion": [{"counter": 3, "timestamp": 5}]}
    files.default_file.write_text(yaml.safe_dump(doc))
    new = AccountEdit("appKey01", "appSecret1", default_topic_perm="PUB|SUB", topic_perms="orders=PUB")
    plain_file.update_account(files, files.load(1), new, now_ms=1000)
    rules = files.load(2)
    assert rules.accounts["appKey01"].perms == {"orders": 4}
    assert (rules.versions[str(files.default_file)].counter, rules.versions[str(files.default_file)].timestamp) == (
        4, 1000
    )
    # a change keeps what it does not name (RocketMQ's createAclAccessConfigMap)
    plain_file.update_account(files, rules, AccountEdit("appKey01", "appSecret2", admin=True), now_ms=2000)
    doc = yaml.safe_load(files.default_file.read_text())
    app = next(a for a in doc["accounts"] if a["accessKey"] == "appKey01")
    assert app == {"accessKey": "appKey01", "secretKey": "appSecret2", "admin": True, "defaultTopicPerm": "PUB|SUB",
                   "topicPerms": ["orders=PUB"]}
    assert doc["dataVersion"] == [{"counter": 5, "timestamp": 2000}]


def test_an_account_is_changed_in_the_file_that_defines_it(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    files.ensure_default()
    files.directory.mkdir(parents=True)
    team = files.directory / "team.yml"
    team.write_text(yaml.safe_dump({"accounts": [{"accessKey": "teamKey1", "secretKey": "teamSecret1"}]}))
    plain_file.update_account(files, files.load(1), AccountEdit("teamKey1", "teamSecret2"), now_ms=9)
    assert yaml.safe_load(team.read_text())["accounts"][0]["secretKey"] == "teamSecret2"
    assert files.default_file.read_text() == ""
    assert plain_file.delete_account(files, files.load(2), "teamKey1", now_ms=10) == team.resolve()
    assert "teamKey1" not in files.load(3).accounts
    assert plain_file.delete_account(files, files.load(3), "teamKey1", now_ms=11) is None


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (AccountEdit("short", "longSecret1"), "longer than 6"),
        (AccountEdit("longKey01", "longSecret1", topic_perms="a=ALL"), "expected permissions"),
        (AccountEdit("longKey01", "longSecret1", white_remote_address="1.2.3"), "netaddress"),
        (AccountEdit("longKey01", "longSecret1", default_topic_perm="EVERYTHING"), "default permission"),
    ],
)
def test_a_bad_edit_never_reaches_the_file(tmp_path: Path, edit: AccountEdit, problem: str) -> None:
    files = files_in(tmp_path)
    files.ensure_default()
    with pytest.raises(AclConfigError, match=problem):
        plain_file.update_account(files, files.load(1), edit, now_ms=1)
    assert files.default_file.read_text() == ""


def test_the_global_whitelist_is_replaced_in_an_acl_file_only(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    files.ensure_default()
    plain_file.update_global_white(files, ["10.10.103.*", "192.168.0.*"], None, now_ms=1)
    doc = yaml.safe_load(files.default_file.read_text())
    assert doc["globalWhiteRemoteAddresses"] == ["10.10.103.*", "192.168.0.*"]
    with pytest.raises(AclConfigError, match="not one of this broker's ACL files"):
        plain_file.update_global_white(files, ["10.0.0.1"], str(tmp_path / "elsewhere.yml"), now_ms=2)
    with pytest.raises(AclConfigError, match="netaddress"):
        plain_file.update_global_white(files, ["10.0.0"], None, now_ms=3)


def test_java_split_drops_trailing_empty_parts() -> None:
    assert plain_file.java_split("a=PUB,b=SUB,") == ["a=PUB", "b=SUB"]
    assert plain_file.java_split("") == [""]
    assert plain_file.java_split(None) is None
