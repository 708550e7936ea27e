"""Issue 22, items 3, 5, 7, 8 and 9: the content source holds when it faces the internet.

Before the fix: a connection sending half a header stayed open for over 100 s and nothing
capped the open connections (1,100 of them ran the process out of file descriptors); the
`concurrency` limit covered building a response, not sending it (slow readers of a big file
all got 200 at once); a large page was rendered on the event loop at every fetch; a fixed
`port` served one run at a time (a second run: "address already in use"); `public_url` was
neither validated nor masked (its proxy password in `config check` and the log); capability
URLs were kept in journal bodies, printed when the service's import error quoted them, and
lived until the run ended. Real loopback HTTP: raw sockets against the real server, and the
emulator (in process) importing from it.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.cli import main
from syncd.config import ContentSourceConfig, TargetRef, load_settings
from syncd.content import ContentSource, ServedFile, SitePage, SpaceSite, serve_content
from syncd.content import site as site_module
from syncd.copy import BackupSource, copy_org
from syncd.emulator import website_import
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.read.backup import backup
from tests.log_support import logged_to_buffer

TOKEN = "item13-token"
PASSWORD = "Pr0xyPass"
SPEC = "orgs=1,empty_orgs=3,collections=1,spaces=3,pages=2,files=1"
BIG = 16 * 1024 * 1024
"""A file larger than loopback's socket buffers: its sender waits for a reader that stalls."""


# ----- raw connections ---------------------------------------------------------------------------


def _connect(url: str, receive_buffer: int | None = None) -> socket.socket:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    sock = socket.socket()
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect((host, int(port)))
    return sock


def _request(url: str) -> bytes:
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]
    return f"GET {path} HTTP/1.1\r\nHost: content.example\r\n\r\n".encode()


