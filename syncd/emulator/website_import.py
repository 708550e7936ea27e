"""The emulator's website import: `content/import` from a URL that is not the emulator's own.

It reads a website the way an importer following common conventions does, and the way syncd
serves the content it holds (docs/concepts/content.md, "The layout, exactly", is the contract):

- the start URL P is a directory; only URLs on P's origin under P's path are read, redirects
  included; everything else is ignored (links to it are kept as absolute URLs);
- pages are the links ending in `/` under P: from P's first `<nav>` (else every link of P),
  then breadth first from the pages read; the page tree is the URL nesting, siblings in the
  order first seen, a page's slug its last URL segment;
- a page with `<link rel="alternate" type="text/markdown">` is read from that markdown (front
  matter, then the body byte for byte) when the importer reads alternates (`reads_alternate`,
  the `import-reads-markdown-alternate` row); otherwise its `<main>` is converted with
  markdownify, links to pages and files rewritten to page paths and `.gitbook/assets/NAME`;
  the first `<h1>` of `<main>` is the page's title, and is dropped from the content or kept
  there as a level-1 heading (`keeps_first_heading`, the `import-first-heading` row);
- files are the `files/...` links and every `<img src>` under P.

Reading is all or nothing: `read_site` returns the whole site or raises `ImportFailed` with
one line naming the URL and the reason, and the caller changes nothing then. `build_content`
turns a site into the pages and files of a new revision.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import unquote, urldefrag, urljoin, urlsplit, urlunsplit

import aiohttp
from bs4 import BeautifulSoup, Tag

from syncd.emulator import revisions
from syncd.emulator.html_markdown import html_page_to_markdown, main_and_title
from syncd.emulator.store import Record, Store

T = TypeVar("T")
MB = 1024 * 1024
HTML_TYPES = ("text/html", "application/xhtml+xml")
FILES_DIR = "files/"
ASSETS = ".gitbook/assets/"
REDIRECTS = (301, 302, 303, 307, 308)
GONE = (404, 410)
USER_AGENT = "syncd-emulator-website-import/1"


@dataclass
class ImportLimits:
    """Bounds of one website import (tests lower them through `LIMITS`)."""

    pages: int = 1000
    files: int = 500
    bytes: int = 50 * MB
    """Every body read (pages, markdown, files) counts."""
    request_timeout: float = 10.0
    total_timeout: float = 60.0
    redirects: int = 5
    concurrency: int = 8


LIMITS = ImportLimits()


class ImportFailed(Exception):
    """The import cannot be done; the message is one line naming the URL and the reason."""


@dataclass
class SitePage:
    segments: tuple[str, ...]
    """Decoded URL segments below P: the page's path in the space (its slug is the last)."""
    title: str
    markdown: str = ""
    description: str | None = None
    emoji: str | None = None
    hidden: bool = False


@dataclass
class SiteFile:
    name: str
    content_type: str
    data: bytes
    dimensions: dict[str, int] | None = None


@dataclass
class Site:
    pages: list[SitePage]
    """In the order first seen; a page comes after its parent."""
    files: list[SiteFile]


# ----- scope: what lies under P -------------------------------------------------------------


class Scope:
    """P's origin and path prefix; `relative` is a URL's path below P (still percent-encoded)."""

    def __init__(self, start: str) -> None:
        parts = urlsplit(start)
        self.scheme = parts.scheme.lower()
        self.host = (parts.hostname or "").lower()
        self.port = _port(parts.scheme, parts.port)
        self.prefix = parts.path if parts.path.endswith("/") else parts.path + "/"
        self.root = urlunsplit((parts.scheme, parts.netloc, self.prefix, "", ""))

    def relative(self, url: str) -> str | None:
        try:
            parts = urlsplit(url)
            port = _port(parts.scheme, parts.port)
        except ValueError:
            return None
        if parts.scheme.lower() != self.scheme or (parts.hostname or "").lower() != self.host or port != self.port:
            return None
        if not parts.path.startswith(self.prefix):
            return None
        return parts.path[len(self.prefix) :]

    def url(self, relative: str) -> str:
        return self.root + relative


