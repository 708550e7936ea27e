"""Retries are said on stderr at the default log level, one line each: which retry of how
many, the wait, the request (method and path) and why, server text made safe, no token.
On both state backends (`backend`): with a PostgreSQL state the client paces through the
token's budget shared in it (syncd.pg.budget), so its retries take another path."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from syncd.api import ApiError, ServerError
from syncd.api.client import retry_notice
from syncd.cli import main
from syncd.state import StateStore
from tests.hostile.cli_support import HOSTILE_TEXT, Server
from tests.loopback import closed_port, wait_for
from tests.state_support import use_backend
from tests.thread_emulator import TOKEN, thread_emulator

RETRY = re.compile(r"retry (\d+)/(\d+) in (\d+\.\d) s: (.*?)(?: \[syncd\.api\].*)?$")
UNTIL = re.compile(r"; retrying for \d+ s, until \d\d:\d\d:\d\d\b")


@pytest.fixture
def on_backend(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path | str:
    """Where the state of the test's syncd is (on `backend`)."""
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    return use_backend(backend, request, monkeypatch, tmp_path / "state")


def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, token: str = TOKEN) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", url)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", token)


def _retries(err: str) -> list[tuple[int, int, str]]:
    found = []
    for line in err.splitlines():
        match = RETRY.search(line)
        if match:
            assert "[warning" in line and "tenant=src" in line, line  # which tenant's request
            found.append((int(match[1]), int(match[2]), match[4]))
    return found


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/_emulator/info", timeout=5) as resp:
            resp.read()
        return True
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def test_a_server_that_is_down_is_said_once_with_until_when_then_the_run_goes_on(
    on_backend: Path | str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A one-shot command says at the first refused connection that it retries and until when
    (not a line per retry); a server back within that time lets the run go on."""
    with thread_emulator("orgs=1,collections=1,spaces=2,pages=1,files=0,sites=0") as emulator:
        _env(monkeypatch, tmp_path, emulator.url)
        emulator.admin("POST", "/outage", {"seconds": 600})  # ended below, once the retry was said
        wait_for("the emulator to go down", lambda: not _answers(emulator.url), timeout=10, interval=0.02)
        said: list[str] = []

        def retrying() -> bool:
            said.append(capsys.readouterr().err)
            return bool(UNTIL.search("".join(said)))

        with ThreadPoolExecutor(1) as pool:
            sync = pool.submit(main, ["sync", "src"])
            wait_for("the retrying line on stderr", retrying, timeout=120, interval=0.02)
            emulator.end_outage()
            assert sync.result(timeout=300) == 0
    err = "".join(said) + capsys.readouterr().err
    port = emulator.url.rsplit(":", 1)[1]
    notices = [line for line in err.splitlines() if UNTIL.search(line)]
    assert len(notices) == 1 and "[warning" in notices[0] and "tenant=src" in notices[0], err
    assert f"cannot connect to {emulator.url} (GET /v1/orgs: connection refused by 127.0.0.1:{port}); retrying for " in notices[0]
    assert not _retries(err), err  # the retries of a refused connection are not said one by one
    with StateStore(on_backend, readonly=True) as mirror:
        assert [run["status"] for run in mirror.runs()] == ["complete"]


def test_a_one_shot_command_gives_up_on_a_server_nothing_listens_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`syncd sync` on a port where nothing listens: one line saying it retries until when (a
    clock time), then, within the one-shot window (`syncd.one_shot`, 10 s), one error line that
    names the URL and what to check; exit 1, no run left open."""
    url = f"http://127.0.0.1:{closed_port()}"
    _env(monkeypatch, tmp_path, url)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    assert main(["sync", "src"]) == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2, err
    port = url.rsplit(":", 1)[1]
    assert UNTIL.search(lines[0]) and "[warning" in lines[0] and "tenant=src" in lines[0], err
    assert f"cannot connect to {url} (GET /v1/orgs: connection refused by 127.0.0.1:{port}); retrying for " in lines[0], err
    error = re.fullmatch(r"syncd: error: src: GET /v1/orgs: connection refused by 127\.0\.0\.1:(\d+) \(gave up after (\d+) attempts\); (.*)", lines[1])
    assert error and error[1] == port and int(error[2]) > 1, err
    assert error[3] == f"check that the server at {url} is running and that tenants.src.base_url is right", err


def test_server_text_in_a_retry_is_one_safe_line_without_the_token(
    on_backend: Path | str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "retry-secret-token-42"
    with Server() as server:
        server.answer("/v1/orgs", 503, {"error": {"code": 503, "message": f"down {HOSTILE_TEXT}\nline two {token}"}})
        _env(monkeypatch, tmp_path, server.url, token)
        monkeypatch.setenv("SYNCD_RETRY__MAX_ATTEMPTS", "3")
        monkeypatch.setenv("SYNCD_RETRY__INITIAL_WAIT", "0.01")
        monkeypatch.setenv("SYNCD_RETRY__MAX_WAIT", "0.02")
        assert main(["sync", "src"]) != 0
    err = capsys.readouterr().err
    retries = _retries(err)
    assert [(n, of) for n, of, _ in retries] == [(1, 2), (2, 2)], err
    for _, _, what in retries:
        assert what.startswith("GET /v1/orgs: 503 down ") and "line two ********" in what, what
    assert token not in err and "\x1b" not in err and "\x07" not in err and "\x9b" not in err


def test_a_retry_after_an_answer_without_rate_figures_waits_for_no_probe() -> None:
    """With a PostgreSQL state the token's permits come from the shared budget, where the first
    request is a lone probe. A 503 without rate-limit headers answers it too: the retry that
    the line said goes "in 0.0 s" may go then, not once the probe's lease (1 s) ends."""
    from syncd.pg.budget_model import Note, Row, grant, observe

    row = Row()
    probe = grant(row, 100.0, 1)
    assert (probe.count, probe.probe) == (1, True)
    assert grant(row, 100.01, 1).reason == "probe"  # while it is out, nobody else goes
    observe(row, Note(row.tickets, 503), 100.02)
    retry = grant(row, 100.03, 1)
    assert (retry.count, retry.probe) == (1, True), retry


async def test_a_probe_without_an_answer_holds_no_retry_back(pg_url: str) -> None:
    """The same for a probe that got no answer at all (a refused connection, a timeout): once
    the Pacer forgets it, the next request is the next probe, without waiting."""
    from syncd.pg.budget import SharedBudget

    async with SharedBudget(pg_url, "http://127.0.0.1:9", "a-token-1234") as budget:
        await budget.acquire(1)
        budget.forget(1)  # failed: no note()
        await budget.acquire(2)
        assert budget.stats.waits == 0 and budget.stats.granted == 2


def test_the_notice_says_the_wait_and_the_reason_of_any_error() -> None:
    refused = ApiError("connection refused", method="GET", path="/v1/orgs")
    assert retry_notice(1, 7, 1.25, refused) == "retry 1/7 in 1.2 s: GET /v1/orgs: connection refused"
    assert retry_notice(2, 7, 12.4, ServerError("down", status=503)) == "retry 2/7 in 12 s: 503 down"  # no request known
    assert retry_notice(2, 7, 10.0, ServerError("down", status=503)) == "retry 2/7 in 10 s: 503 down"
    assert retry_notice(2, 7, 9.96, ServerError("down", status=503)) == "retry 2/7 in 10.0 s: 503 down"
    assert retry_notice(3, 7, 0.5, ValueError("odd")) == "retry 3/7 in 0.5 s: ValueError: odd"
    assert retry_notice(4, 7, 0.5, None) == "retry 4/7 in 0.5 s: unknown error"
    long = retry_notice(5, 7, 0.5, ValueError("x" * 1000))
    assert long == "retry 5/7 in 0.5 s: " + ("ValueError: " + "x" * 1000)[:300]
