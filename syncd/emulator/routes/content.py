"""Space content: revisions, pages, files, links, backlinks, search and content import.

Content lives in immutable revisions (see `revisions.py`). A `Holder` names where a piece of
content is read from and written to, a space or one of its change requests, so the change
request family serves the same eight content operations through the `answer_*` functions
here. Pages inside a revision are never mutated: an edit copies only the path from the root
to the edited page (`replace_page`), so a new revision shares every untouched subtree with
its parent, which keeps seeding and editing cheap.

Markdown links between pages use the target's `path` (`[Install](guides/install)`), files
are referenced as `.gitbook/assets/<name>`; links, backlinks and search read them from the
markdown, so a copy of a space keeps working links without any id rewriting.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions, website_import
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.http import ADMIN_PREFIX
from syncd.emulator.profile import IMPORT_DELAY, Profile, profile_of
from syncd.emulator.restyle import restyle
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces, set_space_content, space_urls
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

PAGE, FILE, BLOB = "page", "file", "blob"
ASSETS = ".gitbook/assets/"
FILES_PREFIX = "/_files"
SEARCH_MAX = 512
LINK_STATUSES = ("ok", "broken", "in-app")
PAGE_FORMATS = ("document", "markdown")
TITLE_MAX = 100
# `source` of content/import: the public document shows only the sample `website`; these are
# the import sources the service has offered (plus `file`, the other ContentImportSource type).
IMPORT_SOURCES = (
    "website", "docx", "markdown", "html", "zip", "confluence", "github-wiki", "dropbox-paper",
    "notion", "quip", "google-docs", "open-office", "text", "file",
)  # fmt: skip
SHAREABLE = ("public", "unlisted", "share-link")
DEFAULT_LAYOUT: dict[str, Any] = {
    "width": "default",
    "cover": True,
    "coverSize": "hero",
    "coverMask": "none",
    "title": True,
    "description": True,
    "tableOfContents": True,
    "outline": True,
    "pagination": True,
    "metadata": True,
    "tags": False,
    "actions": True,
    "anchors": True,
}
_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")
_SPACE_URL = re.compile(r"^/(?:app/o/[^/]+/s|pub/s|v1/spaces)/([^/?#]+)")


# ----- model: where content lives ----------------------------------------------------------


@dataclass
class Holder:
    """A space or a change request: the revision to read and how to point at a new one.

    `app_url` is the app URL under which page paths are appended; `context` is the
    backlinks' `versionContext`; `commit` points the holder at a new revision id.
    """

    space: Record
    revision_id: str
    app_url: str
    context: dict[str, Any]
    commit: Callable[[str], None]

    def revision(self, store: Store) -> Record:
        return revisions.get(store, self.revision_id)


def space_app_url(space: Record, base: str) -> str:
    return f"{base}/app/o/{space['org']}/s/{space['id']}/"


def space_holder(store: Store, space: Record, base: str) -> Holder:
    def commit(revision_id: str) -> None:
        set_space_content(store, space, revision_id)

    return Holder(space, space["revision"], space_app_url(space, base), {"type": "revision", "revision": space["revision"]}, commit)


@dataclass(frozen=True)
class Located:
    """A page with its position: `path` (slugs from the root), parent page id, depth (1 = top)."""

    page: Record
    path: str
    parent: str | None
    depth: int


def locate_all(pages: list[Record]) -> list[Located]:
    """Every page of a tree in document order, with its path."""
    out: list[Located] = []
    stack: list[tuple[Record, str, str | None, int]] = [(p, "", None, 1) for p in reversed(pages)]
    while stack:
        page, prefix, parent, depth = stack.pop()
        path = prefix + page["slug"]
        out.append(Located(page, path, parent, depth))
        stack.extend((child, path + "/", page["id"], depth + 1) for child in reversed(page.get("pages", [])))
    return out


def find_page(store: Store, revision_id: str, page_id: str) -> Located | None:
    """A page of a revision by id (for other families, e.g. comment targets); None when absent."""
    return next((loc for loc in locate_all(revisions.get(store, revision_id)["pages"]) if loc.page["id"] == page_id), None)


def find_file(store: Store, revision_id: str, file_id: str) -> Record | None:
    return next((f for f in revisions.get(store, revision_id)["files"] if f["id"] == file_id), None)


def replace_page(pages: list[Record], page_id: str, fn: Callable[[Record], list[Record]]) -> list[Record] | None:
    """A copy of the tree with page `page_id` replaced by `fn(page)` (zero or more pages);
    only the path from the root is copied. None when the page is not in the tree."""
    for index, page in enumerate(pages):
        if page["id"] == page_id:
            return pages[:index] + fn(page) + pages[index + 1 :]
        children = page.get("pages")
        if children:
            replaced = replace_page(children, page_id, fn)
            if replaced is not None:
                return pages[:index] + [{**page, "pages": replaced}] + pages[index + 1 :]
    return None


def unique_slug(siblings: list[Record], title: str) -> str:
    taken = {p["slug"] for p in siblings}
    slug = revisions.slugify(title)[:90]
    candidate, n = slug, 1
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    return candidate


def make_page(store: Store, title: str, markdown: str, siblings: list[Record], **extra: Any) -> Record:
    """A new page whose slug is unique among its siblings; a body gets a `documentId`."""
    page = revisions.new_page(store, title, markdown, **extra)
    page["slug"] = unique_slug(siblings, title)
    if markdown:
        page["documentId"] = store.new_id()
    return page


def add_page(store: Store, pages: list[Record], title: str, markdown: str, parent_id: str | None = None, **extra: Any) -> tuple[list[Record], Record]:
    """(new tree, new page): the page is appended under `parent_id` (or at the root)."""
    if parent_id is None:
        page = make_page(store, title, markdown, pages, **extra)
        return pages + [page], page
    created: list[Record] = []

    def append(parent: Record) -> list[Record]:
        created.append(make_page(store, title, markdown, parent.get("pages", []), **extra))
        return [{**parent, "pages": parent.get("pages", []) + created}]

    tree = replace_page(pages, parent_id, append)
    if tree is None:
        raise bad_request(f"parent: page {parent_id!r} not found in the content")
    return tree, created[0]


def edit_page(store: Store, pages: list[Record], page_id: str, **fields: Any) -> list[Record] | None:
    """The tree with a page's fields changed (a new `documentId` when the body changes)."""
    changes = {k: v for k, v in fields.items() if v is not None}

    def change(page: Record) -> list[Record]:
        edited = {**page, **changes, "updatedAt": store.now_iso()}
        if "markdown" in changes and changes["markdown"] != page.get("markdown"):
            if changes["markdown"]:
                edited["documentId"] = store.new_id()
            else:
                edited.pop("documentId", None)
        return [edited]

    return replace_page(pages, page_id, change)