def _port(scheme: str, port: int | None) -> int | None:
    return port if port is not None else {"http": 80, "https": 443}.get(scheme.lower())


def _is_page(relative: str) -> bool:
    return relative.endswith("/") and relative != "" and "//" not in relative


def _is_file_link(relative: str) -> bool:
    return relative.startswith(FILES_DIR) and len(relative) > len(FILES_DIR) and not relative.endswith("/")


def _segments(relative: str) -> tuple[str, ...]:
    return tuple(unquote(segment) for segment in relative.strip("/").split("/"))


# ----- fetching -----------------------------------------------------------------------------


@dataclass
class Answer:
    url: str
    """Where the body came from (after redirects under P)."""
    status: int
    content_type: str = ""
    charset: str | None = None
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class Fetcher:
    """GETs under P: redirects followed only under P, every body counted against the limit."""

    def __init__(self, session: aiohttp.ClientSession, scope: Scope, limits: ImportLimits) -> None:
        self.session, self.scope, self.limits = session, scope, limits
        self.received = 0

    async def get(self, url: str) -> Answer:
        for _ in range(self.limits.redirects + 1):
            try:
                async with self.session.get(url, allow_redirects=False) as resp:
                    if resp.status in REDIRECTS and resp.headers.get("Location"):
                        target = urldefrag(urljoin(url, resp.headers["Location"]))[0]
                        if self.scope.relative(target) is None:
                            raise ImportFailed(f"{url} redirects outside {self.scope.root} (to {target})")
                        url = target
                        continue
                    if not 200 <= resp.status < 300:
                        return Answer(url, resp.status)
                    body = await self._read(resp, url)
                    return Answer(url, resp.status, resp.content_type.lower(), resp.charset, body)
            except TimeoutError:
                raise ImportFailed(f"no complete answer from {url} within {self.limits.request_timeout:g} s") from None
            except aiohttp.ClientError as exc:
                raise ImportFailed(f"{url} is not reachable from the emulator ({_one_line(exc)})") from None
        raise ImportFailed(f"{url}: more than {self.limits.redirects} redirects")

    async def _read(self, resp: aiohttp.ClientResponse, url: str) -> bytes:
        declared = resp.content_length
        if declared is not None and self.received + declared > self.limits.bytes:
            raise ImportFailed(f"more than {_size(self.limits.bytes)} in all (at {url})")
        chunks: list[bytes] = []
        async for chunk in resp.content.iter_chunked(64 * 1024):
            self.received += len(chunk)
            if self.received > self.limits.bytes:
                raise ImportFailed(f"more than {_size(self.limits.bytes)} in all (at {url})")
            chunks.append(chunk)
        return b"".join(chunks)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _size(count: int) -> str:
    return f"{count / MB:g} MB" if count >= MB else f"{count} bytes"


