"""File binaries: content-addressed blobs, verified sizes, retries, idempotent re-runs, no credentials."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from syncd.emulator import revisions
from syncd.emulator.server import serve_app
from syncd.read import blobs as blobs_module
from syncd.read.blob_download import download_files
from syncd.read.blobs import BlobError, BlobRefused, BlobStore
from tests.conftest import Api

FAST = {"initial_wait": 0.001, "max_wait": 0.01}


async def file_rows(api: Api, org_id: str) -> list[dict[str, Any]]:
    """StateStore-shaped rows of every file of an organization's spaces and change requests."""
    rows = []
    for space in await api.all_items(f"/v1/orgs/{org_id}/spaces"):
        for item in await api.all_items(f"/v1/spaces/{space['id']}/content/files"):
            rows.append({"kind": "file", "id": f"{space['id']}/{item['id']}", "data": item})
        for cr in await api.all_items(f"/v1/spaces/{space['id']}/change-requests", status="draft"):
            path = f"/v1/spaces/{space['id']}/change-requests/{cr['id']}/content/files"
            for item in await api.all_items(path):
                rows.append({"kind": "change-request-file", "id": f"{cr['id']}/{item['id']}", "data": item})
    return rows


def expected_bytes(data: dict[str, Any]) -> bytes:
    """What the emulator serves for a file: derived from the blob id in its URL."""
    blob = urlsplit(data["downloadURL"]).path.split("/")[2]
    return revisions.file_bytes({"blob": blob, "size": data["size"]})


async def test_downloads_every_file_once_and_verifies_it(api: Api, org_id: str, tmp_path: Path) -> None:
    rows = await file_rows(api, org_id)
    assert any(r["kind"] == "change-request-file" for r in rows) and len(rows) > 4
    store = BlobStore(tmp_path / "blobs")
    async with aiohttp.ClientSession() as session:
        report = await download_files(rows, store, session=session, **FAST)
    assert report.ok and report.downloaded == len(rows) and report.skipped == 0
    distinct = {r["data"]["downloadURL"]: r["data"]["size"] for r in rows}
    assert report.bytes == sum(distinct.values()), "files sharing a URL are fetched once"
    manifest = json.loads(store.manifest_path.read_text())
    assert set(manifest) == {r["id"] for r in rows}
    for row in rows:
        content = expected_bytes(row["data"])
        entry = manifest[row["id"]]
        assert entry == {
            "sha256": hashlib.sha256(content).hexdigest(),
            "size": len(content),
            "name": row["data"]["name"],
            "contentType": row["data"]["contentType"],
        }
        path = store.path_for(entry["sha256"])
        assert path.read_bytes() == content and path.parent.name == entry["sha256"][:2]
    first = store.manifest_path.read_bytes()

    again = await download_files(rows, store, **FAST)
    assert (again.downloaded, again.skipped, again.bytes, again.failed) == (0, len(rows), 0, {})
    assert store.manifest_path.read_bytes() == first

    lost = manifest[rows[0]["id"]]["sha256"]
    store.path_for(lost).unlink()
    repaired = await download_files(rows, store, **FAST)
    assert repaired.downloaded >= 1 and repaired.downloaded + repaired.skipped == len(rows)
    assert store.has(lost, manifest[rows[0]["id"]]["size"])
    assert store.manifest_path.read_bytes() == first
    assert not list((store.root / ".tmp").iterdir())


