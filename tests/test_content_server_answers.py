"""The content server's answers, its log and counts, and its sharing between runs, in process
(issue 26: what the mutation check found untested): status lines, headers and bodies as a
client reads them over loopback, the `content.*` log events as JSON lines."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp
import anyio
import pytest
from aiohttp import web
from yarl import URL

from syncd.config import ContentSourceConfig
from syncd.content import ContentServer, ContentSource, ContentSourceError, ServedFile, SitePage, SpaceSite, serve_content
from syncd.content import server as server_module
from syncd.logging import MASK, redact_text
from tests.content_server_support import BOUND, Raw, loop_errors, path_of, port_of, small_site, until
from tests.log_support import logged_to_buffer

__all__ = ["loop_errors"]  # the fixture, used by name

HINT = " (another process serves content there: give each process its own port, or 0 for a free one)"


@pytest.fixture
def events() -> Iterator[io.StringIO]:
    """The log as JSON lines, debug included (`logged(buffer)` reads it back)."""
    with logged_to_buffer("json", "debug") as buffer:
        yield buffer


def logged(buffer: io.StringIO, event: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in buffer.getvalue().splitlines() if line.startswith("{")]
    return [{k: v for k, v in line.items() if k not in ("timestamp", "logger", "level", "event")} for line in lines if line.get("event") == event]


# ----- answers ---------------------------------------------------------------------------------


async def test_answers_carry_their_headers_and_a_404_says_not_found(tmp_path: Path, loop_errors: list[str]) -> None:
    site = small_site(tmp_path, {"one.txt": ("text/plain", b"x")})
    async with serve_content(ContentSourceConfig()) as source:
        url = source.publish("S", site)
        raw = await Raw.connect(port_of(source))
        status, headers, body = await raw.request(path_of(url) + "nope/")
        assert (status, body) == (404, b"not found\n")
        assert headers["cache-control"] == "no-store" and headers["x-content-type-options"] == "nosniff"
        status, headers, body = await raw.request(path_of(url) + "intro/", "POST")
        assert status == 405 and headers["allow"] == "GET, HEAD"
        status, headers, body = await raw.request(path_of(url) + "files/one.txt")
        assert (status, body) == (200, b"x")  # one byte: the last byte is sent too
        assert headers["cache-control"] == "no-store" and headers["x-content-type-options"] == "nosniff"
        # A query string is no part of the path, whatever it holds.
        for query in ("?x=1", "?x=1?y=2", "?"):
            assert (await raw.request(path_of(url) + "intro/" + query))[0] == 200, query
        # HEAD: the length of what GET sends, no body; the connection serves on.
        status, headers, _ = await raw.request(path_of(url) + "intro/", "HEAD")
        _, get_headers, page = await raw.request(path_of(url) + "intro/")
        assert status == 200 and headers["content-length"] == get_headers["content-length"] == str(len(page))
        status, headers, _ = await raw.request(path_of(url) + "files/one.txt", "HEAD")
        assert (status, headers["content-length"]) == (200, "1")
        assert (await raw.request(path_of(url) + "intro.md"))[2].startswith(b"---\ntitle:")
        raw.close()


async def test_a_dot_dot_segment_is_never_served_even_if_the_site_has_such_a_path(loop_errors: list[str]) -> None:
    site = SpaceSite("S", [SitePage("../etc", "Out", "x"), SitePage("in/../etc", "Deep", "x"), SitePage("ok", "Ok", "x")], [])
    async with serve_content(ContentSourceConfig()) as source:
        url = source.publish("S", site)
        raw = await Raw.connect(port_of(source))
        for tail in ("../etc/", "in/../etc/", "../etc.md", "%2e%2e/etc/", "%2E%2E/etc/", "in/%2e%2e/etc/", "in%2F..%2Fetc/"):
            assert (await raw.request(path_of(url) + tail))[0] == 404, tail
        assert (await raw.request(path_of(url) + "ok/"))[0] == 200
        raw.close()


async def test_a_large_file_is_read_in_chunks_and_the_connection_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loop_errors: list[str]) -> None:
    size = 2 * server_module.CHUNK + 5
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    reads: list[int | None] = []
    original = server_module._open_regular

    class Recording:
        """The blob as opened, telling what each read asks for."""

        def __init__(self, file: BinaryIO) -> None:
            self.file = file

        def read(self, n: int | None = None) -> bytes:
            reads.append(n)
            return self.file.read(n)

        def __enter__(self) -> Recording:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

    def recording(path: Path) -> tuple[Any, int]:
        file, length = original(path)
        return Recording(file), length

    monkeypatch.setattr(server_module, "_open_regular", recording)
    async with serve_content(ContentSourceConfig()) as source:
        url = source.publish("S", small_site(tmp_path, {"large.bin": ("application/octet-stream", data)}))
        raw = await Raw.connect(port_of(source))
        status, headers, body = await raw.request(path_of(url) + "files/large.bin")
        assert status == 200 and headers["content-length"] == str(size) and body == data
        assert reads and set(reads) == {server_module.CHUNK}  # never the whole file at once
        assert (await raw.request(path_of(url) + "intro/"))[0] == 200  # the same connection, kept alive
        raw.close()


ONCE = [(b"", [b""]), (b"abc", [b"abc"]), (b"0123456789", [b"0123", b"4567", b"89"])]


@pytest.mark.parametrize(("body", "chunks"), ONCE, ids=["empty", "one-chunk", "three-chunks"])
async def test_a_document_is_sent_in_chunks_of_at_most_chunk_bytes_then_nothing(
    body: bytes, chunks: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_send` reads a document as it reads a file: chunks that are the body, then b"" (read
    past the end: the file got shorter). CHUNK made small, so that no test holds a large body."""
    monkeypatch.setattr(server_module, "CHUNK", 4)
    chunk = server_module._once(body)
    assert [await chunk() for _ in chunks] == chunks
    assert (await chunk(), await chunk()) == (b"", b"")


