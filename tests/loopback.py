"""Blocking loopback HTTP for tests that run syncd or the emulator as processes of their own:
plain functions that call and poll, like a user's scripts and monitoring would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from syncd.emulator.process import EmulatorProcess
from tests.cli_zygote import emulator_process
from tests.oracle import copied_view

T = TypeVar("T")


def http(method: str, url: str, token: str | None = None, timeout: float = 10.0, body: Any = None) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one call; connection errors raise."""
    data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "PUT") else None)
    request = urllib.request.Request(url, method=method, data=data)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    if "json" in ctype:
        return status, json.loads(raw)
    return status, raw.decode()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; a timeout is a test failure."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except (OSError, ValueError, KeyError) as exc:
            last_error, value = exc, None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last error: {last_error})")


class EmulatorClient:
    """An emulator process's admin routes and API (with one token); any answer >= 300 fails."""

    def __init__(self, url: str, report: dict[str, Any], token: str) -> None:
        self.url, self.report, self.token = url, report, token
        self.orgs = [o["id"] for o in report["organizations"]]

    def _call(self, method: str, path: str, body: Any, token: str | None) -> Any:
        status, answer = http(method, self.url + path, token, body=body)
        assert status < 300, (method, path, status, answer)
        return answer if answer != "" else None

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, path, body, None)

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        return self._call(method, path, body, token or self.token)

    def dump(self, org: str) -> dict[str, list[tuple[str, Any]]]:
        """The copied view of the organization's canonical dump (see `tests.oracle`)."""
        return copied_view(self.admin("GET", f"/_emulator/orgs/{org}/dump"), html_only=self.reads_html_only())

    def reads_html_only(self) -> bool:
        """Whether the serving profile's website importer reads pages from their HTML alone."""
        return self.profile_row("import-reads-markdown-alternate") == "divergent"

    def profile_row(self, row: str) -> str:
        """Which behaviour the serving profile plays at open point `row`: default or divergent."""
        from syncd.emulator.profile import divergent_rows, get_profile

        profile = get_profile(self.admin("GET", "/_emulator/info")["profile"])
        return "divergent" if row in divergent_rows(profile) else "default"

    def writes(self) -> int:
        stats = self.admin("GET", "/_emulator/stats")
        return sum(r["count"] for r in stats["routes"] if r["method"] in ("POST", "PUT", "PATCH", "DELETE"))


class SharedEmulators(contextlib.ExitStack):
    """Emulator processes a module's tests share, one per profile, each started on first use and
    reset to its start (`POST /_emulator/reset`) before every later test: each test sees what a
    fresh process would serve, without the start (a second or more of CPU, most of a short
    test's). One that a test left stopped is started again. Stops them all on exit."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = options
        self.running: dict[str, EmulatorProcess] = {}

    def fresh(self, profile: str) -> EmulatorProcess:
        running = self.running.get(profile)
        if running is not None and running.process.poll() is None:
            status, answer = http("POST", running.url + "/_emulator/reset")
            assert status == 200, ("reset", status, answer)
            return running
        running = self.enter_context(emulator_process(profile=profile, resettable=True, **self.options))
        self.running[profile] = running
        return running


@contextlib.contextmanager
def in_thread(serving: Callable[[], contextlib.AbstractAsyncContextManager[T]], name: str) -> Iterator[tuple[T, asyncio.AbstractEventLoop]]:
    """Enter `serving()` (a server's async context) in an event loop of a thread of its own,
    for a synchronous test; yields what it gives and that loop, and leaves it when the block ends."""
    started = threading.Event()
    found: dict[str, Any] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        found["stop"] = (asyncio.get_running_loop(), stop)
        try:
            async with serving() as value:
                found["value"] = value
                started.set()
                await stop.wait()
        finally:
            started.set()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name=name, daemon=True)
    thread.start()
    assert started.wait(30) and "value" in found, f"{name} did not start"
    loop, stop = found["stop"]
    try:
        yield found["value"], loop
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
