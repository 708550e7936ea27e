"""Seven rows of the emulator's behaviour profiles about imports, each played both ways over
loopback HTTP (`syncd.emulator.profile.ROWS`): what an import does to the pages a space holds,
whether a locked space refuses an import, whether a website import keeps the markdown's style,
whether an import is done when it answers, whether a website import reads a page's markdown
alternate, whether it keeps the `<h1>` it takes as a page's title, and how many connections it
opens to the website. `PROBES` maps each row
to `probe(session, base, token) -> observation` (see `tests/test_profile_rows.py`, which checks
that every row is played both ways). The website probes serve pages whose observation does not
depend on the other importer rows: the `import-style` page says the same in its HTML and its
alternate and has no `<h1>`, the `import-first-heading` page offers no alternate.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from syncd.copy.meaning import meaning
from syncd.emulator.restyle import restyle
from tests.test_profile_rows_tree import _call, _items, _orgs

MARKDOWN = "## Guide\n\nSome *emphasis*, **strong** and a [link](https://example.com/x).\n\n- one\n- two\n"
MARKDOWN_HTML = (
    '<h2>Guide</h2><p>Some <em>emphasis</em>, <strong>strong</strong> and a <a href="https://example.com/x">link</a>.</p>'
    "<ul><li>one</li><li>two</li></ul>"
)
"""`MARKDOWN` as HTML: whether or not the importer reads the alternate, it reads these bytes."""


async def _pages(session: aiohttp.ClientSession, base: str, token: str, space: str) -> list[Any]:
    status, data = await _call(session, base, token, "GET", f"/v1/spaces/{space}/content/pages")
    assert status == 200

    def flat(pages: list[Any]) -> list[Any]:
        return [p for page in pages for p in [page, *flat(page.get("pages") or [])]]

    return flat(data["pages"])


async def _import(session: aiohttp.ClientSession, base: str, token: str, space: str, url: str) -> tuple[int, Any]:
    """An import, waited for until the space shows the revision it answered (a profile may
    answer first: row import-completion), so that the other rows' probes see its content."""
    status, answer = await _call(session, base, token, "POST", f"/v1/spaces/{space}/content/import", {"url": url, "source": "website"})
    for _ in range(100 if status == 200 else 0):
        if (await _call(session, base, token, "GET", f"/v1/spaces/{space}"))[1]["revision"] == answer["revision"]:
            break
        await asyncio.sleep(0.05)
    return status, answer