def remove_page(pages: list[Record], page_id: str) -> list[Record] | None:
    """The tree without a page and its descendants."""
    return replace_page(pages, page_id, lambda page: [])


def register_blob(store: Store, file: Record, data: bytes | None = None) -> None:
    """Make a file's bytes downloadable at its `downloadURL` (copies share the blob): `data`
    when given (held in memory, bounded), else synthetic bytes of the file's size."""
    record = {"id": file["blob"], "blob": file["blob"], "size": file["size"], "contentType": file["contentType"]}
    if data is not None:
        revisions.held_bytes(store).put(file["blob"], data)
        record["held"] = True
    store.add(BLOB, record)


def copy_content(store: Store, revision: Record) -> tuple[list[Record], list[Record]]:
    """Pages and files of a revision with fresh ids, as another space receives them."""
    def fresh(page: Record) -> Record:
        copied = {**page, "id": store.new_id(), "pages": [fresh(child) for child in page.get("pages", [])]}
        if copied.get("documentId"):
            copied["documentId"] = store.new_id()
        return copied

    return [fresh(p) for p in revision["pages"]], [{**f, "id": store.new_id()} for f in revision["files"]]


# ----- rendering ----------------------------------------------------------------------------


def render_file(store: Store, record: Record, base: str) -> dict[str, Any]:
    data = {
        "object": "file",
        "id": record["id"],
        "name": record["name"],
        "contentType": record["contentType"],
        "downloadURL": f"{base}{FILES_PREFIX}/{record['blob']}/{quote(record['name'])}",
        "size": record["size"],
        "dimensions": record.get("dimensions"),
    }
    return h.strip_none(data)


def render_page(page: Record, path: str, app_url: str, *, body: str = "markdown", nested: bool = True) -> dict[str, Any]:
    """A RevisionPageDocument with its body as `markdown` or `document`.

    The public OpenAPI document requires a body on every page (its `Document` oneOf), so nested
    pages in a revision carry their markdown too.
    """
    data: dict[str, Any] = {
        "object": "page",
        "id": page["id"],
        "title": page["title"],
        "emoji": page.get("emoji"),
        "createdAt": page.get("createdAt"),
        "updatedAt": page.get("updatedAt"),
        "kind": "sheet",
        "type": page.get("type", "document"),
        "urls": {"app": app_url + path},
        "slug": page["slug"],
        "path": path,
        "description": page.get("description"),
        "documentId": page.get("documentId"),
        "layout": dict(page.get("layout") or DEFAULT_LAYOUT),
        "tags": [],
        "hidden": page.get("hidden", False),
        "noIndex": page.get("noIndex", False),
        "noRobotsIndex": page.get("noRobotsIndex", False),
    }
    if nested:
        data["pages"] = [render_page(child, f"{path}/{child['slug']}", app_url) for child in page.get("pages", [])]
    if body == "markdown":
        data["markdown"] = page.get("markdown", "")
    elif body == "document":
        data["document"] = markdown_document(page.get("markdown", ""))
    return h.strip_none(data)


