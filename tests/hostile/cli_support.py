"""What the hostile CLI cases of items 6-8 share: `syncd` as a process of its own (bytes out,
a chosen umask), the emulator as a process, a tiny server that answers what a case tells it
to, and small file systems (tmpfs) that are full or read-only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests import cli_zygote
from tests.loopback import http

TOKEN = "hostile-token"
HOSTILE_TEXT = (
    "[/bold][bold red]markup[/][link=https://evil.example]x[/link]"  # rich markup
    "\x1b[2J\x1b[31mred\x1b[0m"  # CSI: clear the screen, colours
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"  # OSC 8: a hyperlink
    "\x1b]0;window title\x07\x1b]52;c;aGVsbG8=\x07"  # OSC: window title, clipboard write
    "\r\x1b[K\x9b2J\u202eevil"  # carriage return, 8-bit CSI, right-to-left override
)
"""Text a server may put in any title or message: markup, escape sequences, controls."""
#: What must never reach a terminal from server text: ESC and BEL (bytes, never part of a
#: UTF-8 character), and the 8-bit CSI and OSC (characters, once decoded).
_RETRY_NOTICE = re.compile(r"\[warning *\] retry \d+/\d+ in ")
"""A retry said on stderr (`syncd.api.client.retry_notice`): not the command's error line."""
TERMINAL_BYTES = (b"\x1b", b"\x07")
TERMINAL_CHARACTERS = ("\x9b", "\x9d")


@dataclass
class Ran:
    """One `syncd` process: exit code and the bytes it wrote."""

    args: tuple[str, ...]
    code: int
    out: bytes
    err: bytes

    @property
    def stdout(self) -> str:
        return self.out.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.err.decode(errors="replace")

    def show(self) -> str:
        return f"syncd {' '.join(self.args)} -> {self.code}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"

    def assert_clean(self) -> None:
        """No traceback, and no terminal control byte, on either stream."""
        both = self.out + self.err
        assert b"Traceback" not in both, self.show()
        for control in TERMINAL_BYTES:
            assert control not in both, (control, self.show())
        for character in TERMINAL_CHARACTERS:
            assert character not in both.decode(errors="replace"), (character, self.show())

    def one_line_error(self, code: int) -> str:
        """The exit code is `code` and stderr is one `syncd: error:` line (progress log
        lines and retry notices aside): that line."""
        self.assert_clean()
        assert self.code == code, self.show()
        lines = [
            line for line in self.stderr.splitlines()
            if line.strip() and "[info" not in line and "[debug" not in line and not _RETRY_NOTICE.search(line)
        ]  # fmt: skip
        assert len(lines) == 1 and lines[0].startswith("syncd: error: "), self.show()
        return lines[0]


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without SYNCD_* (a developer's own settings), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCD_")}
    env.update({"COLUMNS": "300", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"})
    env.update(extra)
    return env


def run_cli(*args: str | Path, env: dict[str, str], cwd: Path, umask: int = 0o022, timeout: float = 300) -> Ran:
    """`syncd ARGS` as a process of its own started with `umask` (022 unless told), not on a
    terminal (forked from the suite's CLI zygote: tests/cli_zygote.py)."""
    argv = tuple(str(a) for a in args)
    done = cli_zygote.run(argv, env=env, cwd=cwd, umask=umask, timeout=timeout)
    return Ran(argv, done.returncode, done.stdout, done.stderr)


class EmulatorProcess:
    """`syncd emulator serve` with generated organizations, in a process of its own."""

    def __init__(self, generate: str) -> None:
        self.proc = cli_zygote.launch(
            ["emulator", "serve", "--port", "0", "--json", "--token", TOKEN, "--rate-limit", "0", "--generate", generate],
            env=clean_env(),
        )  # fmt: skip
        assert self.proc.stdout is not None
        with self.proc.stdout:  # the report, then nothing the test reads
            report = json.loads(self.proc.stdout.readline())
        self.url: str = report["url"]
        self.org_ids: list[str] = [org["id"] for org in report["organizations"]]

    def call(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = http(method, self.url + path, TOKEN, body=body)
        assert status < 300, (method, path, status, answer)
        return answer

    def items(self, path: str) -> list[dict[str, Any]]:
        return list(self.call("GET", path + "?limit=1000")["items"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def module_emulator(generate: str) -> Any:
    """A module-scoped `emulator` fixture: one emulator process, generated from `generate`,
    for the tests of a module (`emulator = module_emulator(GENERATE)`)."""

    @pytest.fixture(scope="module")
    def emulator() -> Iterator[EmulatorProcess]:
        running = EmulatorProcess(generate)
        try:
            yield running
        finally:
            running.stop()

    return emulator


class Server:
    """An HTTP server on loopback, in a thread of its own: `answer(pattern, status, body)`
    makes requests whose path (without query) matches `pattern` get `body` (JSON, or bytes as
    they are); the latest rule that matches wins, anything else is a 404."""

    def __init__(self) -> None:
        self.rules: list[tuple[re.Pattern[str], int, bytes]] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="cli-support-server", daemon=True)

    def answer(self, pattern: str, status: int, body: Any) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.rules.insert(0, (re.compile(pattern), status, raw))

    async def _handle(self, request: web.Request) -> web.Response:
        for pattern, status, raw in self.rules:
            if pattern.fullmatch(request.path):
                return web.Response(status=status, body=raw, content_type="application/json")
        return web.json_response({"error": {"code": 404, "message": "Not Found"}}, status=404)

    async def _start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    def __enter__(self) -> Server:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


def tenant_env(url: str, state_dir: Path, token: str = TOKEN) -> dict[str, str]:
    """The environment of a `syncd` that knows one tenant, `src`, at `url`."""
    return clean_env(
        SYNCD_TENANTS__SRC__BASE_URL=url,
        SYNCD_TENANTS__SRC__TOKEN=token,
        SYNCD_STATE_DIR=str(state_dir),
    )


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    """A fresh tmpfs of `size` (e.g. `256k`), unmounted afterwards; the case is skipped,
    with the reason, where mounting is impossible (not root, no mount permission)."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    with tempfile.TemporaryDirectory(prefix="syncd-tmpfs-") as top:
        point = Path(top) / "fs"
        point.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(point)],
                                 capture_output=True, text=True)  # fmt: skip
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
        try:
            yield point
        finally:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def remount_read_only(point: Path) -> None:
    done = subprocess.run(["mount", "-o", "remount,ro", str(point)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {done.stderr.strip() or done.returncode}")
