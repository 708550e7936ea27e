"""Talking to a running daemon from the command line (`syncd jobs`, `syncd trigger`, `syncd pause`...).

The daemon's address comes from `state/daemon.json` (written by the running daemon, so a
port chosen at start is found too), else from the configuration's `daemon.host/port`. The
token is `daemon.token` when one is configured, else the one the daemon made at start and
wrote to `daemon.json` (readable by its owner only). Calls that change something say
`Content-Type: application/json`, as the control API requires.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
import anyio

from syncd.config import Settings
from syncd.config.base import local_url
from syncd.errors import SyncdError
from syncd.safe_read import FileRefused, read_regular

__all__ = ["ControlClient", "DaemonUnreachable", "daemon_token", "daemon_url", "local_url"]


DAEMON_INFO_LIMIT = 64 * 1024
"""The most of `daemon.json` read (the daemon writes a few hundred bytes)."""


class DaemonUnreachable(SyncdError):
    exit_code = 3


def _daemon_info(settings: Settings, key: str) -> str | None:
    """A string of the running daemon's `state/daemon.json`, None without a usable one (a FIFO
    or a device there is not waited on nor read without end: `syncd.safe_read`)."""
    try:
        text = read_regular(settings.state_dir / "daemon.json", DAEMON_INFO_LIMIT, "daemon's file", encoding="utf-8")
        value = json.loads(text).get(key)
    except (OSError, ValueError, AttributeError, FileRefused):
        return None
    return value if isinstance(value, str) and value else None


def daemon_url(settings: Settings) -> str:
    url = _daemon_info(settings, "url")
    if url is not None and url.startswith("http"):
        return url
    return local_url(settings.daemon.host, settings.daemon.port)


def daemon_token(settings: Settings) -> str | None:
    """`daemon.token` when configured (it wins), else the token the daemon made, from `daemon.json`."""
    if settings.daemon.token is not None:
        return settings.daemon.token.get_secret_value()
    return _daemon_info(settings, "token")


class ControlClient:
    """A few calls to the control API, with one-line errors."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    @classmethod
    def from_settings(cls, settings: Settings, url: str | None = None) -> ControlClient:
        return cls(url or daemon_url(settings), daemon_token(settings))

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """`method path` (with `body`, a JSON object, on a call that changes something)."""
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout, headers=self._headers) as session,
                session.request(method, self.url + path, **self._body(method, body)) as resp,
            ):
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DaemonUnreachable(
                f"no syncd daemon answers at {self.url} ({type(exc).__name__}); start one with `syncd serve`"
            ) from None
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            raise SyncdError(f"{method} {self.url}{path}: HTTP {status} with a body that is not JSON") from None
        if status >= 400:
            message = body.get("error", {}).get("message") if isinstance(body, dict) else None
            raise SyncdError(f"daemon: {message or f'HTTP {status}'}")
        return body

    @staticmethod
    def _body(method: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """What a call that changes something sends: a JSON object (empty by default), said to be JSON."""
        if method.upper() in ("GET", "HEAD"):
            return {}
        return {"data": json.dumps(body or {}).encode(), "headers": {"Content-Type": "application/json"}}

    async def wait_run(
        self, run_id: int, timeout: float | None, poll: float = 0.5, on_poll: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Poll the run until it ends (or `timeout` seconds pass: a SyncdError); `on_poll` sees
        the run at each poll (its `progress` says where it is)."""
        with anyio.move_on_after(timeout) as scope:
            while True:
                run: dict[str, Any] = await self.call("GET", f"/runs/{run_id}")
                if on_poll is not None:
                    on_poll(run)
                if run["outcome"] not in ("queued", "running"):
                    return run
                await anyio.sleep(poll)
        assert scope.cancelled_caught
        raise SyncdError(f"run {run_id} has not ended after {timeout:g}s (it goes on in the daemon)")
