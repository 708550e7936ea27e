"""The emulator's website import (`content/import` from a URL that is not the emulator's own),
against a small site served over loopback HTTP that follows the conventions in docs/concepts/content.md
("The layout, exactly"): an index with a page tree and a file list, pages with a
markdown alternate, one page with HTML only, a PNG and a PDF, a broken and an external link."""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from syncd.emulator import revisions, website_import
from syncd.emulator.server import serve_app
from tests.conftest import Api

PREFIX = "/cap-0123456789/space/"


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x80\x20\x10" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


PNG = _png(4, 3)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n" * 20
PDF_NAME, PDF_URL_NAME = "manual+v2.pdf", "manual%2Bv2.pdf"

# Pages with a markdown alternate: (path, front matter fields, markdown exactly as stored).
INSTALL_MD = (
    "# Install\n\nSee [the API](reference/api) and the [FAQ](getting-started/faq#top).\n\n"
    "![Diagram](.gitbook/assets/diagram.png)\n\n---\n\nA rule above, trailing spaces  \nünïcødé, and no final newline"
)
MARKDOWN = {
    "getting-started": ({"title": "Getting started", "description": "Start here: the basics", "emoji": "1f680"}, "# Getting started\n\nWelcome.\n"),
    "getting-started/install": ({"title": "Install", "hidden": True}, INSTALL_MD),
    "getting-started/install/linux": ({"title": "Linux"}, "# Linux\n\n```bash\napt install syncd\n```\n"),
    "getting-started/faq": ({"title": "FAQ: questions"}, "# FAQ\n\nRead the [old page](archive/old).\n"),
    "reference/api": ({"title": "API"}, ""),
}
NAV = """<nav aria-label="Pages"><ul>
<li><a href="getting-started/">Getting started</a><ul>
  <li><a href="getting-started/install/">Install</a><ul><li><a href="getting-started/install/linux/">Linux</a></li></ul></li>
  <li><a href="getting-started/faq/">FAQ: questions</a></li></ul></li>
<li><a href="reference/">Reference</a></li>
</ul></nav>"""
FILES_NAV = f"""<nav aria-label="Files"><ul>
<li><a href="files/diagram.png"><img src="files/diagram.png" alt="diagram.png" width="4" height="3"></a></li>
<li><a href="files/{PDF_URL_NAME}">{PDF_NAME}</a></li>
</ul></nav>"""
INDEX = f"<!doctype html><html><head><title>Imported space</title></head><body>{NAV}{FILES_NAV}</body></html>"
# The page without an alternate: its <main> is converted. Links: a page, a file, an image,
# an external URL, the same origin outside the prefix, and a page found only here (api/).
REFERENCE = """<!doctype html><html><head><title>Reference</title>
<meta name="description" content="Every call"></head><body><main><h1>Reference</h1>
<p>Start with <a href="../getting-started/install/">Install</a>, then read <a href="api/">the API</a>.</p>
<h2>Overview</h2>
<ul><li>first</li><li>second with <strong>bold</strong></li></ul>
<p><img src="../files/diagram.png" alt="Diagram" width="4" height="3"></p>
<p>Download <a href="../files/manual%2Bv2.pdf">the manual</a>, see <a href="https://example.com/x">the vendor</a>
or <a href="/cap-0123456789/other/">another space</a>.</p>
<pre><code class="language-python">print("hi")
</code></pre>
</main></body></html>"""
REFERENCE_MARKDOWN_PARTS = (
    "## Overview",
    "- first\n- second with **bold**",
    "[Install](getting-started/install)",
    "[the API](reference/api)",
    "![Diagram](.gitbook/assets/diagram.png)",
    f"[the manual](.gitbook/assets/{PDF_NAME})",
    "[the vendor](https://example.com/x)",
    "(http://HOST/cap-0123456789/other/)",
    '```python\nprint("hi")\n```',
)


def _front_matter(fields: dict[str, Any]) -> str:
    return "---\n" + "".join(f"{key}: {json.dumps(value, ensure_ascii=False)}\n" for key, value in fields.items()) + "---\n"


def _page_html(path: str, title: str, body: str, markdown: bool = True) -> str:
    last = path.rsplit("/", 1)[-1]
    alternate = f'<link rel="alternate" type="text/markdown" href="../{last}.md">' if markdown else ""
    return f"<!doctype html><html><head><title>{title}</title>{alternate}</head><body><main><h1>{title}</h1>{body}</main></body></html>"


