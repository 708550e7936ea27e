"""Four rows of the emulator's behaviour profiles about imports, each played both ways over
loopback HTTP (`syncd.emulator.profile.ROWS`): what an import does to the pages a space holds,
whether a locked space refuses an import, whether a website import keeps the markdown's style,
and whether an import is done when it answers. `PROBES` maps each row to `probe(session, base, token) -> observation` (see
`tests/test_profile_rows.py`, which checks that every row is played both ways).
"""

from __future__ import annotations

import asyncio
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

MARKDOWN = "# Guide\n\nSome *emphasis*, **strong** and a [link](https://example.com/x).\n\n- one\n- two\n"


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


@asynccontextmanager
async def website(markdown: str) -> AsyncIterator[str]:
    """A one-page website whose page offers its markdown (`rel="alternate"`), on loopback."""

    async def start(request: web.Request) -> web.Response:
        return web.Response(text='<html><body><nav><a href="guide/">Guide</a></nav></body></html>', content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        head = '<link rel="alternate" type="text/markdown" href="index.md">'
        return web.Response(text=f"<html><head><title>Guide</title>{head}</head><body><main>x</main></body></html>", content_type="text/html")

    async def source(request: web.Request) -> web.Response:
        return web.Response(text=markdown, content_type="text/markdown")

    app = web.Application()
    app.router.add_get("/site/", start)
    app.router.add_get("/site/guide/", page)
    app.router.add_get("/site/guide/index.md", source)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/site/"
    finally:
        await runner.cleanup()


async def probe_import_style(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Whether a website import keeps a page's markdown byte for byte, and what it says."""
    org, _ = await _orgs(session, base, token)
    space = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[0]
    async with website(MARKDOWN) as url:
        status, answer = await _import(session, base, token, space["id"], url)
    assert status == 200, answer
    page = next(p for p in await _pages(session, base, token, space["id"]) if p["title"] == "Guide")
    status, full = await _call(session, base, token, "GET", f"/v1/spaces/{space['id']}/content/page/{page['id']}")
    return full["markdown"] == MARKDOWN, meaning(full["markdown"]) == meaning(MARKDOWN)


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


PROBES: dict[str, Callable[[aiohttp.ClientSession, str, str], Awaitable[Any]]] = {
    "import-existing-pages": probe_import_existing_pages,
    "locked-space": probe_locked_space,
    "import-style": probe_import_style,
    "import-completion": probe_import_completion,
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