def render_tree(pages: list[Record], app_url: str) -> list[dict[str, Any]]:
    return [render_page(page, page["slug"], app_url) for page in pages]


def render_revision(store: Store, holder: Holder, base: str) -> dict[str, Any]:
    revision = holder.revision(store)
    urls = {"app": holder.app_url}
    published = space_urls(holder.space, base)
    for key in ("published", "public"):
        if key in published:
            urls[key] = published[key]
    data: dict[str, Any] = {
        "object": "revision",
        "id": revision["id"],
        "type": revision.get("type", "edits"),
        "parents": list(revision.get("parents", [])),
        "createdAt": revision["createdAt"],
        "pages": render_tree(revision["pages"], holder.app_url),
        "files": [render_file(store, f, base) for f in revision["files"]],
        "reusableContents": [],
        "tags": [],
        "urls": urls,
    }
    merged_from = revision.get("mergedFrom")
    if merged_from:
        from syncd.emulator.routes.change_requests import CHANGE_REQUEST, render_change_request

        record = store.get(CHANGE_REQUEST, merged_from)
        if record is not None:
            data["mergedFrom"] = render_change_request(store, record, base)
    return data


def markdown_document(markdown: str) -> dict[str, Any]:
    """A JSON document of the markdown: one block per paragraph, headings and code kept apart."""
    nodes: list[dict[str, Any]] = []
    for chunk in filter(None, (c.strip("\n") for c in markdown.split("\n\n"))):
        heading = re.match(r"^(#{1,3}) (.*)$", chunk)
        if heading:
            kind, text_value = f"heading-{len(heading.group(1))}", heading.group(2)
        elif chunk.startswith("```"):
            kind, text_value = "code", chunk.strip("`").partition("\n")[2]
        else:
            kind, text_value = "paragraph", chunk
        leaf = {"object": "leaf", "text": text_value, "marks": []}
        nodes.append({"object": "block", "type": kind, "data": {}, "nodes": [{"object": "text", "leaves": [leaf]}]})
    return {"object": "document", "data": {}, "nodes": nodes}


# ----- links, backlinks, search -------------------------------------------------------------


def _link_target(href: str, by_path: dict[str, Record], by_name: dict[str, Record], base: str) -> tuple[str, dict[str, Any]] | None:
    """(status, targetReference) of a markdown link; None for in-page anchors."""
    if href.startswith("#"):
        return None
    if href.startswith(("http://", "https://")):
        parts = urlsplit(href)
        in_app = f"{parts.scheme}://{parts.netloc}" == base and parts.path.startswith("/app/")
        return ("in-app" if in_app else "ok"), {"kind": "url", "url": href}
    if href.startswith("/app/"):
        return "in-app", {"kind": "url", "url": base + href}
    if href.startswith(ASSETS):
        file = by_name.get(href[len(ASSETS) :])
        return ("ok", {"kind": "file", "file": file["id"]}) if file else ("broken", {"kind": "url", "url": href})
    path = href.split("#", 1)[0].strip("/").removesuffix(".md")
    page = by_path.get(path)
    return ("ok", {"kind": "page", "page": page["id"]}) if page else ("broken", {"kind": "url", "url": href})


def content_links(store: Store, holder: Holder, base: str, page_id: str | None = None) -> list[dict[str, Any]]:
    """Link records of a revision (or of one page): one per target, with every location."""
    revision = holder.revision(store)
    located = locate_all(revision["pages"])
    by_path = {loc.path: loc.page for loc in located}
    by_name = {f["name"]: f for f in revision["files"]}
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for loc in located:
        if page_id is not None and loc.page["id"] != page_id:
            continue
        for _, href in _LINK.findall(loc.page.get("markdown", "")):
            resolved = _link_target(href, by_path, by_name, base)
            if resolved is None:
                continue
            status, target = resolved
            key = (status, repr(sorted(target.items())))
            item = grouped.setdefault(
                key,
                {"object": "content-link", "status": status, "relation": "reference", "targetReference": target, "locationReferences": []},
            )
            ref = {"kind": "page", "page": loc.page["id"], "space": holder.space["id"]}
            if ref not in item["locationReferences"]:
                item["locationReferences"].append(ref)
    return list(grouped.values())


def link_stats(items: list[dict[str, Any]], change_request: bool) -> dict[str, Any]:
    broken = sum(1 for item in items if item["status"] == "broken")
    return {"total": len(items), "broken": {"total": broken, "changeRequest": broken if change_request else 0}}


def _sections(markdown: str) -> Iterator[tuple[str, str]]:
    """(heading, body) of each section of a page: the text before the first heading is ''."""
    heading, lines, in_code = "", [], False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        if line.startswith("#") and not in_code:
            if lines or heading:
                yield heading, "\n".join(lines).strip()
            heading, lines = line.lstrip("#").strip(), []
        else:
            lines.append(line)
    yield heading, "\n".join(lines).strip()