async def _all(calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run calls at once in a task group; the first `ImportFailed` cancels the others."""
    tasks: list[asyncio.Task[T]] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call()) for call in calls]
    except ExceptionGroup as failed:
        first = next((exc for exc in failed.exceptions if isinstance(exc, ImportFailed)), None)
        if first is None:
            raise
        raise first from None
    return [task.result() for task in tasks]


# ----- the crawl ----------------------------------------------------------------------------


@dataclass
class _Page:
    relative: str
    seq: int
    listed: bool
    """Listed in P's `<nav>`: it must be there (a broken link elsewhere is skipped)."""
    site_page: SitePage | None = None


@dataclass
class _File:
    relative: str
    name: str
    listed: bool
    dimensions: dict[str, int] | None = None


@dataclass
class _Read:
    answer: Answer
    soup: BeautifulSoup | None = None
    markdown: Answer | None = None


@dataclass
class _Crawl:
    fetcher: Fetcher
    limits: ImportLimits
    reads_alternate: bool = True
    """Read a page's markdown alternate when it offers one (else only its HTML)."""
    keeps_first_heading: bool = False
    """Keep the `<h1>` taken as the title in the content (else drop it)."""
    pages: dict[str, _Page] = field(default_factory=dict)
    queue: list[str] = field(default_factory=list)
    files: dict[str, _File] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    @property
    def scope(self) -> Scope:
        return self.fetcher.scope

    async def run(self, start: str) -> Site:
        index = await self.fetcher.get(start)
        if not index.ok:
            raise ImportFailed(f"{index.url} answered HTTP {index.status}")
        if index.content_type not in HTML_TYPES:
            raise ImportFailed(f"{index.url} is not HTML (Content-Type {index.content_type or 'missing'})")
        soup = _soup(index)
        navs = soup.find_all("nav")
        for anchor in (navs[0] if navs else soup).find_all("a", href=True):
            self._see_page(urljoin(index.url, anchor["href"]), listed=bool(navs))
        listed_files = {id(tag) for nav in navs for tag in nav.find_all(["a", "img"])}
        self._see_files(soup, index.url, listed=lambda tag: id(tag) in listed_files)

        done = 0
        while done < len(self.queue):
            batch = self.queue[done : done + self.limits.concurrency]
            done += len(batch)
            reads = await _all([lambda relative=relative: self._read_page(relative) for relative in batch])
            for relative, read in zip(batch, reads, strict=True):
                self._take_page(self.pages[relative], read)

        files = await self._read_files()
        return Site(self._site_pages(), files)

    # discovery

    def _see_page(self, url: str, listed: bool) -> None:
        relative = self.scope.relative(urldefrag(url)[0])
        if relative is None or not _is_page(relative):
            return
        segments = relative.strip("/").split("/")
        for depth in range(1, len(segments) + 1):  # parents first: a/ is seen with a/b/
            self._add_page("/".join(segments[:depth]) + "/", listed and depth == len(segments))

    def _add_page(self, relative: str, listed: bool) -> None:
        known = self.pages.get(relative)
        if known is not None:
            known.listed = known.listed or listed
            return
        if len(self.pages) >= self.limits.pages:
            raise ImportFailed(f"more than {self.limits.pages} pages")
        self.pages[relative] = _Page(relative, len(self.pages), listed)
        self.queue.append(relative)

    def _see_files(self, soup: BeautifulSoup, base: str, listed: Callable[[Tag], bool]) -> None:
        for tag in soup.find_all(["a", "img"]):
            attribute = "href" if tag.name == "a" else "src"
            if not tag.get(attribute):
                continue
            relative = self.scope.relative(urldefrag(urljoin(base, tag[attribute]))[0])
            if relative is None or (tag.name == "a" and not _is_file_link(relative)) or relative.endswith("/") or not relative:
                continue
            file = self.files.get(relative)
            if file is None:
                if len(self.files) >= self.limits.files:
                    raise ImportFailed(f"more than {self.limits.files} files")
                file = self.files[relative] = _File(relative, self._file_name(relative), listed(tag))
            file.listed = file.listed or listed(tag)
            if tag.name == "img" and file.dimensions is None:
                file.dimensions = _dimensions(tag)

    def _file_name(self, relative: str) -> str:
        name = unquote(relative.rsplit("/", 1)[-1]) or "file"
        stem, dot, ext = name.rpartition(".")
        candidate, n = name, 1
        while candidate in self.names:
            n += 1
            candidate = f"{stem}-{n}.{ext}" if dot and stem else f"{name}-{n}"
        self.names.add(candidate)
        return candidate

    # pages

    async def _read_page(self, relative: str) -> _Read:
        answer = await self.fetcher.get(self.scope.url(relative))
        if not answer.ok or answer.content_type not in HTML_TYPES:
            return _Read(answer)
        soup = _soup(answer)
        read = _Read(answer, soup)
        alternate = _markdown_alternate(soup) if self.reads_alternate else None
        if alternate is not None:
            url = urldefrag(urljoin(answer.url, alternate))[0]
            if self.scope.relative(url) is not None:
                read.markdown = await self.fetcher.get(url)
                if not read.markdown.ok:
                    raise ImportFailed(f"{url} (the markdown of {answer.url}) answered HTTP {read.markdown.status}")
        return read

    def _take_page(self, page: _Page, read: _Read) -> None:
        answer = read.answer
        if read.soup is None:
            if answer.ok:
                reason = f"is not HTML (Content-Type {answer.content_type or 'missing'})"
            else:
                reason = f"answered HTTP {answer.status}"
            if page.listed or not (answer.ok or answer.status in GONE):
                raise ImportFailed(f"{answer.url} {reason}")
            return  # a broken link: skipped (kept as a placeholder if pages are found below it)
        soup = read.soup
        for anchor in soup.find_all("a", href=True):
            self._see_page(urljoin(answer.url, anchor["href"]), listed=False)
        self._see_files(soup, answer.url, listed=lambda tag: False)
        segments = _segments(page.relative)
        if read.markdown is not None:
            page.site_page = self._from_markdown(segments, read.markdown, main_and_title(soup)[2])
            return
        title, markdown, description = html_page_to_markdown(soup, answer.url, rewrite=self._rewrite, keep_first_heading=self.keeps_first_heading)
        page.site_page = SitePage(segments, title or segments[-1], markdown, description=description)

    def _from_markdown(self, segments: tuple[str, ...], answer: Answer, html_title: str) -> SitePage:
        try:
            text = answer.body.decode(answer.charset or "utf-8")
        except (UnicodeDecodeError, LookupError):
            raise ImportFailed(f"{answer.url} is not {answer.charset or 'utf-8'} text") from None
        meta, markdown = split_front_matter(text)
        title = meta.get("title")
        return SitePage(
            segments,
            str(title) if title not in (None, "") else html_title or segments[-1],
            markdown,
            description=_scalar_text(meta.get("description")),
            emoji=_scalar_text(meta.get("emoji")),
            hidden=meta.get("hidden") is True,
        )

    def _rewrite(self, value: str, base: str, image: bool) -> str:
        known = self.files.get
        return rewrite_link(self.scope, value, base, image, lambda relative: file.name if (file := known(relative)) else None)

    # files

    async def _read_files(self) -> list[SiteFile]:
        items = list(self.files.values())
        out: list[SiteFile] = []
        for start in range(0, len(items), self.limits.concurrency):
            batch = items[start : start + self.limits.concurrency]
            answers = await _all([lambda file=file: self.fetcher.get(self.scope.url(file.relative)) for file in batch])
            for file, answer in zip(batch, answers, strict=True):
                if not answer.ok:
                    if file.listed or answer.status not in GONE:
                        raise ImportFailed(f"{answer.url} answered HTTP {answer.status}")
                    continue  # a broken reference: skipped
                content_type = answer.content_type or "application/octet-stream"
                out.append(SiteFile(file.name, content_type, answer.body, file.dimensions))
        return out

    # the tree

    def _site_pages(self) -> list[SitePage]:
        """Pages read, in the order first seen; a broken page with pages below it stays as an
        empty page titled by its slug, so the paths below it keep working."""
        read = {page.relative for page in self.pages.values() if page.site_page is not None}
        out: list[SitePage] = []
        for page in sorted(self.pages.values(), key=lambda p: p.seq):
            if page.site_page is not None:
                out.append(page.site_page)
            elif any(other.startswith(page.relative) for other in read):
                segments = _segments(page.relative)
                out.append(SitePage(segments, segments[-1]))
        return out


def rewrite_link(scope: Scope, value: str, base: str, image: bool, file_name: Callable[[str], str | None]) -> str:
    """Where a link or image of a page under P points in the markdown: a file (`file_name`
    of its path below P) at `.gitbook/assets/NAME`, a page at its path, else the absolute URL."""
    absolute = urljoin(base, value)
    url, fragment = urldefrag(absolute)
    relative = scope.relative(url)
    if relative is None or relative == "":
        return absolute
    name = file_name(relative)
    if name is not None and (image or _is_file_link(relative)):
        return ASSETS + name
    suffix = f"#{fragment}" if fragment else ""
    if _is_page(relative):
        return "/".join(_segments(relative)) + suffix
    if relative.endswith(".md") and not image:
        return "/".join(_segments(relative[: -len(".md")])) + suffix
    return absolute


def _soup(answer: Answer) -> BeautifulSoup:
    return BeautifulSoup(answer.body, "html.parser", from_encoding=answer.charset)


def _markdown_alternate(soup: BeautifulSoup) -> str | None:
    for link in soup.find_all("link", href=True):
        rel = [value.lower() for value in (link.get("rel") or [])]
        kind = (link.get("type") or "").split(";")[0].strip().lower()
        if "alternate" in rel and kind == "text/markdown":
            return str(link["href"])
    return None


def _dimensions(img: Tag) -> dict[str, int] | None:
    try:
        width = int(str(img.get("width", "")).strip().removesuffix("px"))
        height = int(str(img.get("height", "")).strip().removesuffix("px"))
    except ValueError:
        return None
    return {"width": width, "height": height} if width > 0 and height > 0 else None


_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(fields, markdown): YAML front matter of `key: value` lines (values JSON scalars, a
    bare word read as text) and everything after the line that closes it, untouched."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    fields: dict[str, Any] = {}
    for line in match.group(1).splitlines():
        key, colon, raw = line.partition(":")
        if not colon or not key.strip() or key.startswith((" ", "\t", "#")):
            continue
        raw = raw.strip()
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        fields[key.strip()] = value
    return fields, text[match.end() :]


def _scalar_text(value: Any) -> str | None:
    if value is None or value == "" or isinstance(value, (dict, list, bool)):
        return None
    return str(value)


# ----- entry points -------------------------------------------------------------------------


async def read_site(
    url: str, limits: ImportLimits | None = None, *, reads_alternate: bool = True, keeps_first_heading: bool = False,
    connections: int | None = None,
) -> Site:
    """Every page and file of the website at `url` (a directory URL), or `ImportFailed`;
    `reads_alternate`, `keeps_first_heading` and `connections` (requests at once, each on a
    connection of its own: row importer-connections) play the profile's rows."""
    limits = limits or LIMITS
    if connections is not None:
        limits = replace(limits, concurrency=max(1, connections))
    start = urldefrag(url)[0]
    scope = Scope(start)
    try:
        async with asyncio.timeout(limits.total_timeout):
            timeout = aiohttp.ClientTimeout(total=limits.request_timeout)
            headers = {"User-Agent": USER_AGENT, "Accept": "text/html, text/markdown;q=0.9, */*;q=0.5"}
            connector = aiohttp.TCPConnector(limit=limits.concurrency)  # a connection per request in flight, no more
            async with aiohttp.ClientSession(timeout=timeout, headers=headers, cookie_jar=aiohttp.DummyCookieJar(), connector=connector) as session:
                crawl = _Crawl(Fetcher(session, scope, limits), limits, reads_alternate, keeps_first_heading)
                return await crawl.run(start)
    except ImportFailed as exc:
        raise ImportFailed(f"cannot import from {url}: {exc}") from None
    except TimeoutError:
        raise ImportFailed(f"cannot import from {url}: the import took longer than {limits.total_timeout:g} s") from None


def build_content(store: Store, site: Site) -> tuple[list[Record], list[tuple[Record, bytes]]]:
    """The page tree and the (file, bytes) of a new revision holding the site."""
    roots: list[Record] = []
    by_segments: dict[tuple[str, ...], Record] = {}
    for item in site.pages:
        extra: dict[str, Any] = {"description": item.description, "emoji": item.emoji, "hidden": True if item.hidden else None}
        page = revisions.new_page(store, item.title, item.markdown, **extra)
        page["slug"] = item.segments[-1]
        if item.markdown:
            page["documentId"] = store.new_id()
        parent = by_segments.get(item.segments[:-1])
        (parent["pages"] if parent is not None else roots).append(page)
        by_segments[item.segments] = page
    files: list[tuple[Record, bytes]] = []
    for item in site.files:
        blob = revisions.held_blob_id(item.data, item.content_type)
        record = revisions.new_file(store, item.name, item.content_type, len(item.data), blob=blob, dimensions=item.dimensions)
        files.append((record, item.data))
    return roots, files


def count(site: Site) -> int:
    return len(site.pages) + len(site.files)
