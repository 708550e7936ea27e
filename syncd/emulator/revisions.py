"""Content of spaces and change requests as immutable revisions.

A revision record holds the whole page tree and file list; every content change makes a
new revision with a new id, which is what makes a space's `revision` field change exactly
when its content does.
"""

from __future__ import annotations

import copy
import hashlib
import re
import weakref
from collections import OrderedDict
from typing import Any

from syncd.emulator.store import Record, Store

REVISION = "revision"


def slugify(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return slug or "page"


def new_page(store: Store, title: str, markdown: str = "", **extra: Any) -> Record:
    """A page record (children in `pages`); `path` is derived when rendered."""
    ts = store.now_iso()
    page: Record = {
        "id": store.new_id(),
        "title": title,
        "slug": slugify(title),
        "type": "document",
        "markdown": markdown,
        "createdAt": ts,
        "updatedAt": ts,
        "pages": [],
    }
    page.update({k: v for k, v in extra.items() if v is not None})
    return page


def new_file(store: Store, name: str, content_type: str, size: int, blob: str | None = None, **extra: Any) -> Record:
    """A file record; `blob` names its bytes (see `file_bytes`), kept when the file is copied."""
    record: Record = {
        "id": store.new_id(),
        "name": name,
        "contentType": content_type,
        "size": size,
        "blob": blob or store.new_id(12),
    }
    record.update({k: v for k, v in extra.items() if v is not None})
    return record


def file_bytes(record: Record) -> bytes:
    """The content of a file without held bytes: deterministic bytes of its declared size,
    derived from its blob."""
    size = int(record["size"])
    seed = hashlib.sha256(record["blob"].encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


HELD_BYTES_LIMIT = 256 * 1024 * 1024
"""Bytes of imported files an emulator keeps at most (see `HeldBytes`)."""


class HeldBytes:
    """Real bytes of files (the website import's), by blob id, bounded in memory.

    Past `limit` bytes the least recently stored or served blobs are dropped; their
    `downloadURL` then answers 404 instead of serving wrong bytes. Every other file's bytes
    are synthetic (`file_bytes`), so they cost nothing."""

    def __init__(self, limit: int = HELD_BYTES_LIMIT) -> None:
        self.limit = limit
        self.total = 0
        self._blobs: OrderedDict[str, bytes] = OrderedDict()

    def put(self, blob: str, data: bytes) -> None:
        old = self._blobs.pop(blob, None)
        if old is not None:
            self.total -= len(old)
        self._blobs[blob] = data
        self.total += len(data)
        while self.total > self.limit and len(self._blobs) > 1:
            _, dropped = self._blobs.popitem(last=False)
            self.total -= len(dropped)

    def get(self, blob: str) -> bytes | None:
        data = self._blobs.get(blob)
        if data is not None:
            self._blobs.move_to_end(blob)
        return data


_HELD: weakref.WeakKeyDictionary[Store, HeldBytes] = weakref.WeakKeyDictionary()


def held_bytes(store: Store) -> HeldBytes:
    """The store's held bytes (made on first use; they go with the store)."""
    held = _HELD.get(store)
    if held is None:
        held = _HELD[store] = HeldBytes()
    return held


def held_blob_id(data: bytes, content_type: str) -> str:
    """A blob id for real bytes: their content address (with the type they are served as)."""
    return hashlib.sha256(content_type.encode() + b"\0" + data).hexdigest()[:24]


def commit(
    store: Store,
    pages: list[Record],
    files: list[Record],
    parents: list[str] | None = None,
    kind: str = "edits",
    **extra: Any,
) -> Record:
    """Store a new revision (the caller points its space or change request at it)."""
    revision: Record = {
        "id": store.new_id(),
        "pages": pages,
        "files": files,
        "parents": parents or [],
        "type": kind,
        "createdAt": store.now_iso(),
    }
    revision.update(extra)
    return store.add(REVISION, revision)


def get(store: Store, revision_id: str) -> Record:
    return store.tables[REVISION][revision_id]


def fork_tree(store: Store, pages: list[Record], fresh_ids: bool) -> list[Record]:
    """A deep copy of a page tree, with new ids when the copy lives in another space."""
    tree = copy.deepcopy(pages)
    if fresh_ids:
        for page in walk(tree):
            page["id"] = store.new_id()
    return tree


def fork_files(store: Store, files: list[Record], fresh_ids: bool) -> list[Record]:
    copied = copy.deepcopy(files)
    if fresh_ids:
        for record in copied:
            record["id"] = store.new_id()
    return copied


def walk(pages: list[Record]) -> list[Record]:
    """Every page of a tree, depth first in document order."""
    out: list[Record] = []
    stack = list(reversed(pages))
    while stack:
        page = stack.pop()
        out.append(page)
        stack.extend(reversed(page.get("pages", [])))
    return out


def copy_into(store: Store, source_revision_id: str, fresh_ids: bool = True, kind: str = "edits") -> Record:
    """A new revision holding a copy of another revision's pages and files."""
    source = get(store, source_revision_id)
    return commit(
        store,
        fork_tree(store, source["pages"], fresh_ids),
        fork_files(store, source["files"], fresh_ids),
        parents=[] if fresh_ids else [source["id"]],
        kind=kind,
    )