# ----- a file server that misbehaves on purpose ------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def file_server(handler: Handler) -> AbstractAsyncContextManager[str]:
    """A file server on a free loopback port answering every path with `handler`."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return serve_app(app)


def payload(name: str, size: int = 5000) -> bytes:
    return (hashlib.sha256(name.encode()).digest() * (size // 32 + 1))[:size]


def row(base: str, name: str, size: int = 5000, kind: str = "file") -> dict[str, Any]:
    data = {"id": name, "name": f"{name}.bin", "contentType": "application/octet-stream", "size": size,
            "downloadURL": f"{base}/{name}?signature=secret-{name}"}  # fmt: skip
    return {"kind": kind, "id": f"space/{name}", "data": data}


async def test_retries_transient_failures_and_sends_no_credentials(tmp_path: Path) -> None:
    hits: Counter[str] = Counter()
    headers_seen: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        name = request.path.strip("/")
        hits[name] += 1
        headers_seen.append(dict(request.headers))
        if name == "moved":
            raise web.HTTPFound("/plain")
        if name == "loop":
            raise web.HTTPFound("/loop?signature=secret-loop")
        if name == "flaky" and hits[name] == 1:
            return web.Response(status=500, text="boom")
        if name == "limited" and hits[name] == 1:
            return web.Response(status=429, headers={"Retry-After": "0"})
        if name == "truncated" and hits[name] == 1:
            response = web.StreamResponse(headers={"Content-Length": "5000"})
            await response.prepare(request)
            await response.write(payload(name)[:1000])
            assert request.transport is not None
            request.transport.close()
            return response
        if name == "missing":
            return web.Response(status=404)
        return web.Response(body=payload("plain" if name == "plain" else name))

    async with file_server(handler) as base:
        rows = [row(base, n) for n in ("flaky", "limited", "truncated", "plain", "missing", "loop")]
        moved = row(base, "moved")
        rows.append(moved)
        store = BlobStore(tmp_path / "blobs")
        report = await download_files(rows, store, retries=3, **FAST)
    assert set(report.failed) == {"space/missing", "space/loop"} and report.failed["space/missing"] == "HTTP 404"
    assert "TooManyRedirects" in report.failed["space/loop"] and "secret" not in report.failed["space/loop"]
    assert report.downloaded == 5
    assert hits["missing"] == 1, "a 404 is not retried"
    assert (hits["flaky"], hits["limited"], hits["truncated"]) == (2, 2, 2)
    assert all("Authorization" not in h and "authorization" not in {k.lower() for k in h} for h in headers_seen)
    manifest = store.manifest()
    assert manifest["space/moved"]["sha256"] == manifest["space/plain"]["sha256"], "same bytes, one blob"
    assert "space/missing" not in manifest

    with pytest.raises(ValueError, match="credentials"):
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer test-token"}) as session:
            await download_files(rows, store, session=session)


async def test_a_wrong_size_is_never_stored(tmp_path: Path) -> None:
    hits: Counter[str] = Counter()

    async def handler(request: web.Request) -> web.StreamResponse:
        name = request.path.strip("/")
        hits[name] += 1
        body = payload(name)
        return web.Response(body=body[:4000] if name == "short" else body + b"extra" if name == "long" else body)

    async with file_server(handler) as base:
        rows = [row(base, "short"), row(base, "long"), row(base, "fine")]
        store = BlobStore(tmp_path / "blobs")
        report = await download_files(rows, store, retries=3, **FAST)
    assert set(report.failed) == {"space/short", "space/long"}
    assert "4000 bytes" in report.failed["space/short"] and "declared size 5000" in report.failed["space/long"]
    assert hits["short"] == hits["long"] == 3
    assert report.downloaded == 1 and report.bytes == 5000
    blobs = [p for p in store.root.rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert [p.read_bytes() for p in blobs] == [payload("fine")]
    assert set(store.manifest()) == {"space/fine"}


async def test_changed_file_is_fetched_again_and_concurrency_is_bounded(tmp_path: Path) -> None:
    in_flight = 0
    peak = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.01)
            name = request.path.strip("/")
            size = int(request.query.get("size", "5000"))
            return web.Response(body=payload(name, size))
        finally:
            in_flight -= 1

    async with file_server(handler) as base:
        rows = [row(base, f"f{i}") for i in range(12)]
        store = BlobStore(tmp_path / "blobs")
        assert (await download_files(rows, store, concurrency=3, **FAST)).downloaded == 12
        assert peak <= 3
        changed = row(base, "f0", size=700)
        changed["data"]["downloadURL"] += "&size=700"
        report = await download_files([changed, *rows[1:]], store, **FAST)
    assert (report.downloaded, report.skipped) == (1, 11)
    assert store.manifest()["space/f0"]["size"] == 700


def test_store_paths_and_a_broken_manifest(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    digest = hashlib.sha256(b"x").hexdigest()
    assert store.path_for(digest) == tmp_path / digest[:2] / digest[2:]
    for bad in ("../../etc/passwd", digest.upper(), digest[:10]):
        with pytest.raises(ValueError):
            store.path_for(bad)
    assert store.manifest() == {}
    store.manifest_path.write_text("{not json")
    with pytest.raises(BlobError, match="unreadable"):
        store.manifest()


def put_blob(store: BlobStore, content: bytes) -> tuple[str, Path]:
    digest = hashlib.sha256(content).hexdigest()
    path = store.path_for(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return digest, path


def test_a_blob_is_used_only_as_a_regular_file_holding_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BlobStore(tmp_path / "blobs")
    hashed: list[str] = []
    real_hash = blobs_module.hash_stream
    monkeypatch.setattr(blobs_module, "hash_stream", lambda stream: hashed.append("x") or real_hash(stream))
    digest, path = put_blob(store, b"the backed-up bytes")
    assert store.verify(digest, 19) == path and store.verify(digest, 19) == path
    assert len(hashed) == 1, "a blob is hashed once while it stays the same file"
    with store.open(digest, 19) as stream:
        assert stream.read() == b"the backed-up bytes"

    other = tmp_path / "other"
    other.write_bytes(b"X" * 19)
    os.replace(other, path)  # another file of the same size: hashed again, refused
    with pytest.raises(BlobRefused, match="hash to") as refused:
        store.verify(digest, 19)
    assert refused.value.kind == "hash" and len(hashed) == 2 and not store.has(digest, 19)
    assert store.present(digest, 19)  # a dry run's look: a regular file of the size

    secret = tmp_path / "secret.toml"
    secret.write_bytes(b"the backed-up bytes")  # even the right bytes, behind a link, are refused
    path.unlink()
    path.symlink_to(secret)
    for use in (lambda: store.verify(digest, 19), lambda: store.open(digest, 19)):
        with pytest.raises(BlobRefused, match="symbolic link") as refused:
            use()
        assert refused.value.kind == "symlink"
    assert not store.present(digest, 19) and not store.has(digest, 19)

    path.unlink()
    os.mkfifo(path)  # opened as a file, a FIFO waits for a writer forever
    with pytest.raises(BlobRefused, match=r"not a regular file \(a FIFO\)"):
        store.verify(digest, 0)
    path.unlink()
    path.mkdir()
    with pytest.raises(BlobRefused, match=r"not a regular file \(a directory\)"):
        store.verify(digest, 0)
    path.rmdir()
    with pytest.raises(BlobRefused, match="is missing") as refused:
        store.verify(digest, 19)
    assert refused.value.kind == "missing"

    # The blob's folder a link to a folder elsewhere holding the right bytes: refused too.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / path.name).write_bytes(b"the backed-up bytes")
    path.parent.rmdir()
    path.parent.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(BlobRefused, match="folder that is a symbolic link") as refused:
        store.verify(digest, 19)
    assert refused.value.kind == "symlink"


def test_storing_a_download_replaces_a_link_never_writes_through_it(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    content = b"downloaded bytes"
    digest = hashlib.sha256(content).hexdigest()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"not to be touched")
    path = store.path_for(digest)
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    temporary = store.open_temporary()
    temporary.write_bytes(content)
    assert store.store(temporary, digest) == path
    assert not path.is_symlink() and path.read_bytes() == content
    assert victim.read_bytes() == b"not to be touched"
    assert store.verify(digest, len(content)) == path
