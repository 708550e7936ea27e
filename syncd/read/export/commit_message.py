"""What a commit of an export's Git history changed, in words: its message (pure).

Two commits' records (`syncd.read.export.records`) are compared object by object: an object is
added or removed, or changed when its content hash, parent or position differs. Volatile
fields (a member's `lastSeenAt`, an `updatedAt`) are left out of the hash, so a re-read that
only moved them is no change, and makes no commit.

The message: a subject that counts spaces and pages added, changed and removed (`2 pages
added, 1 changed in 1 space`), then, space by space, the titles of those pages, then the
other kinds by count, then where the export came from.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from syncd.read.export.records import Records

__all__ = ["Changes", "commit_message", "compare"]

OPS = ("added", "changed", "removed")
NAMES = 20
"""Titles listed per space and op before `and N more`."""


@dataclass
class Changes:
    """What changed between two commits' records, by kind and op: (id, record) of each object
    (the new record, or the old one of a removed object)."""

    by_kind: dict[str, dict[str, list[tuple[str, dict[str, Any]]]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    first: bool = False
    """No earlier commit: everything is new."""

    def count(self, kind: str, op: str) -> int:
        return len(self.by_kind.get(kind, {}).get(op, []))

    @property
    def empty(self) -> bool:
        return not any(items for ops in self.by_kind.values() for items in ops.values())


def _meaning(record: Mapping[str, Any]) -> tuple[Any, ...]:
    return (record.get("hash"), record.get("parent_kind"), record.get("parent_id"), record.get("position"), record.get("org"))


def compare(old: Records | None, new: Records) -> Changes:
    """Every object added, changed or removed from `old` (None: no earlier commit) to `new`."""
    changes = Changes(first=old is None)
    before = old.objects if old is not None else {}
    for kind in sorted(set(before) | set(new.objects)):
        was = {str(r["id"]): r for r in before.get(kind, [])}
        now = {str(r["id"]): r for r in new.objects.get(kind, [])}
        for id_, record in now.items():
            if id_ not in was:
                changes.by_kind[kind]["added"].append((id_, record))
            elif _meaning(was[id_]) != _meaning(record):
                changes.by_kind[kind]["changed"].append((id_, record))
        for id_, record in was.items():
            if id_ not in now:
                changes.by_kind[kind]["removed"].append((id_, record))
    return changes


def _title(record: Mapping[str, Any]) -> str:
    data = record.get("data") or {}
    title = data.get("title") or data.get("name") or record.get("id")
    return " ".join(str(title).split())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _counted(changes: Changes, kind: str, word: str) -> str:
    """`3 pages added, 1 changed, 1 removed` (only the ops that happened; empty if none)."""
    parts = [(changes.count(kind, op), op) for op in OPS if changes.count(kind, op)]
    if not parts:
        return ""
    (n, op), rest = parts[0], parts[1:]
    return ", ".join([f"{_plural(n, word)} {op}"] + [f"{m} {other}" for m, other in rest])


def _first(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES])
    return shown + (f" and {len(names) - NAMES} more" if len(names) > NAMES else "")


def commit_message(changes: Changes, old: Records | None, new: Records, source: str) -> str:
    """The commit's message: subject, a blank line, the pages by space, the other kinds, the source."""
    spaces = {str(r["id"]): _title(r) for records in (old, new) if records for r in records.objects.get("space", [])}
    if changes.first:
        pages = len(new.objects.get("page", []))
        subject = f"export of {source}: {_plural(len(new.objects.get('space', [])), 'space')}, {_plural(pages, 'page')}"
    else:
        touched = {str(r.get("scope", "")).removeprefix("space:") for op in OPS for _, r in changes.by_kind.get("page", {}).get(op, [])}
        parts = [_counted(changes, "space", "space")]
        pages = _counted(changes, "page", "page")
        if pages:
            parts.append(f"{pages} in {_plural(len(touched), 'space')}")
        subject = "; ".join(part for part in parts if part)
        if not subject:
            others = sum(len(items) for kind, ops in changes.by_kind.items() for items in ops.values())
            subject = f"{_plural(others, 'other object')} changed"
    body: list[str] = []
    if not changes.first:
        by_space: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for op in OPS:
            for id_, record in changes.by_kind.get("page", {}).get(op, []):
                by_space[str(record.get("scope", "")).removeprefix("space:")][op].append(_title(record))
        for space_op in OPS:
            for id_, record in changes.by_kind.get("space", {}).get(space_op, []):
                by_space[id_]  # a space added, changed or removed is listed even without its pages
        for space in sorted(by_space, key=lambda s: (spaces.get(s, s), s)):
            state = next((f" (space {op})" for op in OPS if any(i == space for i, _ in changes.by_kind.get("space", {}).get(op, []))), "")
            body.append(f"{spaces.get(space, space)}{state}")
            for op in OPS:
                if by_space[space][op]:
                    body.append(f"  {op}: {_first(sorted(by_space[space][op]))}")
    others = Counter()  # type: Counter[tuple[str, str]]
    for kind, ops in changes.by_kind.items():
        if kind in ("space", "page") and not changes.first:
            continue
        for op, items in ops.items():
            if items:
                others[(kind, op)] += len(items)
    if others and not changes.first:
        body += ["", "Other objects: " + ", ".join(f"{kind} {n} {op}" for (kind, op), n in sorted(others.items()))]
    body += ["", f"Source: {source}"]
    return subject + "\n\n" + "\n".join(body).strip("\n") + "\n"
