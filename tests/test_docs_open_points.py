"""The site's open-points page lists exactly the open points the emulator plays.

`docs/concepts/open-points.md` holds the table of the spec's open points, one row each, its
first cell ending with the row's key in backticks and brackets ("1. Duplicate (`duplicate`)").
`syncd.emulator.profile.ROWS` is what the emulator plays and `tests/test_profile_rows.py`
probes. A row added to `ROWS` without its line on the page, or a line left on the page after
its row went, fails here, naming the row.
"""

from __future__ import annotations

import re
from pathlib import Path

from syncd.emulator.profile import ROWS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "concepts" / "open-points.md"
HEADER = ["Open point", "What the spec says", "`default`", "`divergent`"]
ROW_MARK = re.compile(r"\(`([a-z0-9-]+)`\)$")
"""A table row's first cell ends with the row's name in backticks: "1. Duplicate (`duplicate`)"."""


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def page_table(text: str) -> list[str]:
    """The lines of the table whose header is HEADER (the open points), header and rule left out."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("|") and _cells(line) == HEADER]
    assert len(starts) == 1, f"{PAGE.name}: expected one table headed {HEADER}, found {len(starts)}"
    first = starts[0]
    assert set(_cells(lines[first + 1])) <= {"---", ":---", "---:", ":---:"}, lines[first + 1]
    table = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        table.append(line)
    return table


def row_names(table: list[str]) -> list[str]:
    """Each line's row key, from the mark that ends its first cell."""
    names = []
    for line in table:
        cells = _cells(line)
        assert len(cells) == len(HEADER), f"{len(cells)} cells, not {len(HEADER)}: {line[:80]}"
        mark = ROW_MARK.search(cells[0])
        assert mark, f"first cell does not end with (`row-name`): {line[:80]}"
        names.append(mark.group(1))
    return names


def test_the_page_lists_every_row_of_rows_and_no_other() -> None:
    names = row_names(page_table(PAGE.read_text(encoding="utf-8")))
    missing = [row for row in ROWS if row not in names]
    unknown = [name for name in names if name not in ROWS]
    assert not missing, f"{PAGE.name} lacks the open point(s) {missing} of syncd/emulator/profile.py ROWS"
    assert not unknown, f"{PAGE.name} lists {unknown}, which syncd/emulator/profile.py ROWS lacks"
    assert len(names) == len(set(names)), f"{PAGE.name} lists a row twice: {sorted(n for n in set(names) if names.count(n) > 1)}"


def test_the_rows_come_in_the_order_of_rows_numbered_and_counted() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = page_table(text)
    assert row_names(table) == list(ROWS)
    assert [int(_cells(line)[0].split(".")[0]) for line in table] == list(range(1, len(ROWS) + 1))
    assert f"{len(ROWS)} open points" in text

