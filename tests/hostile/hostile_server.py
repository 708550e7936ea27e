"""A hostile HTTP server for the tests of issue 11: a small aiohttp app on loopback that sits
in front of the emulator (forwarding what no rule catches) or stands alone, and misbehaves on
the paths it is told to.

    async with HostileServer(upstream=emulator.url) as hostile:
        hostile.on(r"/v1/orgs/[^/]+/spaces", trickle(interval=2.0))
        ...  # point syncd at hostile.url

Rules are regular expressions matched (in full) against the raw request path, without its
query, as it came on the wire (so `%2E%2E` is seen as sent); the first matching rule answers,
`times=N` makes a rule answer only its first N requests. Without a rule the request goes to the
upstream unchanged, or gets a 404 when there is none. `seen` lists every request's method and
raw path (with query); `sent_bytes` counts the body bytes the behaviours streamed.

Behaviours are factories returning the handler; each says in its docstring what it does.
A sync test can run the server on a thread of its own: `with hostile.in_thread(): ...`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from syncd.emulator.server import serve_app

__all__ = [
    "ESCAPES",
    "CliRun",
    "HostileServer",
    "MiB",
    "Rule",
    "answer",
    "bytes_of",
    "deep_json",
    "empty_listing",
    "endless_pages",
    "filler",
    "forward",
    "huge_error",
    "inflate",
    "inject_text",
    "run_cli",
    "trickle",
    "write_config",
]

Behaviour = Callable[[web.Request, "HostileServer"], Awaitable[web.StreamResponse]]

MiB = 1 << 20
_CHUNK = 1 << 16
_HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "transfer-encoding", "upgrade", "content-length", "content-encoding", "host",
    }
)

ESCAPES: tuple[str, ...] = (
    "[/bold]",
    "[bold red]markup[/]",
    "[link=https://evil.example]x[/link]",
    "\x1b[2J",
    "\x1b[31mred\x1b[0m",
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "\x1b]0;window title\x07",
    "\x1b]52;c;aGVsbG8=\x07",
    "\r\x1b[K",
    "\x9b2J",
    "\u202eevil",
)
"""Rich markup, ANSI CSI and OSC sequences (clear screen, colours, hyperlink, window title,
clipboard write), a carriage return, an 8-bit CSI and a right-to-left override."""


@dataclass
class Rule:
    """A path pattern, the behaviour answering it, and how often it fired."""

    pattern: re.Pattern[str]
    behaviour: Behaviour
    method: str | None = None
    times: int | None = None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method != method:
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        return self.pattern.fullmatch(path) is not None


@dataclass
class HostileServer:
    """The server (module docstring). `upstream`: the base URL requests are forwarded to."""

    upstream: str | None = None
    rules: list[Rule] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)
    sent_bytes: int = 0
    url: str = ""
    _session: aiohttp.ClientSession | None = None
    _stack: contextlib.AsyncExitStack | None = None

    # -- rules

    def on(self, pattern: str, behaviour: Behaviour, *, method: str | None = "GET", times: int | None = None) -> Rule:
        """Answer requests whose raw path matches `pattern` with `behaviour` (any method when
        `method` is None); rules added later win over earlier ones."""
        rule = Rule(re.compile(pattern), behaviour, method.upper() if method else None, times)
        self.rules.insert(0, rule)
        return rule

    def clear(self) -> None:
        """Forget every rule: plain forwarding again."""
        self.rules.clear()

    def paths(self, method: str | None = None) -> list[str]:
        """Raw paths (without query) of the requests seen, of one method or all."""
        return [p.split("?", 1)[0] for m, p in self.seen if method is None or m == method]

    # -- life cycle

    async def __aenter__(self) -> HostileServer:
        app = web.Application(client_max_size=64 * MiB)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            self.url = await stack.enter_async_context(serve_app(app))
            self._session = await stack.enter_async_context(
                aiohttp.ClientSession(auto_decompress=True, timeout=aiohttp.ClientTimeout(total=120))
            )
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    @contextlib.contextmanager
    def in_thread(self) -> Iterator[HostileServer]:
        """Serve from an event loop on a thread of its own (for synchronous tests)."""
        ready = threading.Event()
        state: dict[str, Any] = {}

        async def main() -> None:
            stop = asyncio.Event()
            state["loop"], state["stop"] = asyncio.get_running_loop(), stop
            try:
                async with self:
                    ready.set()
                    await stop.wait()
            except BaseException as exc:  # pragma: no cover - reported to the caller
                state["error"] = exc
                ready.set()

        thread = threading.Thread(target=asyncio.run, args=(main(),), name="hostile-server", daemon=True)
        thread.start()
        if not ready.wait(30) or "error" in state:
            raise RuntimeError(f"the hostile server did not start: {state.get('error')!r}")
        try:
            yield self
        finally:
            state["loop"].call_soon_threadsafe(state["stop"].set)
            thread.join(30)

    # -- serving

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = request.raw_path
        self.seen.append((request.method, raw))
        path = raw.split("?", 1)[0]
        for rule in self.rules:
            if rule.matches(request.method, path):
                rule.hits += 1
                return await rule.behaviour(request, self)
        return await forward()(request, self)

    async def fetch(self, request: web.Request) -> tuple[int, Mapping[str, str], bytes]:
        """The upstream's (status, headers, body) for this request (a 404 without upstream)."""
        if self.upstream is None or self._session is None:
            return 404, {"Content-Type": "application/json"}, b'{"error": {"code": 404, "message": "Not Found"}}'
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read()
        target = URL(self.upstream.rstrip("/") + request.raw_path, encoded=True)
        async with self._session.request(
            request.method, target, headers=headers, data=body or None, allow_redirects=False
        ) as upstream:
            raw = await upstream.read()
            kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            return upstream.status, kept, raw

    async def stream(
        self,
        request: web.Request,
        chunks: Iterable[bytes],
        *,
        status: int = 200,
        length: int | None = None,
        content_type: str = "application/json",
        interval: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> web.StreamResponse:
        """Send `chunks` as they come (never joined), with `interval` seconds between them;
        a client that hangs up ends the answer quietly."""
        response = web.StreamResponse(status=status, headers={"Content-Type": content_type, **(headers or {})})
        if length is not None:
            response.content_length = length
        await response.prepare(request)
        try:
            for index, chunk in enumerate(chunks):
                if interval and index:
                    await asyncio.sleep(interval)
                await response.write(chunk)
                self.sent_bytes += len(chunk)
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError, RuntimeError):
            # The client went away (what a refused answer looks like from here).
            pass
        return response


