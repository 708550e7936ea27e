"""Issue 11, item 2: a SIGHUP reload must not open the control API.

A reload does not move the listener (host and port wait for a restart), so a daemon started on
0.0.0.0 with a token keeps listening on 0.0.0.0 whatever the new file says. A file that says
`host = "127.0.0.1"` without a token used to be accepted, and the token dropped: the API then
answered anyone on the network without credentials. Such a reload is now rejected as a whole.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from syncd.config import Settings
from syncd.daemon.service import Daemon
from tests.daemon_support import DaemonProcess, metric_value
from tests.loopback import http, wait_for

TOKEN = "item02-control-token-5c1e"


def _config(tmp: Path, daemon: str, jobs: str = "") -> str:
    return (
        f'state_dir = "{tmp / "state"}"\n'
        '[tenants.src]\nbase_url = "http://127.0.0.1:1"\ntoken = "item02-tenant-token"\n'
        f"[daemon]\nport = 0\n{daemon}" + jobs
    )


def _reload_outcome(daemon: DaemonProcess, seen: int) -> str | None:
    """`rejected` or `reloaded` once the log shows a reload beyond the first `seen` ones."""
    log = daemon.log()
    if log.count("config.reload_rejected") + log.count("config.reloaded") <= seen:
        return None
    return "rejected" if log.count("config.reload_rejected") > 0 else "reloaded"


def test_item02_reload_to_loopback_without_token_while_listening_on_all_addresses_is_rejected(tmp_path: Path) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text(_config(tmp_path, f'host = "0.0.0.0"\ntoken = "{TOKEN}"\n'))
    daemon = DaemonProcess.start(config, tmp_path / "state", token=TOKEN)
    try:
        assert http("GET", daemon.url + "/jobs")[0] == 401
        assert daemon.get("/jobs") == (200, {"jobs": []})

        # The file now says loopback and no token; the listener stays on 0.0.0.0.
        config.write_text(_config(tmp_path, 'host = "127.0.0.1"\n'))
        daemon.signal(signal.SIGHUP)
        outcome = wait_for("the reload to be decided", lambda: _reload_outcome(daemon, 0), 30)
        assert outcome == "rejected", daemon.log()
        line = next(line for line in daemon.log().splitlines() if "config.reload_rejected" in line)
        assert "daemon.token" in line and "0.0.0.0" in line and "restart" in line, line

        # Still closed: nothing answers without the old token, which still works.
        for path in ("/jobs", "/runs", "/metrics", "/readyz"):
            status, body = http("GET", daemon.url + path)
            assert status == 401 and body["error"]["code"] == 401, (path, status, body)
        status, body = http("POST", daemon.url + "/jobs/x/run", body={})
        assert status == 401, body
        assert daemon.get("/jobs") == (200, {"jobs": []})
        assert metric_value(daemon.metrics(), "syncd_config_reloads_total", outcome="rejected") == 1

        # A reload that keeps the token is taken as before.
        config.write_text(
            _config(tmp_path, f'host = "0.0.0.0"\ntoken = "{TOKEN}"\n', '[[jobs]]\nname = "later"\nkind = "backup"\nsource = "src"\n')
        )
        daemon.signal(signal.SIGHUP)
        wait_for("the accepted reload", lambda: "config.reloaded" in daemon.log(), 30)
        assert [job["name"] for job in daemon.get("/jobs")[1]["jobs"]] == ["later"]
        assert http("GET", daemon.url + "/jobs")[0] == 401
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()
    assert TOKEN not in daemon.log()


async def test_item02_reload_dropping_the_token_on_loopback_keeps_the_api_closed(tmp_path: Path) -> None:
    """On loopback a file without a token is accepted, but the API stays closed: the daemon's
    own token (written to daemon.json then, and taken out again when a token comes back)."""
    state = tmp_path / "state"

    def settings(**daemon: Any) -> Settings:
        return Settings.model_validate({"state_dir": str(state), "daemon": {"port": 0, **daemon}})

    files = iter([settings(), settings(token="item02-new-token")])
    daemon = Daemon(settings(token=TOKEN), reload=lambda: next(files))
    info = state / "daemon.json"
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            url = await group.start(daemon.serve)
            try:
                assert "token" not in json.loads(info.read_text())  # a configured token is not written down
                assert daemon.reload() is True
                assert await _status(url, None) == 401
                assert await _status(url, TOKEN) == 401
                made = json.loads(info.read_text())["token"]
                assert stat.S_IMODE(os.stat(info).st_mode) == 0o600
                assert made != TOKEN
                assert await _status(url, made) == 200

                assert daemon.reload() is True
                assert "token" not in json.loads(info.read_text())
                assert await _status(url, made) == 401
                assert await _status(url, "item02-new-token") == 200
            finally:
                daemon.stop()


async def _status(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url + "/jobs", headers=headers) as resp:
        return resp.status
