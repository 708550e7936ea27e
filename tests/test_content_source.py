"""The content source: a space served under a capability URL while the run lasts, and nothing
else (over real loopback HTTP)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from yarl import URL

from syncd.config import ContentSourceConfig
from syncd.content import ContentSourceError, serve_content
from syncd.copy.model import Snapshot
from syncd.copy.served import site_of_space


def _row(kind: str, row_id: str, data: dict[str, object], parent: tuple[str, str] | None = None, position: int | None = None) -> dict[str, object]:
    return {"kind": kind, "id": row_id, "parent_kind": parent[0] if parent else None, "parent_id": parent[1] if parent else None, "position": position, "data": data}


def snapshot() -> Snapshot:
    return Snapshot.from_rows("src", "O", [
        _row("space", "S", {"title": "Guide"}, ("organization", "O"), 0),
        _row("page", "S/p1", {"title": "Intro", "path": "intro", "description": "Where to start",
                              "markdown": "# Intro\n\nRead [the child](intro/child#usage), see ![diagram](.gitbook/assets/diagram.png).\n"}, ("space", "S"), 0),
        _row("page", "S/p2", {"title": "Child", "path": "intro/child", "emoji": "1f680", "hidden": True, "markdown": "Back to [intro](intro).\n"}, ("page", "S/p1"), 0),
        _row("page", "S/p3", {"title": "Sneaky", "path": "../../etc", "markdown": "x"}, ("space", "S"), 1),
        _row("file", "S/f1", {"name": "diagram.png", "contentType": "image/png", "size": 4, "dimensions": {"width": 640, "height": 480}}, ("space", "S")),
        _row("file", "S/f2", {"name": "gone.pdf", "contentType": "application/pdf", "size": 9}, ("space", "S")),
    ])


async def test_a_space_is_served_under_its_capability_and_nothing_else(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x89PNG")
    site = site_of_space(snapshot(), "S", {"S/f1": blob})
    assert [f.name for f in site.missing_files] == ["gone.pdf"]  # not held: neither served nor linked
    async with serve_content(ContentSourceConfig()) as source, aiohttp.ClientSession() as http:
        url = source.publish("S", site)
        other = source.publish("S", site)
        assert url.startswith(source.public_url + "/") and url.endswith("/S/") and url != other  # one capability each

        async def get(path: str, method: str = "GET") -> tuple[int, str, bytes]:
            target = URL(path if path.startswith("http") else url + path, encoded=True)  # sent as written: no `..` folded away
            async with http.request(method, target) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), await resp.read()

        status, ctype, body = await get("")
        assert status == 200 and ctype.startswith("text/html") and b'<a href="intro/">Intro</a>' in body and b"<main>" not in body
        assert b'<a href="files/diagram.png"><img src="files/diagram.png"' in body and b"gone.pdf" not in body
        status, _, body = await get("intro/")
        page = body.decode()
        assert status == 200 and "<title>Intro</title>" in page and '<meta name="description" content="Where to start">' in page
        assert '<link rel="alternate" type="text/markdown" href="../intro.md">' in page
        assert '<a href="../intro/child/#usage">the child</a>' in page
        assert '<img src="../files/diagram.png" alt="diagram" width="640" height="480" />' in page
        status, ctype, body = await get("intro/child.md")
        assert (status, ctype) == (200, "text/markdown; charset=utf-8")
        assert body.decode() == '---\ntitle: "Child"\nemoji: "1f680"\nhidden: true\n---\nBack to [intro](intro).\n'
        status, ctype, body = await get("files/diagram.png")
        assert (status, ctype, body) == (200, "image/png", b"\x89PNG")
        assert (await get("files/diagram.png", "HEAD"))[0] == 200
        assert (await get("page/", "POST"))[0] == 405
        # Outside a live capability, or trying to step out of the site: 404.
        capability = url.split("/")[-3]
        for path in (
            f"{source.public_url}/", f"{source.public_url}/{capability}/", f"{source.public_url}/nope/S/intro/",
            f"{source.public_url}/{capability}/T/", "files/gone.pdf", "intro", "../../etc/", "etc/", "page/",
            "files/../intro/", "%2e%2e/%2e%2e/etc/passwd", "files/%2e%2e%2fintro/", "..%2f..%2f/", f"{source.public_url}/{capability}/S/../S/intro/",
        ):
            assert (await get(path))[0] == 404, path
        assert (await get("sneaky/"))[0] == 200  # a path that would step out is served under its title
        requests, sent = source.served["S"]
        assert requests == 6 and sent >= len(b"\x89PNG") and source.requests == requests  # what was served, counted per space
        source.withdraw(url)
        assert (await get(""))[0] == 404 and (await get(other))[0] == 200
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):  # the run is over: nothing listens
            await http.get(other)


async def test_a_port_in_use_is_one_clear_error() -> None:
    async with serve_content(ContentSourceConfig()) as first:
        port = int(first.public_url.rsplit(":", 1)[1])
        with pytest.raises(ContentSourceError, match=f"cannot listen on 127.0.0.1:{port}"):
            async with serve_content(ContentSourceConfig(port=port)):
                pass


async def test_the_public_url_is_what_urls_are_made_of() -> None:
    async with serve_content(ContentSourceConfig(public_url="https://content.example.com/syncd/")) as source:
        assert source.publish("S", site_of_space(snapshot(), "S", {})).startswith("https://content.example.com/syncd/")


async def test_a_wildcard_address_is_published_through_loopback() -> None:
    async with serve_content(ContentSourceConfig(host="0.0.0.0")) as source:
        assert source.public_url.startswith("http://127.0.0.1:")


def test_same_titled_pages_are_served_as_numbered_paths() -> None:
    """Pages of one title under one parent get `notes`, `notes-2`, ... (the numbering is
    remembered: linear in their number, issue 41), after the paths already read."""
    rows = [_row("space", "S", {"title": "Guide"}, ("organization", "O"), 0)]
    rows += [_row("page", "S/read", {"title": "Read", "path": "notes-3", "markdown": ""}, ("space", "S"), 0)]
    rows += [_row("page", f"S/p{i}", {"title": "Notes", "markdown": ""}, ("space", "S"), i + 1) for i in range(3000)]
    site = site_of_space(Snapshot.from_rows("src", "O", rows), "S", {})
    assert [page.path for page in site.pages] == ["notes-3", "notes", "notes-2"] + [f"notes-{n}" for n in range(4, 3002)]
