"""Why a run's outcome is not a plain success, in one sentence: what failed, what is left, what
to do. Each runner puts it in its summary as `reason` (`RunRecord.explanation`, the API's
`reason`), so the run page, `syncd jobs`, `syncd trigger --wait` and the metrics say the same
words. A failed run needs none: its error says it.

Pure: a run's summary in, text out. The text quotes titles from the organizations: whoever
shows it escapes it (the page's templates, `syncd.safe_text` on a terminal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["backup_reason", "left_sentence", "mirror_reason", "sync_reason"]

NAMES = 3
"""Names quoted in a sentence before `and N more`."""


def _first(items: Sequence[str], total: int | None = None) -> str:
    """`a, b, c and 4 more`."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:NAMES])
    return shown + (f" and {total - NAMES} more" if total > NAMES else "")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _unread(summary: Mapping[str, Any]) -> str:
    """`2 listings could not be read (/v1/...: 503 ...)`, or empty."""
    errors = [str(e) for e in summary.get("errors") or []]
    return f"{_count(len(errors), 'listing')} could not be read ({_first(errors)})" if errors else ""


def sync_reason(outcome: str, summary: Mapping[str, Any]) -> str | None:
    """A partial sync: which lists or spaces could not be read, and that the next run reads them again."""
    if outcome != "partial":
        return None
    unread = _unread(summary) or "part of the organization could not be read"
    return f"{unread}: the mirror keeps what it had of them, and the next run reads them again"


def backup_reason(outcome: str, summary: Mapping[str, Any]) -> str | None:
    """A partial backup: what it lacks, that it is kept as partial (nothing pruned), and to
    check the job's newest complete backup reads well."""
    if outcome != "partial":
        return None
    if isinstance(summary.get("reason"), str) and summary["reason"]:
        return str(summary["reason"])  # the runner already said it (an emptier backup)
    missing = [_unread(summary)] if summary.get("errors") else []
    files = summary.get("files")
    failed = files.get("failed") if isinstance(files, Mapping) else 0
    if failed:
        missing.append(f"{_count(int(failed), 'file')} could not be downloaded")
    what = "; ".join(missing) or "the backup is not whole"
    return (
        f"{what}: the file is kept as partial and nothing was pruned; the next run takes a whole one "
        "(check the job's newest complete backup with `syncd check FILE`)"
    )


def left_sentence(left: Sequence[Mapping[str, Any]], count: int) -> str:
    """`N object(s) the source no longer has were left on the target (copy mode keeps them): space 'Old' at A/Old, ...`."""
    names = [f"{item.get('kind')} {item.get('title')!r}" + (f" at {item['path']}" if item.get("path") and item.get("path") != item.get("title") else "") for item in left]
    return f"{count} object(s) the source no longer has were left on the target (copy mode keeps them): {_first(names, count)}"


def mirror_reason(outcome: str, summary: Mapping[str, Any], verify_command: str) -> str | None:
    """A partial mirror run: the verify counts in words with the first names, the failed
    operations, what to do (`verify_command` lists every difference); a success that left
    objects on the target: what it left."""
    counts = summary.get("verify") or {}
    left = summary.get("left_on_target") or []
    left_count = int(counts.get("left_on_target", len(left)))
    kept = left_sentence(left, left_count) if left_count else ""
    if outcome == "succeeded":
        return kept or None
    if outcome != "partial":
        return None
    parts = []
    if summary.get("read_cleanly") is False:
        parts.append("a side could not be read completely, so nothing was deleted this time")
    words = [(counts.get("missing", 0), "missing on the target"), (counts.get("different", 0), "different"),
             (counts.get("extra", 0), "only on the target"), (counts.get("errors", 0), "in error")]  # fmt: skip
    unequal = ", ".join(f"{n} {word}" for n, word in words if n)
    if unequal:
        differences = [str(d) for d in summary.get("differences") or []]
        parts.append(f"the target is not equal to the source ({unequal}" + (f": {_first(differences, sum(n for n, _ in words))}" if differences else "") + ")")
    if summary.get("residue"):
        parts.append(f"{summary['residue']} object(s) a copy made in the source are still there")
    failures = [str(f) for f in summary.get("failures") or []]
    if failures:
        parts.append(f"{_count(len(failures), 'operation')} failed ({_first(failures)})")
    if not parts:
        parts.append("the copy did not end equal")
    advice = f"the next run tries again; `{verify_command}` lists every difference"
    return "; ".join(parts) + f": {advice}" + (f"; {kept}" if kept else "")
