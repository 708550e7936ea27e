"""Names among siblings in an export: many same-titled pages or same-named files are named
`notes`, `notes-2`, ... in time linear in their number (issue 41, item 3), and the claimers
give exactly the names the first, quadratic ones gave."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.read.export import export_mirror
from syncd.read.export.layout import _ASSET_MAX, SLUG_MAX, _claim, _claim_file
from syncd.read.sibling_names import SiblingNames
from tests.test_export import _row, load, write_backup

COUNT = 8_000


def _space_backup(path: Path, titles: list[str], file_names: list[str]) -> None:
    space = "s1"
    rows = [
        _row("organization", "o1", None, None, title="Org"),
        _row("space", space, ("organization", "o1"), 0, title="Space"),
    ]
    for index, title in enumerate(titles):
        rows.append(_row("page", f"{space}/p{index}", ("space", space), index, f"space:{space}", id=f"p{index}", title=title, markdown=f"{index}\n"))
    for index, name in enumerate(file_names):
        rows.append(_row("file", f"{space}/f{index}", ("space", space), None, f"space:{space}", id=f"f{index}", name=name))
    write_backup(path, rows, [])


def _export(tmp_path: Path, name: str, titles: list[str], file_names: list[str]) -> tuple[Path, list[str]]:
    """The space's folder, and the paths of its files' binaries (all missing: the backup holds
    none, so their names are all there is to see)."""
    db = tmp_path / f"{name}.db"
    _space_backup(db, titles, file_names)
    out = tmp_path / name
    report = export_mirror(db, out)
    return next(out.rglob("space.json")).parent, report.missing_binaries


def test_same_titled_siblings_are_named_in_time_linear_in_their_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41's bound, as a count of the names tried rather than a time (no timing in tests):
    counting up from 2 again for every duplicate tried COUNT²/2 names, 32 million for 8,000."""
    tried = 0
    free = SiblingNames.free

    def counted(self: SiblingNames, name: str, fold: Callable[[str], str] = str) -> bool:
        nonlocal tried
        tried += 1
        return free(self, name, fold)

    monkeypatch.setattr(SiblingNames, "free", counted)
    space, binaries = _export(tmp_path, "same", ["Notes"] * COUNT, ["Notes.png"] * COUNT)
    assert tried <= 4 * 2 * COUNT, f"{tried:,} names tried for {COUNT:,} pages and {COUNT:,} files"
    files = [entry["file"] for entry in load(space / "pages.json")]
    assert files == ["README.md", "notes-2.md"] + [f"notes-{n}.md" for n in range(3, COUNT + 1)]
    assert [path.rsplit("/", 1)[-1] for path in binaries] == ["Notes.png"] + [f"Notes-{n}.png" for n in range(2, COUNT + 1)]


# ----- the new claimers give the old ones' names -----------------------------------------


def _old_claim(taken: set[str], base: str) -> str:
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        suffix = f"-{number}"
        candidate = base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix
    taken.add(candidate)
    return candidate


def _old_claim_file(taken: set[str], name: str) -> str:
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    candidate, number = name, 1
    while candidate.lower() in taken:
        number += 1
        candidate = f"{stem[: _ASSET_MAX - 8 - len(extension)]}-{number}{dot}{extension}"
    taken.add(candidate.lower())
    return candidate


_LONG = "a" * (SLUG_MAX - 3)
_slug_parts = st.sampled_from(["notes", "notes-2", "notes-1", "notes-9", "notes-10", "notes-02", "a-", "-", "x", _LONG, _LONG + "-b", _LONG + "bc", _LONG + "-2", _LONG[:-1] + "-9", "con", "ß", "Σ"])
_slugs = st.one_of(_slug_parts, st.builds(lambda a, n: f"{a}-{n}", _slug_parts, st.integers(0, 120)), st.text(max_size=8))
_file_parts = st.sampled_from(["Notes.png", "notes.PNG", "notes-2.png", "Notes-3.png", "notes", "notes-2", "a.b.c", ".png", "x" * 95 + ".png", "x" * 92 + "-2.png", "ΑΣ.png", "ας-2.png", "İ.txt"])
_files = st.one_of(_file_parts, st.builds(lambda a, n: a.replace(".", f"-{n}.", 1), _file_parts, st.integers(0, 120)), st.text(max_size=8))


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["", "readme", "notes", "notes-3", _LONG[:-1] + "-2"]), max_size=3), st.lists(_slugs, max_size=200))
def test_claim_names_as_before(reserved: list[str], bases: list[str]) -> None:
    old, new = set(reserved), SiblingNames(reserved)
    assert [_old_claim(old, b) for b in bases] == [_claim(new, b) for b in bases]


@settings(max_examples=300)
@given(st.lists(_files, max_size=200))
def test_claim_file_names_as_before(names: list[str]) -> None:
    old, new = set[str](), SiblingNames()
    assert [_old_claim_file(old, n) for n in names] == [_claim_file(new, n) for n in names]


def test_alike_long_names_share_their_numbered_names() -> None:
    """Long names that differ only past the numbered names' cut share those names: the
    numbering is kept per cut stem, not per name, and still gives the old names."""
    bases = ["a" * SLUG_MAX + f"{i:03d}" for i in range(1000)] * 2
    names, old = SiblingNames(), set[str]()
    claimed = [_claim(names, b) for b in bases]
    assert claimed == [_old_claim(old, b) for b in bases]
    assert claimed[1000:1003] == ["a" * (SLUG_MAX - 2) + "-2", "a" * (SLUG_MAX - 2) + "-3", "a" * (SLUG_MAX - 2) + "-4"]
