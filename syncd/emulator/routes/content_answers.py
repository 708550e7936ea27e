"""Answers about a holder's content, a space's or a change request's: its revision, pages,
files, backlinks and links, a content import into it, and the admin's page edits. The content
routes and the change-request routes serve the same operations through these."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions, website_import
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.profile import IMPORT_DELAY, Profile, profile_of
from syncd.emulator.restyle import restyle
from syncd.emulator.routes.change_request_model import CHANGE_REQUEST, render_change_request
from syncd.emulator.routes.content_links import content_links, link_stats
from syncd.emulator.routes.content_model import (
    Holder,
    Located,
    add_page,
    copy_content,
    edit_page,
    find_file,
    find_page,
    locate_all,
    register_blob,
    render_file,
    render_page,
    render_tree,
)
from syncd.emulator.routes.space_model import SPACE, space_urls
from syncd.emulator.store import Record, Store

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
_SPACE_URL = re.compile(r"^/(?:app/o/[^/]+/s|pub/s|v1/spaces)/([^/?#]+)")


# ----- rendering ----------------------------------------------------------------------------


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
        record = store.get(CHANGE_REQUEST, merged_from)
        if record is not None:
            data["mergedFrom"] = render_change_request(store, record, base)
    return data


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
            site = await website_import.read_site(
                url, reads_alternate=profile.import_reads_alternate, keeps_first_heading=profile.import_keeps_first_heading,
                connections=profile.import_connections,
            )
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


def _content_flags(request: web.Request) -> None:
    """`metadata` and `computed` are accepted booleans; the emulator has no git metadata."""
    h.query_bool(request, "metadata", default=True)
    h.query_bool(request, "computed", default=True)


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