def site_routes() -> dict[str, tuple[int, str, bytes]]:
    """Path -> (status, content type, body) of the test site."""
    html = "text/html; charset=utf-8"
    routes: dict[str, tuple[int, str, bytes]] = {
        PREFIX: (200, html, INDEX.encode()),
        PREFIX + "reference/": (200, html, REFERENCE.encode()),
        PREFIX + "files/diagram.png": (200, "image/png", PNG),
        PREFIX + f"files/{PDF_URL_NAME}": (200, "application/pdf", PDF),
        "/cap-0123456789/other/": (200, html, b"<html><body><main><h1>Not this one</h1></main></body></html>"),
    }
    bodies = {
        "getting-started": '<p>Welcome. <a href="install/">Install</a></p>',
        "getting-started/install": '<p><a href="../../reference/api/">the API</a> <img src="../../files/diagram.png" width="4" height="3"></p>',
        "getting-started/install/linux": "<pre><code>apt install syncd</code></pre>",
        "getting-started/faq": '<p>Read the <a href="../../archive/old/">old page</a>.</p>',
        "reference/api": "",
    }
    for path, (fields, markdown) in MARKDOWN.items():
        routes[f"{PREFIX}{path}/"] = (200, html, _page_html(path, fields["title"], bodies[path]).encode())
        routes[f"{PREFIX}{path}.md"] = (200, "text/markdown; charset=utf-8", (_front_matter(fields) + markdown).encode())
    return routes


@dataclass
class Site:
    url: str
    routes: dict[str, tuple[int, str, bytes]]
    requested: list[str] = field(default_factory=list)
    hang: set[str] = field(default_factory=set)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def start(self) -> str:
        return self.url + PREFIX


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site("", site_routes())

    async def handler(request: web.Request) -> web.StreamResponse:
        path = request.rel_url.raw_path  # percent-encoded, as the routes are written
        state.requested.append(path)
        if path in state.hang:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.released.wait(), 30)
        answer = state.routes.get(path)
        if answer is None:
            return web.Response(status=404, text="not found")
        status, content_type, body = answer
        if 300 <= status < 400:
            raise web.HTTPFound(body.decode())
        return web.Response(status=status, body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handler)
    async with serve_app(app) as url:
        state.url = url
        try:
            yield state
        finally:
            state.released.set()


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> website_import.ImportLimits:
    """The importer's limits, restored after the test."""
    fresh = website_import.ImportLimits()
    monkeypatch.setattr(website_import, "LIMITS", fresh)
    return fresh


