"""Where content lives and how its pages and files render: holders, page trees, files.

Content lives in immutable revisions (see `revisions.py`). A `Holder` names where a piece of
content is read from and written to, a space or one of its change requests, so the change
request family serves the same eight content operations through the `answer_*` functions
of `content_answers`. Pages inside a revision are never mutated: an edit copies only the path
from the root to the edited page (`replace_page`), so a new revision shares every untouched
subtree with its parent, which keeps seeding and editing cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.errors import bad_request
from syncd.emulator.routes.space_model import set_space_content
from syncd.emulator.store import Record, Store

PAGE, FILE, BLOB = "page", "file", "blob"
ASSETS = ".gitbook/assets/"
FILES_PREFIX = "/_files"
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
