"""Issue 11, item 10: `daemon.token` is trimmed like tenant tokens.

A token pasted with a trailing space, or read with the newline of a file (`token = "..."` built
by a script, `SYNCD_DAEMON__TOKEN="$(cat file)"` keeps none but `--env-file` and Kubernetes
secrets often do), used to be required byte for byte: nobody could send it, everyone got 401.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import anyio
import pytest

from syncd.config import load_settings
from syncd.daemon.service import Daemon
from syncd.errors import ConfigError
from tests import cli_zygote
from tests.loopback import http, wait_for

CLEAN = "item10-control-token-9d2b"


@contextlib.asynccontextmanager
async def serving(daemon: Daemon) -> AsyncIterator[str]:
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            url = await group.start(daemon.serve)
            try:
                yield url
            finally:
                daemon.stop()


async def _status(url: str, token: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url + "/jobs", headers={"Authorization": f"Bearer {token}"}) as resp:
        return resp.status


def _file(tmp: Path, daemon: str) -> Path:
    path = tmp / "syncd.toml"
    path.write_text(f'state_dir = "{tmp / "state"}"\n[daemon]\nport = 0\n{daemon}')
    return path


@pytest.mark.parametrize(
    ("where", "raw"),
    [("file", f"{CLEAN} \n"), ("file", f"\t{CLEAN}  "), ("env", f"{CLEAN} \n"), ("env", f" {CLEAN}\r\n")],
)
async def test_item10_a_token_with_spaces_and_a_newline_works_as_the_clean_token(tmp_path: Path, where: str, raw: str) -> None:
    if where == "file":
        settings = load_settings(_file(tmp_path, f"token = {json.dumps(raw)}\n"), env={})
    else:
        settings = load_settings(_file(tmp_path, ""), env={"SYNCD_DAEMON__TOKEN": raw})
    assert settings.daemon.token is not None and settings.daemon.token.get_secret_value() == CLEAN
    daemon = Daemon(settings)
    async with serving(daemon) as url:
        assert await _status(url, CLEAN) == 200
        assert await _status(url, "wrong") == 401
    # Empty once trimmed is still an error, as before.
    with pytest.raises(ConfigError, match="daemon.token: must not be empty"):
        load_settings(_file(tmp_path, ""), env={"SYNCD_DAEMON__TOKEN": " \n"})


def test_item10_the_command_line_sends_the_trimmed_token(tmp_path: Path) -> None:
    """`syncd serve` and `syncd jobs`, each given the token with its newline, agree."""
    config = _file(tmp_path, "")
    env = {**os.environ, "SYNCD_DAEMON__TOKEN": f"{CLEAN} \n", "PYTHONUNBUFFERED": "1"}
    with (tmp_path / "serve.log").open("wb") as log:
        serve = cli_zygote.spawn(["serve", "--config", str(config)], cwd=tmp_path, stdout=log.fileno(), stderr=log.fileno(), env=env)
    try:
        info = tmp_path / "state" / "daemon.json"
        wait_for("the daemon to listen", lambda: serve.poll() is None and info.exists(), 30)
        assert "token" not in info.read_text()  # a configured token is never written down
        listed = cli_zygote.run(["jobs", "--json", "--config", str(config)], cwd=tmp_path, timeout=120, env=env)
        assert listed.returncode == 0, listed.stderr
        url = json.loads(info.read_text())["url"]
        assert http("GET", url + "/jobs", CLEAN)[0] == 200
    finally:
        serve.terminate()
        assert serve.wait(timeout=30) == 0
    assert CLEAN not in (tmp_path / "serve.log").read_text()