def _walk(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for page in pages:
        out.append(page)
        out.extend(_walk(page["pages"]))
    return out


async def _target(api: Api, org_id: str) -> dict[str, Any]:
    return (await api.all_items(f"/v1/orgs/{org_id}/spaces"))[0]


async def test_imports_a_website_served_by_the_conventions(api: Api, org_id: str, site: Site, limits: website_import.ImportLimits) -> None:
    space = await _target(api, org_id)
    status, result = await api.post(f"/v1/spaces/{space['id']}/content/import", {"url": site.start, "source": "website"})
    assert status == 200, result
    assert result["importedResources"] == result["totalResources"] == 6 + 2
    status, after = await api.get(f"/v1/spaces/{space['id']}")
    assert after["revision"] == result["revision"] != space["revision"]
    status, content = await api.get(f"/v1/spaces/{space['id']}/content")
    assert content["parents"] == [space["revision"]]

    # the tree: URL nesting, siblings in the order first seen, slugs from the URL
    shape = [(p["path"], p["title"], p["slug"], [c["slug"] for c in p["pages"]]) for p in _walk(content["pages"])]
    assert shape == [
        ("getting-started", "Getting started", "getting-started", ["install", "faq"]),
        ("getting-started/install", "Install", "install", ["linux"]),
        ("getting-started/install/linux", "Linux", "linux", []),
        ("getting-started/faq", "FAQ: questions", "faq", []),
        ("reference", "Reference", "reference", ["api"]),
        ("reference/api", "API", "api", []),
    ]
    by_path = {p["path"]: p for p in _walk(content["pages"])}

    # pages with a markdown alternate: markdown byte for byte, front matter fields
    for path, (fields, markdown) in MARKDOWN.items():
        status, page = await api.get(f"/v1/spaces/{space['id']}/content/page/{by_path[path]['id']}")
        assert page["markdown"] == markdown, path
        assert page["title"] == fields["title"]
        assert page.get("description") == fields.get("description")
        assert page.get("emoji") == fields.get("emoji")
        assert page["hidden"] is fields.get("hidden", False)

    # the HTML-only page: <main> converted, links rewritten to page paths and assets
    status, reference = await api.get(f"/v1/spaces/{space['id']}/content/page/{by_path['reference']['id']}")
    markdown = reference["markdown"]
    assert reference["description"] == "Every call" and "# Reference" not in markdown
    for part in REFERENCE_MARKDOWN_PARTS:
        assert part.replace("HOST", site.url.removeprefix("http://")) in markdown, (part, markdown)

    # files: name, type, size, dimensions, and the bytes at downloadURL
    files = {f["name"]: f for f in content["files"]}
    assert [f["name"] for f in content["files"]] == ["diagram.png", PDF_NAME]
    assert files["diagram.png"]["contentType"] == "image/png" and files["diagram.png"]["size"] == len(PNG)
    assert files["diagram.png"]["dimensions"] == {"width": 4, "height": 3}
    assert files[PDF_NAME]["contentType"] == "application/pdf" and files[PDF_NAME]["size"] == len(PDF)
    assert "dimensions" not in files[PDF_NAME]
    async with aiohttp.ClientSession() as anonymous:
        for name, expected in (("diagram.png", PNG), (PDF_NAME, PDF)):
            async with anonymous.get(files[name]["downloadURL"]) as resp:
                assert resp.status == 200 and await resp.read() == expected
                assert resp.content_type == files[name]["contentType"]

    # links resolve inside the space; the broken one stays broken
    links = await api.all_items(f"/v1/spaces/{space['id']}/links")
    broken = [item["targetReference"].get("url") for item in links if item["status"] == "broken"]
    assert broken == ["archive/old"]
    assert any(item["targetReference"] == {"kind": "file", "file": files[PDF_NAME]["id"]} for item in links)

    # nothing outside the prefix was read; the broken link was tried once
    assert all(path.startswith(PREFIX) for path in site.requested), site.requested
    assert PREFIX + "archive/old/" in site.requested
    assert len(site.requested) == len(set(site.requested))


async def test_change_request_import_reads_the_website_too(api: Api, org_id: str, site: Site, limits: website_import.ImportLimits) -> None:
    space = await _target(api, org_id)
    status, cr = await api.post(f"/v1/spaces/{space['id']}/change-requests", {"subject": "Import"})
    base = f"/v1/spaces/{space['id']}/change-requests/{cr['number']}/content"
    status, result = await api.post(base + "/import", {"url": site.start, "source": "website"})
    assert status == 200 and result["importedResources"] == 8
    status, content = await api.get(base)
    assert content["id"] == result["revision"]
    assert [p["path"] for p in content["pages"]] == ["getting-started", "reference"]
    status, unchanged = await api.get(f"/v1/spaces/{space['id']}")
    assert unchanged["revision"] == space["revision"]


async def _refused(api: Api, space: dict[str, Any], url: str, needle: str) -> str:
    """The import is a 400 with one line naming the URL and the reason; the space is unchanged."""
    status, before = await api.get(f"/v1/spaces/{space['id']}/content")
    status, data = await api.post(f"/v1/spaces/{space['id']}/content/import", {"url": url, "source": "website"})
    message = data["error"]["message"]
    assert status == 400 and "\n" not in message and url in message and needle in message, message
    status, after = await api.get(f"/v1/spaces/{space['id']}/content")
    assert after == before
    return message


async def test_failures_answer_one_line_and_change_nothing(api: Api, org_id: str, site: Site, limits: website_import.ImportLimits) -> None:
    space = await _target(api, org_id)
    await _refused(api, space, site.url + "/nothing/here/", "HTTP 404")
    site.routes["/json/"] = (200, "application/json", b"{}")
    await _refused(api, space, site.url + "/json/", "is not HTML (Content-Type application/json)")
    site.routes["/moved/"] = (302, "", b"https://example.com/elsewhere/")
    await _refused(api, space, site.url + "/moved/", "redirects outside")

    limits.pages = 3
    await _refused(api, space, site.start, "more than 3 pages")
    limits.pages, limits.files = 1000, 1
    await _refused(api, space, site.start, "more than 1 files")
    limits.files, limits.bytes = 500, 2000
    await _refused(api, space, site.start, "more than 2000 bytes in all")
    limits.bytes = website_import.ImportLimits().bytes

    # a page listed in the index that fails fails the whole import (a broken link elsewhere does not)
    site.routes[PREFIX + "reference/"] = (500, "text/html", b"oops")
    message = await _refused(api, space, site.start, "reference/ answered HTTP 500")
    assert message.startswith(f"cannot import from {site.start}: ")

    async with serve_app(web.Application()) as closed:
        pass
    await _refused(api, space, closed + "/site/", "not reachable from the emulator")


async def test_a_server_that_hangs_times_out(api: Api, org_id: str, site: Site, limits: website_import.ImportLimits) -> None:
    space = await _target(api, org_id)
    site.hang.add(PREFIX + "getting-started/install/linux/")
    limits.request_timeout = 0.3
    await _refused(api, space, site.start, "no complete answer from " + site.start + "getting-started/install/linux/ within 0.3 s")
    limits.request_timeout, limits.total_timeout = 5.0, 0.3
    await _refused(api, space, site.start, "the import took longer than 0.3 s")


def test_front_matter_keeps_the_markdown_byte_for_byte() -> None:
    text = '---\ntitle: "A: b"\nhidden: true\nemoji: 1f680\nnote: [1]\n---\n\n---\nbody\r\n---\n'
    fields, markdown = website_import.split_front_matter(text)
    assert fields == {"title": "A: b", "hidden": True, "emoji": "1f680", "note": [1]}
    assert markdown == "\n---\nbody\r\n---\n"
    assert website_import.split_front_matter("# No front matter\n") == ({}, "# No front matter\n")
    assert website_import.split_front_matter("---\ntitle: x\n---") == ({"title": "x"}, "")


def test_held_bytes_are_bounded() -> None:
    held = revisions.HeldBytes(limit=10)
    held.put("a", b"1234")
    held.put("b", b"5678")
    assert held.get("a") == b"1234"  # now the most recently used
    held.put("c", b"90ab")
    assert held.get("b") is None and held.get("a") == b"1234" and held.get("c") == b"90ab"
    assert held.total == 8
