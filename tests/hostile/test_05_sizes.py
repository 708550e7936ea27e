"""Issue 11, item 5: sizes are bounded.

- An answer over `max_answer_bytes` is refused while it is read (never buffered past the cap;
  a Content-Length over the cap is refused before reading), as one error naming the path and
  the cap, not retried.
- A file download longer than the file's declared size is cut.
- Error text that is kept or printed (the API's message, run stats, logs) is capped at a few KB.
- Paging stops after `max_pages_per_listing` pages, and its repeated-token guard keeps a
  bounded amount of memory whatever the tokens' length.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.api import AnswerTooLarge, ApiError, PagingError, Paginator, TenantClient, make_global_limiter
from syncd.api.errors import MESSAGE_LIMIT
from syncd.config import RetryConfig, Settings
from syncd.read.blob_download import download_files
from syncd.read.blobs import BlobStore
from tests.conftest import ALL_TOKEN
from tests.hostile.hostile_server import (
    MiB,
    HostileServer,
    bytes_of,
    endless_pages,
    huge_error,
    inflate,
    run_cli,
    write_config,
)

FAST = RetryConfig(max_attempts=4, initial_wait=0.01, max_wait=0.02)


# ----------------------------------------------------------------------------- answers


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
async def test_item05_an_answer_over_the_cap_is_one_error_and_not_retried(declare_length: bool) -> None:
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", inflate(40 * MiB, declare_length=declare_length))
        async with TenantClient("src", hostile.url, "size-token-1", retry=FAST, max_answer_bytes=4 * MiB) as api:
            with pytest.raises(AnswerTooLarge) as caught:
                await api.get_json("/v1/orgs")
    error = caught.value
    text = str(error)
    assert "\n" not in text and len(text) < 400, text
    assert "GET /v1/orgs" in text and "4 MiB" in text and "max_answer_bytes" in text, text
    assert error.attempts == 1 and len(hostile.seen) == 1 and not error.retryable
    assert (error.status, error.method, error.path, error.tenant, error.may_have_applied) == (200, "GET", "/v1/orgs", "src", False)
    assert api.stats.too_large == 1
    limit = "answer larger than the 4 MiB limit (max_answer_bytes): "
    if declare_length:
        assert error.message == f"{limit}refused from its Content-Length ({40 * MiB} bytes), unread" and api.stats.bytes_received == 0, text
    else:
        assert error.message == f"{limit}refused while reading", text


async def test_item05_a_write_whose_answer_is_over_the_cap_may_have_applied() -> None:
    """The request went and the service may have done it: the error says so, and counts."""
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs/o/collections", inflate(8 * MiB, declare_length=False), method="POST")
        async with TenantClient("src", hostile.url, "size-token-3", retry=FAST, max_answer_bytes=MiB) as api:
            for _ in range(2):
                with pytest.raises(AnswerTooLarge) as caught:
                    await api.request("POST", "/v1/orgs/o/collections", json={"title": "t"})
                assert caught.value.may_have_applied is True and caught.value.method == "POST"
    assert api.stats.too_large == 2 and len(hostile.seen) == 2
    # Never read much past the cap (the rest stays in socket buffers or is never sent).
    assert api.stats.bytes_received <= 4 * MiB
    assert hostile.sent_bytes < 40 * MiB


async def test_item05_an_answer_just_under_the_cap_is_taken() -> None:
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", inflate(MiB - 10, declare_length=False))
        async with TenantClient("src", hostile.url, "size-token-2", retry=FAST, max_answer_bytes=MiB) as api:
            data = await api.get_json("/v1/orgs")
    assert data["items"] == [] and len(data["pad"]) > MiB - 100


async def test_item05_an_error_answer_over_the_cap_keeps_its_status() -> None:
    """A 503 with a huge body is still a 503 (retried as such), its body not read whole."""
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", inflate(20 * MiB, declare_length=False, status=503))
        async with TenantClient("src", hostile.url, "size-token-3", retry=FAST, max_answer_bytes=4 * MiB) as api:
            with pytest.raises(ApiError) as caught:
                await api.get_json("/v1/orgs")
    assert caught.value.status == 503 and caught.value.attempts == FAST.max_attempts
    assert len(str(caught.value)) < 4 * 1024


async def test_item05_sync_of_a_200mb_answer_fails_in_one_line_with_bounded_memory(emulator: Any, org_id: str, tmp_path: Path) -> None:
    """`syncd sync` (a process of its own, default cap 64 MiB) meets a 200 MB spaces listing,
    chunked (the client has to count): one line says what was refused; peak RSS < 250 MB."""
    async with HostileServer(upstream=emulator.url) as hostile:
        hostile.on(r"/v1/orgs/[^/]+/spaces", inflate(200 * MiB, declare_length=False))
        config = write_config(
            tmp_path / "syncd.toml", hostile.url, ALL_TOKEN,
            retry={"max_attempts": 3, "initial_wait": "0.1s", "max_wait": "0.5s"},
        )
        run = await anyio.to_thread.run_sync(lambda: run_cli("sync", f"src:{org_id}", "--config", str(config), cwd=tmp_path, timeout=120))
    output = run.stdout + run.stderr
    assert "Traceback" not in output, output[-3000:]
    # One log line for the refusal (and the run's report names the listing it could not read).
    refusals = [line for line in run.stderr.splitlines() if "max_answer_bytes" in line]
    assert len(refusals) == 1, output[-3000:]
    assert f"/v1/orgs/{org_id}/spaces" in refusals[0] and "64 MiB" in refusals[0], refusals
    assert len(refusals[0]) < 1000, refusals
    assert "1 listings failed" in output and f"could not read /v1/orgs/{org_id}/spaces" in run.stdout, output[-2000:]
    assert hostile.paths().count(f"/v1/orgs/{org_id}/spaces") == 1  # not retried
    assert 0 < run.peak_rss < 250 * 1000 * 1000, f"peak RSS {run.peak_rss / MiB:.0f} MiB"


# ----------------------------------------------------------------------------- files


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
async def test_item05_a_file_longer_than_its_declared_size_is_cut(tmp_path: Path, declare_length: bool) -> None:
    async with HostileServer() as hostile:
        hostile.on("/files/big.bin", bytes_of(50 * MiB, declare_length=declare_length))
        row = {"kind": "file", "id": "s1/f1", "data": {"downloadURL": hostile.url + "/files/big.bin", "size": 1000, "name": "big.bin"}}
        store = BlobStore(tmp_path / "blobs")
        report = await download_files([row], store, retries=2, initial_wait=0.01, max_wait=0.02)
    assert report.downloaded == 0 and report.bytes == 0
    reason = report.failed["s1/f1"]
    if declare_length:
        # Refused from the header: not a byte of the body is read.
        assert "Content-Length 52428800" in reason and "1000" in reason, reason
    else:
        assert "more bytes than the declared size 1000" in reason, reason
    assert hostile.sent_bytes < 2 * 20 * MiB, hostile.sent_bytes
    assert not [p for p in (tmp_path / "blobs").rglob("*") if p.is_file() and p.name != "manifest.json"]


# ----------------------------------------------------------------------------- error text


async def test_item05_a_5mb_error_message_is_cut_with_a_marker() -> None:
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", huge_error(400, message_bytes=5 * MiB))
        async with TenantClient("src", hostile.url, "size-token-4", retry=FAST) as api:
            with pytest.raises(ApiError) as caught:
                await api.get_json("/v1/orgs")
    error = caught.value
    assert error.status == 400
    assert len(error.message) <= MESSAGE_LIMIT + 100, len(error.message)
    assert error.message.startswith("boom EEEE")
    assert re.search(r"more characters? cut\]$", error.message), error.message[-200:]
    assert len(str(error)) < 4 * 1024 and len(repr(error)) < 4 * 1024


def test_item05_error_messages_of_any_source_are_capped() -> None:
    error = ApiError("x" * 1_000_000, method="GET", path="/v1/orgs")
    assert len(error.message) <= MESSAGE_LIMIT + 100
    assert error.message.endswith("[998000 more characters cut]"), error.message[-100:]
    short = ApiError("a short message")
    assert short.message == "a short message"


async def test_item05_run_stats_and_log_of_a_5mb_error_stay_small(emulator: Any, tmp_path: Path) -> None:
    """Before: a 42 MB run-stats entry and 42 MB of log. Now a few KB per failed listing."""
    async with HostileServer(upstream=emulator.url) as hostile:
        hostile.on(r"/v1/orgs/[^/]+/spaces", huge_error(400, message_bytes=5 * MiB))
        config = write_config(tmp_path / "syncd.toml", hostile.url, ALL_TOKEN, retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.2s"})
        run = await anyio.to_thread.run_sync(lambda: run_cli("sync", "src", "--config", str(config), cwd=tmp_path, timeout=120))
    output = run.stdout + run.stderr
    assert "2 listings failed" in output, output[-2000:]
    assert len(output) < 64 * 1024, len(output)
    assert max(len(line) for line in output.splitlines()) < 8 * 1024
    with sqlite3.connect(tmp_path / "state" / "syncd.db") as db:
        stats = [json.loads(row[0]) for row in db.execute("select stats from runs")]
    assert stats and all(len(json.dumps(s)) < 32 * 1024 for s in stats), [len(json.dumps(s)) for s in stats]
    errors = [e for s in stats for e in s.get("errors", [])]
    assert errors and all("more characters cut]" in e for e in errors), errors


# ----------------------------------------------------------------------------- paging


async def test_item05_endless_paging_stops_at_max_pages_per_listing() -> None:
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", endless_pages())
        settings = Settings.model_validate(
            {
                "tenants": {"src": {"base_url": hostile.url, "token": "paging-token-1"}},
                "max_pages_per_listing": 25,
                "retry": {"max_attempts": 2, "initial_wait": 0.01, "max_wait": 0.02},
            }
        )
        async with TenantClient.from_settings(settings, "src", make_global_limiter(settings)) as api:
            pages = 0
            with pytest.raises(PagingError) as caught:
                async for _ in api.paginate("/v1/orgs"):
                    pages += 1
    assert pages == 24 and len(hostile.seen) == 25
    text = str(caught.value)
    assert "25 pages" in text and "max_pages_per_listing" in text and "/v1/orgs" in text, text


def test_item05_the_default_page_guard_is_ten_thousand_pages() -> None:
    assert Settings().max_pages_per_listing == 10_000
    assert Settings().max_answer_bytes == 64 * MiB


def test_item05_the_repeated_token_guard_has_bounded_memory() -> None:
    """10,000 pages of 2 KB tokens: keeping the tokens took 20 MB; their digests take < 3 MB."""
    pager = Paginator(path="/v1/x", max_pages=10_001)
    tokens = (f"{n:08d}" + "t" * 2000 for n in range(10_000))
    tracemalloc.start()
    try:
        for token in tokens:
            pager.update({"items": [], "next": {"page": token}})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * MiB, f"{peak / MiB:.1f} MiB"
    with pytest.raises(PagingError, match="repeated a page token"):
        pager.update({"items": [], "next": {"page": "00000007" + "t" * 2000}})
