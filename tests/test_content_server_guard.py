"""The content server's guard, in process (issue 26: what the mutation check found untested).

The guard bounds what slow or silent clients can hold: at most `max_connections` connections
(a new one takes the place of the one without a request that waited longest, half a header
before silence before a client), a header within `header_timeout`, the next one within
`idle_timeout`, and a response whose reader stalls cut after `idle_timeout`. Raw loopback
connections against the real server, small deadlines, no timing assertions: every wait is a
poll bounded by `BOUND`."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from syncd.config import ContentSourceConfig
from syncd.content import serve_content
from tests.content_server_support import Raw, big_site, guard_of, loop_errors, path_of, port_of, small_site, until

__all__ = ["loop_errors"]  # the fixture, used by name

BIG = 16 * 1024 * 1024
"""A file larger than what loopback's buffers hold: its sender waits for a reader that stalls."""


async def test_at_the_cap_half_a_header_goes_first_then_silence_oldest_first_then_a_client(tmp_path: Path, loop_errors: list[str]) -> None:
    config = ContentSourceConfig(max_connections=3, header_timeout=60, idle_timeout=60)
    async with serve_content(config) as source:
        url = source.publish("S", small_site(tmp_path))
        port, guard = port_of(source), guard_of(source)
        client = await Raw.connect(port)
        assert (await client.request(path_of(url) + "intro/"))[0] == 200  # a client, idle now
        silent = await Raw.connect(port)
        await until(lambda: len(guard.open) == 2)
        half = await Raw.connect(port)
        half.send(b"GET / HTTP/1.1\r\n")
        await until(lambda: len(guard.open) == 3 and any(c.partial for c in guard.open.values()))

        newer_silent = await Raw.connect(port)  # half a header goes first, though newer than silence
        assert await half.closed() == 0
        await until(lambda: guard.rejected == 1 and len(guard.open) == 3)
        newest_silent = await Raw.connect(port)  # then the silent one that waited longest
        assert await silent.closed() == 0
        await until(lambda: guard.rejected == 2 and len(guard.open) == 3)
        last = await Raw.connect(port)  # silence still goes before a client
        assert await newer_silent.closed() == 0
        await until(lambda: guard.rejected == 3 and len(guard.open) == 3)

        assert (await client.request(path_of(url)))[0] == 200  # the client kept its connection
        for raw in (client, newest_silent, last, half, silent, newer_silent):
            raw.close()
        # Closed connections are forgotten, by the guard and by aiohttp's own list.
        await until(lambda: not guard.open and not guard.connections)
        assert guard.rejected == 3 and guard.timed_out == 0 and guard.max_open == 3


async def test_at_the_cap_the_client_idle_longest_makes_room_even_if_another_is_midway_through_its_next_header(
    tmp_path: Path, loop_errors: list[str]
) -> None:
    config = ContentSourceConfig(max_connections=2, header_timeout=60, idle_timeout=60)
    async with serve_content(config) as source:
        url = source.publish("S", small_site(tmp_path))
        port, guard = port_of(source), guard_of(source)
        first, second = await Raw.connect(port), await Raw.connect(port)
        await until(lambda: len(guard.open) == 2)
        # The second to connect is the first to be answered: it has been idle the longest.
        for raw in (second, first):
            assert (await raw.request(path_of(url) + "intro/"))[0] == 200
            await until(lambda: not any(c.busy for c in guard.open.values()))
        first.send(b"GET " + path_of(url).encode() + b" HTTP/1.1\r\nHo")  # half of its next header
        await anyio.sleep(0.1)  # its bytes are in (a client that spoke once stays a client)
        third = await Raw.connect(port)
        # A connection whose requests were all answered makes room: the one idle longest.
        assert await second.closed() == 0
        first.send(b"st: content.example\r\n\r\n")
        status, _, _ = await first.answer()
        assert status == 200 and guard.rejected == 1
        assert (await third.request(path_of(url) + "intro.md"))[0] == 200
        for raw in (first, second, third):
            raw.close()