# --------------------------------------------------------------------------- behaviours


def forward() -> Behaviour:
    """Pass the request to the upstream and its answer back unchanged."""

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        status, headers, raw = await server.fetch(request)
        return web.Response(status=status, body=raw, headers=headers)

    return handler


def answer(status: int = 200, body: Any = None, *, raw: bytes | None = None, headers: Mapping[str, str] | None = None) -> Behaviour:
    """A fixed answer: `body` as JSON (or `raw` bytes as they are) with `status`."""
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        return web.Response(status=status, body=data, headers={"Content-Type": "application/json", **(headers or {})})

    return handler


def trickle(interval: float = 2.0, *, body: bytes | None = None, chunk: int = 1, declare_length: bool = True) -> Behaviour:
    """Send the status and headers at once, then the body `chunk` bytes every `interval`
    seconds: never idle long enough for a read timeout, never done. The body is the upstream's
    answer, or `body`; its Content-Length is declared (unless `declare_length=False`)."""

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        if body is None:
            status, headers, raw = await server.fetch(request)
        else:
            status, headers, raw = 200, {}, body
        pieces = [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
        content_type = headers.get("Content-Type", "application/json")
        return await server.stream(
            request, pieces, status=status, length=len(raw) if declare_length else None,
            content_type=content_type, interval=interval,
        )

    return handler


def filler(size: int, byte: bytes = b"x") -> Iterator[bytes]:
    """`size` bytes of `byte` in 64 KiB chunks, made as they are sent."""
    block = byte * _CHUNK
    left = size
    while left > 0:
        yield block[: min(left, _CHUNK)]
        left -= _CHUNK


def inflate(size: int = 200 * MiB, *, declare_length: bool = True, status: int = 200) -> Behaviour:
    """A valid list envelope of exactly `size` bytes, `{"items": [], "pad": "xxx..."}`,
    streamed in 64 KiB chunks and never held whole: an answer too large to take. Content-Length
    is declared unless `declare_length=False` (then chunked: the client has to count)."""
    head, tail = b'{"items": [], "pad": "', b'"}'
    pad = max(0, size - len(head) - len(tail))

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        chunks = itertools.chain([head], filler(pad), [tail])
        return await server.stream(request, chunks, status=status, length=len(head) + pad + len(tail) if declare_length else None)

    return handler


def bytes_of(size: int, *, declare_length: bool = True, content_type: str = "application/octet-stream") -> Behaviour:
    """`size` bytes of filler (a file's download, longer or shorter than it should be)."""

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        return await server.stream(request, filler(size), length=size if declare_length else None, content_type=content_type)

    return handler


def endless_pages(items_per_page: int = 1, *, token_bytes: int = 16) -> Behaviour:
    """A list envelope with a fresh `next.page` token on every page, forever: paging that never
    ends and never repeats a token. Items are `{"id": "loop-N", "title": "loop N"}`."""
    counter = itertools.count()

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        items = []
        for _ in range(items_per_page):
            n = next(counter)
            items.append({"id": f"loop-{n}", "title": f"loop {n}", "name": f"loop {n}"})
        token = (uuid.uuid4().hex * (token_bytes // 32 + 1))[:token_bytes]
        return web.json_response({"items": items, "next": {"page": token}})

    return handler


def empty_listing() -> Behaviour:
    """`{"items": []}` with no next page: a listing that suddenly looks empty."""
    return answer(200, {"items": []})


def _inject(value: Any, fields: frozenset[str], payload: str) -> Any:
    if isinstance(value, dict):
        return {k: (v + payload if k in fields and isinstance(v, str) else _inject(v, fields, payload)) for k, v in value.items()}
    if isinstance(value, list):
        return [_inject(v, fields, payload) for v in value]
    return value


def inject_text(
    payloads: Iterable[str] = ESCAPES, fields: Iterable[str] = ("title", "name", "description", "message", "slug")
) -> Behaviour:
    """Forward to the upstream and append markup and terminal escape sequences (`[/bold]`,
    `\\x1b[2J`, OSC hyperlinks and titles: `ESCAPES` by default) to every string under the
    given keys, at any depth, in JSON answers (error bodies' `message` too). Ids are kept, so
    the answer stays consistent with the rest of the API."""
    payload = "".join(payloads)
    keys = frozenset(fields)

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        status, headers, raw = await server.fetch(request)
        try:
            data = json.loads(raw)
        except ValueError:
            return web.Response(status=status, body=raw, headers=headers)
        body = json.dumps(_inject(data, keys, payload)).encode()
        return web.Response(status=status, body=body, headers={**headers, "Content-Type": "application/json"})

    return handler


def huge_error(status: int = 500, *, message_bytes: int = 5 * MiB, prefix: str = "boom ") -> Behaviour:
    """The documented error body `{"error": {"code", "message"}}` with a message of
    `message_bytes` characters (after `prefix`), streamed without being held whole."""
    head = json.dumps({"error": {"code": status, "message": prefix}})[: -3].encode()  # up to the message's closing quote
    tail = b'"}}'

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        chunks = itertools.chain([head], filler(message_bytes, b"E"), [tail])
        return await server.stream(request, chunks, status=status, length=len(head) + message_bytes + len(tail))

    return handler


def deep_json(depth: int = 200_000, *, status: int = 200, opener: bytes = b"[", closer: bytes = b"]") -> Behaviour:
    """JSON nested `depth` levels deep (`[[[...]]]` by default): valid, and deeper than any
    recursive parser can go."""
    body = opener * depth + closer * depth

    async def handler(request: web.Request, server: HostileServer) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type="application/json")

    return handler


# --------------------------------------------------------------------------- running syncd against it


@dataclass
class CliRun:
    """A finished `syncd` process: exit code, output, wall time and peak RSS (bytes)."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int


def write_config(path: Path, base_url: str, token: str, **settings: Any) -> Path:
    """A TOML configuration with one tenant `src` at `base_url`, plus top-level `settings`
    (tables as dicts); state in `path`'s folder."""
    lines = [f"state_dir = {json.dumps(str(path.parent / 'state'))}"]
    tables: dict[str, Mapping[str, Any]] = {"tenants.src": {"base_url": base_url, "token": token}}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            tables[key] = value
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in table.items())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_cli(
    *args: str, cwd: Path, timeout: float = 120.0, env: Mapping[str, str] | None = None, base_env: Mapping[str, str] | None = None
) -> CliRun:
    """Run `python -m syncd.cli ARGS` to its end (killed after `timeout` s, or when the wait for
    it is interrupted: nothing is left running) and measure it: the peak RSS is that process's
    own (`measured_cli`), read after it exits (0 if it was killed). Its environment is
    `base_env` (default: this process's) with `env` over it."""
    environment = {**(os.environ if base_env is None else base_env), "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        process = subprocess.Popen(measured_cli(peak_file, *args), cwd=cwd, stdout=out, stderr=err, env=environment)
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            process.wait()
        finally:
            timer.cancel()
            if process.returncode is None:
                process.kill()
                process.wait()
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return CliRun(
            process.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
            measured_peak(peak_file),
        )


# The high-water mark of the process's own memory map, written when it exits. Not `wait4`'s
# ru_maxrss: Linux carries the memory map's peak across exec, and subprocess starts the child
# with vfork, whose memory map before exec is the parent's. The parent here is a test worker or a
# bench that served hundreds of megabytes, so ru_maxrss reported the parent's peak.
_RECORD_PEAK = """\
import atexit, runpy, sys
peak_file = sys.argv.pop(1)
def record_peak():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(peak_file, "w") as out:
        out.write(kib)
atexit.register(record_peak)
runpy.run_module("syncd.cli", run_name="__main__", alter_sys=True)
"""


def measured_cli(peak_file: Path, *args: str) -> list[str]:
    """The command that runs `python -m syncd.cli ARGS` and, when it exits, writes its peak
    RSS (KiB, of its own memory map) to `peak_file`."""
    return [sys.executable, "-c", _RECORD_PEAK, str(peak_file), *args]


def measured_peak(peak_file: Path) -> int:
    """The peak RSS in bytes that `measured_cli` wrote (0 when the process was killed)."""
    try:
        return int(peak_file.read_text()) * 1024
    except (FileNotFoundError, ValueError):
        return 0
