"""The platform's blocks through the content source's HTML and an HTML-only import: each block
and a page with all of them come back with the same meaning (words and structure), with the
page's title once, whether the importer drops the first `<h1>` or keeps it
(docs/concepts/content.md). The round trip is the real one: `SpaceSite.page_html`, then the emulator
importer's own HTML conversion (`syncd.emulator.html_markdown.html_page_to_markdown`), then `meaning` of both sides."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import aiohttp
import pytest

from syncd.config import ContentSourceConfig
from syncd.content import serve_content
from syncd.content.site import ServedFile, SitePage, SpaceSite
from syncd.copy.meaning import form, meaning
from syncd.emulator.routes.content import _TEMPLATES
from syncd.emulator.html_markdown import html_page_to_markdown
from syncd.emulator.website_import import Scope, rewrite_link

START = "http://docs.test/p/"
TITLE = "Getting started"

BLOCKS = {
    "hint": '{% hint style="warning" %}\nKeep **backups** of [the setup](setup) and:\n\n- one thing\n- another\n{% endhint %}\n',
    "tabs": '{% tabs %}\n{% tab title="Python" %}\n```python\nprint("hi")\n```\n{% endtab %}\n\n{% tab title="Shell" %}\nRun `hi` now.\n{% endtab %}\n{% endtabs %}\n',
    "code": '{% code title="my_app.py" overflow="wrap" %}\n```python\nx = 1  # one\n```\n{% endcode %}\n',
    "table": "| Setting | Default |\n| --- | :---: |\n| `timeout` | 30 s |\n| mode | *strict* |\n",
    "figure": '<figure><img src=".gitbook/assets/diagram.png" alt="The diagram"><figcaption><p>Where it fits &amp; why</p></figcaption></figure>\n',
    "image": "![diagram](.gitbook/assets/diagram.png)\n",
    "details": "<details>\n\n<summary>What if it fails?</summary>\n\nTry **again** later.\n\n</details>\n",
    "embed": '{% embed url="https://www.youtube.com/watch?v=abc" %}\n',
    "math": "$$\nE = mc^2 \\cdot n\n$$\n",
    "links": "See [the setup](setup), [a section](setup#usage), [an old page](archive/old-v1), [the checklist](.gitbook/assets/check%20list.pdf) and [elsewhere](https://example.com/x).\n",
    "emoji": "Ready ✅ to go 🚀.\n",
    "references": '{% hint style="info" %}\nRead [the guide][g] first.\n{% endhint %}\n\n[g]: https://example.com/guide\n',
    "quote": "> Tip: keep it *short*.\n",
    "headings": "## Before you begin\n\nText.\n\n### Details\n\n1. first\n2. second\n",
}
ALL = "\n".join(BLOCKS.values())


def _site(markdown: str, title: str = TITLE) -> SpaceSite:
    files = [ServedFile("diagram.png", "image/png", 4, Path("/nonexistent/diagram.png"), 640, 480), ServedFile("check list.pdf", "application/pdf", 9, Path("/nonexistent/c"))]
    return SpaceSite("Guide", [SitePage("start", title, markdown), SitePage("setup", "Setup", "Set up.\n")], files)


def _file_name(relative: str) -> str | None:
    return unquote(relative[len("files/") :]) if relative.startswith("files/") else None


def html_import(page_html: str, keep_first_heading: bool) -> tuple[str, str]:
    """(title, markdown) as the emulator's HTML-only importer reads the page at START/start/."""
    scope = Scope(START)
    title, markdown, _ = html_page_to_markdown(
        page_html, START + "start/", rewrite=lambda value, base, image: rewrite_link(scope, value, base, image, _file_name), keep_first_heading=keep_first_heading
    )
    return title, markdown


def _one_h1(page_html: str, title: str) -> None:
    assert re.findall(r"<title>(.*?)</title>", page_html) == [title]
    assert re.findall(r"<h1>(.*?)</h1>", page_html) == [title]


@pytest.mark.parametrize("heading", [True, False], ids=["opens-with-title", "no-title-heading"])
@pytest.mark.parametrize("keep", [False, True], ids=["drops-h1", "keeps-h1"])
@pytest.mark.parametrize("block", [*BLOCKS, "all"])
def test_a_block_means_the_same_after_an_html_only_import(block: str, keep: bool, heading: bool) -> None:
    body = ALL if block == "all" else BLOCKS[block]
    markdown = (f"# {TITLE}\n\n" if heading else "") + body
    site = _site(markdown)
    page_html = site.page_html(site.pages[0])
    _one_h1(page_html, TITLE)
    title, imported = html_import(page_html, keep)
    assert title == TITLE
    assert imported.startswith(f"# {TITLE}\n") == keep  # the title once: as a heading only when kept
    assert meaning(imported, title) == meaning(markdown, TITLE), imported
    assert meaning(imported, title)  # words there, not an empty comparison


@pytest.mark.parametrize("block", ["hint", "tabs", "code", "figure", "details", "embed", "math"])
def test_a_block_an_import_cannot_carry_as_written_is_a_change_of_form(block: str) -> None:
    site = _site(BLOCKS[block])
    _, imported = html_import(site.page_html(site.pages[0]), False)
    assert meaning(imported, TITLE) == meaning(BLOCKS[block], TITLE)
    assert form(imported, TITLE) != form(BLOCKS[block], TITLE)


