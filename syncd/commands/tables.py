"""Tables that fit the terminal: words wrap, and whole columns go before anything is cut.

rich fits a table that is too wide by wrapping its cells, and when wrapping is not enough by
cutting them with an ellipsis: at 80 columns a run's start time became `2026-1…` and its
status `comple…`. A `Col` says how its cells may give way: `no_wrap` for values that are
only useful whole (a date), `min_width` for the longest word that must stay whole (an
outcome), `fold_at` for long ids that may fold onto a second line, and `drop` for columns
the table can do without on a narrow terminal (lowest first). `fitted_table` leaves out
droppable columns until the rest fits by wrapping alone; `--json` keeps every field. Output
that is not a terminal gets every value whole instead, a row a line (`whole_values`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "fitted_table", "whole_values"]

UNBOUNDED = 100_000


@dataclass(frozen=True)
class Col:
    """One column: its header and how its cells give way on a narrow terminal."""

    header: str
    justify: str = "left"
    no_wrap: bool = False
    min_width: int | None = None
    max_width: int | None = None
    fold_at: int | None = None
    """Words longer than this (ids, URLs) may fold rather than make the table drop columns."""
    drop: int | None = None
    """None: always shown; else left out on a narrow terminal, lowest first."""


def _build(
    title: Text | str | None, cols: Sequence[Col], rows: Sequence[Sequence[RenderableType]], keep: list[int], *, headers: bool = True
) -> Table:
    table = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), title_justify="left", show_header=headers
    )
    for index in keep:
        col = cols[index]
        table.add_column(
            col.header if headers else "", justify=col.justify, no_wrap=col.no_wrap, overflow="fold",  # type: ignore[arg-type]
            min_width=col.min_width if headers else None, max_width=col.max_width,
        )  # fmt: skip
    for row in rows:
        table.add_row(*(row[index] for index in keep))
    return table


def whole_values(console: Console, table: Table) -> Table:
    """`table` for output that is not a terminal (a pipe, a file): there is no width to fit,
    so every value is whole (no cell wraps, folds or is cut) and a row is a line, as wide as
    that takes; print it with `crop=False`. So `syncd orgs src | grep` finds whole ids. On a
    terminal, `table` as it is."""
    if console.is_terminal:
        return table
    for column in table.columns:
        column.no_wrap, column.max_width = True, None
    table.width = Measurement.get(console, console.options.update(width=UNBOUNDED), table).maximum
    return table


def fitted_table(console: Console, title: Text | str | None, cols: Sequence[Col], rows: Sequence[Sequence[RenderableType]]) -> Table:
    """A table of `rows` (one renderable per column of `cols`) that fits `console`'s width by
    wrapping, without its droppable columns (lowest `drop` first) as far as that takes; for
    output that is not a terminal, every column with its values whole (`whole_values`)."""
    keep = list(range(len(cols)))
    if not console.is_terminal:
        return whole_values(console, _build(title, cols, rows, keep))
    droppable = sorted((i for i, col in enumerate(cols) if col.drop is not None), key=lambda i: cols[i].drop or 0)
    least = [_least_width(console, col, [Text(col.header), *(row[i] for row in rows)]) for i, col in enumerate(cols)]
    while True:
        frame = _build(None, cols, [["" for _ in cols]], keep, headers=False)  # padding and separators alone
        needed = Measurement.get(console, console.options.update(width=UNBOUNDED), frame).minimum + sum(least[i] for i in keep)
        if needed <= console.width or not droppable:
            return _build(title, cols, rows, keep)
        keep.remove(droppable.pop(0))


def _least_width(console: Console, col: Col, cells: Sequence[RenderableType]) -> int:
    """The narrowest `col` can be without cutting a cell: its longest word, or its longest
    cell when it does not wrap (rich measures every cell by its longest word), within its
    `min_width` and `max_width`."""
    options = console.options.update(width=UNBOUNDED)
    least = 0
    for renderable in cells:
        measured = Measurement.get(console, options, renderable)
        least = max(least, measured.maximum if col.no_wrap else measured.minimum)
    if not col.no_wrap:
        for cap in (col.max_width, col.fold_at):
            least = least if cap is None else min(least, cap)
    return max(least, col.min_width or 0)
