"""Export a mirror or backup file to a readable directory of markdown and JSON.

Layout (every directory name is a slug: lower-case ascii letters, digits and `-`; siblings
that would share a slug get `-2`, `-3`, ... in position order, then id order)::

    OUT/.syncd-export                  marker: this directory belongs to `syncd export`
    OUT/<org>/organization.json        the organization's settings
              members.json             members, each with its spaces and teams
              teams.json  saml.json  sso.json  translations.json  custom-fields.json
              integrations.json        integrations, each with its installations
              openapi/<slug>.json      an OpenAPI spec; `<slug>.source.yaml|json` its text
              sites/<site>/site.json   the site; `structure.json` its section groups,
                                       sections and site-spaces in order, each site-space
                                       naming its space's export path (relative to <org>);
                                       the raw `sections.json`, `section-groups.json`,
                                       `site-spaces.json`, `adaptive-schema.json`, `published.json`
              other/<kind>.json        rows of kinds this exporter does not know (none today)
              <collection>/collection.json
              <collection>/<sub-collection>/.../<space>/   a space (or <org>/<space>/)
    <space>/space.json  revision.json  custom-fields.json (name -> value)
            SUMMARY.md                 `# Summary`, then `* [Title](path.md)` nested in page order
            <page>.md                  a page without children
            <page>/README.md           a page with children, which live in <page>/
            pages.json                 every page's other fields, in document order
            files.json  comments.json (each with its replies)  links.json
            change-requests/<number>-<subject>/   change-request.json and the same content
                                       files as a space (SUMMARY.md, pages, files.json, ...)

A page file is front matter then the page's markdown, byte for byte::

    ---
    id: "<page id>"
    title: "<title>"
    description: "<only when set>"
    emoji: "<only when set>"
    ---
    <markdown>

Every front-matter value is a JSON scalar, which is also a YAML scalar (strings are
double-quoted with JSON escapes, and characters YAML does not allow raw are escaped too).

Why it is deterministic: JSON is written with sorted keys, 2-space indent and a final
newline; lists follow positions, then ids; nothing about the export itself (time, paths)
is written. Re-exporting writes only files whose bytes changed and removes the files that
are no longer part of the export, so the tree equals a fresh export byte for byte.

Why it is safe: every path component is a slug or a fixed name, checked before use, so no
title can reach outside OUT; symlinks met inside OUT are replaced, never followed; a
non-empty directory without the marker is refused rather than cleaned.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncd.errors import SyncdError
from syncd.mirror import FINISHED, Mirror

__all__ = [
    "HANDLED_KINDS",
    "MARKER",
    "ExportError",
    "ExportReport",
    "export_mirror",
    "front_matter",
    "json_text",
    "slugify",
    "yaml_scalar",
]

MARKER = ".syncd-export"
_MARKER_TEXT = (
    "This directory is written by `syncd export`.\n"
    "The next export into it replaces changed files and removes the files it no longer holds.\n"
)
SLUG_MAX = 60
_WINDOWS_RESERVED = frozenset({"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(1, 10)})
_ORG_RESERVED = _WINDOWS_RESERVED | {"sites", "openapi", "other"}
_PAGE_RESERVED = _WINDOWS_RESERVED | {"readme", "summary", "change-requests"}
_SAFE_PART = re.compile(r"^[A-Za-z0-9._-]+$")

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


class ExportError(SyncdError):
    """The export cannot run as asked (bad source file, tenant, organization or target)."""

    exit_code = 2


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


# ----- text ------------------------------------------------------------------------------


def slugify(text: Any, fallback: str = "untitled") -> str:
    """A file-system-safe name: ascii lower-case letters, digits and single dashes."""
    value = unicodedata.normalize("NFKD", str(text or ""))
    value = "".join(ch for ch in value if not unicodedata.combining(ch)).lower()
    value = re.sub(r"[^a-z0-9]+", "-", value).strip("-")[:SLUG_MAX].rstrip("-")
    return value or fallback


# YAML forbids these raw (or reads them as line breaks); JSON leaves them raw. Lone
# surrogates cannot be encoded at all; as `\uXXXX` escapes JSON keeps them.
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def yaml_scalar(value: Any) -> str:
    """One YAML flow scalar for `value`: JSON text, with the characters YAML cannot hold
    raw escaped. Strings are always quoted (`2699` or `yes` stay strings)."""
    if isinstance(value, float) and math.isnan(value):
        return ".nan"
    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _NOT_YAML_PRINTABLE.sub(_escape, text)


def front_matter(fields: Iterable[tuple[str, Any]]) -> str:
    """`---` / `key: scalar` lines / `---`, each key a plain identifier."""
    lines = ["---"]
    for key, value in fields:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"front matter key {key!r} is not a plain identifier")
        lines.append(f"{key}: {yaml_scalar(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def json_text(value: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, raw unicode, final newline."""
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=True)
    return _SURROGATE.sub(_escape, text) + "\n"