def search_revision(store: Store, holder: Holder, query: str) -> list[dict[str, Any]]:
    """Pages whose title or markdown contains the query (case-insensitive), best first."""
    needle = query.lower()
    results: list[tuple[int, dict[str, Any]]] = []
    ancestry: dict[str, list[dict[str, str]]] = {}
    for loc in locate_all(holder.revision(store)["pages"]):
        page = loc.page
        ancestors = ancestry.get(loc.parent, []) if loc.parent else []
        ancestry[page["id"]] = ancestors + [{"title": page["title"]}]
        markdown = page.get("markdown", "")
        title_hit = needle in page["title"].lower()
        if not title_hit and needle not in markdown.lower():
            continue
        page_url = holder.app_url + loc.path
        sections = []
        for heading, text in _sections(markdown):
            if needle in heading.lower() or needle in text.lower():
                anchor = revisions.slugify(heading) if heading else ""
                suffix = f"#{anchor}" if anchor else ""
                sections.append(
                    {
                        "id": f"{page['id']}{suffix}",
                        "title": heading or page["title"],
                        "path": loc.path + suffix,
                        "body": text[:400],
                        "score": 1.0,
                        "resultType": "section",
                        "urls": {"app": page_url + suffix},
                    }
                )
        score = (10 if title_hit else 0) + len(sections)
        results.append(
            (
                score,
                {
                    "object": "search-page-result",
                    "id": page["id"],
                    "title": page["title"],
                    "description": page.get("description", ""),
                    "path": loc.path,
                    "score": float(score),
                    "resultType": "page" if title_hit else "section",
                    "sections": sections,
                    "ancestors": ancestors,
                    "urls": {"app": page_url},
                },
            )
        )
    results.sort(key=lambda pair: -pair[0])
    out = [item for _, item in results]
    for rank, item in enumerate(out, start=1):
        item["rank"] = rank
    return out


def _query(request: web.Request) -> str:
    query = h.query_text(request, "query", required=True, max_len=SEARCH_MAX)
    if not query or not query.strip():
        raise bad_request("query: must not be empty")
    return query


def _content_flags(request: web.Request) -> None:
    """`metadata` and `computed` are accepted booleans; the emulator has no git metadata."""
    h.query_bool(request, "metadata", default=True)
    h.query_bool(request, "computed", default=True)


# ----- content import -----------------------------------------------------------------------


def _same_server(url_origin: str, request: web.Request) -> bool:
    base = urlsplit(h.base_url(request))
    target = urlsplit(url_origin)
    loopback = {"127.0.0.1", "localhost", "::1"}
    if target.scheme != base.scheme or target.port != base.port:
        return False
    return target.hostname == base.hostname or (target.hostname in loopback and base.hostname in loopback)


def _import_url(body: dict[str, Any]) -> str:
    url = h.text(body, "url", required=True, min_len=1, max_len=2048)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise bad_request("url: must be an absolute http(s) URI")
    return url


def import_source(request: web.Request, url: str) -> Record:
    """The emulator space one of its own URLs names (app, published or API location), if the
    caller may read it."""
    store, user = h.store_of(request), h.user_of(request)
    match = _SPACE_URL.match(urlsplit(url).path)
    if match is None:
        raise bad_request(f"cannot import from {url}: not reachable from the emulator")
    space = store.get(SPACE, match.group(1))
    if space is None or space.get("deletedAt"):
        raise bad_request(f"cannot import from {url}: no space at this address")
    if user not in store.members.get(space["org"], {}) and space.get("visibility") not in SHAREABLE:
        raise bad_request(
            f"cannot import from {url}: the space is {space.get('visibility')} and the token's user is not a member of its organization"
        )
    return space


async def import_into(request: web.Request, holder_of: Callable[[web.Request], Holder]) -> web.Response:
    """POST .../content/import: replace the holder's content by a copy of another emulator
    space's (a URL of the emulator's own) or by the website at the URL (`website_import`).

    The holder is looked up again after the website is read, since that takes a while."""
    store, profile = h.store_of(request), profile_of(request)
    holder = holder_of(request)
    body = await h.json_body(request)
    url = _import_url(body)
    h.choice(body, "source", IMPORT_SOURCES, required=True)
    _refuse_if_locked(holder, profile)
    if _same_server(url, request):
        source = import_source(request, url)
        pages, files = copy_content(store, revisions.get(store, source["revision"]))
    else:
        try:
            site = await website_import.read_site(url)
        except website_import.ImportFailed as exc:
            raise bad_request(str(exc)) from None
        holder = holder_of(request)
        _refuse_if_locked(holder, profile)
        if profile.import_restyles:
            for page in site.pages:
                page.markdown = restyle(page.markdown)
        pages, held = website_import.build_content(store, site)
        for file, data in held:
            register_blob(store, file, data)
        files = [file for file, _ in held]
    imported = len(locate_all(pages)) + len(files)
    if profile.import_adds:  # the spec does not say an import replaces what the space holds
        pages, files = _kept_and_added(store, holder, pages, files)
    revision = revisions.commit(store, pages, files, parents=[holder.revision_id])
    if profile.import_deferred:  # the spec does not say the content is in when the import answers
        asyncio.get_running_loop().call_later(IMPORT_DELAY, holder.commit, revision["id"])
    else:
        holder.commit(revision["id"])
    return h.json_answer({"revision": revision["id"], "importedResources": imported, "totalResources": imported})


