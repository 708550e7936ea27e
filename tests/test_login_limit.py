"""Issue 41, item 6: wrong tokens are slowed per client, and a short daemon token is refused.

On main, 300 wrong guesses took 0.22 s on one connection, and `daemon.token = "a"` was accepted
with `host = "0.0.0.0"`. Now (`syncd.daemon.login_limit`): after 5 wrong tokens from one address,
every further one waits 1 s, 2 s, 4 s ... (at most 60 s), answered 429 with `Retry-After`
meanwhile, for the web page's login and the control API's bearer check alike; the right token
gets in once the current wait has passed. And a daemon token under 16 characters is refused.

The acceptance bound ("40 wrong guesses cannot complete in under 20 s") is proven without the
test taking 20 s: the limit's own answers, with its clock injected, for a client that honours
every `Retry-After`; and the real daemon's answers to a burst (only 5 of 40 are checked, the
rest 429 with `Retry-After`), its growing wait, and the right token after the wait.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

import aiohttp
import pytest

from syncd.daemon.login_limit import FREE_FAILURES, MAX_WAIT, LoginLimit, client_key, retry_after
from tests import cli_zygote
from tests.daemon_support import DaemonProcess, daemon_json_token

CONTROL = "item41-6-control-token-7f3e9a"
WRONG = "item41-6-a-wrong-guess-0000"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ----- the limit alone --------------------------------------------------------------------------


def _guesses_heard(limit: LoginLimit, clock: Clock, guesses: int, address: str = "192.0.2.7") -> float:
    """Seconds a client that honours every wait needs to have `guesses` wrong tokens checked."""
    start = clock.now
    for _ in range(guesses):
        clock.now += limit.wait(address)
        assert limit.wait(address) == 0
        limit.failed(address)
    return clock.now - start


def test_forty_wrong_guesses_take_at_least_twenty_seconds_of_waits() -> None:
    clock = Clock()
    limit = LoginLimit(clock=clock)
    assert _guesses_heard(limit, clock, 40) >= 20.0


def test_five_free_failures_then_a_doubling_wait_up_to_the_cap() -> None:
    clock = Clock()
    limit = LoginLimit(clock=clock)
    waits = []
    for _ in range(14):
        clock.now += limit.wait("192.0.2.7")
        waits.append(limit.failed("192.0.2.7"))
    assert waits == [0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert limit.wait("192.0.2.7") == MAX_WAIT
    clock.now += 59.5
    assert limit.wait("192.0.2.7") == pytest.approx(0.5)
    assert retry_after(0.5) == "1" and retry_after(1.2) == "2"
    assert limit.wait("192.0.2.8") == 0  # per address


def test_the_right_token_after_the_current_wait_starts_the_client_afresh() -> None:
    clock = Clock()
    limit = LoginLimit(clock=clock)
    _guesses_heard(limit, clock, 8)
    wait = limit.wait("192.0.2.7")
    assert 0 < wait <= 8
    clock.now += wait  # the lockout lasts no longer than the current wait
    assert limit.wait("192.0.2.7") == 0
    limit.succeeded("192.0.2.7")
    assert [limit.failed("192.0.2.7") for _ in range(FREE_FAILURES - 1)] == [0] * (FREE_FAILURES - 1)


def test_a_quiet_client_is_forgotten_and_memory_is_bounded() -> None:
    clock = Clock()
    limit = LoginLimit(clock=clock, forget_after=600, max_clients=3)
    _guesses_heard(limit, clock, 7)
    clock.now += 599
    assert limit.wait("192.0.2.7") == 0 and len(limit) == 1
    clock.now += 2
    assert limit.failed("192.0.2.7") == 0  # counted from 1 again
    for n in range(1, 10):
        limit.failed(f"198.51.100.{n}")
    assert len(limit) == 3  # the oldest dropped first
    assert limit.failed("198.51.100.9") == 0 and len(limit) == 3


def test_clients_are_counted_by_ipv4_address_or_ipv6_64() -> None:
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key(None) == client_key("") == "(unknown)"


# ----- a real daemon ----------------------------------------------------------------------------


def _config(tmp: Path, daemon: str) -> Path:
    path = tmp / "syncd.toml"
    path.write_text(f'state_dir = "{tmp / "state"}"\n[daemon]\nport = 0\n{daemon}')
    return path


async def _login(session: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientResponse:
    async with session.get(url + "/ui/login") as form:
        text = await form.text()
    nonce = re.search(r'name="csrf" value="([^"]+)"', text)
    assert nonce, text
    data = {"csrf": nonce.group(1), "next": "/ui/", "token": token}
    async with session.post(url + "/ui/login", data=data, allow_redirects=False) as resp:
        await resp.read()
        return resp


async def _bearer(session: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientResponse:
    async with session.get(url + "/jobs", headers={"Authorization": f"Bearer {token}"}) as resp:
        await resp.read()
        return resp


def _burst(answers: list[aiohttp.ClientResponse]) -> None:
    """40 wrong tokens as fast as the client can: 5 checked (401), the rest waited (429)."""
    statuses = [resp.status for resp in answers]
    assert statuses == [401] * FREE_FAILURES + [429] * (40 - FREE_FAILURES), statuses
    assert all(int(resp.headers["Retry-After"]) >= 1 for resp in answers[FREE_FAILURES:])


async def test_a_daemon_slows_wrong_tokens_of_its_login_form_and_its_bearer_check(tmp_path: Path) -> None:
    config = _config(tmp_path, f'token = "{CONTROL}"\n')
    daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL)
    try:
        jar = aiohttp.CookieJar(unsafe=True)  # cookies of 127.0.0.1
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            # The login form: a burst of 40 wrong tokens is 5 checked and 35 told to wait.
            _burst([await _login(session, daemon.url, WRONG) for _ in range(40)])
            # The same address waits on the control API too: one limit for both.
            waited = await _bearer(session, daemon.url, CONTROL)
            assert waited.status == 429 and waited.headers["Retry-After"] == "1"
            await asyncio.sleep(1.1)
            # The wait grows: the next wrong token is checked, and then 2 s.
            assert (await _login(session, daemon.url, WRONG)).status == 401
            again = await _login(session, daemon.url, CONTROL)
            assert again.status == 429 and again.headers["Retry-After"] == "2"
            await asyncio.sleep(2.1)
            # The right token after the current wait logs in, and the count starts afresh.
            logged_in = await _login(session, daemon.url, CONTROL)
            assert logged_in.status == 303 and logged_in.headers["Location"] == "/ui/"
            # The bearer check: a burst of 40 wrong bearers, then the right one after the wait.
            _burst([await _bearer(session, daemon.url, WRONG) for _ in range(40)])
            await asyncio.sleep(1.1)
            assert (await _bearer(session, daemon.url, CONTROL)).status == 200
            assert (await _bearer(session, daemon.url, WRONG)).status == 401  # afresh
        assert (await _health(daemon.url)) == 200  # never limited
    finally:
        assert daemon.stop() == 0
    assert CONTROL not in daemon.log()


async def _health(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url + "/healthz") as resp:
        return resp.status


# ----- the token's length -----------------------------------------------------------------------


def _syncd(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli_zygote.run(list(args), cwd=tmp, timeout=60, text=True, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("where", ["file", "env"])
def test_a_daemon_token_under_sixteen_characters_is_refused(tmp_path: Path, where: str) -> None:
    short = "fifteen-chars-x"
    assert len(short) == 15
    if where == "file":
        config, env = _config(tmp_path, f'host = "0.0.0.0"\ntoken = "{short}"\n'), {}
    else:
        config, env = _config(tmp_path, 'host = "0.0.0.0"\n'), {"SYNCD_DAEMON__TOKEN": short}
    for command in (["config", "check"], ["serve"]):
        result = _syncd(tmp_path, *command, "--config", str(config), env=env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert "daemon.token" in line and "at least 16 characters" in line, line
        assert short not in result.stdout + result.stderr
    long_enough = _syncd(tmp_path, "config", "check", "--config", str(config), env={"SYNCD_DAEMON__TOKEN": short + "y"})
    assert long_enough.returncode == 0, long_enough.stderr


def test_the_token_a_daemon_makes_itself_is_long(tmp_path: Path) -> None:
    daemon = DaemonProcess.start(_config(tmp_path, ""), tmp_path / "state")
    try:
        assert len(daemon_json_token(tmp_path / "state")) >= 32
    finally:
        assert daemon.stop() == 0