def _link_text(title: str) -> str:
    """A title as markdown link text: one line, no control characters, brackets escaped."""
    visible = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in title)
    text = " ".join(visible.split()) or "Untitled"
    return re.sub(r"([\\\[\]])", r"\\\1", text)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="replace")


# ----- the output directory --------------------------------------------------------------


class _Tree:
    """Writes files under `root` and removes, at the end, the files it did not write.

    Only changed files are rewritten (atomically, through a temporary file), so a
    re-export of unchanged data touches nothing. Every path part is checked: only slugs and
    fixed names, never `..` or a separator; a symlink or file in place of a directory is
    replaced, never followed.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: set[str] = set()
        self._dirs: set[tuple[str, ...]] = set()
        self.written = 0
        self.removed = 0

    def _directory(self, parts: tuple[str, ...]) -> Path:
        path = self.root
        for depth in range(1, len(parts) + 1):
            path = path / parts[depth - 1]
            if parts[:depth] in self._dirs:
                continue
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                path.unlink()
            if not path.exists():
                path.mkdir()
            self._dirs.add(parts[:depth])
        return path

    def write(self, parts: tuple[str, ...], content: str | bytes) -> None:
        for part in parts:
            if not _SAFE_PART.match(part) or part in (".", ".."):
                raise ExportError(f"export bug: unsafe path part {part!r} in {'/'.join(parts)}")
        rel = "/".join(parts)
        if rel in self.paths:
            raise ExportError(f"export bug: {rel} written twice")
        self.paths.add(rel)
        data = _encode(content) if isinstance(content, str) else content
        path = self._directory(parts[:-1]) / parts[-1]
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        elif path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
            return
        temporary = path.with_name(f".{parts[-1]}.syncd-tmp")
        temporary.unlink(missing_ok=True)
        # O_EXCL: never write through a symlink someone left at the temporary name.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
        self.written += 1

    def json(self, parts: tuple[str, ...], value: Any) -> None:
        self.write(parts, json_text(value))

    def prune(self, directory: Path | None = None, rel: str = "") -> bool:
        """Remove what this export did not write; True when `directory` ends up empty."""
        directory = directory or self.root
        empty = True
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if self.prune(Path(entry.path), child):
                        os.rmdir(entry.path)
                    else:
                        empty = False
                elif child in self.paths or child == MARKER:
                    empty = False
                else:
                    os.unlink(entry.path)
                    self.removed += 1
        return empty


def _prepare_target(out: Path, db_path: Path) -> None:
    """Refuse targets that are not ours: a file, or a non-empty directory without marker."""
    if out.is_symlink() and not out.exists():
        raise ExportError(f"{out} is a broken symbolic link")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    resolved = out.resolve()
    source = db_path.resolve()
    if resolved in source.parents:
        raise ExportError(f"{out} holds the file being exported ({db_path}): choose another directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ExportError(
            f"{out} is not empty and was not made by `syncd export` (no {MARKER} file): "
            "choose a new or empty directory"
        )
    out.mkdir(parents=True, exist_ok=True)


# ----- the source file -------------------------------------------------------------------


def _open_source(db_path: Path) -> Mirror:
    """The mirror, after checking read-only that the file is a syncd state file (so a
    foreign SQLite file is never touched by the Mirror's set-up)."""
    if not db_path.is_file():
        raise ExportError(f"{db_path}: no such file")
    not_ours = f"{db_path} is not a syncd mirror or backup"
    try:
        conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ExportError(f"{not_ours} ({exc})") from None
    if not {"migrations", "runs", "resources"} <= tables:
        raise ExportError(f"{not_ours} (it has no syncd tables)")
    return Mirror(db_path, create=False)


def _choose_tenant(mirror: Mirror, db_path: Path, tenant: str | None) -> str:
    runs = mirror.runs()
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


def _order(row: Mapping[str, Any]) -> tuple[bool, int, str]:
    """Positions first (rows without one after), then ids: the stable sibling order."""
    position = row.get("position")
    return (position is None, position if isinstance(position, int) else 0, str(row["id"]))


def _title(row: Mapping[str, Any]) -> str:
    value = row["data"].get("title")
    return "" if value is None else str(value)


def _raw_id(row: Mapping[str, Any]) -> str:
    """The API id of a row whose mirror id is qualified by its container (`SPACE/PAGE`)."""
    return str(row["id"]).rsplit("/", 1)[-1]


def _claim(taken: set[str], base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... : the first name not in `taken` (which it joins)."""
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        suffix = f"-{number}"
        candidate = base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix
    taken.add(candidate)
    return candidate


def _assign(items: Iterable[tuple[Any, str]], reserved: Iterable[str] = ()) -> list[tuple[Any, str]]:
    """(item, unique slug) in the given order: the first keeps its slug, later ones get -2, -3, ..."""
    taken = set(reserved)
    return [(item, _claim(taken, base)) for item, base in items]


def _children(rows: Iterable[dict[str, Any]]) -> dict[tuple[str | None, str | None], list[dict[str, Any]]]:
    grouped: dict[tuple[str | None, str | None], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["parent_kind"], row["parent_id"])].append(row)
    for siblings in grouped.values():
        siblings.sort(key=_order)
    return grouped


# ----- the export ------------------------------------------------------------------------


class _Exporter:
    def __init__(self, mirror: Mirror, tenant: str, tree: _Tree, report: ExportReport) -> None:
        self.mirror = mirror
        self.tenant = tenant
        self.tree = tree
        self.report = report

    def rows(self, kind: str, org: str) -> list[dict[str, Any]]:
        return sorted(self.mirror.current(self.tenant, kind=kind, org=org), key=_order)

    # ----- organization ---------------------------------------------------------------

    def organization(self, row: dict[str, Any], base: tuple[str, ...]) -> None:
        org = row["id"]
        self.report.organizations += 1
        self.tree.json(base + ("organization.json",), row["data"])
        rows = {kind: self.rows(kind, org) for kind in _ORG_KINDS if kind != "organization"}
        self._people(rows, base)
        for kind, name in (("saml-provider", "saml.json"), ("sso-provider", "sso.json"),
                           ("translation", "translations.json"), ("custom-field", "custom-fields.json")):  # fmt: skip
            if rows[kind]:
                self.tree.json(base + (name,), [r["data"] for r in rows[kind]])
        self._integrations(rows, base)
        self._openapi(rows, base)
        space_paths = self._content(rows, base)
        self._sites(rows, base, space_paths)
        self._other(org, base)

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
                text, fmt = source["data"].get("text"), source["data"].get("format")
                if isinstance(text, str):
                    extension = fmt if fmt in ("yaml", "json") else "txt"
                    self.tree.write(base + ("openapi", f"{slug}.source.{extension}"), text)

    def _other(self, org: str, base: tuple[str, ...]) -> None:
        """Rows of kinds this module does not know, so nothing in the file is left out."""
        for kind in sorted(set(self.mirror.counts(self.tenant, org)) - HANDLED_KINDS):
            rows = [
                {k: r[k] for k in ("id", "parent_kind", "parent_id", "position", "data")}
                for r in self.mirror.current(self.tenant, kind=kind, org=org)
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
        top_taken = set(_ORG_RESERVED)

        def place(items: list[tuple[str, dict[str, Any]]], where: tuple[str, ...], taken: set[str]) -> None:
            for kind, row in items:
                if row["id"] in placed:
                    continue
                placed.add(row["id"])
                path = where + (_claim(taken, slugify(_title(row), kind)),)
                if kind == "collection":
                    self.tree.json(path + ("collection.json",), row["data"])
                    place(kids.get(row["id"], []), path, set(_WINDOWS_RESERVED))
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

    def _scoped(self, scope: str) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.mirror.current(self.tenant, scope=scope):
            grouped[row["kind"]].append(row)
        for rows in grouped.values():
            rows.sort(key=_order)
        return grouped

    def _content_of(self, scoped: dict[str, list[dict[str, Any]]], where: tuple[str, ...], prefix: str) -> int:
        """Revision, pages, files, comments and links of a space or change request."""
        for revision in scoped[prefix + "revision"][:1]:
            self.tree.json(where + ("revision.json",), revision["data"])
        count = self._pages(scoped[prefix + "page"], where, prefix + "page")
        files = sorted(scoped[prefix + "file"], key=lambda r: (str(r["data"].get("name", "")), r["id"]))
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

    def _pages(self, rows: list[dict[str, Any]], where: tuple[str, ...], kind: str) -> int:
        """Page files in tree order, SUMMARY.md and pages.json; returns the page count."""
        kids = _children(rows)
        ids = {r["id"] for r in rows}
        summary = ["# Summary", ""]
        entries: list[dict[str, Any]] = []
        done: set[str] = set()

        def walk(siblings: list[dict[str, Any]], folder: tuple[str, ...], taken: set[str], depth: int) -> None:
            for row in siblings:
                if row["id"] in done:
                    continue
                done.add(row["id"])
                slug = _claim(taken, slugify(row["data"].get("slug") or _title(row), "page"))
                children = [c for c in kids.get((kind, row["id"]), []) if c["id"] not in done]
                parts = folder + ((slug, "README.md") if children else (f"{slug}.md",))
                self._page(row, where + parts)
                rel = "/".join(parts)
                summary.append(f"{'  ' * depth}* [{_link_text(_title(row))}]({rel})")
                entries.append({"file": rel, "page": {k: v for k, v in row["data"].items() if k != "markdown"}})
                if children:
                    walk(children, folder + (slug,), set(_PAGE_RESERVED), depth + 1)

        top_taken = set(_PAGE_RESERVED)
        walk([r for r in rows if r["parent_kind"] != kind], (), top_taken, 0)
        # Pages whose parent page is missing go to the top, after the others; so do pages
        # caught in a parent cycle.
        walk([r for r in rows if r["parent_kind"] == kind and r["parent_id"] not in ids], (), top_taken, 0)
        walk(rows, (), top_taken, 0)
        if rows:
            self.tree.write(where + ("SUMMARY.md",), "\n".join(summary) + "\n")
            self.tree.json(where + ("pages.json",), entries)
        return len(entries)

    def _page(self, row: dict[str, Any], parts: tuple[str, ...]) -> None:
        data = row["data"]
        fields: list[tuple[str, Any]] = [("id", _raw_id(row)), ("title", data.get("title", ""))]
        fields += [(name, data[name]) for name in ("description", "emoji") if data.get(name) not in (None, "")]
        markdown = data.get("markdown")
        self.tree.write(parts, front_matter(fields) + (markdown if isinstance(markdown, str) else ""))

    # ----- sites ----------------------------------------------------------------------

    def _sites(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...], space_paths: dict[str, str]) -> None:
        children = {kind: _children(rows[kind]) for kind in ("site-section-group", "site-section", "site-space", "site-adaptive-schema", "site-published")}
        named = ((r, slugify(_title(r), "site")) for r in rows["site"])
        for site, slug in _assign(named, _WINDOWS_RESERVED):
            path = base + ("sites", slug)
            own = {kind: grouped.get(("site", site["id"]), []) for kind, grouped in children.items()}
            self.tree.json(path + ("site.json",), site["data"])
            for kind, name in (("site-section-group", "section-groups.json"), ("site-section", "sections.json"), ("site-space", "site-spaces.json")):
                if own[kind]:
                    self.tree.json(path + (name,), [r["data"] for r in own[kind]])
            for kind, name in (("site-adaptive-schema", "adaptive-schema.json"), ("site-published", "published.json")):
                for r in own[kind][:1]:
                    self.tree.json(path + (name,), r["data"])
            self.tree.json(path + ("structure.json",), _structure(site, own, space_paths))


def _structure(site: dict[str, Any], own: dict[str, list[dict[str, Any]]], space_paths: dict[str, str]) -> dict[str, Any]:
    """The site's tree in order: section groups (their sections' ids), sections (their
    site-spaces) and the site-spaces outside any section; each site-space names its space
    and the space's export path, relative to the organization's directory."""

    def ident(row: dict[str, Any]) -> Any:
        return row["data"].get("id", row["id"])

    def site_space(row: dict[str, Any]) -> dict[str, Any]:
        data = row["data"]
        space = data.get("space") if isinstance(data.get("space"), dict) else {}
        space_id = space.get("id", data.get("spaceId"))
        return {
            "id": ident(row),
            "title": data.get("title"),
            "path": data.get("path"),
            "default": data.get("default"),
            "condition": data.get("condition"),
            "space": space_id,
            "exportPath": space_paths.get(space_id) if isinstance(space_id, str) else None,
        }

    entries = [(row["data"].get("section"), site_space(row)) for row in own["site-space"]]
    sections = [
        {
            "id": ident(row),
            "title": row["data"].get("title"),
            "path": row["data"].get("path"),
            "default": row["data"].get("default"),
            "sectionGroup": row["data"].get("sectionGroup"),
            "siteSpaces": [entry for section, entry in entries if section == ident(row)],
        }
        for row in own["site-section"]
    ]
    groups = [
        {
            "id": ident(row),
            "title": row["data"].get("title"),
            "sections": [s["id"] for s in sections if s["sectionGroup"] == ident(row)],
        }
        for row in own["site-section-group"]
    ]
    section_ids = {s["id"] for s in sections}
    loose = [entry for section, entry in entries if section not in section_ids]
    return {
        "site": {"id": site["id"], "title": site["data"].get("title")},
        "sectionGroups": groups,
        "sections": sections,
        "siteSpaces": loose,
    }


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


def _choose_orgs(mirror: Mirror, tenant: str, org: str | None) -> list[tuple[dict[str, Any], str]]:
    """(organization row, directory name) of the organizations to export; names are
    assigned over ALL organizations so a one-organization export uses the same name."""
    rows = sorted(mirror.current(tenant, kind="organization"), key=lambda r: (_title(r), r["id"]))
    named = _assign(((r, slugify(_title(r), "organization")) for r in rows), _WINDOWS_RESERVED)
    if org is None:
        return named
    chosen = [item for item in named if item[0]["id"] == org] or [item for item in named if _title(item[0]) == org]
    if len(chosen) != 1:
        known = ", ".join(f"{r['id']} ({_title(r)})" for r, _ in named) or "none"
        what = "several organizations are titled" if chosen else "no organization"
        raise ExportError(f"{what} {org!r} in tenant {tenant!r} (organizations: {known})")
    return chosen


def export_mirror(db_path: Path, out_dir: Path, tenant: str | None = None, org: str | None = None) -> ExportReport:
    """Export the current snapshot of one tenant (optionally one organization) to `out_dir`.

    Raises `ExportError` (exit 2) for a file that is not a syncd mirror or backup, one
    without a complete run, an unknown tenant or organization, several tenants and none
    chosen, and a target directory that is not empty and not a previous export.
    """
    db_path, out = Path(db_path), Path(out_dir)
    with _open_source(db_path) as mirror:
        chosen_tenant = _choose_tenant(mirror, db_path, tenant)
        orgs = _choose_orgs(mirror, chosen_tenant, org)
        _prepare_target(out, db_path)
        report = ExportReport()
        tree = _Tree(out)
        tree.write((MARKER,), _MARKER_TEXT)
        exporter = _Exporter(mirror, chosen_tenant, tree, report)
        for row, name in orgs:
            exporter.organization(row, (name,))
        tree.prune()
    report.files = len(tree.paths) - 1
    report.written, report.removed = tree.written, tree.removed
    return report