async def test_at_the_cap_with_every_connection_busy_a_new_one_is_closed_at_once(tmp_path: Path, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig(max_connections=1, header_timeout=60, idle_timeout=60)) as source:
        url = source.publish("S", big_site(tmp_path, BIG)) + "files/big.bin"
        guard = guard_of(source)
        reader = await Raw.connect(port_of(source), receive_buffer=4096)
        reader.ask(path_of(url))
        assert (await reader.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        extra = await Raw.connect(port_of(source))
        assert await extra.closed() == 0
        assert guard.rejected == 1 and list(guard.open.values())[0].busy == 1 and guard.max_open == 1
        reader.close()


async def test_a_kept_alive_client_has_the_idle_timeout_between_requests_not_the_header_deadline(
    tmp_path: Path, loop_errors: list[str]
) -> None:
    async with serve_content(ContentSourceConfig(header_timeout=0.3, idle_timeout=30)) as source:
        url = source.publish("S", small_site(tmp_path))
        port, guard = port_of(source), guard_of(source)
        client, silent = await Raw.connect(port), await Raw.connect(port)
        assert (await client.request(path_of(url) + "intro/"))[0] == 200
        assert await silent.closed() == 0  # no header in time: closed
        assert guard.timed_out == 1
        await anyio.sleep(0.4)  # past the header deadline of its connection, within the idle timeout
        assert (await client.request(path_of(url) + "intro/"))[0] == 200
        assert guard.timed_out == 1 and len(guard.open) == 1
        client.close()


async def test_an_idle_kept_alive_connection_is_cut_by_the_guard_after_the_idle_timeout(tmp_path: Path, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig(header_timeout=30, idle_timeout=0.3)) as source:
        url = source.publish("S", small_site(tmp_path))
        guard = guard_of(source)
        # aiohttp closes a connection kept alive that long, too: leave that to the guard alone.
        guard.handler_options["keepalive_timeout"] = 60
        clients = [await Raw.connect(port_of(source)) for _ in range(2)]
        for client in clients:
            assert (await client.request(path_of(url)))[0] == 200
        for client in clients:
            assert await client.closed() == 0
        assert guard.timed_out == 2 and not guard.open


async def test_a_reader_that_stops_reading_is_cut_after_the_idle_timeout_and_counted(tmp_path: Path, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig(concurrency=2, header_timeout=30, idle_timeout=0.3)) as source:
        url = source.publish("S", big_site(tmp_path, BIG)) + "files/big.bin"
        guard = guard_of(source)
        readers = [await Raw.connect(port_of(source), receive_buffer=4096) for _ in range(2)]
        for reader in readers:
            reader.ask(path_of(url))
            assert (await reader.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        # Neither reads on: each response is cut, counted once.
        await until(lambda: guard.timed_out == 2)
        for reader in readers:
            assert await reader.closed() < BIG
        await until(lambda: not guard.open and source.server.limiter.borrowed_tokens == 0)
        assert guard.timed_out == 2


async def test_a_reader_that_goes_away_mid_response_is_not_counted_as_timed_out(tmp_path: Path, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig(header_timeout=30, idle_timeout=30)) as source:
        url = source.publish("S", big_site(tmp_path, BIG)) + "files/big.bin"
        guard = guard_of(source)
        reader = await Raw.connect(port_of(source), receive_buffer=4096)
        reader.ask(path_of(url))
        assert (await reader.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        await until(lambda: any(c.busy for c in guard.open.values()))
        reader.reset()
        await until(lambda: not guard.open and source.server.limiter.borrowed_tokens == 0)
        assert guard.timed_out == 0 and guard.rejected == 0
        # The server serves on.
        other = await Raw.connect(port_of(source))
        status, headers, _ = await other.request(path_of(url), "HEAD")
        assert status == 200 and headers["content-length"] == str(BIG)
        other.close()


async def test_a_request_waiting_for_its_turn_whose_client_goes_away_is_forgotten(tmp_path: Path, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig(concurrency=1, header_timeout=60, idle_timeout=60)) as source:
        url = source.publish("S", big_site(tmp_path, BIG)) + "files/big.bin"
        guard, limiter = guard_of(source), source.server.limiter
        slow = await Raw.connect(port_of(source), receive_buffer=4096)
        slow.ask(path_of(url))
        assert (await slow.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        waiting = await Raw.connect(port_of(source))
        waiting.ask(path_of(url))
        await until(lambda: limiter.statistics().tasks_waiting == 1)
        waiting.reset()  # gone while its request waits: no deadline of its own runs, none to cancel
        await until(lambda: len(guard.open) == 1)
        slow.close()
        await until(lambda: not guard.open and limiter.borrowed_tokens == 0 and not limiter.statistics().tasks_waiting)
        other = await Raw.connect(port_of(source))
        assert (await other.request(path_of(url), "HEAD"))[0] == 200
        other.close()


@pytest.mark.parametrize("stop_with", ["a slow reader", "a silent connection"])
async def test_the_end_of_the_last_run_closes_every_connection(tmp_path: Path, loop_errors: list[str], stop_with: str) -> None:
    async with serve_content(ContentSourceConfig(header_timeout=60, idle_timeout=60)) as source:
        url = source.publish("S", big_site(tmp_path, BIG)) + "files/big.bin"
        guard = guard_of(source)
        raw = await Raw.connect(port_of(source), receive_buffer=4096)
        if stop_with == "a slow reader":
            raw.ask(path_of(url))
            assert (await raw.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
            await until(lambda: any(c.busy for c in guard.open.values()))
        else:
            await until(lambda: len(guard.open) == 1)
    # Nothing is left to drain or to wait for: the connection ends with the run, though its
    # client reads nothing (a close would wait for it to read what is still buffered).
    await until(lambda: not raw.established())
    assert await raw.closed() < BIG
    raw.close()


WHOLE = {
    "CRLF": [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"],
    "LF": [b"GET / HTTP/1.1\nHost: x\n\n"],
    "split in the blank line": [b"GET / HTTP/1.1\r\nHost: x\r\n\r", b"\n"],
    "split before the blank line": [b"GET / HTTP/1.1\r\nHost: x\r\n", b"\r\n"],
    "split after its first byte": [b"GET / HTTP/1.1\r\nHost: x\r", b"\n\r\n"],
    "byte by byte": [bytes([byte]) for byte in b"GET / HTTP/1.1\r\n\r\n"],
}
HALF = {
    "a header line": [b"GET / HTTP/1.1\r\nHost: x\r\n"],
    "line ends never doubled": [b"GET / HTTP/1.1\r\n", b"Host: x\r\n", b"Accept: */*\r"],
    "three bytes": [b"GET"],
}


async def test_the_blank_line_that_ends_a_first_header_is_found_however_its_bytes_are_split(loop_errors: list[str]) -> None:
    """What `heard` makes of the bytes of a connection's first header, given to it as they
    would arrive (the connections stay silent: aiohttp never sees these bytes)."""
    async with serve_content(ContentSourceConfig(max_connections=64, header_timeout=60)) as source:
        guard = guard_of(source)
        for name, pieces in [*WHOLE.items(), *HALF.items()]:
            raw = await Raw.connect(port_of(source))
            await until(lambda: len(guard.open) == 1)
            [(handler, connection)] = guard.open.items()
            for piece in pieces:
                guard.heard(handler, piece)
            if name in WHOLE:
                assert (connection.spoke, connection.partial, connection.tail) == (True, False, b""), name
                guard.heard(handler, b"GET /next HTT")  # a client's next header is no concern of `heard`
                assert (connection.spoke, connection.partial, connection.tail) == (True, False, b""), name
            else:
                assert (connection.spoke, connection.partial, connection.tail) == (False, True, b"".join(pieces)[-3:]), name
            raw.close()
            await until(lambda: not guard.open)
        guard.heard(object(), b"GET / HTTP/1.1\r\n\r\n")  # a connection the guard closed already: nothing to do