async def probe_import_existing_pages(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Pages of a space after the content of another space is imported into it."""
    org, _ = await _orgs(session, base, token)
    first, second = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[:2]
    before = len(await _pages(session, base, token, first["id"]))
    status, _ = await _import(session, base, token, first["id"], second["urls"]["app"])
    assert status == 200
    after = len(await _pages(session, base, token, first["id"]))
    return "adds" if after == before + len(await _pages(session, base, token, second["id"])) else "replaces"


async def probe_locked_space(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """The status of an import into a locked space (and of a title PATCH while locked)."""
    org, _ = await _orgs(session, base, token)
    first, second = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[:2]
    status, _ = await _call(session, base, token, "PATCH", f"/v1/spaces/{first['id']}", {"editMode": "locked"})
    assert status == 200
    imported, answer = await _import(session, base, token, first["id"], second["urls"]["app"])
    patched, _ = await _call(session, base, token, "PATCH", f"/v1/spaces/{first['id']}", {"editMode": "live"})
    message = answer.get("error", {}).get("message") if isinstance(answer, dict) and imported != 200 else None
    return imported, message, patched


WebPage = tuple[str, str, str | None]
"""A page of a probe's website: (title, the HTML of its `<main>`, its markdown alternate or None)."""


@asynccontextmanager
async def website(pages: dict[str, WebPage]) -> AsyncIterator[str]:
    """A website on loopback whose index lists `pages` (slug -> page) in its `<nav>`; a page
    with an alternate links it (`rel="alternate"`, `type="text/markdown"`)."""

    async def start(request: web.Request) -> web.Response:
        links = "".join(f'<a href="{slug}/">{title}</a>' for slug, (title, _, _) in pages.items())
        return web.Response(text=f"<html><body><nav>{links}</nav></body></html>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        title, main, markdown = pages[request.match_info["slug"]]
        head = '<link rel="alternate" type="text/markdown" href="index.md">' if markdown is not None else ""
        return web.Response(text=f"<html><head><title>{title}</title>{head}</head><body><main>{main}</main></body></html>", content_type="text/html")

    async def source(request: web.Request) -> web.Response:
        markdown = pages[request.match_info["slug"]][2]
        if markdown is None:
            raise web.HTTPNotFound()
        return web.Response(text=markdown, content_type="text/markdown")

    app = web.Application()
    app.router.add_get("/site/", start)
    app.router.add_get("/site/{slug}/", page)
    app.router.add_get("/site/{slug}/index.md", source)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/site/"
    finally:
        await runner.cleanup()


async def imported(session: aiohttp.ClientSession, base: str, token: str, pages: dict[str, WebPage]) -> dict[str, str]:
    """Title -> markdown of the pages of the organization's first space after the website of
    `pages` is imported into it (only the titles of `pages`)."""
    org, _ = await _orgs(session, base, token)
    space = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[0]
    async with website(pages) as url:
        status, answer = await _import(session, base, token, space["id"], url)
    assert status == 200, answer
    titles = {title for title, _, _ in pages.values()}
    found: dict[str, str] = {}
    for page in await _pages(session, base, token, space["id"]):
        if page["title"] in titles:
            _, full = await _call(session, base, token, "GET", f"/v1/spaces/{space['id']}/content/page/{page['id']}")
            found[page["title"]] = full["markdown"]
    return found


async def probe_import_style(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Whether a website import keeps a page's markdown byte for byte, and what it says."""
    markdown = (await imported(session, base, token, {"guide": ("Guide", MARKDOWN_HTML, MARKDOWN)}))["Guide"]
    return markdown == MARKDOWN, meaning(markdown) == meaning(MARKDOWN)


HEADED: WebPage = ("Headline", "<h1>Headline</h1><p>The words of the page.</p>", None)
"""A page whose `<main>` starts with the `<h1>` that is its title, and no alternate."""
SOURCED: WebPage = ("Sourced", "<h1>Sourced</h1><p>Read from the HTML.</p>", "Read from the markdown alternate.\n")
"""A page whose markdown alternate says something other than its HTML."""
READ_FROM = {"markdown alternate": "Read from the markdown alternate.", "HTML": "Read from the HTML."}


async def probe_import_reads_markdown_alternate(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Where a website import reads a page that offers a markdown alternate: the alternate, or
    the HTML of its `<main>`."""
    markdown = (await imported(session, base, token, {"sourced": SOURCED}))["Sourced"]
    return [source for source, words in READ_FROM.items() if words in markdown]


async def probe_import_first_heading(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """What a website import makes of the `<h1>` that starts a page's `<main>`: the page's
    title, and whether the content keeps it as a level-1 heading (in either heading style:
    row import-style may restyle it)."""
    found = await imported(session, base, token, {"headed": HEADED})
    markdown = found.get("Headline", "")
    kept = re.match(r"\s*(# Headline\s*\n|Headline\n=+\n)", markdown) is not None
    return {"titled": "Headline" in found, "heading kept": kept, "words kept": "The words of the page." in markdown}


async def probe_import_completion(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Whether the space shows the revision an import answered as soon as it answers."""
    org, _ = await _orgs(session, base, token)
    first, second = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[:2]
    status, answer = await _call(session, base, token, "POST", f"/v1/spaces/{first['id']}/content/import", {"url": second["urls"]["app"], "source": "website"})
    assert status == 200 and isinstance(answer.get("revision"), str)
    _, space = await _call(session, base, token, "GET", f"/v1/spaces/{first['id']}")
    at_once = space["revision"] == answer["revision"]
    for _ in range(100):  # and the revision does become the active one
        _, space = await _call(session, base, token, "GET", f"/v1/spaces/{first['id']}")
        if space["revision"] == answer["revision"]:
            break
        await asyncio.sleep(0.05)
    assert space["revision"] == answer["revision"]
    return at_once


WIDE_PAGES = 40
"""Pages of the website `probe_importer_connections` serves: more than any importer's fan-out."""
QUIET = 0.3
"""Seconds without a new request after which the probe's pages answer."""


async def probe_importer_connections(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """How many connections a website import opens to the site it reads, and how many of its
    requests are in flight at once. A page answers only once no new request has come for
    `QUIET` seconds, so that every request the importer sends together piles up, however
    loaded the machine (a fixed pause let one answer before the last of 32 came)."""
    in_flight, peak, peers = 0, 0, set()
    last = [asyncio.get_running_loop().time()]

    async def start(request: web.Request) -> web.Response:
        links = "".join(f'<a href="p{n}/">Page {n}</a>' for n in range(WIDE_PAGES))
        return web.Response(text=f"<html><body><nav>{links}</nav></body></html>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        in_flight += 1
        peak = max(peak, in_flight)
        loop = asyncio.get_running_loop()
        last[0] = loop.time()
        try:
            while loop.time() - last[0] < QUIET:
                await asyncio.sleep(QUIET / 4)
        finally:
            in_flight -= 1
        return web.Response(text=f"<html><body><main><h1>Page</h1><p>{request.match_info['n']}</p></main></body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/site/", start)
    app.router.add_get("/site/p{n}/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        org, _ = await _orgs(session, base, token)
        space = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[0]
        status, answer = await _import(session, base, token, space["id"], f"http://127.0.0.1:{port}/site/")
        assert status == 200, answer
    finally:
        await runner.cleanup()
    return ("in flight at once", peak), ("connections", len(peers))


PROBES: dict[str, Callable[[aiohttp.ClientSession, str, str], Awaitable[Any]]] = {
    "import-existing-pages": probe_import_existing_pages,
    "locked-space": probe_locked_space,
    "import-style": probe_import_style,
    "import-completion": probe_import_completion,
    "import-reads-markdown-alternate": probe_import_reads_markdown_alternate,
    "import-first-heading": probe_import_first_heading,
    "importer-connections": probe_importer_connections,
}


# ----- meaning: what a page says, whatever the style ------------------------------------------

WORDS = st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=6), min_size=1, max_size=6).map(" ".join)
BLOCKS = st.one_of(
    WORDS,
    WORDS.map(lambda w: f"*{w}*"),
    WORDS.map(lambda w: f"**{w}**"),
    WORDS.map(lambda w: f"- {w}"),
    WORDS.map(lambda w: f"# {w}"),
    WORDS.map(lambda w: f"## {w}"),
    st.tuples(WORDS, WORDS).map(lambda p: f"[{p[0]}](https://example.com/{p[1].replace(' ', '-')})"),
)
DOCUMENTS = st.lists(BLOCKS, min_size=1, max_size=8).map("\n\n".join)


@given(DOCUMENTS)
def test_another_importers_style_says_the_same(markdown: str) -> None:
    assert meaning(restyle(markdown)) == meaning(markdown)


@given(DOCUMENTS, WORDS)
def test_other_words_are_a_difference(markdown: str, extra: str) -> None:
    assert meaning(markdown + "\n\n" + extra + " zz") != meaning(markdown)
    assert meaning(markdown.replace("a", "k")) != meaning(markdown) or "a" not in markdown


def test_a_reordered_or_retitled_page_is_a_difference() -> None:
    assert meaning("# One\n\nText") != meaning("# Two\n\nText")
    assert meaning("first\n\nsecond") != meaning("second\n\nfirst")
    assert meaning("Setext\n======\n\nbody") == meaning("# Setext\n\nbody")
    assert meaning("see [x][1]\n\n[1]: https://e.x/a") == meaning("see [x](https://e.x/a)")
    assert meaning("a \\* b") == meaning("a * b") and meaning("text\n") == meaning("text\n\n\n")