def _refuse_if_locked(holder: Holder, profile: Profile) -> None:
    """`locked` means "all edits locked" (spec, Space): a profile may count an import as one."""
    if profile.locked_refuses_import and holder.space.get("editMode") == "locked":
        raise bad_request("The space is locked")


def _kept_and_added(store: Store, holder: Holder, pages: list[Record], files: list[Record]) -> tuple[list[Record], list[Record]]:
    """The holder's pages and files (fresh ids in the new revision), then the imported ones."""
    kept_pages, kept_files = copy_content(store, holder.revision(store))
    return kept_pages + pages, kept_files + files


# ----- shared answers (space and change request content) -----------------------------------


def answer_revision(request: web.Request, holder: Holder) -> web.Response:
    _content_flags(request)
    return h.json_answer(render_revision(h.store_of(request), holder, h.base_url(request)))


def answer_pages(request: web.Request, holder: Holder) -> web.Response:
    _content_flags(request)
    pages = holder.revision(h.store_of(request))["pages"]
    return h.json_answer({"pages": render_tree(pages, holder.app_url)})


def answer_files(request: web.Request, holder: Holder) -> web.Response:
    _content_flags(request)
    store, base = h.store_of(request), h.base_url(request)
    return h.list_answer(request, holder.revision(store)["files"], lambda f: render_file(store, f, base), label=lambda f: f["name"])


def _file_of(request: web.Request, holder: Holder) -> Record:
    file_id = request.match_info["fileId"]
    record = find_file(h.store_of(request), holder.revision_id, file_id)
    if record is None:
        raise not_found(f"file {file_id!r} not found in the content")
    return record


def answer_file(request: web.Request, holder: Holder) -> web.Response:
    _content_flags(request)
    return h.json_answer(render_file(h.store_of(request), _file_of(request, holder), h.base_url(request)))


def answer_backlinks(request: web.Request, holder: Holder) -> web.Response:
    """Pages whose markdown mentions the file (by name): where the file is used."""
    store, base = h.store_of(request), h.base_url(request)
    record = _file_of(request, holder)
    file_data = render_file(store, record, base)
    items = []
    for loc in locate_all(holder.revision(store)["pages"]):
        if record["name"] in loc.page.get("markdown", ""):
            items.append(
                {
                    "object": "content-location",
                    "kind": "page",
                    "organization": holder.space["org"],
                    "space": holder.space["id"],
                    "versionContext": holder.context,
                    "page": {"id": loc.page["id"], "title": loc.page["title"], "path": loc.path, "urls": {"app": holder.app_url + loc.path}},
                    "file": file_data,
                }
            )
    return h.list_answer(request, items, lambda item: item)


def _page_of(request: web.Request, holder: Holder) -> Located:
    page_id = request.match_info["pageId"]
    located = find_page(h.store_of(request), holder.revision_id, page_id)
    if located is None:
        raise not_found(f"page {page_id!r} not found in the content")
    return located


def answer_page(request: web.Request, holder: Holder) -> web.Response:
    _content_flags(request)
    body = h.query_choice(request, "format", PAGE_FORMATS, default="markdown")
    located = _page_of(request, holder)
    return h.json_answer(render_page(located.page, located.path, holder.app_url, body=body))


def answer_links(request: web.Request, holder: Holder, page_id: str | None = None, change_request: bool = False) -> web.Response:
    status = h.query_choice(request, "status", LINK_STATUSES)
    items = content_links(h.store_of(request), holder, h.base_url(request), page_id)
    shown = [item for item in items if status is None or item["status"] == status]
    return h.list_answer(request, shown, lambda item: item, extra={"stats": link_stats(items, change_request)})


def answer_page_links(request: web.Request, holder: Holder, change_request: bool = False) -> web.Response:
    located = _page_of(request, holder)
    return answer_links(request, holder, located.page["id"], change_request)


# ----- routes: space content, links and search ---------------------------------------------


def _holder(request: web.Request) -> Holder:
    store = h.store_of(request)
    space = live_space(store, request.match_info["spaceId"], h.user_of(request))
    return space_holder(store, space, h.base_url(request))


@routes.get("/v1/spaces/{spaceId}/content")
async def get_content(request: web.Request) -> web.Response:
    return answer_revision(request, _holder(request))


