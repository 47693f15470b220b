from __future__ import annotations

from pathlib import Path

import pytest

from apogee.dashboard.settings import DashboardSettings, load_settings
from apogee.errors import ConfigError


def test_a_file_then_the_options_that_were_given(tmp_path: Path) -> None:
    conf = tmp_path / "dashboard.conf"
    conf.write_text("namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\nlisten=0.0.0.0:9090\npassword=s\ncacheTtlSeconds=2.5\n")
    settings = load_settings(conf, listen="127.0.0.1:8081", password=None)
    assert settings.namesrv_addr == "10.0.0.1:9876;10.0.0.2:9876"
    assert settings.host_port == ("127.0.0.1", 8081)  # the option wins over the file
    assert settings.password == "s" and settings.login_required  # None: not given, the file's stays
    assert settings.cache_ttl_seconds == 2.5


def test_an_unknown_key_is_named_with_the_closest_known_one(tmp_path: Path) -> None:
    conf = tmp_path / "dashboard.conf"
    conf.write_text("pasword=x\n")
    with pytest.raises(ConfigError, match=r"unknown key in .*dashboard.conf: pasword \(did you mean 'password'\?\)"):
        load_settings(conf)
    conf.write_text("adminOptions=x\n")  # passed through in code, not a file key
    with pytest.raises(ConfigError, match="adminOptions"):
        load_settings(conf)


@pytest.mark.parametrize(("listen", "password", "exposed"), [
    ("127.0.0.1:8080", "", False), ("localhost:8080", "", False), ("[::1]:8080", "", False),
    ("0.0.0.0:8080", "", True), ("192.0.2.7:8080", "", True), ("0.0.0.0:8080", "secret", False),
])
def test_listening_beyond_loopback_without_a_password_is_flagged(listen: str, password: str, exposed: bool) -> None:
    assert DashboardSettings(listen=listen, password=password).exposed_without_login() is exposed
