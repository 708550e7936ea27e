"""Export in GitBook's Git Sync layout: per space (and change request) `.gitbook.yaml`,
`README.md`, `SUMMARY.md`, nested pages and `.gitbook/assets/`; every link that resolved in
the stored markdown resolves in the export; binaries with the right bytes; re-export identical."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncd.cli import main
from syncd.read.backup import blobs_dir
from syncd.read.export import ASSETS, asset_name, export_mirror, rewrite_links, slugify
from tests.test_export import (
    Backup,
    _row,
    build_backup,
    load,
    rows_of,
    spaces_in,
    split_page,
    tree_digest,
    write_backup,
)
from syncd.state import Row

GITBOOK_YAML = "root: ./\n\nstructure:\n  readme: README.md\n  summary: SUMMARY.md\n"
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
DANGLING = re.compile(r"^archive/[a-z0-9-]+-v1$")


@pytest.fixture(scope="module")
def backup(tmp_path_factory: pytest.TempPathFactory) -> Backup:
    return build_backup(tmp_path_factory.mktemp("backup") / "backup.db")


@pytest.fixture(scope="module")
def manifest(backup: Backup) -> dict[str, dict[str, object]]:
    return load(blobs_dir(backup.path) / "manifest.json")


@pytest.fixture(scope="module")
def exported(backup: Backup, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    report = export_mirror(backup.path, out)
    files = rows_of(backup, "file") + rows_of(backup, "change-request-file")
    assert report.assets == len(files) and report.missing_binaries == []
    return out


@dataclass
class Root:
    """A folder in Git Sync layout: a space's, or a change request's inside it."""

    folder: Path
    pages: list[Row]
    files: list[Row]

    @property
    def page_by_path(self) -> dict[str, Row]:
        return {row.data["path"]: row for row in self.pages}

    @property
    def file_by_name(self) -> dict[str, Row]:
        return {row.data["name"]: row for row in sorted(self.files, key=lambda r: (r.data["name"], r.id))[::-1]}

    def first_page(self) -> Row:
        top = [r for r in self.pages if r.parent_kind not in ("page", "change-request-page")]
        return min(top, key=lambda r: (r.position, r.id))


def roots(backup: Backup, exported: Path) -> Iterator[Root]:
    folders = spaces_in(exported)
    for space in rows_of(backup, "space"):
        pages = [r for r in rows_of(backup, "page") if r.scope == f"space:{space.id}"]
        files = [r for r in rows_of(backup, "file") if r.parent_id == space.id]
        yield Root(folders[space.id], pages, files)
    for cr in rows_of(backup, "change-request"):
        folder = folders[cr.parent_id] / "change-requests" / f"{cr.data['number']}-{slugify(cr.data['subject'])}"
        pages = [r for r in rows_of(backup, "change-request-page") if r.scope == f"change-request:{cr.id}"]
        files = [r for r in rows_of(backup, "change-request-file") if r.parent_id == cr.id]
        yield Root(folder, pages, files)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def body_of(root: Root, page: Row) -> tuple[Path, str]:
    """The exported file of `page` and its markdown."""
    [entry] = [e for e in load(root.folder / "pages.json") if e["page"]["id"] == page.data["id"]]
    path = root.folder / entry["file"]
    fields, body = split_page(path.read_text(encoding="utf-8"))
    assert fields["id"] == page.data["id"]
    return path, body


# ----- the layout ------------------------------------------------------------------------


def test_every_space_and_change_request_is_a_git_sync_folder(backup: Backup, exported: Path) -> None:
    checked = 0
    for root in roots(backup, exported):
        assert (root.folder / ".gitbook.yaml").read_text(encoding="utf-8") == GITBOOK_YAML
        fields, _ = split_page((root.folder / "README.md").read_text(encoding="utf-8"))
        assert fields["id"] == root.first_page().data["id"]
        entries = load(root.folder / "pages.json")
        lines = (root.folder / "SUMMARY.md").read_text(encoding="utf-8").splitlines()
        assert lines[:2] == ["# Table of contents", ""]
        targets = [line.strip().rpartition("](")[2].rstrip(")") for line in lines[2:]]
        assert targets == [e["file"] for e in entries] and targets[0] == "README.md"
        assert lines[2].startswith("* [")
        for entry in entries[1:]:
            assert entry["file"].endswith(".md") and entry["file"] != "README.md"
            nested = entry["file"].endswith("/README.md")
            children = [r for r in root.pages if r.parent_id and r.parent_id.endswith("/" + entry["page"]["id"])]
            assert nested == bool(children), entry["file"]
        assert len(entries) == len(root.pages)
        checked += 1
    assert checked == len(rows_of(backup, "space")) + len(rows_of(backup, "change-request"))


def test_assets_hold_the_backup_blobs_byte_for_byte(backup: Backup, exported: Path, manifest: dict[str, dict[str, object]]) -> None:
    compared = 0
    for root in roots(backup, exported):
        folder = root.folder.joinpath(*ASSETS)
        written = sorted(p for p in folder.iterdir()) if folder.exists() else []
        assert len(written) == len(root.files)
        assert len({p.name.lower() for p in written}) == len(written)
        for row in root.files:
            # The generator's names are already safe: the binary keeps its name.
            path = folder / row.data["name"]
            assert sha256(path) == manifest[row.id]["sha256"]
            assert path.stat().st_size == row.data["size"]
            compared += 1
    assert compared == len(manifest) > 0, (compared, len(manifest))


# ----- links -----------------------------------------------------------------------------


def test_every_link_that_resolved_in_the_source_resolves_in_the_export(
    backup: Backup, exported: Path, manifest: dict[str, dict[str, object]]
) -> None:
    dangling: list[str] = []
    kinds = {"page": 0, "asset": 0, "external": 0}
    for root in roots(backup, exported):
        by_path, by_name = root.page_by_path, root.file_by_name
        for page in root.pages:
            path, body = body_of(root, page)
            before, after = LINK.findall(page.data["markdown"]), LINK.findall(body)
            assert len(before) == len(after), path
            for source, target in zip(before, after, strict=True):
                if SCHEME.match(source) or source.startswith("#"):
                    assert target == source
                    kinds["external"] += 1
                    continue
                where, _, anchor = source.partition("#")
                if where.startswith(".gitbook/assets/") and unquote(where[16:]) in by_name:
                    file = by_name[unquote(where[16:])]
                    assert not target.startswith("/") and "#" not in target
                    resolved = (path.parent / target).resolve()
                    assert resolved.parent == root.folder.joinpath(*ASSETS).resolve(), target
                    assert sha256(resolved) == manifest[file.id]["sha256"]
                    kinds["asset"] += 1
                elif where in by_path:
                    file_part, _, new_anchor = target.partition("#")
                    assert file_part.endswith(".md") and not file_part.startswith("/") and new_anchor == anchor
                    fields, _ = split_page((path.parent / file_part).resolve().read_text(encoding="utf-8"))
                    assert fields["id"] == by_path[where].data["id"], (path, source, target)
                    kinds["page"] += 1
                else:
                    assert target == source, "a link that pointed nowhere is left as it is"
                    dangling.append(source)
    assert all(kinds.values()), kinds
    assert dangling and all(DANGLING.match(link) for link in dangling), sorted(set(dangling))[:5]
    sources = [link for r in rows_of(backup, "page") + rows_of(backup, "change-request-page") for link in LINK.findall(r.data["markdown"])]
    assert len(dangling) == len([link for link in sources if link.startswith("archive/")])


def test_every_relative_link_in_every_markdown_file_resolves(exported: Path) -> None:
    """The export on its own: walk every .md file; each relative link or image is a file of
    the export (anchors dropped), but for the broken links the source already had."""
    checked, broken = 0, []
    for md in exported.rglob("*.md"):
        for link in LINK.findall(md.read_text(encoding="utf-8")):
            if SCHEME.match(link) or link.startswith("#"):
                continue
            target = (md.parent / unquote(link.partition("#")[0])).resolve()
            if exported.resolve() in target.parents and target.is_file():
                checked += 1
            else:
                broken.append(link)
    assert checked > 100
    assert broken and all(DANGLING.match(link) for link in broken), sorted(set(broken))[:5]


# ----- missing binaries ------------------------------------------------------------------


def test_missing_binaries_are_reported_and_still_linked(backup: Backup, exported: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    bare = tmp_path / "bare.db"  # a backup made without --with-files
    shutil.copy(backup.path, bare)
    out = tmp_path / "out"
    report = export_mirror(bare, out)
    files = rows_of(backup, "file") + rows_of(backup, "change-request-file")
    assert report.assets == 0 and len(report.missing_binaries) == len(files)
    assert all("/.gitbook/assets/" in path and not (out / path).exists() for path in report.missing_binaries)
    with_files, without = tree_digest(exported), tree_digest(out)
    assert {k for k in with_files if "/.gitbook/assets/" not in k} == set(without)
    assert all(with_files[k] == without[k] for k in without), "pages link to the same places"

    # Some binaries: one left out of the manifest, one whose blob was damaged.
    shutil.copytree(blobs_dir(backup.path), blobs_dir(bare))
    entries = load(blobs_dir(bare) / "manifest.json")
    left_out = sorted(entries)[0]
    del entries[left_out]
    (blobs_dir(bare) / "manifest.json").write_text(json.dumps(entries))
    damaged = entries[sorted(entries)[-1]]["sha256"]
    blob = blobs_dir(bare) / damaged[:2] / damaged[2:]
    blob.write_bytes(bytes(len(blob.read_bytes())))
    missing = {left_out} | {row_id for row_id, e in entries.items() if e["sha256"] == damaged}
    report = export_mirror(bare, out)
    assert len(report.missing_binaries) == len(missing) and report.assets == len(files) - len(missing)
    assert all(sha256(out / p) == with_files[p] for p in without.keys() ^ with_files.keys() if (out / p).exists())

    assert main(["export", str(bare), str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"{len(missing)} file binaries are not in the backup" in printed
    assert all(" ".join(path.split()) in printed for path in report.missing_binaries)


# ----- re-export ---------------------------------------------------------------------------


def test_reexport_with_assets_is_byte_identical(backup: Backup, exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    shutil.copytree(exported, out)
    report = export_mirror(backup.path, out)
    assert (report.written, report.removed) == (0, 0)
    assert tree_digest(out) == tree_digest(exported)
    assets = sorted(p for p in out.rglob("*") if p.parent.name == "assets" and p.is_file())
    assets[0].write_bytes(b"changed")
    assets[1].unlink()
    (assets[2].parent / "stray.png").write_bytes(b"x")
    report = export_mirror(backup.path, out)
    assert (report.written, report.removed) == (2, 1)
    assert tree_digest(out) == tree_digest(exported)


# ----- front matter and names ------------------------------------------------------------


def test_hidden_pages_say_so_and_the_first_page_is_the_readme(tmp_path: Path) -> None:
    space = "s1"
    rows = [
        _row("organization", "o1", None, None, title="Org"),
        _row("space", space, ("organization", "o1"), 0, title="Docs"),
        _row("page", f"{space}/intro", ("space", space), 0, f"space:{space}", title="Intro", slug="intro", path="intro",
             markdown="See [the secret](intro/secret#top) and [guide](guide/).\n"),  # fmt: skip
        _row("page", f"{space}/secret", ("page", f"{space}/intro"), 0, f"space:{space}", title="Secret", slug="secret",
             path="intro/secret", hidden=True, markdown="Back to [intro](intro).\n"),  # fmt: skip
        _row("page", f"{space}/guide", ("space", space), 1, f"space:{space}", title="Guide", slug="guide", path="guide",
             hidden=False, markdown="![Logo](.gitbook/assets/My%20Logo.PNG \"logo\") [missing](nowhere)\n"),  # fmt: skip
        _row("file", f"{space}/f1", ("space", space), None, f"space:{space}", name="My Logo.PNG", size=3),
        _row("file", f"{space}/f2", ("space", space), None, f"space:{space}", name="my logo.png", size=3),
    ]
    write_backup(tmp_path / "b.db", rows, [])
    out = tmp_path / "out"
    report = export_mirror(tmp_path / "b.db", out)
    folder = out / "org" / "docs"
    assert report.missing_binaries == ["org/docs/.gitbook/assets/My-Logo.PNG", "org/docs/.gitbook/assets/my-logo-2.png"]
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert readme.endswith("See [the secret](intro/secret.md#top) and [guide](guide.md).\n")
    secret = split_page((folder / "intro" / "secret.md").read_text(encoding="utf-8"))
    assert secret == ({"id": "secret", "title": "Secret", "hidden": True}, "Back to [intro](../README.md).\n")
    guide = split_page((folder / "guide.md").read_text(encoding="utf-8"))
    assert guide == ({"id": "guide", "title": "Guide"}, '![Logo](.gitbook/assets/My-Logo.PNG "logo") [missing](nowhere)\n')
    assert (folder / "SUMMARY.md").read_text(encoding="utf-8") == (
        "# Table of contents\n\n* [Intro](README.md)\n  * [Secret](intro/secret.md)\n* [Guide](guide.md)\n"
    )


def test_rewrite_links_changes_destinations_only() -> None:
    targets = {"a": "x/a.md", ".gitbook/assets/p.png": "../.gitbook/assets/p.png", "a(1)": "a-1.md", "b c": "b-c.md"}

    def resolve(destination: str) -> str | None:
        return targets.get(destination)

    cases = {
        "[A](a) and ![P](.gitbook/assets/p.png)": "[A](x/a.md) and ![P](../.gitbook/assets/p.png)",
        '[A]( a "title" ) [B](b)': '[A]( x/a.md "title" ) [B](b)',
        "[![P](.gitbook/assets/p.png)](a)": "[![P](../.gitbook/assets/p.png)](x/a.md)",
        "[A](<b c>) [A](a(1))": "[A](<b-c.md>) [A](a-1.md)",
        "`[A](a)` and ``[A](a)`` but [A](a)": "`[A](a)` and ``[A](a)`` but [A](x/a.md)",
        "```\n[A](a)\n```\n[A](a)\n": "```\n[A](a)\n```\n[A](x/a.md)\n",
        "~~~~md\n[A](a)\n~~~\n[A](a)\n~~~~\n[A](a)": "~~~~md\n[A](a)\n~~~\n[A](a)\n~~~~\n[A](x/a.md)",
        "[A](a 'unterminated) [A](a)": "[A](a 'unterminated) [A](x/a.md)",
        "no links ](here": "no links ](here",
    }
    for before, after in cases.items():
        assert rewrite_links(before, resolve) == after, before


@given(st.text())
def test_asset_names_are_safe_path_parts(name: str) -> None:
    safe = asset_name(name)
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,100}", safe) and not safe.startswith(".") and safe not in (".", "..")
    assert asset_name("diagram (1).png") == "diagram-1.png" and asset_name("../../etc/passwd") == "etc-passwd"
    assert asset_name("CON.txt") == "CON-file.txt" and asset_name("Ünïcödé.svg") == "Unicode.svg"
