"""Content across tenants at the open points of imports (docs/concepts/open-points.md, rows
import-existing-pages, locked-space, import-style): a locked space gets its content, a changed
source space is brought over without stacking imports, and a service that adds what it imports
is found out and remembered. Runs the real CLI against an emulator process under `default`,
`divergent` and a `mixed` profile, with lost answers and server errors on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.cli import main
from syncd.config import load_settings
from syncd.daemon.jobs import execute_job
from syncd.daemon.metrics import DaemonMetrics
from tests.cli_zygote import emulator_process
from tests.profile_scenario import shape
from tests.test_copy_e2e import FAULTS, Emulator, no_duplicates

SPEC = "orgs=2,empty_orgs=1,collections=2,spaces=4,pages=3,sites=1,sections=2"

pytestmark = pytest.mark.parametrize("profile", ["default", "divergent", "mixed:5"])


@pytest.fixture
def emulator(profile: str) -> Iterator[Emulator]:
    with emulator_process(token="all", spec=SPEC, seed=11, rate=0, profile=profile) as running:
        yield Emulator(running.url, running.report, "all")


@pytest.fixture
def env(emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name, token in (("ONE", "org1-token"), ("THREE", "org3-token")):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", emulator.url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", token)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SYNCD_RETRY__INITIAL_WAIT", "0.02")  # faults are retried after short waits: the same calls, less sleep
    monkeypatch.setenv("SYNCD_RETRY__MAX_WAIT", "0.1")
    return tmp_path


def spaces(emulator: Emulator, org: str, token: str) -> list[dict[str, Any]]:
    """The live spaces (a profile may list deleted ones, with `deletedAt`)."""
    return [s for s in emulator.api("GET", f"/v1/orgs/{org}/spaces?limit=1000", token=token)["items"] if not s.get("deletedAt")]


def pages(emulator: Emulator, space: str, token: str) -> list[str]:
    def titles(items: list[dict[str, Any]]) -> list[str]:
        return [t for p in items for t in [p["title"], *titles(p.get("pages") or [])]]

    return titles(emulator.api("GET", f"/v1/spaces/{space}/content/pages", token=token)["pages"])


def import_into(emulator: Emulator, space: str, url: str, token: str = "org1-token") -> None:
    """Change a source space's content by an import, and wait until the space shows it (a
    profile may answer an import first: row import-completion)."""
    revision = emulator.api("POST", f"/v1/spaces/{space}/content/import", {"url": url, "source": "website"}, token=token)["revision"]
    deadline = time.monotonic() + 10
    while emulator.api("GET", f"/v1/spaces/{space}", token=token)["revision"] != revision:
        assert time.monotonic() < deadline, f"space {space} did not show revision {revision}"
        time.sleep(0.05)


def copied_id(emulator: Emulator, org: str, title: str) -> str:
    return next(s["id"] for s in spaces(emulator, org, "org3-token") if s["title"] == title)


@contextmanager
def website(markdown: str) -> Iterator[str]:
    """A one-page website on loopback whose page offers its markdown (`rel="alternate"`)."""
    pages = {
        "/site/": ("text/html", '<html><body><nav><a href="guide/">Release notes</a></nav></body></html>'),
        "/site/guide/": ("text/html", '<html><head><title>Release notes</title><link rel="alternate" type="text/markdown" '
                         'href="index.md"></head><body><main>x</main></body></html>'),
        "/site/guide/index.md": ("text/markdown", markdown),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            kind, text = pages.get(self.path, ("text/plain", ""))
            body = text.encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/site/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def apply(emulator: Emulator, src: str, dst: str, capsys: pytest.CaptureFixture[str]) -> str:
    emulator.faults(**FAULTS)
    code = main(["mirror", "apply", f"one:{src}", f"three:{dst}"])
    emulator.faults()
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def assert_equal_once(emulator: Emulator, src: str, dst: str) -> None:
    target = emulator.dump(dst)
    assert target == emulator.dump(src), [k for k in target if target[k] != emulator.dump(src)[k]]
    assert no_duplicates(target)
    source = {s["title"]: pages(emulator, s["id"], "org1-token") for s in spaces(emulator, src, "org1-token")}
    for space in spaces(emulator, dst, "org3-token"):
        assert pages(emulator, space["id"], "org3-token") == source[space["title"]], space["title"]  # no page twice


def test_locked_space_and_changed_content_converge_without_stacking(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[2]
    listed = spaces(emulator, src, "org1-token")
    locked, changing, other = listed[0], listed[1], listed[2]
    emulator.api("PATCH", f"/v1/spaces/{locked['id']}", {"editMode": "locked"}, token="org1-token")
    before = emulator.raw_dump(src)

    out = apply(emulator, src, dst, capsys)
    assert_equal_once(emulator, src, dst)
    assert emulator.raw_dump(src) == before  # the source is never changed
    copied = {s["title"]: s for s in spaces(emulator, dst, "org3-token")}
    assert copied[locked["title"]]["editMode"] == "locked" and pages(emulator, copied[locked["title"]]["id"], "org3-token")
    # An importer that writes markdown in its own style (row import-style), or from the HTML
    # alone (row import-reads-markdown-alternate), is no difference:
    # verify counts those spaces, and calls the copy equal.
    capsys.readouterr()
    assert main(["mirror", "verify", f"one:{src}", f"three:{dst}", "--json"]) == 0
    verified = json.loads(capsys.readouterr().out)
    restyled = "divergent" in (emulator.profile_row("import-style"), emulator.profile_row("import-reads-markdown-alternate"))  # its own style, or from the HTML
    counts = verified["verification"]["counts"]
    assert verified["equal"] and (counts["formatting"] + counts["restructured"] > 0) == restyled, counts

    # The source space's content changes (imported from another space): the target follows,
    # by a fresh space the first time (the service's import behaviour is not known yet).
    for round_ in range(2):
        import_into(emulator, changing["id"], (other if round_ == 0 else locked)["urls"]["app"])
        out = apply(emulator, src, dst, capsys)
        assert_equal_once(emulator, src, dst)
        if round_ == 0:
            assert "on import (observed, remembered for this tenant)" in out, out
    # Once the tenant is known to replace, a content change is imported in place.
    replaces = emulator.profile_row("import-existing-pages") == "default"
    assert ("came by a fresh space" in out) != replaces, out

    # The locked source space's content changes too (a page from a website: imported into a
    # space holding pages, it adds nothing twice whatever the service does): the locked target
    # space is unlocked, imported into (or replaced by a fresh space), and locked again.
    emulator.api("PATCH", f"/v1/spaces/{locked['id']}", {"editMode": "live"}, token="org1-token")
    with website("# Release notes\n\nVersion *2* is out.\n") as url:
        import_into(emulator, locked["id"], url)
    emulator.api("PATCH", f"/v1/spaces/{locked['id']}", {"editMode": "locked"}, token="org1-token")
    out = apply(emulator, src, dst, capsys)
    assert_equal_once(emulator, src, dst)
    assert "Release notes" in pages(emulator, copied_id(emulator, dst, locked["title"]), "org3-token")
    assert {s["title"]: s for s in spaces(emulator, dst, "org3-token")}[locked["title"]]["editMode"] == "locked"
    assert ("was locked: unlocked for its content import" in out) == replaces, out  # a fresh space needs no unlock

    writes = emulator.writes()
    assert main(["mirror", "apply", f"one:{src}", f"three:{dst}"]) == 0
    assert emulator.writes() == writes  # a second apply sends nothing


def test_a_daemon_mirror_job_succeeds_on_every_run(emulator: Emulator, env: Path) -> None:
    """Issue 21: a mirror job on an organization with a locked space and a site root that
    alternates sections and groups succeeds on its first run and every run after, content
    changes included, whatever the profile plays."""
    src, dst = emulator.orgs[0], emulator.orgs[2]
    shape(emulator, src, "org1-token")
    config = env / "daemon.toml"
    config.write_text(f'[[jobs]]\nname = "copy"\nkind = "mirror"\nsource = "one:{src}"\ntarget = "three:{dst}"\nmode = "mirror"\n')
    settings = load_settings(config)
    listed = spaces(emulator, src, "org1-token")
    for run in range(3):
        if run == 1:  # the source's content changes between runs
            import_into(emulator, listed[1]["id"], listed[3]["urls"]["app"])
        emulator.faults(**FAULTS)
        result = anyio.run(lambda: execute_job(settings, settings.jobs[0], DaemonMetrics()))
        emulator.faults()
        assert result.outcome == "succeeded", (run, result.summary)
        assert_equal_once(emulator, src, dst)
    assert result.summary["rounds"] == []  # the last run had nothing to do
