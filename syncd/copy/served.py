"""Content that travels: a space whose content the target cannot import from the source
(private, deleted, or read from a backup) is served by syncd's content source and imported
from there.

`Publisher` builds a space's site from the source snapshot (pages and their markdown as read)
and the bytes of its files: a backup's blob folder, or, for a live source, the files
downloaded into the state directory's blob cache (`STATE_DIR/blobs/TENANT/`, fetched with no
credentials from their signed download URLs) just before the site is published.

Only verified blobs are published (`held_blobs`, `BlobStore.verify`): a regular file reached
without following a link, of the manifest's size, whose bytes hash to its name. A file whose
blob is anything else (a link to some file on this machine, a FIFO, bytes that changed) is
left out of the site like a file the backup does not hold, with a warning naming it: what
the content source serves is only ever what was backed up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import anyio

from syncd.content import ContentSource, ServedFile, SitePage, SpaceSite
from syncd.copy.model import Node, Snapshot
from syncd.copy.rules import text
from syncd.logging import get_logger
from syncd.read.blob_download import download_files
from syncd.read.blobs import BlobRefused, BlobStore
from syncd.read.sibling_names import SiblingNames
from syncd.safe_text import one_line

__all__ = ["Publisher", "held_blobs", "site_of_space"]

log = get_logger("syncd.copy")
_SEGMENT = re.compile(r"[^a-z0-9]+")


def held_blobs(store: BlobStore, rows: Iterable[str] | None = None, *, warn: bool = True) -> dict[str, Path]:
    """File row id -> the path of its verified blob (`BlobStore.verify`), for the file rows
    `rows` (every one of the manifest when None); files without one are left out. With `warn`,
    a blob that is there but refused (a link, not a regular file, other bytes) is said once
    per file on stderr: the file is then not served, as one the backup does not hold."""
    manifest = store.manifest()
    out: dict[str, Path] = {}
    for row_id in manifest if rows is None else rows:
        entry = manifest.get(row_id)
        sha256, size = (entry.get("sha256"), entry.get("size")) if isinstance(entry, dict) else (None, None)
        if not isinstance(sha256, str) or not isinstance(size, int) or isinstance(size, bool):
            continue
        try:
            out[row_id] = store.verify(sha256, size)
        except BlobRefused as exc:
            if warn and exc.kind != "missing":
                log.warning("content.file_not_served", file=one_line(row_id)[:200], reason=f"its blob {exc}")
    return out


class Publisher:
    """Publishes source spaces on the run's content source, once per import: `withdraw`
    ends a space's capability when its import has ended (the next import publishes anew)."""

    def __init__(self, source: ContentSource, snapshot: Snapshot, blobs: BlobStore, *, fetch: bool, concurrency: int = 8) -> None:
        self.source, self.snapshot, self.blobs = source, snapshot, blobs
        self.fetch, self.concurrency = fetch, concurrency
        self.published: dict[str, str] = {}
        self.missing: dict[str, list[str]] = {}
        """Source space id -> names of its files that could not be served."""
        self._lock = anyio.Lock()

    async def publish(self, space_id: str) -> str:
        """The URL the target imports `space_id` from (its files fetched first if needed)."""
        async with self._lock:
            if space_id in self.published:
                return self.published[space_id]
            rows = [{"kind": n.kind, "id": n.id, "data": n.data} for n in self.snapshot.children("file", ("space", space_id))]
            if self.fetch and rows:
                report = await download_files(rows, self.blobs, concurrency=self.concurrency)
                for row_id, why in report.failed.items():
                    log.warning("content.file_not_fetched", space=space_id, file=row_id, reason=why)
            # A restore's blobs were verified (and refusals said) when the run began; the hashes
            # are remembered, so this costs a stat per file.
            files = [str(row["id"]) for row in rows]
            held = await anyio.to_thread.run_sync(lambda: held_blobs(self.blobs, files, warn=self.fetch))
            site = site_of_space(self.snapshot, space_id, held)
            self.missing[space_id] = [f.name for f in site.missing_files]
            url = self.source.publish(space_id, site)
            self.published[space_id] = url
            return url

    def withdraw(self, space_id: str) -> None:
        """The import of `space_id` has ended (done or not): its capability URL is dead."""
        url = self.published.pop(space_id, None)
        if url is not None:
            self.source.withdraw(url)

    def shown(self, text: str) -> str:
        """`text` (a URL, an error) without a live capability or the public URL's password."""
        return self.source.shown(text)

    def opened(self, space_id: str) -> int:
        """Connections the import of `space_id` has read its site over so far."""
        return self.source.opened(space_id)

    def refused(self) -> int:
        """Connections the content source has closed at once for want of room."""
        return self.source.refused


def site_of_space(snapshot: Snapshot, space_id: str, blobs: Mapping[str, Path]) -> SpaceSite:
    """The site of a space as a snapshot holds it; `blobs` maps a file's row id to the path of
    its bytes (files not in it are listed as missing, neither served nor linked)."""
    space = snapshot.get("space", space_id)
    taken = SiblingNames()

    def pages_under(parent: tuple[str, str], prefix: str) -> list[SitePage]:
        out = []
        for node in snapshot.children("page", parent):
            title = text(node.data.get("title")) or "Untitled"
            path = _page_path(node, prefix, title, taken)
            page = SitePage(
                path=path, title=title, markdown=str(node.data.get("markdown") or ""),
                description=text(node.data.get("description")), emoji=text(node.data.get("emoji")), hidden=bool(node.data.get("hidden")),
            )
            page.children = pages_under(("page", node.id), path + "/")
            out.append(page)
        return out

    pages = pages_under(("space", space_id), "")
    files = [_file(node, blobs.get(node.id)) for node in snapshot.children("file", ("space", space_id))]
    title = text(space.data.get("title")) if space is not None else None
    return SpaceSite(title or space_id, pages, files)


def _slug(title: str) -> str:
    return _SEGMENT.sub("-", title.lower()).strip("-") or "page"


def _page_path(node: Node, prefix: str, title: str, taken: SiblingNames) -> str:
    """The page's path as read (the links of the stored markdown use it) when it lies under
    its parent's; else a slug of its title under its parent. Unique, and no segment an
    importer could take for a step up or aside (`..`, `.`, empty)."""
    path = node.data.get("path")
    read = path.strip("/") if isinstance(path, str) else ""
    wanted = read if read and read.startswith(prefix) and "/" not in read[len(prefix) :] else prefix + (text(node.data.get("slug")) or _slug(title))
    wanted = "/".join(segment if segment not in ("", ".", "..") else "page" for segment in wanted.split("/"))
    if taken.free(wanted):
        return wanted
    found = taken.numbered(wanted, lambda n: f"{wanted}-{n}", 2)
    assert found is not None  # no end: some number is free
    return found


def _file(node: Node, path: Path | None) -> ServedFile:
    data = node.data
    dimensions = data.get("dimensions") if isinstance(data.get("dimensions"), dict) else {}
    width, height = dimensions.get("width"), dimensions.get("height")
    name = text(data.get("name")) or node.api_id
    return ServedFile(
        name=name.replace("/", "_"), content_type=str(data.get("contentType") or "application/octet-stream"),
        size=int(data["size"]) if isinstance(data.get("size"), int) else 0, path=path,
        width=width if isinstance(width, int) else None, height=height if isinstance(height, int) else None,
    )