@pytest.mark.parametrize(
    ("stored", "sent"),
    [
        ("text/plain; charset=utf-8", "text/plain; charset=utf-8"),
        ("image/x\x01y", "application/octet-stream"),
        ("image/x\x1fy", "application/octet-stream"),
        ("image/x\x7fy", "application/octet-stream"),
        ("image/x\x80y", "image/x\x80y"),
        ("application/" + "x" * 188, "application/" + "x" * 188),  # 200 characters
        ("application/" + "x" * 189, "application/octet-stream"),  # 201
    ],
    ids=["plain", "control", "unit-separator", "delete", "latin-1", "200-characters", "201-characters"],
)
async def test_a_stored_content_type_is_sent_unless_it_could_split_a_header(tmp_path: Path, stored: str, sent: str) -> None:
    async with serve_content(ContentSourceConfig()) as source:
        url = source.publish("S", small_site(tmp_path, {"f": (stored, b"data")}))
        raw = await Raw.connect(port_of(source))
        status, headers, body = await raw.request(path_of(url) + "files/f")
        assert (status, headers["content-type"], body) == (200, sent.encode("utf-8").decode("latin-1"), b"data")
        raw.close()


async def test_no_access_log_line_is_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """aiohttp's access log would carry every capability URL asked for."""
    caplog.set_level(logging.DEBUG, logger="aiohttp.access")
    async with serve_content(ContentSourceConfig()) as source, aiohttp.ClientSession() as http:
        url = source.publish("S", small_site(tmp_path))
        async with http.get(url + "intro/") as response:
            assert response.status == 200
    assert [record for record in caplog.records if record.name.startswith("aiohttp.access")] == []


# ----- what is logged and counted ---------------------------------------------------------------


