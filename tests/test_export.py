"""Export of a mirror/backup file to a readable directory: content, order, determinism, safety."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncd import catalog
from syncd.emulator import revisions
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.routes.content_model import locate_all
from syncd.emulator.routes.space_model import org_spaces
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from syncd.read.backup import blobs_dir
from syncd.state import StateStore, Row, content_hash
from syncd.read.export import (
    HANDLED_KINDS,
    MARKER,
    ExportError,
    export_mirror,
    slugify,
    yaml_scalar,
)
from syncd.read.blob_download import download_files
from syncd.read.blobs import BlobStore
from tests.conftest import ALL_TOKEN, SMALL, Api

TENANT = "emu"


# ----- a backup file without the crawler: every list of the catalog, read over loopback ---


async def _items(api: Api, kind: catalog.Kind, path: str, query: dict[str, str]) -> list[Any]:
    if kind.shape == "envelope":
        return await api.all_items(path, **query)
    status, data = await api.get(path, **query)
    assert status == 200, (path, status, data)
    return {"items": lambda: data["items"], "array": lambda: data, "tree": lambda: data["pages"]}.get(kind.shape, lambda: [data])()


def _flatten(pages: list[dict[str, Any]], parent: str | None = None) -> Iterator[tuple[dict[str, Any], str | None]]:
    for page in pages:
        yield page, parent
        yield from _flatten(page.get("pages", []), page["id"])


async def _read(api: Api, kind: catalog.Kind, items: list[Any], context: dict[str, str],
                parent: tuple[str, str] | None, scope: str | None, listing: str, rows: list[Row]) -> list[str]:  # fmt: skip
    """Rows of one listing as the crawler stores them (ids, parents, positions, scopes), and
    recursively those of their children; returns the listing keys read."""
    owner = parent[1] if kind.id_is_local and parent else None
    positions: Counter[tuple[str, str] | None] = Counter()
    listings = [listing]
    pairs = _flatten(items) if kind.shape == "tree" else ((item, None) for item in items)
    for item, parent_page in list(pairs):
        where = (kind.name, f"{owner}/{parent_page}" if owner else parent_page) if parent_page else parent
        if kind.parent_field and isinstance(item.get(kind.parent_field), str):
            where = (kind.parent_field_kind or kind.name, item[kind.parent_field])
        raw = str(catalog.dotted(item, kind.id_field)) if kind.id_field else kind.name if kind.shape == "object" else catalog.content_id(item)
        row_id = f"{owner}/{raw}" if owner else raw
        position = positions[where] if kind.ordered else None
        positions[where] += 1
        data = {k: v for k, v in item.items() if k not in kind.strip}
        rows.append(Row(TENANT, kind.name, row_id, context["org"], where[0] if where else None, where[1] if where else None,
                        position, listing, scope, data, catalog.content_hash(kind, data)))  # fmt: skip
        inner = dict(context)
        if kind.binds:
            inner[kind.binds] = str(item.get(kind.bind_field) if kind.bind_field else raw)
        inner_scope = {"space": f"space:{raw}", "change-request": f"change-request:{raw}"}.get(kind.name, scope)
        for child in catalog.children(kind.name):
            if child.when is not None and not child.when(item):
                continue
            for path, query in child.list_paths(inner):
                found = await _items(api, child, path, query)
                key = catalog.listing_key(path, query)
                listings += await _read(api, child, found, inner, (kind.name, row_id), inner_scope if child.scope else None, key, rows)
    return listings


def write_backup(path: Path, rows: Iterable[Row], listings: Iterable[str], tenant: str = TENANT) -> None:
    """One complete run holding `rows`; the listings read cleanly (so missing rows are deleted)."""
    with StateStore(path) as mirror:
        run = mirror.start_run("backup", tenant, tenant)
        mirror.stage(run, rows)
        for listing in sorted(set(listings)):
            mirror.record_listing(run, tenant, listing, ok=True)
        mirror.finish_run(run)


@dataclass
class Backup:
    path: Path
    rows: list[Row]
    listings: list[str]
    store: Store


def build_backup(path: Path) -> Backup:
    """A backup of the generated two-organization tenant, with its files' binaries in
    `<path stem>.blobs/` as `syncd backup --with-files` leaves them."""

    async def build() -> Backup:
        store = Store(seed=7)
        generate(store, parse_spec(SMALL), seed=7, all_token=ALL_TOKEN)
        rows: list[Row] = []
        listings: list[str] = []
        async with serve_emulator(store) as running, aiohttp.ClientSession() as session:
            api = Api(session, running.url, ALL_TOKEN)
            orgs = await api.all_items("/v1/orgs")
            for org in orgs:
                listings += await _read(api, catalog.BY_NAME["organization"], [org], {"org": org["id"]}, None, None, "/v1/orgs", rows)
            files = [{"kind": r.kind, "id": r.id, "data": r.data} for r in rows]
            report = await download_files(files, BlobStore(blobs_dir(path)), session=session)
            assert report.ok and report.downloaded, report
        write_backup(path, rows, listings)
        return Backup(path, rows, listings, store)

    return asyncio.run(build())


@pytest.fixture(scope="module")
def backup(tmp_path_factory: pytest.TempPathFactory) -> Backup:
    """A backup of the generated two-organization tenant (built once for the module)."""
    return build_backup(tmp_path_factory.mktemp("backup") / "backup.db")


# ----- reading an export back ------------------------------------------------------------


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def tree_state(root: Path) -> dict[str, tuple[str, int, int]]:
    """Each file's digest, inode and modification time: a file rewritten with the same bytes
    (a new inode from the atomic replace, a new mtime) differs too."""
    state = {}
    for rel, digest in tree_digest(root).items():
        info = (root / rel).stat()
        state[rel] = (digest, info.st_ino, info.st_mtime_ns)
    return state


def split_page(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body): every front-matter value is a JSON scalar."""
    assert text.startswith("---\n")
    head, sep, body = text[4:].partition("\n---\n")
    assert sep, text[:200]
    fields = {}
    for line in head.split("\n"):
        key, colon, value = line.partition(": ")
        assert colon and key.isidentifier(), line
        fields[key] = json.loads(value)
    return fields, body


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def spaces_in(root: Path) -> dict[str, Path]:
    return {load(p)["id"]: p.parent for p in root.rglob("space.json")}