@routes.post("/v1/spaces/{spaceId}/content/import")
async def import_content(request: web.Request) -> web.Response:
    return await import_into(request, _holder)


@routes.get("/v1/spaces/{spaceId}/content/pages")
async def get_pages(request: web.Request) -> web.Response:
    return answer_pages(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/files")
async def list_files(request: web.Request) -> web.Response:
    return answer_files(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/files/{fileId}")
async def get_file(request: web.Request) -> web.Response:
    return answer_file(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/files/{fileId}/backlinks")
async def get_file_backlinks(request: web.Request) -> web.Response:
    return answer_backlinks(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/page/{pageId}")
async def get_page(request: web.Request) -> web.Response:
    return answer_page(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/page/{pageId}/links")
async def get_page_links(request: web.Request) -> web.Response:
    return answer_page_links(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/links")
async def get_space_links(request: web.Request) -> web.Response:
    return answer_links(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/search")
async def search_space(request: web.Request) -> web.Response:
    query = _query(request)
    holder = _holder(request)
    return h.list_answer(request, search_revision(h.store_of(request), holder, query), lambda item: item)


@routes.get("/v1/orgs/{organizationId}/search")
async def search_org(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    query = _query(request)
    base = h.base_url(request)
    groups: list[dict[str, Any]] = []
    for space in org_spaces(store, org["id"]):
        pages = search_revision(store, space_holder(store, space, base), query)
        if pages:
            score = max(page["score"] for page in pages)
            groups.append({"object": "search-space-result", "type": "space", "id": space["id"], "title": space["title"], "score": score, "pages": pages})
    groups.sort(key=lambda group: -group["score"])
    rank = 0
    for group in groups:
        for page in group["pages"]:
            rank += 1
            page["rank"] = rank
    return h.list_answer(request, groups, lambda item: item)


# ----- file downloads (a signed CDN URL in the real service: no auth) ---------------------


@routes.get(FILES_PREFIX + "/{blob}/{name}")
async def download_file(request: web.Request) -> web.Response:
    store = h.store_of(request)
    blob = store.get(BLOB, request.match_info["blob"])
    if blob is None:
        raise not_found("file not found")
    data = revisions.held_bytes(store).get(blob["blob"]) if blob.get("held") else revisions.file_bytes(blob)
    if data is None:
        raise not_found("file bytes no longer held: the emulator keeps imported files' bytes within a memory bound")
    return web.Response(
        body=data,
        content_type=blob["contentType"],
        headers={"Content-Disposition": f"inline; filename*=UTF-8''{quote(request.match_info['name'])}"},
    )


# ----- admin: edit content as a user of the app would (tests and demo) ---------------------


def _page_fields(body: dict[str, Any], creating: bool) -> dict[str, Any]:
    return {
        "title": h.text(body, "title", required=creating, min_len=1, max_len=TITLE_MAX),
        "markdown": h.text(body, "markdown", default="" if creating else None),
        "description": h.text(body, "description", max_len=500),
        "emoji": h.text(body, "emoji", max_len=50),
    }


def admin_add_page(store: Store, holder: Holder, body: dict[str, Any]) -> web.Response:
    """Add a page (body: title, markdown, parent, description, emoji) in a new revision."""
    fields = _page_fields(body, creating=True)
    parent = h.text(body, "parent", nullable=True)
    title, markdown = fields.pop("title"), fields.pop("markdown")
    revision = holder.revision(store)
    pages, page = add_page(store, revision["pages"], title, markdown, parent, **fields)
    holder.commit(revisions.commit(store, pages, revision["files"], parents=[revision["id"]])["id"])
    located = next(loc for loc in locate_all(pages) if loc.page["id"] == page["id"])
    return h.json_answer(render_page(page, located.path, holder.app_url, body="markdown"), status=201)


def admin_edit_page(store: Store, holder: Holder, page_id: str, body: dict[str, Any]) -> web.Response:
    """Change a page's title, markdown, description or emoji in a new revision."""
    revision = holder.revision(store)
    pages = edit_page(store, revision["pages"], page_id, **_page_fields(body, creating=False))
    if pages is None:
        raise not_found(f"page {page_id!r} not found in the content")
    holder.commit(revisions.commit(store, pages, revision["files"], parents=[revision["id"]])["id"])
    located = next(loc for loc in locate_all(pages) if loc.page["id"] == page_id)
    return h.json_answer(render_page(located.page, located.path, holder.app_url, body="markdown"))


def _admin_holder(request: web.Request) -> Holder:
    store = h.store_of(request)
    space = store.get(SPACE, request.match_info["spaceId"])
    if space is None or space.get("deletedAt"):
        raise not_found(f"space {request.match_info['spaceId']!r} not found")
    return space_holder(store, space, h.base_url(request))


@routes.post(ADMIN_PREFIX + "/spaces/{spaceId}/pages")
async def admin_create_space_page(request: web.Request) -> web.Response:
    holder = _admin_holder(request)
    return admin_add_page(h.store_of(request), holder, await h.json_body(request))


@routes.patch(ADMIN_PREFIX + "/spaces/{spaceId}/pages/{pageId}")
async def admin_patch_space_page(request: web.Request) -> web.Response:
    holder = _admin_holder(request)
    return admin_edit_page(h.store_of(request), holder, request.match_info["pageId"], await h.json_body(request))


@routes.delete(ADMIN_PREFIX + "/spaces/{spaceId}/pages/{pageId}")
async def admin_delete_space_page(request: web.Request) -> web.Response:
    store, holder = h.store_of(request), _admin_holder(request)
    page_id = request.match_info["pageId"]
    revision = holder.revision(store)
    pages = remove_page(revision["pages"], page_id)
    if pages is None:
        raise not_found(f"page {page_id!r} not found in the content")
    holder.commit(revisions.commit(store, pages, revision["files"], parents=[revision["id"]])["id"])
    return h.no_content()


# ----- generator ----------------------------------------------------------------------------

PAGE_TITLES = (
    "Getting started", "Installation", "Configuration", "Authentication", "Webhooks", "Rate limits",
    "Troubleshooting", "FAQ", "Release notes", "Architecture", "Deploying", "Monitoring", "Billing",
    "Permissions", "Data model", "Migrations", "Backups", "Command line", "SDKs", "Error codes",
    "Glossary", "Security", "Roadmap", "Contributing", "Testing", "Performance", "Logging", "Alerts",
)  # fmt: skip
TOPICS = ("the API", "your workspace", "the dashboard", "a new project", "production", "the CLI", "single sign-on", "exports")
EMOJIS = ("1f4d8", "1f680", "2699", "1f4a1", "1f512", "1f41b")
IMAGE_FILES = (("architecture-diagram.png", 1600, 900), ("dashboard-screenshot.png", 1280, 800), ("logo.svg", 512, 512), ("flow-chart.jpg", 1024, 768))
PDF_FILES = ("api-reference.pdf", "security-whitepaper.pdf", "onboarding-checklist.pdf")
CONTENT_TYPES = {"png": "image/png", "svg": "image/svg+xml", "jpg": "image/jpeg", "pdf": "application/pdf"}

_TEMPLATES = (
    """# %(title)s

This page explains how %(title_l)s works with %(topic)s. Read [%(title_a)s](%(link_a)s) first if you are new here.

## Before you begin

- An account with the *edit* role
- Access to %(topic)s
- About %(n)s minutes

## Steps

1. Open the settings of %(topic)s.
2. Follow the instructions in [%(title_b)s](%(link_b)s).
3. Save, then check the result.

```bash
syncd run --profile %(slug)s --retries %(n)s
```
""",
    """# %(title)s

%(title)s keeps %(topic)s consistent across environments.

## Overview

| Setting | Default |
| --- | --- |
| `timeout` | %(n)s s |
| `mode` | strict |

See also [%(title_a)s](%(link_a)s) and the older notes in [the archive](%(broken)s).

## Example

```json
{"name": "%(slug)s", "enabled": true, "limit": %(n)s}
```
""",
    """# %(title)s

![%(image)s](.gitbook/assets/%(image)s)

The diagram above shows where %(title_l)s fits. The full reference is in [%(title_b)s](%(link_b)s).

## Notes

- Changes apply within %(n)s minutes.
- Status of the service: [status page](https://status.example.com).

> Tip: keep %(topic)s up to date before you change %(title_l)s.
""",
    """# %(title)s

Frequently asked questions about %(title_l)s.

## Why does %(title_l)s fail?

Most failures come from %(topic)s. Check [%(title_a)s](%(link_a)s), then [%(title_b)s](%(link_b)s).

## Where is the checklist?

Download [the checklist](.gitbook/assets/%(file)s) or read the [old page](%(broken)s).
""",
)
_TEMPLATES_NO_FILE = (_TEMPLATES[0], _TEMPLATES[1])


def _seed_files(store: Store, rng: random.Random, count: int) -> list[Record]:
    files: list[Record] = []
    for index in range(count):
        if index % 3 == 1:
            name = PDF_FILES[(index // 3) % len(PDF_FILES)]
            record = revisions.new_file(store, name, "application/pdf", rng.randint(20_000, 120_000))
        else:
            name, width, height = IMAGE_FILES[(index + rng.randint(0, 3)) % len(IMAGE_FILES)]
            if any(f["name"] == name for f in files):
                name = f"{index}-{name}"
            ext = name.rsplit(".", 1)[1]
            record = revisions.new_file(store, name, CONTENT_TYPES[ext], rng.randint(2_000, 60_000), dimensions={"width": width, "height": height})
        register_blob(store, record)
        files.append(record)
    return files


def _seed_tree(store: Store, rng: random.Random, count: int, ts: str) -> list[Record]:
    """A tree of `count` pages, nested up to three levels (markdown filled in afterwards)."""
    roots: list[Record] = []
    open_parents: list[tuple[Record, int]] = []
    titles = list(PAGE_TITLES)
    rng.shuffle(titles)
    for index in range(count):
        title = titles[index % len(titles)] + (f" {index // len(titles) + 1}" if index >= len(titles) else "")
        parent: tuple[Record, int] | None = None
        if open_parents and rng.random() < 0.6:
            parent = open_parents[rng.randrange(len(open_parents))]
        siblings = parent[0]["pages"] if parent else roots
        page = {
            "id": store.new_id(),
            "title": title,
            "slug": unique_slug(siblings, title),
            "type": "document",
            "markdown": "",
            "createdAt": ts,
            "updatedAt": ts,
            "pages": [],
        }
        if rng.random() < 0.3:
            page["emoji"] = rng.choice(EMOJIS)
        if rng.random() < 0.5:
            page["description"] = f"How {title.lower()} works"
        siblings.append(page)
        depth = parent[1] + 1 if parent else 1
        if depth < 3:
            open_parents.append((page, depth))
    return roots


def _fill_markdown(store: Store, rng: random.Random, pages: list[Record], files: list[Record]) -> None:
    """Markdown from a few templates, linking to other pages, sometimes to a missing page or a file."""
    located = locate_all(pages)
    templates = _TEMPLATES if files else _TEMPLATES_NO_FILE
    images = [f["name"] for f in files if "dimensions" in f] or [f["name"] for f in files]
    for loc in located:
        page = loc.page
        a = located[rng.randrange(len(located))]
        b = located[rng.randrange(len(located))]
        values = {
            "title": page["title"],
            "title_l": page["title"].lower(),
            "slug": page["slug"],
            "topic": rng.choice(TOPICS),
            "n": rng.randint(2, 60),
            "title_a": a.page["title"],
            "link_a": a.path,
            "title_b": b.page["title"],
            "link_b": b.path,
            "broken": f"archive/{page['slug']}-v1",
            "file": files[rng.randrange(len(files))]["name"] if files else "",
            "image": images[rng.randrange(len(images))] if images else "",
        }
        page["markdown"] = templates[rng.randrange(len(templates))] % values
        page["documentId"] = store.new_id(16)


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """For every space: a page tree, files (images and a PDF), one committed revision."""
    count, file_count = params.get("pages", 0), params.get("files", 0)
    ts = store.now_iso()
    for space in org_spaces(store, org_id):
        files = _seed_files(store, rng, file_count)
        pages = _seed_tree(store, rng, count, ts)
        _fill_markdown(store, rng, pages, files)
        revision = revisions.commit(store, pages, files, parents=[space["revision"]])
        set_space_content(store, space, revision["id"])


# ----- canonical dump -----------------------------------------------------------------------


def _dump_pages(store: Store, org_id: str) -> Iterator[Record]:
    """Every page of every space in document order, wrapped with its space and parent.

    The dump id is the page id; a page id met again (a duplicated space keeps its page ids)
    gets `<space>:<page>` so every record stays distinct.
    """
    seen: set[str] = set()
    for space in org_spaces(store, org_id):
        keys: dict[str, str] = {}
        for loc in locate_all(revisions.get(store, space["revision"])["pages"]):
            key = loc.page["id"] if loc.page["id"] not in seen else f"{space['id']}:{loc.page['id']}"
            seen.add(key)
            keys[loc.page["id"]] = key
            parent = ("page", keys[loc.parent]) if loc.parent else (SPACE, space["id"])
            yield {"id": key, "page": loc.page, "path": loc.path, "space": space, "parent": parent}


def _dump_files(store: Store, org_id: str) -> Iterator[Record]:
    seen: set[str] = set()
    for space in org_spaces(store, org_id):
        for file in revisions.get(store, space["revision"])["files"]:
            key = file["id"] if file["id"] not in seen else f"{space['id']}:{file['id']}"
            seen.add(key)
            yield {"id": key, "file": file, "space": space}


def _render_dumped_page(store: Store, wrapped: Record, base: str) -> dict[str, Any]:
    return render_page(wrapped["page"], wrapped["path"], space_app_url(wrapped["space"], base), body="markdown", nested=False)


DUMP = [
    DumpKind(
        name=PAGE,
        records=_dump_pages,
        render=_render_dumped_page,
        label=lambda data: data["title"],
        parent=lambda store, wrapped: wrapped["parent"],
        volatile=frozenset({"documentId"}),
    ),
    DumpKind(
        name=FILE,
        records=_dump_files,
        render=lambda store, wrapped, base: render_file(store, wrapped["file"], base),
        label=lambda data: data["name"],
        parent=lambda store, wrapped: (SPACE, wrapped["space"]["id"]),
        volatile=frozenset({"downloadURL"}),
    ),
]