@pytest.mark.parametrize("index", range(len(_TEMPLATES)))
def test_the_generators_pages_mean_the_same_after_an_html_only_import(index: int) -> None:
    values = {"title": TITLE, "title_l": TITLE.lower(), "slug": "getting-started", "topic": "the API", "n": 7, "title_a": "Setup", "link_a": "setup",
              "title_b": "Setup", "link_b": "setup#usage", "broken": "archive/x-v1", "file": "check list.pdf", "image": "diagram.png"}  # fmt: skip
    markdown = _TEMPLATES[index] % values
    site = _site(markdown)
    page_html = site.page_html(site.pages[0])
    _one_h1(page_html, TITLE)
    for keep in (False, True):
        title, imported = html_import(page_html, keep)
        assert meaning(imported, title) == meaning(markdown, TITLE), imported


def test_the_blocks_become_plain_semantic_html() -> None:
    site = _site(ALL)
    page_html = site.page_html(site.pages[0])
    for piece in (
        "<blockquote>\n<p>Keep <strong>backups</strong>",
        "<p><strong>Python</strong></p>\n<pre><code class=\"language-python\">",
        "<p>my_app.py</p>\n<pre><code class=\"language-python\">x = 1",
        '<figure><img src="../files/diagram.png" alt="The diagram" width="640" height="480"><figcaption>Where it fits &amp; why</figcaption></figure>',
        "<details>\n<summary>What if it fails?</summary>\n<p>Try <strong>again</strong> later.</p>\n</details>",
        '<p><a href="https://www.youtube.com/watch?v=abc">https://www.youtube.com/watch?v=abc</a></p>',
        '<pre><code class="language-math">E = mc^2 \\cdot n\n</code></pre>',
        '<a href="../setup/#usage">a section</a>',
        '<a href="../files/check%20list.pdf">the checklist</a>',
        "<th style=\"text-align:center\">Default</th>",
    ):
        assert piece in page_html
    assert "{%" not in page_html


HOSTILE = [
    "<script>alert(1)</script>\n",
    '{% hint style="<x>" %}\n<b>bold</b>\n{% endhint %}\n',
    '{% hint style="info" %}\nnever closed <script>x</script>\n',
    '{% tabs %}\n{% tab title="<img src=x onerror=alert(1)>" %}\nx\n{% endtab %}\n{% endtabs %}\n',
    '{% code title="\\"><script>y</script>" %}\n```\nz\n```\n{% endcode %}\n',
    '<figure><img src="javascript:alert(1)" alt="&lt;script&gt;"><figcaption><p><script>c</script></p></figcaption></figure>\n',
    "<details>\n<summary><script>s</script></summary>\n\n<iframe src=x></iframe>\n\n</details>\n",
    "<details>\nnever closed\n",
    '{% embed url="javascript:alert(1)" %}\n',
    '{% embed url="https://e.x/&quot;&gt;<script>" %}\n',
    "$$\n</code><script>m</script>\n$$\n",
    "```\n{% hint %}\n```\n" + "{% tabs %}\n" * 40,
    "{% tabs %}\n" * 5000 + "<details>\n" * 5000 + "$$\n" * 5001,  # unclosed, many: read in one pass
]


@pytest.mark.parametrize("markdown", HOSTILE)
def test_an_organizations_markdown_is_escaped_never_raw(markdown: str) -> None:
    site = _site(markdown)
    page_html = site.page_html(site.pages[0])
    main = page_html[page_html.index("<main>") :]
    assert "<script" not in main and "<iframe" not in main and "<b>" not in main and "onerror=alert" not in main.replace("&lt;img src=x onerror=alert(1)&gt;", "")
    assert "javascript:" not in main.replace("javascript:alert(1)</p>", "")  # as text at most, never a link or a source
    assert re.findall(r"<(\w+)", main) == [t for t in re.findall(r"<(\w+)", main) if t in _OURS]


_OURS = {"main", "h1", "p", "blockquote", "strong", "em", "pre", "code", "figure", "img", "figcaption", "details", "summary", "a", "ul", "ol", "li",
         "table", "thead", "tbody", "tr", "th", "td", "body", "html", "h2", "h3", "br", "hr"}  # fmt: skip


def test_a_title_in_the_markdown_that_renders_differently_keeps_our_heading() -> None:
    site = _site("# Getting *started*\n\nText.\n")
    page_html = site.page_html(site.pages[0])
    assert re.findall(r"<h1>(.*?)</h1>", page_html) == [TITLE, "Getting <em>started</em>"]


async def test_a_page_that_opens_with_its_title_is_served_with_one_h1() -> None:
    site = SpaceSite("Guide", [SitePage("start", TITLE, f"\n# {TITLE}\n\nWelcome.\n"), SitePage("other", "Other", "Other text.\n")], [])
    async with serve_content(ContentSourceConfig()) as source, aiohttp.ClientSession() as http:
        url = source.publish("S", site)
        async with http.get(url + "start/") as resp:
            page = await resp.text()
        async with http.get(url + "other/") as resp:
            other = await resp.text()
    assert resp.status == 200
    _one_h1(page, TITLE)
    assert "<main><h1>Getting started</h1>\n<p>Welcome.</p>" in page
    _one_h1(other, "Other")