def rows_of(backup: Backup, kind: str) -> list[Row]:
    return [r for r in backup.rows if r.kind == kind]


@pytest.fixture(scope="module")
def exported(backup: Backup, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    report = export_mirror(backup.path, out)
    assert report.organizations == 2
    assert report.spaces == len(rows_of(backup, "space"))
    assert report.pages == len(rows_of(backup, "page"))
    assert report.files == len(tree_digest(out)) - 1
    return out


# ----- content ---------------------------------------------------------------------------


def without_destinations(markdown: str) -> str:
    """Markdown with its inline links' destinations left out: the export rewrites only those
    (tests/test_export_gitsync.py checks where they point)."""
    return re.sub(r"\]\([^)\s]*\)", "]()", markdown)


def test_every_page_is_a_markdown_file_with_front_matter(backup: Backup, exported: Path) -> None:
    pages = {r.id: r.data for r in rows_of(backup, "page")}
    seen = set()
    for space_id, folder in spaces_in(exported).items():
        for entry in load(folder / "pages.json"):
            fields, body = split_page((folder / entry["file"]).read_text(encoding="utf-8"))
            data = pages[f"{space_id}/{fields['id']}"]
            assert without_destinations(body) == without_destinations(data["markdown"])
            assert body.count("](") == data["markdown"].count("](")
            expected = {"id": data["id"], "title": data["title"]}
            expected |= {k: data[k] for k in ("description", "emoji") if data.get(k)}
            expected |= {"hidden": True} if data.get("hidden") else {}
            assert fields == expected
            assert "markdown" not in entry["page"] and entry["page"]["id"] == data["id"]
            seen.add(f"{space_id}/{fields['id']}")
    assert seen == set(pages)


def test_summary_follows_the_page_tree(backup: Backup, exported: Path) -> None:
    folders = spaces_in(exported)
    checked = 0
    for org_id in sorted(backup.store.orgs):
        for space in org_spaces(backup.store, org_id):
            tree = revisions.get(backup.store, space["revision"])["pages"]
            expected = [(loc.depth - 1, loc.page["title"]) for loc in locate_all(tree)]
            lines = (folders[space["id"]] / "SUMMARY.md").read_text(encoding="utf-8").splitlines()
            assert lines[:2] == ["# Table of contents", ""]
            items = []
            for line in lines[2:]:
                indent = len(line) - len(line.lstrip(" "))
                title, _, target = line.strip()[3:].rpartition("](")
                items.append((indent // 2, title))
                assert (folders[space["id"]] / target.rstrip(")")).is_file()
            assert items == expected
            checked += 1
    assert checked == len(rows_of(backup, "space"))


def test_collections_nest_as_directories(backup: Backup, exported: Path) -> None:
    orgs = {r.id: r.data for r in rows_of(backup, "organization")}
    org_dirs = {load(p)["id"]: p.parent for p in exported.glob("*/organization.json")}
    assert set(org_dirs) == set(orgs)
    nested = 0
    for kind, name in (("collection", "collection.json"), ("space", "space.json")):
        for row in rows_of(backup, kind):
            matches = [p.parent for p in org_dirs[row.org].rglob(name) if load(p)["id"] == row.id]
            assert len(matches) == 1, row.id
            folder = matches[0]
            parent = row.data.get("parent")
            if parent:
                assert load(folder.parent / "collection.json")["id"] == parent
                nested += folder.parent.parent != org_dirs[row.org]
            else:
                assert folder.parent == org_dirs[row.org]
    assert nested, "the generated tenant has collections inside collections"


def test_sites_list_their_structure_in_order(backup: Backup, exported: Path) -> None:
    folders = spaces_in(exported)
    seen = {"sites": 0, "sections": 0, "site-spaces": 0}
    for site in rows_of(backup, "site"):
        [folder] = [p.parent for p in exported.glob("*/sites/*/site.json") if load(p)["id"] == site.id]
        structure = load(folder / "structure.json")
        site_spaces = [r for r in rows_of(backup, "site-space") if r.parent_id == site.id]
        sections = [r for r in rows_of(backup, "site-section") if r.parent_id == site.id]
        assert [s["id"] for s in structure["sections"]] == [r.id for r in sorted(sections, key=lambda r: r.position)]
        listed = [ss for s in structure["sections"] for ss in s["siteSpaces"]] + structure["siteSpaces"]
        assert sorted(ss["id"] for ss in listed) == sorted(r.id for r in site_spaces)
        for section in structure["sections"]:
            ids = [ss["id"] for ss in section["siteSpaces"]]
            assert ids == [r.id for r in sorted(site_spaces, key=lambda r: r.position) if r.data["section"] == section["id"]]
        for entry in listed:
            target = folder.parent.parent / entry["exportPath"]
            assert target == folders[entry["space"]]
        assert load(folder / "site-spaces.json") == [r.data for r in sorted(site_spaces, key=lambda r: r.position)]
        seen["sites"] += 1
        seen["sections"] += len(structure["sections"])
        seen["site-spaces"] += len(listed)
    # The loop ran over something of each kind: an export without sites would pass it vacuously.
    assert all(seen.values()), seen


def test_settings_people_and_space_details(backup: Backup, exported: Path) -> None:
    for org in rows_of(backup, "organization"):
        [folder] = [p.parent for p in exported.glob("*/organization.json") if load(p)["id"] == org.id]
        assert load(folder / "organization.json") == org.data
        members = load(folder / "members.json")
        expected = sorted(r.data["id"] for r in rows_of(backup, "member") if r.org == org.id)
        assert sorted(m["member"]["id"] for m in members) == expected
        assert sum(len(m["spaces"]) for m in members) == len([r for r in rows_of(backup, "member-space") if r.org == org.id])
        for name, kind in (("teams.json", "team"), ("saml.json", "saml-provider"), ("translations.json", "translation"),
                           ("custom-fields.json", "custom-field")):  # fmt: skip
            assert sorted(d["id"] for d in load(folder / name)) == sorted(r.id for r in rows_of(backup, kind) if r.org == org.id)
        assert len(load(folder / "integrations.json")) == len([r for r in rows_of(backup, "integration") if r.org == org.id])
        specs = [r for r in rows_of(backup, "openapi-spec") if r.org == org.id]
        for spec in specs:
            assert load(folder / "openapi" / f"{spec.data['slug']}.json") == spec.data
        for source in (r for r in rows_of(backup, "openapi-spec-source") if r.org == org.id):
            slug = next(s.data["slug"] for s in specs if s.id == source.parent_id)
            text = (folder / "openapi" / f"{slug}.source.{source.data['format']}").read_text(encoding="utf-8")
            assert text == source.data["text"]
    folders = spaces_in(exported)
    for cr in rows_of(backup, "change-request"):
        folder = folders[cr.parent_id] / "change-requests" / f"{cr.data['number']}-{slugify(cr.data['subject'])}"
        assert load(folder / "change-request.json") == cr.data
        pages = [r for r in rows_of(backup, "change-request-page") if r.parent_id.startswith(cr.id)]
        assert len(load(folder / "pages.json")) == len(pages) > 0
    for space in rows_of(backup, "space"):
        files = [r.data for r in rows_of(backup, "file") if r.parent_id == space.id]
        assert load(folders[space.id] / "files.json") == sorted(files, key=lambda d: (d["name"], d["id"]))
        values = {r.data["customField"]["name"]: r.data["value"] for r in rows_of(backup, "space-custom-field-value") if r.parent_id == space.id}
        if values:
            assert load(folders[space.id] / "custom-fields.json") == values
    comments = rows_of(backup, "comment")
    assert comments and all(
        any(c["comment"]["id"] == r.id for c in load(folders[r.parent_id] / "comments.json")) for r in comments
    )


def test_every_catalog_kind_has_a_place() -> None:
    assert set(catalog.BY_NAME) <= HANDLED_KINDS


# ----- determinism, re-export, target safety ---------------------------------------------


def test_second_export_is_byte_identical_and_writes_nothing(backup: Backup, exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    shutil.copytree(exported, out)
    before = tree_state(out)
    report = export_mirror(backup.path, out)
    assert (report.written, report.removed) == (0, 0)
    assert tree_state(out) == before, "a second export must leave every file as it was (not even rewrite it)"
    other = tmp_path / "fresh"
    export_mirror(backup.path, other)
    assert tree_digest(other) == {rel: digest for rel, (digest, _, _) in before.items()}


def test_reexport_of_a_changed_backup_removes_what_is_gone(backup: Backup, exported: Path, tmp_path: Path) -> None:
    db = tmp_path / "changed.db"
    shutil.copy(backup.path, db)
    gone = rows_of(backup, "space")[0]
    renamed = next(r for r in rows_of(backup, "page") if not r.id.startswith(gone.id + "/"))
    data = dict(renamed.data, title="Brand new title")
    rows = [
        replace(r, data=data, hash=content_hash(data)) if r.id == renamed.id else r
        for r in backup.rows
        if r.id != gone.id and r.scope != f"space:{gone.id}"
    ]
    write_backup(db, rows, backup.listings)
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    (out / "stray.txt").write_text("not part of the export")
    (out / "empty" / "dir").mkdir(parents=True)
    report = export_mirror(db, out)
    fresh = tmp_path / "fresh"
    export_mirror(db, fresh)
    assert tree_digest(out) == tree_digest(fresh)
    assert not (out / "empty").exists()
    assert gone.id not in spaces_in(out)
    assert report.removed > len(rows_of(backup, "page")) / len(rows_of(backup, "space"))
    space_dir = spaces_in(out)[renamed.id.split("/")[0]]
    titles = [split_page((space_dir / e["file"]).read_text(encoding="utf-8"))[0]["title"] for e in load(space_dir / "pages.json")]
    assert "Brand new title" in titles


def test_refuses_a_directory_it_did_not_make(backup: Backup, tmp_path: Path) -> None:
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "notes.md").write_text("mine")
    with pytest.raises(ExportError, match="not empty and was not made by `syncd export`") as info:
        export_mirror(backup.path, foreign)
    assert info.value.exit_code == 2
    assert [p.name for p in foreign.iterdir()] == ["notes.md"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="not a directory"):
        export_mirror(backup.path, tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_mirror(backup.path, empty).spaces > 0
    shutil.copy(backup.path, empty / "backup.db")
    with pytest.raises(ExportError, match="holds the file being exported"):
        export_mirror(empty / "backup.db", empty)


def test_symlinks_inside_the_export_are_replaced_not_followed(backup: Backup, exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    outside = tmp_path / "outside"
    outside.mkdir()
    org_dir = next(p.parent for p in out.glob("*/organization.json"))
    shutil.rmtree(org_dir)
    org_dir.symlink_to(outside, target_is_directory=True)
    page = next(out.rglob("SUMMARY.md"))
    page.unlink()
    page.symlink_to(outside / "victim.md")
    export_mirror(backup.path, out)
    assert list(outside.iterdir()) == []
    assert org_dir.is_dir() and not org_dir.is_symlink() and not page.is_symlink()
    assert tree_digest(out) == tree_digest(exported)


# ----- hostile names ---------------------------------------------------------------------


def _row(kind: str, row_id: str, under: tuple[str, str] | None, position: int | None, scope: str | None = None,
         tenant: str = TENANT, org: str = "o1", **data: Any) -> Row:  # fmt: skip
    data = {"id": row_id.rsplit("/", 1)[-1], **data}
    return Row(tenant, kind, row_id, org, under[0] if under else None, under[1] if under else None, position,
               f"list:{kind}", scope, data, content_hash(data))  # fmt: skip


NASTY = ["../x", "..", "/etc/passwd", 'Say "hi": now', "line\nbreak\u2028sep", "CON", "README", "Summary", "", "   ",
         "Ünïcödé 文档 🚀", "a\\b", "[link](x)", "\x00\x7f\x85\ufeff", "a/b/../../c", "-", "Ünïcödé 文档 🚀"]  # fmt: skip


def nasty_backup(path: Path) -> list[Row]:
    space = "s1"
    rows = [
        _row("organization", "o1", None, None, title="../../org"),
        _row("collection", "c1", ("organization", "o1"), 0, title="../.."),
        _row("collection", "c2", ("collection", "c1"), 0, title="..\\..", parent="c1"),
        _row("space", space, ("collection", "c2"), 0, title="/", parent="c2"),
        _row("space", "s2", ("organization", "o1"), 0, title="Sites"),
        _row("site", "site1", ("organization", "o1"), None, title="../site"),
        _row("openapi-spec", "spec1", ("organization", "o1"), None, slug="../../spec"),
        _row("openapi-spec-source", "spec1/openapi-spec-source", ("openapi-spec", "spec1"), None, text="openapi: 3.1.0\n", format="../yaml"),
        _row("change-request", "cr1", ("space", space), None, f"space:{space}", number=1, subject="../../../cr"),
        _row("weird-future-kind", "w1", ("organization", "o1"), None, note="kept"),
    ]
    for index, title in enumerate(NASTY):
        rows.append(_row("page", f"{space}/p{index}", ("space", space), index, f"space:{space}", id=f"p{index}",
                         title=title, slug=title, description=title or None, emoji=title[:2] or None, markdown=f"body {index}\n"))  # fmt: skip
    rows.append(_row("page", f"{space}/child", ("page", f"{space}/p0"), 0, f"space:{space}", id="child", title="..", slug="..", markdown="child\n"))
    rows.append(_row("page", f"{space}/orphan", ("page", f"{space}/missing"), 0, f"space:{space}", id="orphan", title="Orphan", markdown="o\n"))
    write_backup(path, rows, [])
    return rows


def test_hostile_titles_stay_inside_and_stay_readable(tmp_path: Path) -> None:
    db = tmp_path / "nasty.db"
    rows = nasty_backup(db)
    out = tmp_path / "out"
    report = export_mirror(db, out)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != db and not p.name.startswith("nasty.db")]
    assert all(out in p.parents for p in written)
    for p in written:
        for part in p.relative_to(out).parts:
            assert part not in (".", "..") and part.isascii() and part == part.strip()
    names = [p.relative_to(out).as_posix() for p in written]
    assert len({n.lower() for n in names}) == len(names), "names must not collide on a case-insensitive disk"
    space_dir = next(p.parent for p in out.rglob("space.json") if load(p)["id"] == "s1")
    assert report.pages == len(NASTY) + 2
    bodies = {}
    for entry in load(space_dir / "pages.json"):
        fields, body = split_page((space_dir / entry["file"]).read_text(encoding="utf-8"))
        bodies[fields["id"]] = (fields, body)
        head = (space_dir / entry["file"]).read_text(encoding="utf-8").split("\n---\n")[0]
        assert not set(head) & set("\x00\x7f\x85\ufeff\u2028"), head
    for index, title in enumerate(NASTY):
        fields, body = bodies[f"p{index}"]
        assert fields["title"] == title and body == f"body {index}\n"
    assert bodies["child"][1] == "child\n" and bodies["orphan"][1] == "o\n"
    summary = (space_dir / "SUMMARY.md").read_text(encoding="utf-8")
    assert "* [\\[link\\](x)](" in summary and "* [line break sep](" in summary
    assert summary.splitlines()[-1].startswith("* [Orphan]"), "pages whose parent is gone come last"
    assert not set(summary) & set("\x00\x7f\x85\ufeff\u2028")
    org_dir = out / "org"
    assert (org_dir / "sites" / "site" / "site.json").is_file()
    assert (org_dir / "sites-2" / "space.json").is_file(), "a space titled Sites must not mix with the sites folder"
    assert (org_dir / "openapi" / "spec.source.txt").read_text() == "openapi: 3.1.0\n"
    assert load(org_dir / "other" / "weird-future-kind.json")[0]["data"] == {"id": "w1", "note": "kept"}
    assert (space_dir / "change-requests" / "1-cr" / "change-request.json").is_file()
    first = tree_state(out)
    again = export_mirror(db, out)
    assert (again.written, again.removed) == (0, 0)
    assert tree_state(out) == first, "a second export of the same backup must leave every file as it was"
    assert {r.id for r in rows if r.kind == "page"} == {f"s1/{i}" for i in bodies}


@given(st.text())
def test_front_matter_scalars_are_json_and_single_line_yaml(text: str) -> None:
    scalar = yaml_scalar(text)
    assert "\n" not in scalar and "\r" not in scalar
    assert all(ch in "\t" or " " <= ch <= "~" or ("\xa0" <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\ufffd" and ch != "\ufeff") or ch >= "\U00010000" for ch in scalar)
    assert json.loads(scalar) == text
    assert yaml_scalar("2699") == '"2699"' and yaml_scalar(None) == "null"


# ----- source errors ---------------------------------------------------------------------


def test_source_errors_are_one_line(backup: Backup, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ExportError, match="no such file"):
        export_mirror(tmp_path / "missing.db", out)
    text = tmp_path / "notes.db"
    text.write_text("hello, this is not a database at all" * 10)
    with pytest.raises(ExportError, match="not a syncd mirror or backup"):
        export_mirror(text, out)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (text)")
    with pytest.raises(ExportError, match="not a syncd mirror or backup"):
        export_mirror(foreign, out)
    with sqlite3.connect(foreign) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    empty = tmp_path / "empty.db"
    with StateStore(empty) as mirror:
        run = mirror.start_run("backup", "t1", "t1")
        mirror.abandon_run(run, "failed")
    with pytest.raises(ExportError, match="holds no complete run"):
        export_mirror(empty, out)
    with pytest.raises(ExportError, match="no complete run of tenant 't1'"):
        export_mirror(empty, out, tenant="t1")
    two = tmp_path / "two.db"
    shutil.copy(backup.path, two)
    write_backup(two, [_row("organization", "o9", None, None, tenant="other", org="o9", title="Other")], [], tenant="other")
    with pytest.raises(ExportError, match=r"several tenants \(emu, other\): choose one"):
        export_mirror(two, out)
    with pytest.raises(ExportError, match="holds no tenant 'nope'"):
        export_mirror(two, out, tenant="nope")
    with pytest.raises(ExportError, match="no organization 'nope' in tenant 'emu'"):
        export_mirror(two, out, tenant="emu", org="nope")
    assert not out.exists()
    assert export_mirror(two, out, tenant="other").organizations == 1
    assert [p.name for p in out.iterdir() if p.name != MARKER] == ["other"]


def test_one_organization_keeps_its_directory_name(backup: Backup, exported: Path, tmp_path: Path) -> None:
    org = rows_of(backup, "organization")[1]
    out = tmp_path / "one"
    report = export_mirror(backup.path, out, org=org.id)
    assert report.organizations == 1
    [folder] = [p for p in out.iterdir() if p.name != MARKER]
    full = tree_digest(exported)
    assert tree_digest(out) == {k: v for k, v in full.items() if k.startswith(folder.name + "/") or k == MARKER}
    assert export_mirror(backup.path, out, org=org.data["title"]).written == 0


# ----- with the real crawler ---------------------------------------------------------------


async def test_a_crawled_backup_exports_like_the_catalog_says(tmp_path: Path) -> None:
    """The crawler's rows follow the conventions the exporter reads: both exports agree,
    except the change requests' page links, which the crawler reads only where they differ."""
    from syncd.api import TenantClient
    from syncd.read.crawl import Crawler

    store = Store(seed=7)
    generate(store, parse_spec(SMALL), seed=7, all_token=ALL_TOKEN)
    rows: list[Row] = []
    listings: list[str] = []
    async with serve_emulator(store) as running:
        async with TenantClient(TENANT, running.url, ALL_TOKEN) as client:
            with StateStore(tmp_path / "crawl.db") as mirror:
                assert (await Crawler(client, mirror, TENANT).crawl()).status == "complete"
        async with aiohttp.ClientSession() as session:
            api = Api(session, running.url, ALL_TOKEN)
            for org in await api.all_items("/v1/orgs"):
                listings += await _read(api, catalog.BY_NAME["organization"], [org], {"org": org["id"]}, None, None, "/v1/orgs", rows)
    write_backup(tmp_path / "helper.db", rows, listings)
    assert export_mirror(tmp_path / "crawl.db", tmp_path / "crawled").pages == len([r for r in rows if r.kind == "page"])
    export_mirror(tmp_path / "helper.db", tmp_path / "helper")
    helper, crawled = tree_digest(tmp_path / "helper"), tree_digest(tmp_path / "crawled")
    differ = {k for k in helper.keys() | crawled.keys() if helper.get(k) != crawled.get(k)}
    assert all("/change-requests/" in k and k.endswith("/links.json") for k in differ), sorted(differ)[:5]
