"""The web page behind a TLS proxy (issue 41, item 4): `daemon.public_url` names the address
users reach the daemon by. The daemon listens on plain HTTP, so without it the browser's
`Origin: https://...` never matched the request's own and every form got 403; with it the page
takes its origin from that URL, accepts its Host, marks its cookies `Secure` and sends every
URL under its path prefix (the proxy strips the prefix before forwarding).

A real `syncd serve` on loopback, spoken to as the proxy would forward a browser's requests.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import unquote, urlencode, urlsplit

import pytest
from pydantic import ValidationError

from syncd.cli import main
from syncd.config.daemon import DaemonConfig
from tests.daemon_support import DaemonProcess, toml_value

CONTROL = "proxy-test-control-token-1234"
PUBLIC = "https://docs.example.com:8443/syncd"
HOST = "docs.example.com:8443"
ORIGIN = "https://docs.example.com:8443"


@pytest.fixture(autouse=True)
def _sqlite_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)


def _daemon(tmp: Path, public_url: str | None) -> DaemonProcess:
    lines = [f"state_dir = {toml_value(tmp / 'state')}", "[daemon]", "port = 0", f"token = {toml_value(CONTROL)}"]
    if public_url is not None:
        lines.append(f"public_url = {toml_value(public_url)}")
    path = tmp / "syncd.toml"
    path.write_text("\n".join(lines) + "\n")
    return DaemonProcess.start(path, tmp / "state", token=CONTROL)


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[DaemonProcess]:
    daemon = _daemon(tmp_path, PUBLIC)
    try:
        yield daemon
    finally:
        daemon.stop()


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.location = response.getheader("Location")
        self.set_cookies = response.headers.get_all("Set-Cookie") or []
        self.text = response.read().decode()

    def cookie(self, name: str) -> tuple[str, str]:
        """(value, the whole Set-Cookie line) of cookie `name`."""
        for line in self.set_cookies:
            parsed = SimpleCookie(line)
            if name in parsed:
                return parsed[name].value, line
        raise AssertionError(f"no {name} cookie in {self.set_cookies}")


def _call(daemon: DaemonProcess, method: str, path: str, headers: dict[str, str], form: dict[str, str] | None = None) -> Answer:
    address = urlsplit(daemon.url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=10)
    try:
        body = urlencode(form).encode() if form is not None else None
        if body is not None:
            headers = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
        connection.request(method, path, body=body, headers=headers)
        return Answer(connection.getresponse())
    finally:
        connection.close()


def _login(daemon: DaemonProcess, host: str, origin: str | None, *, token: str = CONTROL) -> Answer:
    """The login form loaded, then sent back with `token` (Origin as a browser sends it)."""
    form_page = _call(daemon, "GET", "/ui/login?next=%2Fui%2Fruns", {"Host": host})
    assert form_page.status == 200, form_page.text
    nonce, _line = form_page.cookie("syncd_ui_login")
    headers = {"Host": host, "Cookie": f"syncd_ui_login={nonce}", "Sec-Fetch-Site": "same-origin"}
    if origin is not None:
        headers["Origin"] = origin
    return _call(daemon, "POST", "/ui/login", headers, {"csrf": nonce, "next": "/ui/runs", "token": token})


def _attributes(line: str) -> dict[str, str]:
    parts = [part.strip() for part in line.split(";")[1:]]
    return {key.lower(): value for key, _, value in (part.partition("=") for part in parts)}


def test_a_login_through_an_https_proxy_is_a_secure_session_under_the_prefix(proxied: DaemonProcess) -> None:
    form_page = _call(proxied, "GET", "/ui/login", {"Host": HOST})
    assert form_page.status == 200, form_page.text
    _nonce, nonce_line = form_page.cookie("syncd_ui_login")
    assert "secure" in _attributes(nonce_line) and _attributes(nonce_line)["path"] == "/syncd/ui/"
    assert 'action="/syncd/ui/login"' in form_page.text and 'href="/syncd/ui/static/ui.css"' in form_page.text
    assert 'src="/syncd/ui/static/ui.js"' in form_page.text

    answer = _login(proxied, HOST, ORIGIN)
    assert answer.status == 303, answer.text
    assert answer.location == "/syncd/ui/runs"
    session, line = answer.cookie("syncd_ui")
    attributes = _attributes(line)
    assert "secure" in attributes and "httponly" in attributes and attributes["path"] == "/syncd/ui/"
    assert attributes["samesite"] == "Strict"

    # The pages it leads to send every URL under the prefix: links, forms, live parts, scripts.
    page = _call(proxied, "GET", "/ui/", {"Host": HOST, "Cookie": f"syncd_ui={session}"})
    assert page.status == 200, page.text
    for url in ('href="/syncd/ui/runs"', 'action="/syncd/ui/logout"', 'data-live="/syncd/ui/?part=jobs"', 'data-ui="/syncd/ui/"'):
        assert url in page.text, url
    assert not re.search(r'(href|src|action|data-live)="/ui/', page.text), "a URL without the prefix"
    # Without a session: to the login form under the prefix, and back after it.
    away = _call(proxied, "GET", "/ui/runs", {"Host": HOST})
    assert away.status == 303 and unquote(away.location or "") == "/syncd/ui/login?next=/ui/runs"  # `next`: the daemon's path
    assert _call(proxied, "GET", "/ui", {"Host": HOST}).location == "/syncd/ui/"
    # Log out: the cookie is dropped where it was set.
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    out = _call(proxied, "POST", "/ui/logout", {"Host": HOST, "Origin": ORIGIN, "Cookie": f"syncd_ui={session}"}, {"csrf": csrf.group(1)})
    assert out.status == 303 and out.location == "/syncd/ui/login"
    assert _attributes(out.cookie("syncd_ui")[1])["path"] == "/syncd/ui/"


def test_through_the_proxy_another_origin_or_host_is_refused(proxied: DaemonProcess) -> None:
    assert _login(proxied, HOST, "http://docs.example.com:8443").status == 403  # the daemon's own scheme: not the page's
    assert _login(proxied, HOST, "https://docs.example.com").status == 403  # another port
    assert _login(proxied, HOST, "https://evil.example").status == 403
    refused = _call(proxied, "GET", "/ui/login", {"Host": "evil.example"})
    assert refused.status == 403
    assert _login(proxied, HOST, ORIGIN, token="a-wrong-token").status == 401


def test_without_public_url_the_page_is_its_own_origin_as_before(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path, None)
    try:
        own = urlsplit(daemon.url).netloc
        answer = _login(daemon, own, f"http://{own}")
        assert answer.status == 303 and answer.location == "/ui/runs", answer.text
        attributes = _attributes(answer.cookie("syncd_ui")[1])
        assert "secure" not in attributes and attributes["path"] == "/ui/"
        assert _login(daemon, own, ORIGIN).status == 403  # Host docs.example.com is not this daemon's
        assert _login(daemon, own, f"https://{own}").status == 403  # not the request's own scheme
    finally:
        daemon.stop()


@pytest.mark.parametrize(
    ("given", "origin", "prefix"),
    [
        ("https://docs.example.com:8443/syncd", "https://docs.example.com:8443", "/syncd"),
        ("https://Docs.Example.com/syncd/", "https://docs.example.com", "/syncd"),
        ("https://docs.example.com:443/", "https://docs.example.com", ""),
        ("http://10.0.0.7:8080", "http://10.0.0.7:8080", ""),
        ("https://[::1]:9443/a/b", "https://[::1]:9443", "/a/b"),
    ],
)
def test_a_public_url_gives_the_pages_origin_and_prefix(given: str, origin: str, prefix: str) -> None:
    config = DaemonConfig(public_url=given)
    assert config.public_url == f"{origin}{prefix}"


@pytest.mark.parametrize(
    "given",
    [
        "ftp://docs.example.com",
        "docs.example.com",
        "https://",
        "https://docs.example.com/?a=1",
        "https://docs.example.com/#top",
        "https://user:pw@docs.example.com",
        "https://docs.example.com:99999",
        "https://docs.example.com/a b",
        "https://docs.example.com/a/../b",
        "https://docs.example.com/a;b",
        "https://*.example.com",
    ],
)
def test_a_public_url_that_is_not_an_address_is_refused(given: str) -> None:
    with pytest.raises(ValidationError, match="public_url"):
        DaemonConfig(public_url=given)


def test_config_check_shows_the_public_url_and_refuses_a_bad_one_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "syncd.toml"
    path.write_text(f'[daemon]\npublic_url = "{PUBLIC}/"\n')
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert PUBLIC in out and f"{PUBLIC}/ui/" in out
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["daemon"]["public_url"] == PUBLIC
    path.write_text('[daemon]\npublic_url = "https://docs.example.com/?x=1"\n')
    assert main(["config", "check", "--config", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "daemon.public_url" in line and "query" in line
