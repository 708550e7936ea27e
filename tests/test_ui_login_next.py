"""Where the login sends the browser (`next`): a control character in it, `\r` among them,
sends it to `/ui/` with a 303, and the daemon logs no traceback (issue 41, item 7)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from tests.daemon_support import DaemonProcess, daemon_config

CONTROL_TOKEN = "control-secret-login-next"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    config = daemon_config(tmp_path, "http://127.0.0.1:9", "unused-token", retry={}, daemon={"port": 0, "token": CONTROL_TOKEN, "ui": True}, jobs=[])
    running = DaemonProcess.start(config, tmp_path / "state", token=CONTROL_TOKEN)
    try:
        yield running
    finally:
        running.stop()


def _login(daemon: DaemonProcess, next_page: str) -> tuple[int | None, str | None]:
    """Load the login form (its nonce cookie), post the right token with `next_page` as the
    page does; (status, Location), or (None, None) when the connection is dropped."""
    where = urlsplit(daemon.url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    try:
        connection.request("GET", "/ui/login")
        form = connection.getresponse()
        form.read()
        nonce = SimpleCookie(form.headers["Set-Cookie"])["syncd_ui_login"].value
        body = urlencode({"token": CONTROL_TOKEN, "csrf": nonce, "next": next_page})
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"syncd_ui_login={nonce}", "Origin": f"http://{where.netloc}"}
        connection.request("POST", "/ui/login", body, headers)
        answer = connection.getresponse()
        answer.read()
        return answer.status, answer.headers.get("Location")
    except (ConnectionError, http.client.HTTPException):
        return None, None
    finally:
        connection.close()


def test_a_next_page_with_a_control_character_sends_the_browser_home(daemon: DaemonProcess) -> None:
    assert _login(daemon, "/ui/jobs") == (303, "/ui/jobs")  # a page of the daemon: kept
    for crafted in ("/ui/jobs\r\nX: y", "/ui/jobs\r", "\r", "/ui/\rjobs", "/ui/jobs\x00", "/ui/jobs\t", "/ui/jobs\x7f", "/ui/jobs\x85", "//evil.example/ui/", "https://evil.example/ui/"):
        assert _login(daemon, crafted) == (303, "/ui/"), repr(crafted)
    assert "Traceback" not in daemon.log()
