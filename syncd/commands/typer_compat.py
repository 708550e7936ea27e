"""Where typer's help and syncd's conventions disagree, and how syncd settles it.

typer 0.29 renders `--help` with rich panels, and its panel asks every option for its type,
flags included: `--json <bool>`, even `--help <bool>`, as if they took a value. Its plain
help (`TyperOption.get_help_record`) already leaves the type out for flags and counters; the
rich panel does not (`rich_utils._print_options_panel` calls `display_type_rich` on every
option). `flags_read_as_flags` makes `display_type_rich` answer None for flags and counters,
which the panel renders as no type: every command's boolean options, and `--help`, read as
flags. Options that take a value keep their `<type>`.
"""

from __future__ import annotations

from typing import Any

_PATCHED = "_syncd_flags_read_as_flags"


def flags_read_as_flags() -> None:
    """Make typer's rich help show flags without a type (module docstring); idempotent, and
    a no-op on a typer without `TyperOption.display_type_rich`."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, _PATCHED, False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) or getattr(self, "count", False):
            return None
        return shown(self, ctx)  # type: ignore[no-any-return]

    setattr(display_type_rich, _PATCHED, True)
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