async def test_each_answer_is_logged_and_counted_and_the_stop_line_sums_them(tmp_path: Path, events: io.StringIO, loop_errors: list[str]) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"secret")
    link = tmp_path / "link"
    link.symlink_to(target)
    site = small_site(tmp_path, {"a.bin": ("application/octet-stream", b"abc")})
    site.files["link.bin"] = ServedFile("link.bin", "application/octet-stream", 6, link)
    async with serve_content(ContentSourceConfig()) as source:
        url = source.publish("S", site)
        raw = await Raw.connect(port_of(source))
        sizes = [len((await raw.request(path_of(url) + tail))[2]) for tail in ("", "intro/", "intro.md", "files/a.bin")]
        assert (await raw.request(path_of(url) + "files/link.bin"))[:3:2] == (404, b"not found\n")  # a link is not followed
        assert (await raw.request(path_of(url) + "nope/"))[0] == 404
        assert source.served == {"S": [4, sum(sizes)]} and source.requests == 4 and source.bytes_sent == sum(sizes)
        assert (source.server.requests, source.server.bytes_sent) == (5, sum(sizes))  # the link's request counts, not its bytes
        max_open = source.server.guard.max_open if source.server.guard else None
        raw.close()
    served = logged(events, "content.served")
    assert served == [
        {"space": "S", "path": path, "bytes": size} for path, size in zip(("/", "intro/", "intro.md", "files/a.bin"), sizes, strict=True)
    ]
    [refused] = logged(events, "content.file_not_served")
    assert (refused["space"], refused["path"]) == ("S", "files/link.bin") and "symbolic link" in refused["reason"], refused
    assert logged(events, "content.stopped") == [
        {"requests": 5, "bytes": sum(sizes), "max_open": max_open, "rejected": 0, "timed_out": 0}
    ] and max_open == 1


async def test_the_stop_line_tells_timeouts_and_refusals_alone_and_an_unused_server_says_nothing(events: io.StringIO, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig()):
        pass
    assert logged(events, "content.stopped") == []
    async with serve_content(ContentSourceConfig(header_timeout=0.2)) as source:
        silent = await Raw.connect(port_of(source))
        assert await silent.closed() == 0
    assert logged(events, "content.stopped") == [{"requests": 0, "bytes": 0, "max_open": 1, "rejected": 0, "timed_out": 1}]
    async with serve_content(ContentSourceConfig(max_connections=1, header_timeout=60)) as source:
        first = await Raw.connect(port_of(source))
        await until(lambda: bool(source.server.guard and source.server.guard.open))
        second = await Raw.connect(port_of(source))
        assert await first.closed() == 0
        await until(lambda: bool(source.server.guard and source.server.guard.rejected))
        second.close()
    assert logged(events, "content.stopped")[1:] == [{"requests": 0, "bytes": 0, "max_open": 1, "rejected": 1, "timed_out": 0}]


# ----- the run's view: publish, withdraw -------------------------------------------------------


async def test_a_capability_is_32_random_bytes_under_the_public_url_masked_while_it_lives(tmp_path: Path) -> None:
    config = ContentSourceConfig(public_url="https://tunnel.example.com/PREFIX/")
    async with serve_content(config) as source:
        url = source.publish("S", small_site(tmp_path))
        capability = url.split("/")[-3]
        assert url == f"https://tunnel.example.com/PREFIX/{capability}/S/"
        assert len(base64.urlsafe_b64decode(capability + "=")) == 32
        assert capability not in redact_text(url) and MASK in redact_text(url)
        source.withdraw(url)
        source.withdraw(url)  # twice, or a URL never published: nothing to do
        source.withdraw("https://tunnel.example.com/PREFIX/unknown/S/")
        source.withdraw("https://tunnel.example.com/PREFIX/")
        assert redact_text(capability) == capability  # dead: no longer masked (the set does not grow)
        assert source.sites == {} and source.server.sites == {}
        # A run's view made by hand (not through the config, which trims it too): the same form.
        by_hand = ContentSource(source.server, "https://other.example.com/p/")
        url = by_hand.publish("S", small_site(tmp_path))
        assert url == f"https://other.example.com/p/{url.split('/')[-3]}/S/"
        by_hand.withdraw_all()


