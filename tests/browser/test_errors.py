"""What a person sees when something is wrong (a NameServer nobody answers at, a broker
that is down) and who may use the dashboard (login, writes from other sites), each with a
dashboard of its own, as ``apogee dashboard`` is started by hand."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import Cluster, dashboard_process, open_page, screenshot, start_cluster


@pytest.fixture(scope="module")
def doomed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of this module's own, whose broker a test stops."""
    started = start_cluster(tmp_path_factory.mktemp("doomed"))
    yield started
    started.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_nameserver_nobody_answers_at(chromium: Browser) -> None:
    nowhere = f"127.0.0.1:{closed_port()}"
    with dashboard_process(nowhere) as dashboard, open_page(chromium, f"http://{dashboard.addr}") as page:
        page.goto("/topics")
        banner = page.locator(".banner.error")
        expect(banner).to_contain_text("The NameServer cannot be reached")
        expect(banner).to_contain_text(f"cannot reach the NameServer at {nowhere}")
        expect(banner).to_contain_text("is it running there?")
        assert "Traceback" not in page.content()
        screenshot(page, "error")
        page.goto("/cluster")
        expect(page.locator(".banner.error")).to_contain_text("The NameServer cannot be reached")


def test_create_a_topic_when_the_broker_is_stopped(chromium: Browser, doomed: Cluster) -> None:
    with open_page(chromium, doomed.url) as page:
        page.goto("/topics/+new")
        page.get_by_label("Topic").fill("CreatedTooLate")
        expect(page.get_by_label("Where")).to_have_value("cluster:DefaultCluster")
        doomed.broker.stop()  # it unregisters: the NameServer no longer lists it
        page.get_by_role("button", name="Create").click()
        banner = page.locator(".banner.error")
        expect(banner).to_contain_text("No broker available")
        expect(banner).to_contain_text("the NameServer knows no cluster 'DefaultCluster' (clusters: none)")
        expect(page.get_by_label("Topic")).to_have_value("CreatedTooLate")
        screenshot(page, "error-broker")

        page.goto("/cluster")
        expect(page.locator("main")).to_contain_text("No broker is registered with the NameServer")
        page.goto("/topics/+new")
        expect(page.locator(".banner.error")).to_contain_text(f"no broker is registered with the NameServer at "
                                                              f"{doomed.namesrv.addr}")


def test_login_when_a_password_is_set_and_no_writes_from_other_sites(
    chromium: Browser, doomed: Cluster
) -> None:
    with dashboard_process(doomed.namesrv.addr, env={"APOGEE_DASHBOARD_PASSWORD": "s3cret"}) as dashboard:
        assert "login required" in dashboard.ready_line
        url = f"http://{dashboard.addr}"
        with open_page(chromium, url) as page:  # headless: no login prompt, the answer itself
            response = page.request.get("/cluster")
            assert response.status == 401 and "Basic" in response.headers["www-authenticate"]
        wrong = urllib.request.Request(f"{url}/cluster", headers={"Authorization": "Basic YWRtaW46d3Jvbmc="})
        with pytest.raises(urllib.error.HTTPError) as refused:  # admin:wrong
            urllib.request.urlopen(wrong, timeout=10)
        refused.value.close()  # an HTTPError holds the connection's socket until closed
        assert refused.value.code == 401 and "Basic" in refused.value.headers["WWW-Authenticate"]
        with open_page(chromium, url, http_credentials={"username": "admin", "password": "s3cret"}) as page:
            page.goto("/cluster")
            expect(page.locator("h1")).to_have_text("Cluster")

    # A form posted from a page of another site is refused before anything is done.
    request = urllib.request.Request(
        f"{doomed.url}/topics/+new", data=b"topic=Forged&target=cluster:DefaultCluster", method="POST",
        headers={"Origin": "http://elsewhere.example", "Content-Type": "application/x-www-form-urlencoded"},
    )
    with pytest.raises(urllib.error.HTTPError) as forged:
        urllib.request.urlopen(request, timeout=10)
    forged.value.close()
    assert forged.value.code == 403
