"""`syncd config check --online`: each tenant's token tried on its server (`GET /v1/user`),
who it belongs to or the one-line reason it failed; exit 1 when any failed; tokens never shown.
The CLI in-process against an emulator served by a thread. With a PostgreSQL state the tokens
are tried through their budget shared in it (syncd.pg.budget): the first test runs on both
backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncd.cli import main
from tests.loopback import closed_port
from tests.schema_support import assert_valid
from tests.state_support import use_backend
from tests.thread_emulator import TOKEN, ThreadEmulator, thread_emulator

BAD_TOKEN = "a-wrong-token-1234"
UNREACHABLE_TOKEN = "a-token-for-nowhere-5678"


@pytest.fixture(scope="module")
def emulator() -> Iterator[ThreadEmulator]:
    with thread_emulator("orgs=1,spaces=1") as running:
        yield running


@pytest.fixture
def tenants(emulator: ThreadEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name, url, token in (
        ("SRC", emulator.url, TOKEN),
        ("OWNER", emulator.url, "org1-token"),
        ("BAD", emulator.url, BAD_TOKEN),
        ("GONE", f"http://127.0.0.1:{closed_port()}", UNREACHABLE_TOKEN),
    ):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", token)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))


def test_online_check_says_whose_token_it_is(
    tenants: None, backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    use_backend(backend, request, monkeypatch, tmp_path / "state")
    assert main(["config", "check", "--online"]) == 1
    out, err = capsys.readouterr()
    lines = {line.split(":")[0].strip(): line.strip() for line in out.split("(GET /v1/user on each tenant's server)")[1].splitlines() if ": " in line}
    assert lines["src"] == f"src: ok, the token of Emulator Admin <admin@emulator.test> at {lines['src'].rsplit(' ', 1)[1]}"
    assert lines["owner"].startswith("owner: ok, the token of Owner 1 <owner@org1.example.com>")
    assert lines["bad"].startswith("bad: failed: bad: GET /v1/user: 401 ")
    assert lines["gone"].startswith("gone: failed: gone: GET /v1/user: connection refused")
    assert "2 of 4 tokens failed" in out
    for token in (TOKEN, "org1-token", BAD_TOKEN, UNREACHABLE_TOKEN):
        assert token not in out + err


def test_online_check_as_json(tenants: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "--online", "--json"]) == 1
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert_valid("config-check", document)
    online = document["online"]
    assert [name for name, found in online.items() if found["ok"]] == ["owner", "src"]
    assert online["src"]["user"]["displayName"] == "Emulator Admin" and online["src"]["error"] is None
    assert online["bad"]["user"] is None and "401" in online["bad"]["error"]
    assert BAD_TOKEN not in out + err and UNREACHABLE_TOKEN not in out + err


def test_online_check_passes_when_every_token_works(tenants: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BAD", "GONE"):
        monkeypatch.delenv(f"SYNCD_TENANTS__{name}__BASE_URL")
        monkeypatch.delenv(f"SYNCD_TENANTS__{name}__TOKEN")
    assert main(["config", "check", "--online"]) == 0
    assert "every token works" in capsys.readouterr().out
    assert main(["config", "check"]) == 0  # without --online: no token section
    assert "GET /v1/user" not in capsys.readouterr().out