async def test_a_space_name_is_one_segment_of_its_url(tmp_path: Path, loop_errors: list[str]) -> None:
    async with serve_content(ContentSourceConfig()) as source, aiohttp.ClientSession() as http:
        url = source.publish("a/b c", small_site(tmp_path))
        assert url.endswith("/a%2Fb%20c/")
        async with http.get(URL(url + "intro/", encoded=True)) as response:
            assert response.status == 200
            body = await response.read()
        assert source.served == {"a/b c": [1, len(body)]}


async def test_the_sites_of_a_run_that_ends_are_withdrawn_while_another_run_keeps_the_server(tmp_path: Path) -> None:
    config = ContentSourceConfig()
    async with serve_content(config) as holder, aiohttp.ClientSession() as http:
        async with serve_content(config) as run:
            assert run.server is holder.server
            url = run.publish("S", small_site(tmp_path))
            async with http.get(url) as response:
                assert response.status == 200
        async with http.get(url) as response:
            assert response.status == 404
        assert holder.server.sites == {}


# ----- one server per address ------------------------------------------------------------------


async def _refused(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return True
    writer.close()
    return False


async def test_overlapping_runs_share_one_server_until_the_last_one_leaves(tmp_path: Path) -> None:
    config = ContentSourceConfig()
    entered = [anyio.Event(), anyio.Event()]
    leave = [anyio.Event(), anyio.Event()]
    urls: list[str] = []
    servers: list[ContentServer] = []

    async def run(i: int) -> None:
        async with serve_content(config) as source:
            servers.append(source.server)
            urls.append(source.publish("S", small_site(tmp_path)))
            entered[i].set()
            await leave[i].wait()

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group, aiohttp.ClientSession() as http:
            group.start_soon(run, 0)
            await entered[0].wait()
            group.start_soon(run, 1)
            await entered[1].wait()
            assert servers[0] is servers[1]
            leave[0].set()  # the first run (which started the server) leaves first
            await until(lambda: len(servers[1].sites) == 1)
            async with http.get(urls[1]) as response:
                assert response.status == 200
            leave[1].set()
    assert await _refused(servers[0].port)
    assert not [key for key in server_module._SHARED if key[0] is asyncio.get_running_loop()]


async def test_runs_one_after_another_each_start_the_server_anew(tmp_path: Path) -> None:
    config = ContentSourceConfig()
    with anyio.fail_after(BOUND):
        async with serve_content(config) as first:
            pass
        async with serve_content(config) as second, aiohttp.ClientSession() as http:
            assert second.server is not first.server
            async with http.get(second.publish("S", small_site(tmp_path))) as response:
                assert response.status == 200
    assert await _refused(second.server.port)


@pytest.fixture
async def gated_stop(monkeypatch: pytest.MonkeyPatch) -> tuple[anyio.Event, anyio.Event]:
    """ContentServer.stop waits for the second event once it has set the first."""
    entered, gate = anyio.Event(), anyio.Event()
    original = ContentServer.stop

    async def stop(self: ContentServer) -> None:
        entered.set()
        await gate.wait()
        await original(self)

    monkeypatch.setattr(ContentServer, "stop", stop)
    return entered, gate


async def test_a_run_that_starts_while_the_last_one_stops_the_server_gets_a_new_one(
    tmp_path: Path, gated_stop: tuple[anyio.Event, anyio.Event]
) -> None:
    entered, gate = gated_stop
    config = ContentSourceConfig()
    servers: list[ContentServer] = []
    statuses: list[int] = []

    async def first() -> None:
        async with serve_content(config) as source:
            servers.append(source.server)

    async def second() -> None:
        async with serve_content(config) as source, aiohttp.ClientSession() as http:
            servers.append(source.server)
            async with http.get(source.publish("S", small_site(tmp_path))) as response:
                statuses.append(response.status)

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await entered.wait()  # the first run's server is stopping
            group.start_soon(second)
            await anyio.sleep(0.05)  # the second waits for that
            assert not statuses
            gate.set()
    assert statuses == [200] and servers[0] is not servers[1]


async def test_a_run_cancelled_while_its_server_stops_still_stops_it(gated_stop: tuple[anyio.Event, anyio.Event]) -> None:
    entered, gate = gated_stop
    ports: list[int] = []

    async def run() -> None:
        async with serve_content(ContentSourceConfig()) as source:
            ports.append(port_of(source))

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await entered.wait()
            group.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)  # the cancellation reaches the stopping run
                gate.set()
    assert await _refused(ports[0])


