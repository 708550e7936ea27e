"""Writing an export: the current snapshot of a tenant, read from the mirror or backup file
(read-only), written organization by organization into the tree `syncd.read.export.layout`
lays out, in the layout `syncd.read.export` describes."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncd.logging import get_logger
from syncd.read.backup import blobs_dir
from syncd.read.blobs import BlobRefused, BlobStore
from syncd.state import FINISHED, StateStore, StateError
from syncd.read.export.layout import (
    _MARKER_TEXT,
    _ORG_RESERVED,
    _PAGE_RESERVED,
    _WINDOWS_RESERVED,
    ASSETS,
    MARKER,
    SLUG_MAX,
    ExportError,
    _assign,
    _children,
    _claim,
    _claim_file,
    _order,
    _Plan,
    _prepare_target,
    _raw_id,
    _refuse_emptier,
    _title,
    _Tree,
    front_matter,
    slugify,
)
from syncd.read.export.links import _lines, _link_text, _resolver, asset_name, rewritten_lines
from syncd.read.export.records import Held, LinePatch, write_records
from syncd.read.export.sites import write_sites
from syncd.read.sibling_names import SiblingNames
from syncd.safe_text import one_line
from syncd.scope import EVERYTHING, Scope
from syncd.selection import LINK_KINDS, VALUE_KINDS, Dependency, content_dependencies, item_of_row, select

log = get_logger("syncd.export")

_GITBOOK_YAML = "root: ./\n\nstructure:\n  readme: README.md\n  summary: SUMMARY.md\n"

# Kinds written by this module (the rest go to `other/<kind>.json`). `collection-space`
# is the order of a collection's spaces, which the `space` rows already carry.
_ORG_KINDS = (
    "organization", "member", "member-space", "member-team", "team", "saml-provider", "sso-provider",
    "openapi-spec", "openapi-spec-source", "translation", "custom-field", "integration",
    "integration-installation", "collection", "collection-space", "space", "site", "site-section-group",
    "site-section", "site-space", "site-adaptive-schema", "site-published",
)  # fmt: skip
_SCOPED_KINDS = (
    "space-custom-field-value", "revision", "page", "page-link", "file", "file-backlink", "space-link",
    "comment", "comment-reply", "change-request", "change-request-revision", "change-request-page",
    "change-request-page-link", "change-request-file", "change-request-file-backlink",
    "change-request-comment", "change-request-comment-reply",
)  # fmt: skip
HANDLED_KINDS = frozenset(_ORG_KINDS + _SCOPED_KINDS)
HELD_TEXT_MAX = 1 << 20
"""A page's markdown or an OpenAPI source longer than this is not held with the other rows of
its space or organization: it is read again when its own file is written, and written as it
is rewritten (see `_Exporter._current`)."""
_DEFERRED_FIELD = {"page": "markdown", "change-request-page": "markdown", "openapi-spec-source": "text"}
_DEFERRED = "deferred"
"""The row key naming the field of `data` left out to be read when it is written."""


@dataclass
class ExportReport:
    """What an export holds and what it changed on disk."""

    organizations: int = 0
    spaces: int = 0
    pages: int = 0
    change_requests: int = 0
    files: int = 0
    """Files the export holds (the marker not counted)."""
    written: int = 0
    """Files created or changed by this export (unchanged files are left untouched)."""
    removed: int = 0
    """Files of a previous export that this one no longer holds."""
    assets: int = 0
    """File binaries the export holds under `.gitbook/assets/` folders."""
    missing_binaries: list[str] = field(default_factory=list)
    """Export paths (relative to OUT) of file binaries the backup does not hold (made without
    `--with-files`, or a download failed): pages link to them all the same."""
    dependencies: list[Dependency] = field(default_factory=list)
    """What the exported objects need outside the scope (`syncd.selection`)."""


# ----- the source file -------------------------------------------------------------------


def _open_source(db_path: Path) -> StateStore:
    """The mirror, opened read-only: nothing is written into the file or beside it (no
    migration, no WAL switch), so an old backup stays as it is and read-only media work."""
    if not db_path.exists():
        raise ExportError(f"{db_path}: no such file")
    try:
        return StateStore(db_path, readonly=True)
    except StateError as exc:
        raise ExportError(str(exc)) from None


def _choose_tenant(store: StateStore, db_path: Path, tenant: str | None) -> str:
    runs = store.runs()
    finished = sorted({run["tenant"] for run in runs if run["status"] in FINISHED})
    if tenant is not None:
        if tenant not in {run["tenant"] for run in runs}:
            known = ", ".join(finished) or "none"
            raise ExportError(f"{db_path} holds no tenant {tenant!r} (tenants with a complete run: {known})")
        if tenant not in finished:
            raise ExportError(f"{db_path} holds no complete run of tenant {tenant!r}: nothing to export")
        return tenant
    if not finished:
        raise ExportError(f"{db_path} holds no complete run: nothing to export")
    if len(finished) > 1:
        raise ExportError(f"{db_path} holds several tenants ({', '.join(finished)}): choose one with --tenant")
    return finished[0]


# ----- the export ------------------------------------------------------------------------


class _Exporter:
    def __init__(
        self, store: StateStore, tenant: str, tree: _Tree, report: ExportReport, blobs: BlobStore, scope: Scope = EVERYTHING, held: Held | None = None
    ) -> None:
        self.scope = scope
        self.held = held
        """Where the export's files hold an object's text or binary, for the records (`--git`)."""
        self.store = store
        self.tenant = tenant
        self.tree = tree
        self.report = report
        self.blobs = blobs
        self.manifest = blobs.manifest() if blobs.root.is_dir() else {}
        self.on_space: Callable[[], None] | None = None
        """Called after each space is written (progress, and a safe point to stop at)."""

    def rows(self, kind: str, org: str) -> list[dict[str, Any]]:
        return sorted(self._current(kind=kind, org=org), key=_order)

    def _current(self, **where: str) -> Iterator[dict[str, Any]]:
        """The current rows (`StateStore.current`'s filters), one object read at a time: the file
        sorts their keys only (`current_keys`), and a text field longer than `HELD_TEXT_MAX`
        (`_DEFERRED_FIELD`) is left out of `data`, named by the row's `deferred`, and read
        again when its file is written (`_text`). So the memory a row takes is that of its
        own file while it is written, whatever the size of its space."""
        for row in self.store.current_keys(self.tenant, **where):
            data = self.store.current_value(self.tenant, row["kind"], row["id"])
            if data is None:  # not within one snapshot of the file: cannot happen
                continue
            field = _DEFERRED_FIELD.get(row["kind"])
            value = data.get(field) if field else None
            if field and isinstance(value, str) and len(value) > HELD_TEXT_MAX:
                del data[field]
                row[_DEFERRED] = field
            del value  # nor held by this frame while the caller works on the row
            row["data"] = data
            yield row

    def _text(self, row: dict[str, Any], field: str) -> Any:
        """The row's `field`, read again from the file when it was deferred (`_current`)."""
        if row.get(_DEFERRED) != field:
            return row["data"].get(field)
        data = self.store.current_value(self.tenant, row["kind"], row["id"])
        return data.get(field) if isinstance(data, dict) else None

    def _has_text(self, row: dict[str, Any], field: str) -> bool:
        return row.get(_DEFERRED) == field or isinstance(row["data"].get(field), str)

    def _text_pieces(self, row: dict[str, Any], field: str) -> Iterator[str]:
        """The text of the row's `field`, read when the first piece is asked for (a dry run
        asks for none)."""
        text = self._text(row, field)
        if isinstance(text, str):
            yield text

    # ----- organization ---------------------------------------------------------------

    def organization(self, row: dict[str, Any], base: tuple[str, ...]) -> None:
        org = row["id"]
        self.report.organizations += 1
        self.tree.json(base + ("organization.json",), row["data"])
        rows = self._in_scope(row, {kind: self.rows(kind, org) for kind in _ORG_KINDS if kind != "organization"})
        self._people(rows, base)
        for kind, name in (("saml-provider", "saml.json"), ("sso-provider", "sso.json"),
                           ("translation", "translations.json"), ("custom-field", "custom-fields.json")):  # fmt: skip
            if rows[kind]:
                self.tree.json(base + (name,), [r["data"] for r in rows[kind]])
        self._integrations(rows, base)
        self._openapi(rows, base)
        space_paths = self._content(rows, base)
        write_sites(self.tree, rows, base, space_paths)
        self._other(org, base)

    def _in_scope(self, org_row: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        """The organization's rows in the export's scope (content follows its space); what
        they need outside it goes to the report."""
        if self.scope.everything:
            return rows
        chosen = select(self.scope, [item_of_row(org_row)] + [item_of_row(r) for kind_rows in rows.values() for r in kind_rows])
        content = [r for kind in sorted(VALUE_KINDS | LINK_KINDS) for r in self.store.current(self.tenant, kind=kind, org=org_row["id"])]
        space_of = {(r["kind"], r["id"]): str(r["scope"]).removeprefix("space:") for r in content if str(r["scope"]).startswith("space:")}
        self.report.dependencies += chosen.dependencies + content_dependencies(chosen, map(item_of_row, content), space_of)
        return {kind: [r for r in kind_rows if (r["kind"], r["id"]) in chosen] for kind, kind_rows in rows.items()}

    def _people(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> None:
        spaces = _children(rows["member-space"])
        teams = _children(rows["member-team"])
        members = [
            {
                "member": r["data"],
                "spaces": [s["data"] for s in spaces.get(("member", r["id"]), [])],
                "teams": [t["data"] for t in teams.get(("member", r["id"]), [])],
            }
            for r in rows["member"]
        ]
        if members:
            self.tree.json(base + ("members.json",), members)
        if rows["team"]:
            self.tree.json(base + ("teams.json",), [r["data"] for r in rows["team"]])

    def _integrations(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> None:
        installations = _children(rows["integration-installation"])
        items = [
            {"integration": r["data"], "installations": [i["data"] for i in installations.get(("integration", r["id"]), [])]}
            for r in rows["integration"]
        ]
        if items:
            self.tree.json(base + ("integrations.json",), items)

    def _openapi(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> None:
        sources = _children(rows["openapi-spec-source"])
        specs = sorted(rows["openapi-spec"], key=lambda r: (str(r["data"].get("slug", "")), r["id"]))
        for spec, slug in _assign(((r, slugify(r["data"].get("slug"), "spec")) for r in specs), _WINDOWS_RESERVED):
            self.tree.json(base + ("openapi", f"{slug}.json"), spec["data"])
            for source in sources.get(("openapi-spec", spec["id"]), [])[:1]:
                fmt = source["data"].get("format")
                if self._has_text(source, "text"):
                    extension = fmt if fmt in ("yaml", "json") else "txt"
                    parts = base + ("openapi", f"{slug}.source.{extension}")
                    pieces = self._text_pieces(source, "text")
                    pairs = ((text, text) for text in self._text_pieces(source, "text")) if self.held is not None else None
                    self.tree.write(parts, self._held_pieces(source, "text", pairs, pieces, parts, front_matter=False))

    def _other(self, org: str, base: tuple[str, ...]) -> None:
        """Rows of kinds this module does not know, so nothing in the file is left out."""
        for kind in sorted(set(self.store.counts(self.tenant, org)) - HANDLED_KINDS):
            rows = [
                {k: r[k] for k in ("id", "parent_kind", "parent_id", "position", "data")}
                for r in self._current(kind=kind, org=org)
            ]
            self.tree.json(base + ("other", f"{slugify(kind, 'kind')}.json"), rows)

    # ----- collections and spaces -----------------------------------------------------

    def _content(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> dict[str, str]:
        """Write collections and spaces; returns space id -> its path relative to the org."""
        collections = {r["id"]: r for r in rows["collection"]}

        def parent_of(row: dict[str, Any]) -> str | None:
            if row["parent_kind"] == "collection" and row["parent_id"] in collections:
                return str(row["parent_id"])
            return None

        kids: dict[str | None, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        for kind in ("collection", "space"):
            for row in rows[kind]:
                kids[parent_of(row)].append((kind, row))
        space_paths: dict[str, str] = {}
        placed: set[str] = set()
        top_taken = SiblingNames(_ORG_RESERVED)

        def place(items: list[tuple[str, dict[str, Any]]], where: tuple[str, ...], taken: SiblingNames) -> None:
            for kind, row in items:
                if row["id"] in placed:
                    continue
                placed.add(row["id"])
                path = where + (_claim(taken, slugify(_title(row), kind)),)
                if kind == "collection":
                    self.tree.json(path + ("collection.json",), row["data"])
                    place(kids.get(row["id"], []), path, SiblingNames(_WINDOWS_RESERVED))
                else:
                    space_paths[row["id"]] = "/".join(path[len(base) :])
                    self.space(row, path)

        place(kids.get(None, []), base, top_taken)
        # Collections in a parent cycle are reachable from no root: they go to the top.
        place([("collection", r) for r in rows["collection"]], base, top_taken)
        return space_paths

    def space(self, row: dict[str, Any], where: tuple[str, ...]) -> None:
        self.report.spaces += 1
        self.tree.json(where + ("space.json",), row["data"])
        scoped = self._scoped(f"space:{row['id']}")
        values = {_raw_id(r): r["data"].get("value") for r in scoped["space-custom-field-value"]}
        if values:
            self.tree.json(where + ("custom-fields.json",), values)
        self.report.pages += self._content_of(scoped, where, "")
        crs = sorted(scoped["change-request"], key=lambda r: (_number(r), r["id"]))
        named = ((r, _cr_slug(r)) for r in crs)
        for cr, slug in _assign(named, _WINDOWS_RESERVED):
            self.report.change_requests += 1
            path = where + ("change-requests", slug)
            self.tree.json(path + ("change-request.json",), cr["data"])
            self._content_of(self._scoped(f"change-request:{cr['id']}"), path, "change-request-")
        if self.on_space is not None:
            self.on_space()

    def _scoped(self, scope: str) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self._current(scope=scope):
            grouped[row["kind"]].append(row)
        for rows in grouped.values():
            rows.sort(key=_order)
        return grouped

    def _content_of(self, scoped: dict[str, list[dict[str, Any]]], where: tuple[str, ...], prefix: str) -> int:
        """Revision, pages (Git Sync layout), files, comments and links of a space or change request."""
        for revision in scoped[prefix + "revision"][:1]:
            self.tree.json(where + ("revision.json",), revision["data"])
        files = sorted(scoped[prefix + "file"], key=lambda r: (str(r["data"].get("name", "")), r["id"]))
        assets = self._assets(files, where)
        count = self._pages(scoped[prefix + "page"], where, prefix + "page", assets)
        if files:
            self.tree.json(where + ("files.json",), [r["data"] for r in files])
        replies = _children(scoped[prefix + "comment-reply"])
        comments = sorted(scoped[prefix + "comment"], key=_posted)
        if comments:
            self.tree.json(
                where + ("comments.json",),
                [{"comment": c["data"], "replies": [r["data"] for r in sorted(replies.get((prefix + "comment", c["id"]), []), key=_posted)]} for c in comments],
            )
        links: dict[str, Any] = {}
        if scoped["space-link"] and not prefix:
            links["space"] = [r["data"] for r in sorted(scoped["space-link"], key=lambda r: r["id"])]
        for kind, key in ((prefix + "page-link", "pages"), (prefix + "file-backlink", "files")):
            by_owner: dict[str, list[Any]] = defaultdict(list)
            for r in sorted(scoped[kind], key=lambda r: r["id"]):
                by_owner[str(r["parent_id"]).rsplit("/", 1)[-1]].append(r["data"])
            if by_owner:
                links[key] = dict(by_owner)
        if links:
            self.tree.json(where + ("links.json",), links)
        return count

    def _assets(self, files: list[dict[str, Any]], where: tuple[str, ...]) -> dict[str, str]:
        """Write the binaries of `files` (in name order) under `.gitbook/assets/`; returns each
        file name -> the path of its binary from the content's root (the first of a name wins),
        whether the binary could be written or is missing from the backup."""
        taken = SiblingNames()
        by_name: dict[str, str] = {}
        for row in files:
            name = row["data"].get("name")
            asset = _claim_file(taken, asset_name(name if isinstance(name, str) else _raw_id(row)))
            if isinstance(name, str):
                by_name.setdefault(name, "/".join(ASSETS + (asset,)))
            parts = where + ASSETS + (asset,)
            entry = self.manifest.get(str(row["id"]))
            why: BlobRefused | None = BlobRefused("missing", "is not in the manifest")
            if isinstance(entry, dict):
                sha256, size = entry.get("sha256"), entry.get("size")
                if isinstance(sha256, str) and isinstance(size, int) and not isinstance(size, bool):
                    why = self.tree.copy(parts, self.blobs, sha256, size)
            if why is None:
                self.report.assets += 1
                if self.held is not None and isinstance(entry, dict):
                    self.held.binary((row["kind"], str(row["id"])), "/".join(parts), str(entry["sha256"]), int(entry["size"]))
                continue
            self.report.missing_binaries.append("/".join(parts))
            if why.kind != "missing" and not isinstance(self.tree, _Plan):
                log.warning("export.binary_refused", file=one_line(row["id"])[:200], path="/".join(parts), reason=f"its blob {why}")
        return by_name

    def _pages(self, rows: list[dict[str, Any]], where: tuple[str, ...], kind: str, assets: Mapping[str, str]) -> int:
        """Page files in tree order (the first page as README.md), SUMMARY.md, .gitbook.yaml
        and pages.json; returns the page count."""
        kids = _children(rows)
        ids = {r["id"] for r in rows}
        placed: list[tuple[dict[str, Any], str, int]] = []  # (page, its file from the root, depth)
        page_files: dict[str, str] = {}  # page path (from the API, else from the slugs) -> its file
        done: set[str] = set()

        def walk(siblings: list[dict[str, Any]], folder: tuple[str, ...], taken: SiblingNames, depth: int, under: str) -> None:
            for row in siblings:
                if row["id"] in done:
                    continue
                done.add(row["id"])
                slug = _claim(taken, slugify(row["data"].get("slug") or _title(row), "page"))
                children = [c for c in kids.get((kind, row["id"]), []) if c["id"] not in done]
                if not placed:
                    parts: tuple[str, ...] = ("README.md",)
                else:
                    parts = folder + ((slug, "README.md") if children else (f"{slug}.md",))
                rel = "/".join(parts)
                placed.append((row, rel, depth))
                api_path = row["data"].get("path")
                own_slug = row["data"].get("slug")
                path = api_path if isinstance(api_path, str) and api_path else under + str(own_slug or slug)
                page_files.setdefault(path.strip("/"), rel)
                if children:
                    walk(children, folder + (slug,), SiblingNames(_PAGE_RESERVED), depth + 1, path.strip("/") + "/")

        top_taken = SiblingNames(_PAGE_RESERVED)
        walk([r for r in rows if r["parent_kind"] != kind], (), top_taken, 0, "")
        # Pages whose parent page is missing go to the top, after the others; so do pages
        # caught in a parent cycle.
        walk([r for r in rows if r["parent_kind"] == kind and r["parent_id"] not in ids], (), top_taken, 0, "")
        walk(rows, (), top_taken, 0, "")

        summary = ["# Table of contents", ""]
        entries: list[dict[str, Any]] = []
        for row, rel, depth in placed:
            resolve = _resolver(rel, page_files, assets)
            self._page(row, where + tuple(rel.split("/")), resolve)
            summary.append(f"{'  ' * depth}* [{_link_text(_title(row))}]({rel})")
            entries.append({"file": rel, "page": {k: v for k, v in row["data"].items() if k != "markdown"}})
        self.tree.write(where + (".gitbook.yaml",), _GITBOOK_YAML)
        self.tree.write(where + ("SUMMARY.md",), "\n".join(summary) + "\n")
        if entries:
            self.tree.json(where + ("pages.json",), entries)
        return len(entries)

    def _page(self, row: dict[str, Any], parts: tuple[str, ...], resolve: Callable[[str], str | None]) -> None:
        data = row["data"]
        fields: list[tuple[str, Any]] = [("id", _raw_id(row)), ("title", data.get("title", ""))]
        fields += [(name, data[name]) for name in ("description", "emoji") if data.get(name) not in (None, "")]
        if data.get("hidden") is True:
            fields.append(("hidden", True))
        self.tree.write(parts, self._page_pieces(row, front_matter(fields), resolve, parts))

    def _page_pieces(self, row: dict[str, Any], head: str, resolve: Callable[[str], str | None], parts: tuple[str, ...]) -> Iterator[str]:
        """A page file as it is written: its front matter, then its markdown rewritten line
        by line (read only now when it was deferred)."""
        yield head
        markdown = self._text(row, "markdown")
        if isinstance(markdown, str):
            # `rewritten_lines` writes one line for each of `_lines`: the records pair them.
            pairs = zip(_lines(markdown), rewritten_lines(markdown, resolve), strict=True) if self.held is not None else None
            yield from self._held_pieces(row, "markdown", pairs, rewritten_lines(markdown, resolve), parts, front_matter=True)

    def _held_pieces(
        self, row: dict[str, Any], field: str, pairs: Iterator[tuple[str, str]] | None, pieces: Iterator[str], parts: tuple[str, ...], *, front_matter: bool
    ) -> Iterator[str]:
        """The file's pieces as they are written; with records (`held`), each paired with the
        piece of the row's `field` it stands for (`pairs`), and the file noted as the holder of
        the text with the lines it changed (`syncd.read.export.records.LinePatch`)."""
        if self.held is None or pairs is None:
            yield from pieces
            return
        patch = LinePatch()
        for original, written in pairs:
            yield patch.see(original, written)
        self.held.text((row["kind"], str(row["id"])), field, "/".join(parts), patch, front_matter=front_matter)


def _number(row: Mapping[str, Any]) -> int:
    number = row["data"].get("number")
    return number if isinstance(number, int) and not isinstance(number, bool) else 1 << 62


def _cr_slug(row: Mapping[str, Any]) -> str:
    subject = slugify(row["data"].get("subject"), "change-request")
    number = row["data"].get("number")
    if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
        return f"{number}-{subject}"[:SLUG_MAX].rstrip("-")
    return subject


def _posted(row: Mapping[str, Any]) -> tuple[str, str]:
    return (str(row["data"].get("postedAt") or ""), str(row["id"]))


def _choose_orgs(store: StateStore, tenant: str, org: str | None) -> list[tuple[dict[str, Any], str]]:
    """(organization row, directory name) of the organizations to export; names are
    assigned over ALL organizations so a one-organization export uses the same name."""
    rows = sorted(store.current(tenant, kind="organization"), key=lambda r: (_title(r), r["id"]))
    named = _assign(((r, slugify(_title(r), "organization")) for r in rows), _WINDOWS_RESERVED)
    if org is None:
        return named
    chosen = [item for item in named if item[0]["id"] == org] or [item for item in named if _title(item[0]) == org]
    if len(chosen) != 1:
        known = ", ".join(f"{r['id']} ({_title(r)})" for r, _ in named) or "none"
        what = "several organizations are titled" if chosen else "no organization"
        raise ExportError(f"{what} {org!r} in tenant {tenant!r} (organizations: {known})")
    return chosen


def export_mirror(
    db_path: Path, out_dir: Path, tenant: str | None = None, org: str | None = None, *, force: bool = False, scope: Scope = EVERYTHING,
    on_progress: Callable[[int, int | None, int], None] | None = None, records: bool = False,
) -> ExportReport:
    """Export the current snapshot of one tenant (optionally one organization) to `out_dir`.

    The file is only read (see `_open_source`); the binaries of its files come from its blob
    folder (`FILE.blobs/`, see `syncd.read.blobs`), and those it lacks are listed in the report's
    `missing_binaries` without failing the export. `scope`: only these collections, spaces and
    sites (`syncd.selection`; what they need outside it is in the report's `dependencies`).
    `on_progress(spaces done, spaces in all or None with a scope, files so far)` is called
    after each space: the place where a display updates and a stop request (SIGTERM) is met,
    between files, never inside one.

    Raises `ExportError` (exit 2) for a file that is not a syncd mirror or backup, a damaged
    one, one written while it was read, one without a complete run, an unknown tenant or
    organization, several tenants and none chosen, a target directory that is not empty
    and not a previous export, and (unless `force`) an export that would remove all the files
    of the previous export in it, or more than `MAX_REMOVED_RATIO` of them.

    `records`: also write every object as JSON under `.syncd/` (`syncd.read.export.records`),
    what a Git history of the export needs to restore a commit; a scope does not go with them.
    """
    if records and not scope.everything:
        raise ExportError("the records of a Git history hold whole organizations: --include and --exclude do not go with --git")
    db_path, out = Path(db_path), Path(out_dir)
    try:
        with _open_source(db_path) as store:
            try:
                chosen_tenant = _choose_tenant(store, db_path, tenant)
                orgs = _choose_orgs(store, chosen_tenant, org)
                _prepare_target(out, db_path)
                blobs = BlobStore(blobs_dir(db_path))
                org_ids = [str(row["id"]) for row, _ in orgs]

                def with_records(exporter: _Exporter) -> None:
                    if exporter.held is not None:
                        write_records(exporter.tree.write, store, chosen_tenant, org_ids, exporter.held)

                if not force:
                    planned = _Exporter(store, chosen_tenant, _Plan(out), ExportReport(), blobs, scope, Held() if records else None)
                    _refuse_emptier(out, planned, orgs, then=lambda: with_records(planned))
                report = ExportReport()
                tree = _Tree(out)
                tree.write((MARKER,), _MARKER_TEXT)
                exporter = _Exporter(store, chosen_tenant, tree, report, blobs, scope, Held() if records else None)
                if on_progress is not None:
                    spaces = sum(store.counts(chosen_tenant, row["id"]).get("space", 0) for row, _ in orgs) if scope.everything else None
                    exporter.on_space = lambda: on_progress(report.spaces, spaces, len(tree.paths) - 1)
                    exporter.on_space()
                for row, name in orgs:
                    exporter.organization(row, (name,))
                with_records(exporter)
                tree.prune()
            except sqlite3.DatabaseError as exc:  # a page past the schema is damaged
                store.check_unchanged()  # or it changed under an immutable read
                raise ExportError(f"{db_path} cannot be read, it is damaged: {exc}") from None
    except StateError as exc:  # written while it was read (see StateStore.check_unchanged)
        raise ExportError(str(exc)) from None
    report.files = len(tree.paths) - 1
    report.written, report.removed = tree.written, tree.removed
    return report
