"""Helpers for the content server's in-process tests: raw HTTP/1.1 connections on loopback
(asyncio streams, so a test can stop reading, send half a header or go away mid-response) and
a watch on the event loop, so an exception in the server's connection callbacks fails a test
instead of only being printed."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.content import ContentSource, ServedFile, SitePage, SpaceSite

BOUND = 5.0
"""Seconds any wait of these tests may take: far under mutmut's limit, so a server that hangs
fails the test (killed) instead of running into mutmut's timeout."""

_TCP_ESTABLISHED = 1
"""tcpi_state of an established connection (linux/tcp_states.h)."""


def path_of(url: str) -> str:
    """The request target of a capability URL (`/CAPABILITY/SPACE/...`)."""
    return "/" + url.split("/", 3)[3]


def port_of(source: ContentSource) -> int:
    return source.server.port


def guard_of(source: ContentSource) -> Any:
    assert source.server.guard is not None
    return source.server.guard


async def until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(BOUND):
        while not check():
            await anyio.sleep(0.01)


class Raw:
    """One HTTP/1.1 connection to the content server, written and read by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int, receive_buffer: int | None = None) -> Raw:
        sock = socket.socket()
        sock.setblocking(False)
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=receive_buffer or 2**16)
        return cls(reader, writer)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def ask(self, target: str, method: str = "GET") -> None:
        self.send(f"{method} {target} HTTP/1.1\r\nHost: content.example\r\n\r\n".encode())

    async def answer(self, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        """The next response: status, headers (names in lower case), body."""
        with anyio.fail_after(BOUND):
            head = await self.reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:] if line)}
            length = int(headers.get("content-length", "0"))
            body = b"" if method == "HEAD" else await self.reader.readexactly(length)
        return int(lines[0].split()[1]), headers, body

    async def request(self, target: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        self.ask(target, method)
        return await self.answer(method)

    async def closed(self) -> int:
        """Read until the server ends the connection (EOF or reset); the bytes read."""
        got = 0
        with anyio.fail_after(BOUND):
            try:
                while data := await self.reader.read(1 << 16):
                    got += len(data)
            except ConnectionResetError:
                pass
        return got

    def established(self) -> bool:
        """Whether the connection is still open both ways, as this side's kernel sees it (Linux),
        read or not: a server that aborts it makes it CLOSE at once, one that closes it makes
        it CLOSE_WAIT once all it sent was read, no sooner."""
        sock = self.writer.get_extra_info("socket")
        try:
            return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == _TCP_ESTABLISHED)
        except OSError:  # this side noticed the end already and closed its socket
            return False

    def reset(self) -> None:
        """Go away at once: a reset, not a polite close."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    def close(self) -> None:
        self.writer.transport.abort()


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[str]]:
    """Exceptions raised in the loop's callbacks (a protocol's connection_made/lost) or logged
    by aiohttp while handling a request: none may occur."""
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(str(context.get("exception") or context.get("message"))))

    class Errors(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            errors.append(f"{record.name}: {record.getMessage()}")

    handler = Errors(logging.ERROR)
    aiohttp_log = logging.getLogger("aiohttp")
    aiohttp_log.addHandler(handler)
    try:
        yield errors
        await anyio.sleep(0.05)  # callbacks of connections closed at the end of the test
    finally:
        loop.set_exception_handler(previous)
        aiohttp_log.removeHandler(handler)
    assert not errors, errors


def small_site(tmp_path: Path, files: dict[str, tuple[str, bytes]] | None = None) -> SpaceSite:
    """A space with a page `intro` and the files given (name -> content type, bytes)."""
    served = []
    for name, (content_type, data) in (files or {}).items():
        blob = tmp_path / f"blob-{len(served)}"
        blob.write_bytes(data)
        served.append(ServedFile(name, content_type, len(data), blob))
    return SpaceSite("S", [SitePage("intro", "Intro", "# Intro\n\nhello\n")], served)


def big_site(tmp_path: Path, size: int) -> SpaceSite:
    """A space with one sparse file of `size` bytes (`files/big.bin`)."""
    blob = tmp_path / "big.bin"
    with blob.open("wb") as out:
        out.truncate(size)
    return SpaceSite("Big", [SitePage("intro", "Intro", "# Intro\n")], [ServedFile("big.bin", "application/octet-stream", size, blob)])