# ----- a server that cannot start --------------------------------------------------------------


@pytest.fixture
async def gated_listen(monkeypatch: pytest.MonkeyPatch) -> tuple[anyio.Event, list[BaseException]]:
    """aiohttp's TCPSite.start waits for the event, then raises what the list holds, if anything."""
    gate, fail_with = anyio.Event(), list[BaseException]()
    original = web.TCPSite.start

    async def start(self: web.TCPSite) -> None:
        await gate.wait()
        if fail_with:
            raise fail_with[0]
        await original(self)

    monkeypatch.setattr(web.TCPSite, "start", start)
    return gate, fail_with


async def _two_at_once(config: ContentSourceConfig, gate: anyio.Event) -> list[BaseException]:
    """Two runs that need `config`'s server at once: the second waits for the first's start."""
    errors: list[BaseException] = []

    async def run() -> None:
        try:
            async with serve_content(config):
                pass
        except BaseException as exc:  # noqa: BLE001 (what each run got is the test's point)
            errors.append(exc)

    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await anyio.sleep(0.05)
            group.start_soon(run)
            await anyio.sleep(0.05)
            gate.set()
    return errors


async def test_a_port_in_use_fails_both_runs_that_wanted_it_in_one_line_then_a_free_port_serves(
    gated_listen: tuple[anyio.Event, list[BaseException]],
) -> None:
    gate, _ = gated_listen
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        errors = await _two_at_once(ContentSourceConfig(port=port), gate)
    assert len(errors) == 2 and all(isinstance(exc, ContentSourceError) for exc in errors), errors
    first, second = (str(exc) for exc in errors)
    assert first == second, (first, second)  # the one that waited says what the first was told
    assert first.startswith(f"content source: cannot listen on 127.0.0.1:{port}: ") and first.endswith(HINT), first
    assert "address already in use" in first.lower() and "[Errno" not in first, first
    async with serve_content(ContentSourceConfig(port=port)) as source:
        assert port_of(source) == port


async def test_a_start_that_fails_otherwise_is_a_content_source_error_for_the_run_that_waited(
    gated_listen: tuple[anyio.Event, list[BaseException]],
) -> None:
    gate, fail_with = gated_listen
    fail_with.append(RuntimeError("no sockets left"))
    errors = await _two_at_once(ContentSourceConfig(), gate)
    assert [type(exc) for exc in errors] == [RuntimeError, ContentSourceError], errors
    assert str(errors[1]) == "content source: no sockets left"
    fail_with.clear()
    async with serve_content(ContentSourceConfig()) as source:  # the failed start left nothing behind
        assert port_of(source) > 0


async def test_an_address_not_of_this_machine_fails_without_the_hint_of_a_fixed_port() -> None:
    with pytest.raises(ContentSourceError) as failed:
        async with serve_content(ContentSourceConfig(host="192.0.2.1")):
            pass
    message = str(failed.value)
    assert message.startswith("content source: cannot listen on 192.0.2.1:0: ") and "(another process" not in message, message
    assert "[Errno" not in message and message.endswith("cannot assign requested address"), message
