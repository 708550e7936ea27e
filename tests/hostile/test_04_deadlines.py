"""Issue 11, item 4: every request and every file download has an overall deadline.

A body trickled one byte at a time never trips a read timeout (each byte resets it); before
the fix `syncd sync` hung far past `request_timeout`. Now each attempt (connect, headers and
the whole body) must finish within `request_timeout`, and a file download within its own
deadline. Bounds are generous (a loaded machine must not flake them); the trickles are slow
enough that only a real deadline ends them in time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.api import TenantClient, TransportError
from syncd.config import RetryConfig
from syncd.read.blob_download import download_files
from syncd.read.blobs import BlobStore
from tests.conftest import ALL_TOKEN
from tests.hostile.hostile_server import HostileServer, run_cli, trickle, write_config

SLACK = 5.0
"""What a deadline may overrun by (scheduling, retries' waits): the brief's bound."""
QUICK = RetryConfig(max_attempts=1, initial_wait=0.01, max_wait=0.05)


async def test_item04_a_trickled_body_fails_within_request_timeout() -> None:
    """100 bytes at one every 0.3 s (30 s) against a 1 s deadline: one TransportError, soon."""
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", trickle(0.3, body=b'{"items": []}' + b" " * 87))
        async with TenantClient("src", hostile.url, "trickle-token-1", timeout=1.0, retry=QUICK) as api:
            started = time.monotonic()
            with anyio.fail_after(1.0 + SLACK + 5), pytest.raises(TransportError) as caught:
                await api.get_json("/v1/orgs")
            elapsed = time.monotonic() - started
    assert elapsed < 1.0 + SLACK, elapsed
    error = caught.value
    assert error.retryable and error.attempts == 1
    assert "within 1s" in str(error), str(error)
    assert str(error).startswith("src: GET /v1/orgs: "), str(error)


async def test_item04_retries_of_a_trickled_body_are_bounded_by_attempts_times_deadline() -> None:
    """The retry policy treats a deadline like any timeout: 3 attempts of at most 0.5 s each."""
    retry = RetryConfig(max_attempts=3, initial_wait=0.05, max_wait=0.1)
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", trickle(0.2, body=b'{"items": []}' + b" " * 100))
        async with TenantClient("src", hostile.url, "trickle-token-2", timeout=0.5, retry=retry) as api:
            started = time.monotonic()
            with anyio.fail_after(3 * 0.5 + SLACK + 10), pytest.raises(TransportError) as caught:
                await api.get_json("/v1/orgs")
            elapsed = time.monotonic() - started
    assert caught.value.attempts == 3
    assert len(hostile.seen) == 3
    assert elapsed < 3 * 0.5 + 2 * 0.1 + SLACK, elapsed


async def test_item04_sync_with_a_trickled_listing_ends_in_time(emulator: Any, tmp_path: Path) -> None:
    """`syncd sync` (a process of its own) with request_timeout = 1s, every spaces listing
    trickled: the run ends, partial, with the listings failed, instead of hanging."""
    async with HostileServer(upstream=emulator.url) as hostile:
        hostile.on(r"/v1/orgs/[^/]+/spaces", trickle(0.5))
        config = write_config(
            tmp_path / "syncd.toml", hostile.url, ALL_TOKEN,
            request_timeout="1s", retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.5s"},
        )
        run = await anyio.to_thread.run_sync(lambda: run_cli("sync", "src", "--config", str(config), cwd=tmp_path, timeout=90))
    output = run.stdout + run.stderr
    assert run.returncode not in (-9, 0), (run.returncode, output[-2000:])
    assert "listings failed" in output and "within 1s" in output, output[-2000:]
    # Two organizations, two attempts of 1 s each, short waits; the rest of the crawl is fast.
    # Before the fix the process was still reading when it was killed.
    assert run.seconds < 60, run.seconds


async def test_item04_a_trickled_file_download_fails_within_its_deadline(tmp_path: Path) -> None:
    """A 200-byte file at one byte every 0.3 s (a minute) against a 1 s per-file deadline."""
    async with HostileServer() as hostile:
        hostile.on("/files/slow.bin", trickle(0.3, body=b"x" * 200))
        row = {"kind": "file", "id": "s1/f1", "data": {"downloadURL": hostile.url + "/files/slow.bin?sig=secret", "size": 200, "name": "slow.bin"}}
        store = BlobStore(tmp_path / "blobs")
        started = time.monotonic()
        with anyio.fail_after(1.0 + SLACK + 5):
            report = await download_files([row], store, retries=1, timeout=30.0, deadline=1.0)
        elapsed = time.monotonic() - started
    assert elapsed < 1.0 + SLACK, elapsed
    assert report.downloaded == 0 and "s1/f1" in report.failed
    assert "within 1s" in report.failed["s1/f1"], report.failed
    assert "secret" not in report.failed["s1/f1"]


def test_item04_the_file_deadline_grows_with_the_size_from_a_floor() -> None:
    """Generous but finite: the floor for small files, then at least `min_rate` bytes a second."""
    from syncd.read.blob_download import file_deadline

    assert file_deadline(0, floor=120.0, min_rate=65536) == 120.0
    assert file_deadline(10, floor=120.0, min_rate=65536) == pytest.approx(120.0, abs=0.01)
    assert file_deadline(1 << 30, floor=120.0, min_rate=65536) == pytest.approx(120.0 + 16384.0)