async def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (read until EOF or a reset; what was sent is skipped)."""

    def read() -> bool:
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        return True

    with anyio.fail_after(20):  # a bound so that a connection left open fails the test
        return await anyio.to_thread.run_sync(read)


async def _until(what: str, check: Callable[[], bool]) -> None:
    with anyio.fail_after(20):
        while not check():
            await anyio.sleep(0.01)


def _big_site(tmp_path: Path) -> SpaceSite:
    blob = tmp_path / "big.bin"
    with blob.open("wb") as out:
        out.truncate(BIG)
    return SpaceSite("Big", [SitePage("intro", "Intro", "# Intro\n")], [ServedFile("big.bin", "application/octet-stream", BIG, blob)])


def _guard(source: ContentSource) -> Any:
    assert source.server.guard is not None
    return source.server.guard


# ----- item 3: slow clients --------------------------------------------------------------------


async def test_item13_half_a_header_is_closed_after_the_header_timeout() -> None:
    async with serve_content(ContentSourceConfig(header_timeout=0.3, idle_timeout=0.3)) as source:
        url = source.publish("S", SpaceSite("S", [SitePage("intro", "Intro", "hello")], []))
        half = _connect(url)
        half.sendall(b"GET / HTTP/1.1\r\nHost: content.exa")
        assert await _closed(half)
        assert _guard(source).timed_out >= 1
        # A whole request is answered; the kept-alive connection is closed once idle.
        kept = _connect(url)
        kept.sendall(_request(url + "intro/"))
        head = await anyio.to_thread.run_sync(kept.recv, 65536)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert await _closed(kept)
        half.close()
        kept.close()


async def test_item13_connections_over_the_cap_are_closed_at_once(tmp_path: Path) -> None:
    config = ContentSourceConfig(max_connections=2, concurrency=1, header_timeout=300, idle_timeout=600)
    async with serve_content(config) as source:
        url = source.publish("S", _big_site(tmp_path))
        guard = _guard(source)
        first, second = _connect(url), _connect(url)
        for sock in (first, second):
            sock.sendall(b"GET / HTTP/1.1\r\n")  # half a header each
        await _until("two connections open", lambda: len(guard.open) == 2)
        third = _connect(url)
        # The cap is full of connections without a request: the oldest makes room, at once
        # (the header timeout is 5 minutes away).
        assert await _closed(first)
        await _until("the third is in", lambda: len(guard.open) == 2 and guard.rejected == 1)
        second.close()
        third.close()

        # Every open connection has a request in flight: a new one is closed at once.
        await _until("both gone", lambda: not guard.open)
        reader = _connect(url, receive_buffer=4096)
        reader.sendall(_request(url + "files/big.bin"))
        assert (await anyio.to_thread.run_sync(reader.recv, 1024)).startswith(b"HTTP/1.1 200 ")
        waiting = _connect(url)
        waiting.sendall(_request(url + "files/big.bin"))
        await _until("the second request waits", lambda: source.server.limiter.statistics().tasks_waiting == 1)
        extra = _connect(url)
        assert await _closed(extra)
        assert guard.rejected == 2 and guard.max_open <= 2 and len(guard.open) == 2
        for sock in (first, reader, waiting, extra):
            sock.close()


async def test_item13_with_concurrency_one_a_second_reader_waits_while_the_first_reads_slowly(tmp_path: Path) -> None:
    async with serve_content(ContentSourceConfig(concurrency=1)) as source, aiohttp.ClientSession() as http:
        url = source.publish("S", _big_site(tmp_path)) + "files/big.bin"
        limiter = getattr(source, "server", source).limiter  # (before the fix the run's source held it)
        slow = _connect(url, receive_buffer=4096)
        slow.sendall(_request(url))
        first = await anyio.to_thread.run_sync(slow.recv, 1024)
        assert first.startswith(b"HTTP/1.1 200 ")
        second = asyncio.ensure_future(http.get(url))
        await _until("the second request waits for the first", lambda: limiter.statistics().tasks_waiting == 1)
        assert not second.done()  # no status, no header: it is not being sent

        def read_the_rest() -> int:
            got = len(first.split(b"\r\n\r\n", 1)[1])
            while got < BIG:
                got += len(slow.recv(1 << 20))
            return got

        assert await anyio.to_thread.run_sync(read_the_rest) == BIG
        response = await second
        assert response.status == 200 and len(await response.read()) == BIG
        slow.close()


# ----- item 5: large pages -----------------------------------------------------------------------


def _table(columns: int, rows: int) -> str:
    line = "|" + "|".join("x" for _ in range(columns)) + "|\n"
    return "|" + "|".join(f"c{i}" for i in range(columns)) + "|\n" + "|" + "---|" * columns + "\n" + line * rows


async def test_item13_a_large_page_is_rendered_once_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(site_module, "RENDER_LIMIT", 50_000, raising=False)
    renders: list[str] = []
    original = SpaceSite.render

    def render(self: SpaceSite, markdown: str, up: str) -> str:
        renders.append(threading.current_thread().name)
        return original(self, markdown, up)

    monkeypatch.setattr(SpaceSite, "render", render)
    pages = [SitePage("wide", "Wide", _table(200, 20)), SitePage("huge", "Huge", _table(300, 200))]  # 24 KB, 180 KB
    async with serve_content(ContentSourceConfig()) as source, aiohttp.ClientSession() as http:
        url = source.publish("S", SpaceSite("S", pages, []))
        bodies = []
        for path in ("wide/", "wide/", "wide/", "huge/", "huge/"):
            async with http.get(url + path) as response:
                assert response.status == 200
                bodies.append(await response.text())
    assert "<table>" in bodies[0] and bodies[0] == bodies[1] == bodies[2]
    # One rendering of the page under the limit, in a worker thread; the one over it is not
    # rendered (markdown-it takes seconds on it): its markdown is in a <pre>.
    assert len(renders) == 1 and renders[0] != threading.main_thread().name, renders
    assert "<table>" not in bodies[3] and "<pre>|c0|c1|" in bodies[3] and 'type="text/markdown" href="../huge.md"' in bodies[3]


# ----- items 7 and 9: runs on a fixed port; capabilities -------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Tenant:
    """The in-process emulator, a backup of its organization (files included) and settings
    whose content source listens on a fixed port behind a public URL with a proxy password."""

    def __init__(self, running: RunningEmulator, orgs: list[str], folder: Path, port: int) -> None:
        self.running, self.orgs, self.folder, self.port = running, orgs, folder, port
        self.backup = folder / "backup.db"
        self.env = {
            "SYNCD_TENANTS__SRC__BASE_URL": running.url, "SYNCD_TENANTS__SRC__TOKEN": TOKEN,
            "SYNCD_TENANTS__DST__BASE_URL": running.url, "SYNCD_TENANTS__DST__TOKEN": TOKEN,
            "SYNCD_TENANTS__DST__CONCURRENCY": "1",  # one import at a time: what is live when the next starts is seen
            "SYNCD_STATE_DIR": str(folder / "state"), "SYNCD_LOG_LEVEL": "error",
            "SYNCD_CONTENT_SOURCE__PORT": str(port),
            "SYNCD_CONTENT_SOURCE__PUBLIC_URL": f"http://admin:{PASSWORD}@127.0.0.1:{port}",
        }
        empty = folder / "syncd.toml"
        empty.write_text("")
        self.settings = load_settings(empty, self.env)

    def journal(self, name: str = "syncd.db") -> list[tuple[str, str, str | None, str | None]]:
        with sqlite3.connect(self.folder / "state" / name) as db:
            return list(db.execute("SELECT op_key, path, body, error FROM journal"))


@asynccontextmanager
async def tenant_at(folder: Path) -> AsyncIterator[Tenant]:
    store = Store(seed=13)
    generated = generate(store, parse_spec(SPEC), seed=13, all_token=TOKEN)
    async with serve_emulator(store) as running:
        tenant = Tenant(running, list(generated.org_ids), folder, _free_port())
        await backup(tenant.settings, TargetRef("src", tenant.orgs[0]), tenant.backup, with_files=True)
        yield tenant


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every capability URL published, with how many sites of its run were live just before."""
    seen: list[tuple[str, int]] = []
    original = ContentSource.publish

    def publish(self: ContentSource, space: str, site: SpaceSite) -> str:
        live = len(self.sites)
        url = original(self, space, site)
        seen.append((url, live))
        return url

    monkeypatch.setattr(ContentSource, "publish", publish)
    yield seen


