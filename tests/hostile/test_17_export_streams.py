"""Issue 22, item 11 (second half): an export of one 150 MB row peaked at 1.09 GB.

The file's sort held every row of a space whole (SQLite copies each sorted row), the rows of a
space were all in memory at once, and a page was split into a list of lines, rewritten into
another, joined, prefixed with its front matter and encoded: six copies of one big markdown.
Now rows are sorted by key and read one at a time, a text longer than `HELD_TEXT_MAX` is read
again only when its file is written, and every file is written as it is made (compared with
what is there as it goes, so an unchanged file is still left untouched).

What is checked here without timing: a big page, an OpenAPI source and a big row of an
unknown kind come out byte for byte as the JSON and link rewriting say, re-exports leave them
alone or rewrite them right; and the Python memory the export takes for a page of N bytes
(tracemalloc: every allocation counted, nothing sampled, so the figure is deterministic)
stays under 3 N, where the old code took over 5 N. The RSS of a 150 MB page is in
`bench/export_memory.py`.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

from syncd.read import export
from syncd.read.export import export_mirror, front_matter, json_text
from syncd.state import StateStore, Row, content_hash

BIG_TEXT = 2 * 1024 * 1024
"""Characters of the OpenAPI source and the unknown row: over `HELD_TEXT_MAX` (1 MiB)."""
TENANT = "big"
ORG, SPACE = "org1", "space1"
SIZE = 8 * 1024 * 1024
"""Characters of the big page's markdown: well over `HELD_TEXT_MAX`, small enough to be quick."""


def row(kind: str, row_id: str, parent: tuple[str, str] | None, scope: str | None, data: dict[str, Any], position: int | None = None) -> Row:
    return Row(TENANT, kind, row_id, ORG, parent[0] if parent else None, parent[1] if parent else None, position,
               f"listing:{kind}", scope, data, content_hash(data))  # fmt: skip


def big_markdown(size: int, ending: str) -> tuple[str, str]:
    """(markdown, what export makes of it): plain lines, lines linking the other page (made a
    link to its file), a fenced block whose link stays, CRLF and lone CR line ends, accents;
    the block is repeated past several of `_lines`' 1 MiB cuts, then `ending` (no line end)."""
    block = (
        "Plain text of a big page, é and ü, nothing to rewrite here at all.\n" * 60
        + "See [the other page](other-page#part) and ![a picture](.gitbook/assets/none.png).\r\n"
        + "```\n[inside code](other-page)\n```\rCR-ended line\n"
    )
    exported = block.replace("](other-page#part)", "](other-page.md#part)")
    count = size // len(block)
    return block * count + ending, exported * count + ending


def write_backup(path: Path, markdown: str, spec_text: str, other_text: str) -> None:
    rows = [
        row("organization", ORG, None, None, {"id": ORG, "title": "Big organization"}),
        row("space", SPACE, ("organization", ORG), None, {"id": SPACE, "title": "Big space"}, 0),
        row("page", f"{SPACE}/big", ("space", SPACE), f"space:{SPACE}",
            {"id": "big", "title": "Big page", "path": "big-page", "markdown": markdown}, 0),
        row("page", f"{SPACE}/other", ("space", SPACE), f"space:{SPACE}",
            {"id": "other", "title": "Other page", "path": "other-page", "markdown": "small\n"}, 1),
        row("openapi-spec", "spec1", ("organization", ORG), None, {"slug": "petstore", "id": "spec1"}),
        row("openapi-spec-source", "spec1/source", ("openapi-spec", "spec1"), None, {"format": "yaml", "text": spec_text}),
        row("future-kind", "f1", ("organization", ORG), None, {"id": "f1", "blob": other_text}),
    ]  # fmt: skip
    if path.exists():
        path.unlink()
    with StateStore(path) as mirror:
        run = mirror.start_run("backup", TENANT, TENANT)
        mirror.stage(run, rows)
        for listing in sorted({r.listing for r in rows if r.listing}):
            mirror.record_listing(run, TENANT, listing, ok=True)
        mirror.finish_run(run)


def traced_export(db: Path, out: Path) -> tuple[Any, int]:
    """(report, peak bytes Python allocated during the export)."""
    tracemalloc.start()
    try:
        report = export_mirror(db, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return report, peak


def test_item22_a_page_far_bigger_than_held_rows_is_exported_exactly_and_held_once(tmp_path: Path) -> None:
    markdown, expected = big_markdown(SIZE, "last line, no end")
    spec_text = "openapi: 3.0.0\n" + "# a comment line of the spec, long enough\n" * (BIG_TEXT // 42)
    other_text = "x\u2028y\"z\\" * (BIG_TEXT // 6)  # JSON escapes cut across the writer's blocks
    held = getattr(export, "HELD_TEXT_MAX", 1 << 20)
    assert len(markdown) > 4 * held and len(spec_text) > held
    db, out = tmp_path / "big.db", tmp_path / "out"
    write_backup(db, markdown, spec_text, other_text)

    report, peak = traced_export(db, out)
    page = out / "big-organization" / "big-space" / "README.md"
    head = front_matter([("id", "big"), ("title", "Big page")])
    assert page.read_bytes() == (head + expected).encode()
    assert (out / "big-organization" / "openapi" / "petstore.source.yaml").read_bytes() == spec_text.encode()
    other = [{"id": "f1", "parent_kind": "organization", "parent_id": ORG, "position": None, "data": {"id": "f1", "blob": other_text}}]
    assert (out / "big-organization" / "other" / "future-kind.json").read_text() == json_text(other)
    assert report.pages == 2 and report.files > 5
    # At most the text as read from the file and as decoded, at one time: not a list of its
    # lines, a rewritten list, their join, the join with the front matter and its bytes.
    assert peak < 3 * len(markdown), f"export took {peak / len(markdown):.1f} times the page's size"

    # A re-export of the same file changes nothing; one where only the page's end changed
    # rewrites the page, from the same beginning.
    before = page.stat()
    again = export_mirror(db, out)
    assert again.written == 0 and page.stat().st_mtime_ns == before.st_mtime_ns and page.stat().st_ino == before.st_ino
    markdown, expected = big_markdown(SIZE, "a new last line\n")
    write_backup(db, markdown, spec_text[:-10], other_text)
    changed = export_mirror(db, out)
    assert changed.written == 2  # the page and the source; nothing else
    assert page.read_bytes() == (head + expected).encode()
    assert (out / "big-organization" / "openapi" / "petstore.source.yaml").read_bytes() == spec_text[:-10].encode()
    assert not [p for p in out.rglob("*syncd-tmp*")]
