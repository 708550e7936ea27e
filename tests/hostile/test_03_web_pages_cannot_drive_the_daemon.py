"""Issue 11, item 3: a web page in the operator's browser cannot drive the daemon.

With the default control API (loopback, no `daemon.token`), a page could POST
`/jobs/NAME/run` with `Content-Type: text/plain` (a "simple" request, no CORS preflight) and
start mirror jobs that write and delete on tenants; a DNS-rebinding page (its name resolving to
127.0.0.1) could also read `/runs`. Now the API checks `Host` and `Origin`, wants JSON for
anything that changes something, and on loopback too wants a token: the one the daemon made at
start, in `state/daemon.json` (mode 0600), which `syncd trigger` and `syncd jobs` read.
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import cli_zygote
from tests.daemon_support import DaemonProcess

FOREIGN = "attacker.example"


def _raw(url: str, method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> tuple[int, Any]:
    """One request with exactly these headers (`Host` included), as a browser would send it."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        raw = response.read()
        lines = raw.decode(errors="replace").splitlines()
        if "json" in (response.getheader("Content-Type") or ""):
            assert len(lines) == 1, raw  # one JSON line
            return response.status, json.loads(raw)
        return response.status, raw.decode(errors="replace")
    finally:
        connection.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    """`syncd serve` with the defaults that matter (loopback, no daemon.token) and a mirror job
    that only runs when triggered (its tenants are unreachable: a started run would fail)."""
    config = tmp_path / "syncd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        '[tenants.src]\nbase_url = "http://127.0.0.1:1"\ntoken = "item03-src-token"\n'
        '[tenants.dst]\nbase_url = "http://127.0.0.1:1"\ntoken = "item03-dst-token"\n'
        '[retry]\nmax_attempts = 1\n'
        '[daemon]\nport = 0\nallowed_hosts = ["syncd.internal"]\nshutdown_deadline = "1s"\n'
        '[[jobs]]\nname = "copy"\nkind = "mirror"\nmode = "mirror"\nsource = "src:ORG_A"\ntarget = "dst:ORG_B"\n'
    )
    running = DaemonProcess.start(config, tmp_path / "state", wait=False)
    try:
        running.wait_ready()
        yield running
    finally:
        assert running.stop() == 0, running.log()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`syncd ARGS` as a process of its own (forked from the suite's CLI zygote)."""
    return cli_zygote.run(args, cwd=cwd, timeout=120, text=True)


def test_item03_cross_site_requests_are_refused_and_start_nothing(daemon: DaemonProcess) -> None:
    port = urlsplit(daemon.url).port
    local = f"127.0.0.1:{port}"
    page = {"Content-Type": "text/plain", "Origin": f"http://{FOREIGN}:{port}"}

    # A page of another site, through DNS rebinding (Host is the page's name) or not.
    status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {**page, "Host": f"{FOREIGN}:{port}"}, b"{}")
    assert status == 403 and body["error"]["code"] == 403, (status, body)
    status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {**page, "Host": local}, b"{}")
    assert status == 403 and "Origin" in body["error"]["message"], (status, body)
    status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {**page, "Host": local, "Origin": "null"}, b"{}")
    assert status == 403, (status, body)
    # No Origin (not a browser, or a same-origin page): still no token, no run.
    status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {"Host": local, "Content-Type": "text/plain"}, b"{}")
    assert status == 401, (status, body)
    # Even with the token, a form or text/plain body is not a call of this API.
    auth = {"Authorization": f"Bearer {daemon.token}"}
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {**auth, "Host": local, "Content-Type": ctype}, b"{}")
        assert status == 415 and body["error"]["code"] == 415, (ctype, status, body)
    status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {**auth, "Host": local}, None)
    assert status == 415, (status, body)

    # DNS rebinding cannot read the run history, with or without the token, nor probe health.
    for headers in ({"Host": FOREIGN}, {"Host": f"{FOREIGN}:{port}"}, {"Host": f"{FOREIGN}:{port}", **auth}):
        status, body = _raw(daemon.url, "GET", "/runs", headers)
        assert status == 403 and FOREIGN in body["error"]["message"], (headers, status, body)
    assert _raw(daemon.url, "GET", "/healthz", {"Host": f"{FOREIGN}:{port}"})[0] == 403
    assert _raw(daemon.url, "GET", "/healthz", {"Host": local}) == (200, {"status": "ok"})
    # Loopback is closed too: no token, no answer.
    for path in ("/runs", "/jobs", "/jobs/copy"):
        assert _raw(daemon.url, "GET", path, {"Host": local})[0] == 401, path

    # Nothing started.
    status, job = daemon.get("/jobs/copy")
    assert status == 200 and job["runs"] == [] and job["state"] == "idle", job
    assert daemon.get("/runs") == (200, {"runs": []})


def test_item03_same_machine_clients_use_the_token_of_daemon_json(daemon: DaemonProcess, tmp_path: Path) -> None:
    info_path = tmp_path / "state" / "daemon.json"
    assert stat.S_IMODE(os.stat(info_path).st_mode) == 0o600
    info = json.loads(info_path.read_text())
    token = info["token"]
    assert isinstance(token, str) and len(token) >= 32
    assert not [p.name for p in info_path.parent.iterdir() if p.name.startswith(".daemon.json")]  # no temporary left

    port = urlsplit(daemon.url).port
    json_call = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"syncd.internal:{port}", f"SYNCD.internal.:{port}"):
        status, body = _raw(daemon.url, "GET", "/jobs", {"Authorization": f"Bearer {token}", "Host": host})
        assert status == 200 and [j["name"] for j in body["jobs"]] == ["copy"], (host, status, body)
    # A page of the daemon's own origin (its own UI, or curl saying so) is fine.
    status, body = _raw(daemon.url, "GET", "/runs", {**json_call, "Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"})
    assert status == 200, body

    # The command line finds the token in daemon.json, and sends JSON.
    config = tmp_path / "syncd.toml"
    listed = _cli("jobs", "--json", "--config", str(config), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [job["name"] for job in json.loads(listed.stdout)["jobs"]] == ["copy"]
    started = _cli("trigger", "copy", "--config", str(config), cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert "copy: run #1 started" in started.stdout
    status, body = _raw(daemon.url, "POST", "/jobs/copy/run", {**json_call, "Host": f"127.0.0.1:{port}"}, b"{}")
    assert status == 202 and body["run"]["job"] == "copy", body

    assert token not in daemon.log()
