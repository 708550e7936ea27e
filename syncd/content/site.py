"""One space's content as a website an importer can read (pure: built from a snapshot).

`content/import` takes only a URL, so syncd serves what it holds with the most common
conventions of a documentation website and nothing private. Under a prefix P (the space's
capability URL):

    P               index: <title>; <nav aria-label="Pages"> with the page tree as nested
                    <ul> of links to PATH/; <nav aria-label="Files"> linking files/NAME (an
                    image with its width and height); no <main>: it is no page
    P PATH/         a page: <title>, <meta name="description">, <link rel="alternate"
                    type="text/markdown" href="../LAST.md">, <main><h1>Title</h1>BODY</main>
                    (the title once: no <h1> of ours when the markdown begins with
                    `# Title`), BODY the stored markdown rendered by markdown-it (CommonMark
                    and tables; the platform's blocks as plain semantic HTML, see `render`),
                    links to other pages pointing at their PATH/, files at files/NAME; a page
                    whose markdown is over RENDER_LIMIT is not rendered (markdown-it takes
                    seconds on a large table): BODY is then the markdown in a <pre>
    P PATH.md       the page as markdown: YAML front matter (title, description, emoji,
                    hidden), then the markdown exactly as stored
    P files/NAME    the file's bytes with its content type

PATH is the page's path as read (its slugs from the space root); links in stored markdown
name pages by that path and files as `.gitbook/assets/NAME` (the service's convention), so
an importer that maps them back gets the space as it was.

Documents are built on demand (`document`), each once: kept in a cache of DOCUMENT_CACHE
bytes per site (least recently used first out), behind a lock, so callers may build them in
worker threads and a page fetched twice (a retried import, the probe import) is rendered once.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from syncd.content import blocks

__all__ = ["ASSETS", "DOCUMENT_CACHE", "RENDER_LIMIT", "Served", "ServedFile", "SitePage", "SpaceSite"]

ASSETS = ".gitbook/assets/"
RENDER_LIMIT = 128 * 1024
"""Markdown longer than this (characters) is served in a <pre>, not rendered."""
DOCUMENT_CACHE = 32 * 1024 * 1024
"""Bytes of built documents a site keeps."""
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")
_TITLE_HEADING = re.compile(r"^ {0,3}# +(.*?)(?: +#+)? *$")


@dataclass(frozen=True)
class ServedFile:
    """A file of the space; `path` is its bytes on disk (None: not held, not served)."""

    name: str
    content_type: str
    size: int
    path: Path | None
    width: int | None = None
    height: int | None = None


@dataclass
class SitePage:
    """A page of the site: `path` is where it is served (and how stored links name it)."""

    path: str
    title: str
    markdown: str
    description: str | None = None
    emoji: str | None = None
    hidden: bool = False
    children: list[SitePage] = field(default_factory=list)


@dataclass(frozen=True)
class Served:
    """What one request gets: a document of the site (`document`: "" the index, `PATH/` a
    page, `PATH.md` its markdown; built by `SpaceSite.document`) or a file on disk."""

    content_type: str
    document: str | None = None
    file: Path | None = None


class SpaceSite:
    """The website of one space (see the module docstring); `get(tail)` answers the path
    below the prefix, None when it is not part of the site (no file system is touched but
    the blobs it was given)."""

    def __init__(self, title: str, pages: list[SitePage], files: list[ServedFile]) -> None:
        self.title = title
        self.pages = pages
        self.files = {file.name: file for file in files}
        self._by_path: dict[str, SitePage] = {}
        for page in _walk(pages):
            self._by_path[page.path] = page
        self._built: OrderedDict[str, bytes] = OrderedDict()
        self._built_bytes = 0
        self._building = threading.Lock()
        self.renders = 0
        """Pages rendered by markdown-it so far (the cache keeps it to one per page)."""

    @property
    def served_files(self) -> list[ServedFile]:
        return [f for f in self.files.values() if f.path is not None]

    @property
    def missing_files(self) -> list[ServedFile]:
        """Files whose bytes syncd does not hold: not served, not linked."""
        return [f for f in self.files.values() if f.path is None]

    def get(self, tail: str) -> Served | None:
        """What `tail` is on the site (nothing is built yet), None when it is not part of it."""
        if tail == "":
            return Served("text/html; charset=utf-8", document="")
        if tail.startswith("files/"):
            file = self.files.get(tail[len("files/") :])
            return Served(file.content_type or "application/octet-stream", file=file.path) if file and file.path else None
        if tail.endswith("/") and tail[:-1] in self._by_path:
            return Served("text/html; charset=utf-8", document=tail)
        if tail.endswith(".md") and tail[:-3] in self._by_path:
            return Served("text/markdown; charset=utf-8", document=tail)
        return None

    def document(self, name: str) -> bytes:
        """The document `name` of a `Served` (built once, then from the cache). Blocking and
        possibly slow (markdown-it): call it from a worker thread."""
        with self._building:
            built = self._built.get(name)
            if built is not None:
                self._built.move_to_end(name)
                return built
            built = self._build(name).encode()
            self._built[name] = built
            self._built_bytes += len(built)
            while self._built_bytes > DOCUMENT_CACHE and len(self._built) > 1:
                self._built_bytes -= len(self._built.popitem(last=False)[1])
            return built

    def _build(self, name: str) -> str:
        if name == "":
            return self.index()
        if name.endswith("/"):
            return self.page_html(self._by_path[name[:-1]])
        return self.page_markdown(self._by_path[name.removesuffix(".md")])

    # -- the documents -----------------------------------------------------------------

    def index(self) -> str:
        def tree(pages: list[SitePage]) -> str:
            items = "".join(
                f'<li><a href="{_href(p.path)}/">{html.escape(p.title)}</a>{tree(p.children) if p.children else ""}</li>' for p in pages
            )
            return f"<ul>{items}</ul>"

        files = "".join(
            f'<li><a href="files/{quote(f.name)}">{self._image(f, "files/") if f.width else html.escape(f.name)}</a></li>'
            for f in self.served_files
        )
        return (
            f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(self.title)}</title></head>\n'
            f'<body><nav aria-label="Pages">{tree(self.pages)}</nav>\n<nav aria-label="Files"><ul>{files}</ul></nav></body></html>\n'
        )

    def page_html(self, page: SitePage) -> str:
        up = "../" * (page.path.count("/") + 1)
        last = page.path.rsplit("/", 1)[-1]
        head = [f'<meta charset="utf-8"><title>{html.escape(page.title)}</title>']
        if page.description:
            head.append(f'<meta name="description" content="{html.escape(page.description)}">')
        head.append(f'<link rel="alternate" type="text/markdown" href="../{quote(last)}.md">')
        rendered = len(page.markdown) <= RENDER_LIMIT
        if rendered:
            self.renders += 1
            body = self.render(page.markdown, up)
        else:
            body = f"<pre>{html.escape(page.markdown)}</pre>\n"
        title = "" if rendered and _opens_with_title(page.markdown, page.title) else f"<h1>{html.escape(page.title)}</h1>\n"
        return f"<!doctype html>\n<html><head>{''.join(head)}</head>\n<body><main>{title}{body}</main></body></html>\n"

    def page_markdown(self, page: SitePage) -> str:
        fields: list[tuple[str, Any]] = [("title", page.title)]
        fields += [(k, v) for k, v in (("description", page.description), ("emoji", page.emoji)) if v]
        if page.hidden:
            fields.append(("hidden", True))
        matter = "".join(f"{key}: {json.dumps(value, ensure_ascii=False)}\n" for key, value in fields)
        return f"---\n{matter}---\n{page.markdown}"

    def render(self, markdown: str, up: str) -> str:
        """The markdown as HTML, its links to pages and files pointing where they are served
        (`up` leads from the page's directory back to the prefix); the platform's blocks
        (syncd/content/blocks.py) as plain semantic HTML, every text of them escaped."""
        items, definitions = blocks.read(markdown)
        if len(items) == 1 and isinstance(items[0], blocks.Text):
            return self._markdown(markdown, up)
        references = "\n\n" + "\n".join(definitions)
        return "".join(self._item(item, up, references) for item in items)

    def _item(self, item: blocks.Text | blocks.Block, up: str, references: str) -> str:
        if isinstance(item, blocks.Text):
            return self._markdown(item.markdown + references, up)
        inner = "".join(self._item(child, up, references) for child in item.children)
        attrs = item.attrs
        if item.kind == "hint":
            return f"<blockquote>\n{inner}</blockquote>\n"
        if item.kind == "tab":
            return f"<p><strong>{html.escape(attrs.get('title', ''))}</strong></p>\n{inner}"
        if item.kind == "code":
            title = f"<p>{html.escape(attrs['title'])}</p>\n" if attrs.get("title") else ""
            return title + inner
        if item.kind == "embed":
            url = attrs.get("url", "")
            link = f'<p><a href="{html.escape(self._target(url, up))}">{html.escape(url)}</a></p>\n' if _MD.validateLink(url) else ""
            return link + inner
        if item.kind == "details":
            return f"<details>\n<summary>{html.escape(attrs.get('summary', ''))}</summary>\n{inner}</details>\n"
        if item.kind == "figure":
            return f"<figure>{self._figure_image(attrs.get('src', ''), attrs.get('alt', ''), up)}<figcaption>{html.escape(attrs.get('caption', ''))}</figcaption></figure>\n"
        if item.kind == "math":
            return f'<pre><code class="language-math">{html.escape(item.text)}\n</code></pre>\n'
        return inner  # tabs and blocks of other names: what they hold

    def _figure_image(self, src: str, alt: str, up: str) -> str:
        if not _MD.validateLink(src):
            src = ""
        file = self._file_of(src)
        size = f' width="{file.width}" height="{file.height}"' if file is not None and file.width and file.height else ""
        return f'<img src="{html.escape(self._target(src, up))}" alt="{html.escape(alt)}"{size}>'

    def _markdown(self, markdown: str, up: str) -> str:
        tokens = _MD.parse(markdown)
        for token in _inline_tokens(tokens):
            if token.type == "link_open":
                token.attrSet("href", self._target(str(token.attrGet("href") or ""), up))
            elif token.type == "image":
                src = str(token.attrGet("src") or "")
                file = self._file_of(src)
                token.attrSet("src", self._target(src, up))
                if file is not None and file.width and file.height:
                    token.attrSet("width", str(file.width))
                    token.attrSet("height", str(file.height))
        return str(_MD.renderer.render(tokens, _MD.options, {}))

    def _file_of(self, href: str) -> ServedFile | None:
        path = unquote(urlsplit(href).path)
        index = path.find(ASSETS)
        if index < 0 or urlsplit(href).scheme:
            return None
        file = self.files.get(path[index + len(ASSETS) :])
        return file if file is not None and file.path is not None else None

    def _target(self, href: str, up: str) -> str:
        """Where a link of the stored markdown points on the site (unchanged: elsewhere)."""
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or not parts.path:
            return href
        file = self._file_of(href)
        if file is not None:
            return f"{up}files/{quote(file.name)}"
        page = parts.path.removeprefix("./").removesuffix(".md").strip("/")
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        if page in self._by_path:
            return f"{up}{_href(page)}/" + fragment
        written = unquote(parts.path.removeprefix("./").rstrip("/"))
        if written and not written.startswith("/") and ".." not in written.split("/"):
            return f"{up}{_href(written)}/" + fragment  # a page not here: a page URL all the same, so an importer reads the link back as written
        return href

    def _image(self, file: ServedFile, prefix: str) -> str:
        return f'<img src="{prefix}{quote(file.name)}" alt="{html.escape(file.name)}" width="{file.width}" height="{file.height}">'


def _opens_with_title(markdown: str, title: str) -> bool:
    """Whether the markdown begins (after blank lines) with a level-1 heading that reads as
    the title: that heading is then the page's one `<h1>`."""
    first = markdown.lstrip("\r\n").split("\n", 1)[0]
    heading = _TITLE_HEADING.match(first)
    if heading is None:
        return False
    rendered = _MD.renderInline(heading.group(1))
    return "<" not in rendered and html.unescape(rendered) == title


def _href(path: str) -> str:
    return "/".join(quote(segment) for segment in path.split("/"))


def _walk(pages: Iterable[SitePage]) -> Iterable[SitePage]:
    for page in pages:
        yield page
        yield from _walk(page.children)


def _inline_tokens(tokens: list[Token]) -> Iterable[Token]:
    for token in tokens:
        if token.children:
            yield from _inline_tokens(token.children)
        yield token