def _no_capability_in(text: str, urls: list[str]) -> None:
    for url in urls:
        capability = url.rstrip("/").split("/")[-2]
        assert capability not in text, f"capability {capability} in:\n{text[-3000:]}"
    assert PASSWORD not in text, text[-3000:]


async def test_item13_two_runs_on_one_fixed_port_both_succeed_and_capabilities_end_with_their_import(
    tmp_path: Path, published: list[tuple[str, int]]
) -> None:
    async with tenant_at(tmp_path) as tenant:
        # A run of this process already serves on the port (a daemon's other job, say); two
        # restores start beside it: all three share the one listener.
        async with serve_content(tenant.settings.content_source) as holder:
            reports: list[Any] = []

            async def restore(org: str, db: str) -> None:
                state = tenant.folder / "state" / db
                reports.append(await copy_org(tenant.settings, BackupSource(tenant.backup), TargetRef("dst", org), db=state))

            async with anyio.create_task_group() as group:  # (a state file each: one writer at a time per file)
                for org, db in zip(tenant.orgs[1:3], ("one.db", "two.db"), strict=True):
                    group.start_soon(restore, org, db)
            assert [report.equal for report in reports] == [True, True]
            urls = [url for url, _ in published]
            assert len(urls) >= 6 and all(url.startswith(f"http://admin:{PASSWORD}@127.0.0.1:{tenant.port}/") for url in urls)
            # The listener still runs (the holder keeps it): every capability is dead, each
            # withdrawn when its import ended.
            async with aiohttp.ClientSession() as http:
                for url in urls:
                    async with http.get(url) as response:
                        assert response.status == 404, url
            assert holder.sites == {}
        rows = tenant.journal("one.db") + tenant.journal("two.db")
        _no_capability_in(json.dumps(rows), urls)
        imports = [row for row in rows if row[1].endswith("/content/import")]
        assert imports and all(f"admin:********@127.0.0.1:{tenant.port}/********/" in str(row[2]) for row in imports), imports


async def test_item13_capabilities_are_neither_stored_nor_printed_and_end_with_their_import(
    tmp_path: Path, published: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with tenant_at(tmp_path) as tenant:
        for name, value in tenant.env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(website_import.LIMITS, "bytes", 10)  # every import fails, quoting its URL
        code = await anyio.to_thread.run_sync(main, ["restore", str(tenant.backup), f"dst:{tenant.orgs[1]}"])
        out = capsys.readouterr()
        urls = [url for url, _ in published]
        assert code != 0 and urls and "cannot import from http://admin:********@127.0.0.1:" in out.out, out
        _no_capability_in(out.out + out.err, urls)
        rows = tenant.journal()
        _no_capability_in(json.dumps(rows), urls)
        assert any("********" in str(row[3]) for row in rows if row[1].endswith("/content/import"))
        # One import at a time: when a space is published, the run serves no other site (the
        # one before was withdrawn when its import ended, not when the run ends).
        assert [live for _, live in published] == [0] * len(published), published


# ----- item 8: public_url --------------------------------------------------------------------------


@pytest.fixture
def log_buffer() -> Iterator[io.StringIO]:
    with logged_to_buffer("console", "info") as buffer:
        yield buffer


async def test_item13_public_url_credentials_are_masked_in_the_log_and_config_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], log_buffer: io.StringIO
) -> None:
    public = f"https://admin:{PASSWORD}@proxy.example:8443/syncd"
    async with serve_content(ContentSourceConfig(public_url=public)):
        pass
    logged = log_buffer.getvalue()
    assert "content.listening" in logged and "https://admin:********@proxy.example:8443/syncd" in logged and PASSWORD not in logged, logged

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_CONTENT_SOURCE__PUBLIC_URL", public)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    for args in (["config", "check"], ["config", "check", "--json"]):
        assert await anyio.to_thread.run_sync(main, args) == 0
        out = capsys.readouterr()
        assert "admin:********@proxy.example:8443" in out.out and PASSWORD not in out.out + out.err, out


@pytest.mark.parametrize(
    "public_url",
    ["http://host.example:99999", "http://[::1", "http://con\x7ftent.example", "http://content.example/a b", "ftp://content.example",
     f"http://admin:{PASSWORD}@content.example:70000", "https://", "https://content.example/?x=1"],
)
def test_item13_an_invalid_public_url_is_refused_in_one_line(
    public_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_CONTENT_SOURCE__PUBLIC_URL", public_url)
    assert main(["config", "check"]) == 2
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("syncd: error: ") and "content_source.public_url" in lines[0], out
    assert "Traceback" not in out.out + out.err and PASSWORD not in out.out + out.err
