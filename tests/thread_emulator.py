"""The emulator on a loopback port, served by a thread of the test process: quick to start,
and the test's own code (the CLI in-process, `syncd.cli.main`) can block while it serves.
Change it over HTTP (its API and `/_emulator/` admin routes), as any client would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from datetime import datetime
from typing import Any

import pytest

from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from tests.loopback import http, in_thread

TOKEN = "thread-token"


class ThreadEmulator:
    """A running emulator: `url`, `org_ids`, `api(...)` and `admin(...)` calls (any answer
    >= 300 fails the test)."""

    def __init__(self, url: str, org_ids: list[str], end_outage: Any = None) -> None:
        self.url, self.org_ids = url, org_ids
        self._end_outage = end_outage

    def end_outage(self) -> None:
        """End the emulator's outage now (its admin routes are down with it): a test takes a
        long outage and ends it once its checks are done, so nothing races the clock."""
        self._end_outage()

    def api(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = http(method, self.url + path, TOKEN, body=body)
        assert status < 300, (method, path, status, answer)
        return answer

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = http(method, self.url + "/_emulator" + path, body=body)
        assert status < 300, (method, path, status, answer)
        return answer

    def items(self, path: str) -> list[dict[str, Any]]:
        return list(self.api("GET", path + ("&" if "?" in path else "?") + "limit=1000")["items"])


@contextmanager
def thread_emulator(spec: str, seed: int = 3, clock: datetime | None = None, **options: Any) -> Iterator[ThreadEmulator]:
    """Serve a generated emulator (`spec` as for `--generate`) until the block ends. `clock`: the
    emulator's time stays there (`Store.freeze_clock`), so what the API changes gets the same
    timestamps on every run (wall time otherwise)."""
    store = Store(seed=seed)
    generated = generate(store, parse_spec(spec), seed=seed, all_token=TOKEN)
    store.freeze_clock(clock)
    with in_thread(lambda: serve_emulator(store, **options), "thread-emulator") as (running, loop):
        yield ThreadEmulator(running.url, list(generated.org_ids), lambda: loop.call_soon_threadsafe(running.listener.end_outage))


def module_thread_emulator(spec: str) -> Any:
    """A module-scoped `emulator` fixture serving `spec` (`emulator = module_thread_emulator(SPEC)`)."""

    @pytest.fixture(scope="module")
    def emulator() -> Iterator[ThreadEmulator]:
        with thread_emulator(spec) as running:
            yield running

    return emulator


def command_folder(monkeypatch: pytest.MonkeyPatch, folder: Path, url: str, token: str = "all") -> Path:
    """`folder` as the working directory of `syncd` commands whose tenant EMU is the emulator at
    `url` (with `token`), whose state is in `folder/state`, and whose output has no colours."""
    monkeypatch.chdir(folder)
    use_tenants(monkeypatch, url, folder / "state", "EMU", token=token)
    monkeypatch.setenv("NO_COLOR", "1")
    return folder


def use_tenants(monkeypatch: pytest.MonkeyPatch, url: str, state: Any, *names: str, token: str = TOKEN) -> None:
    """The environment of a `syncd` whose tenants `names` (default SRC) are the emulator at `url`,
    with `token` (this emulator's all-organizations one by default), and whose state is in `state`."""
    for name in names or ("SRC",):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", token)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(state))
