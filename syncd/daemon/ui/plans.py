"""Saved plans as the page shows them: the files of the plans folder, one plan's changes.

Why a folder and not a path from the page: the page may only show what the operator put where
the daemon looks (`<state_dir>/plans`, where `mirror plan --out` can write and where the page's
"plan now" saves), never a path a request names. A plan file is untrusted like any file: its
name must be plain, its size is bounded, it must be a plan this syncd applies (its header and
each op and skip checked as `load_plan` checks them), and every line of its listing is checked
for shape before it is shown. It is streamed (`plan_stream`), off the event loop, and shown a
page at a time: a 60 MB plan must not freeze the daemon, nor be held whole in its memory.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from syncd.copy.plancheck import BadField, check_element
from syncd.copy.planfile import PlanFileError, saved_from
from syncd.copy.review import ACTIONS, SECTIONS, SYMBOLS
from syncd.daemon.ui.plan_stream import LIST_END, JsonStreamError, members
from syncd.safe_read import FileRefused, open_regular_file

__all__ = ["MAX_PLAN_BYTES", "PAGE_SIZE", "Change", "PlanFile", "PlanQuery", "PlanView", "grouped", "plan_files", "plan_name", "read_plan"]

MAX_PLAN_BYTES = 64 * 1024 * 1024
"""A plan larger than this is not read (a million operations are about 400 MB: use the CLI)."""
MAX_LISTED = 500
PAGE_SIZE = 200
"""Changes on one page of a plan: the page is a few hundred kB whatever the plan's size."""
MAX_SHOWN_LEFT = 500
"""Skips and objects left on the target held (and shown) at most; the rest are counted."""
MAX_KINDS = 200
"""Kinds counted apart at most (syncd knows a few dozen; a crafted file could name millions)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.json")


def plan_name(name: str) -> bool:
    """Whether `name` may name a file of the plans folder: plain, no path, `.json`."""
    return _NAME.fullmatch(name) is not None and ".." not in name


@dataclass(frozen=True)
class PlanFile:
    name: str
    size: int
    modified: datetime


@dataclass(frozen=True)
class Change:
    """One line of a plan's listing (`syncd.copy.review.Item` as the file holds it)."""

    symbol: str
    action: str
    kind: str
    title: str
    path: str
    to_path: str | None = None
    detail: str = ""
    fields: tuple[tuple[str, str, str], ...] = ()
    """(field, before, after) as text."""
    section: str = ""
    """The heading it is listed under (`syncd.copy.review.SECTIONS`); "": by action."""


@dataclass
class PlanView:
    name: str
    source: str
    target: str
    mode: str
    created_at: str
    changes: list[Change]
    counts: dict[str, int]
    """Changes per action, in the listing's order of actions."""
    kinds: list[str]
    skips: list[dict[str, str]] = field(default_factory=list)
    left: list[dict[str, str]] = field(default_factory=list)
    """What the plan leaves on the target (kind, title, path): its own section."""
    warnings: list[str] = field(default_factory=list)
    refused: str | None = None
    unreadable: int = 0
    """Lines of the listing that were not shaped like one (counted, not shown)."""
    total: int = 0
    """Changes of the whole listing (`changes` holds one page of them)."""
    matched: int = 0
    """Changes of the kind and action asked for."""
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    """Changes per kind, per action."""
    page: int = 1
    size: int = PAGE_SIZE
    skips_total: int = 0
    left_total: int = 0
    sections: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per section (Access settings) of the changes asked for: how many, and the page it starts on."""

    @property
    def pages(self) -> int:
        return max(1, -(-self.matched // self.size))


def _regular(path: Path) -> os.stat_result | None:
    try:
        info = path.lstat()  # a link is not followed out of the folder
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None



def plan_files(folder: Path) -> list[PlanFile]:
    """The plan files of `folder`, newest first (none when it does not exist)."""
    try:
        names = [entry.name for entry in folder.iterdir()]
    except OSError:
        return []
    found = []
    for name in names:
        info = _regular(folder / name) if plan_name(name) else None
        if info is not None:
            found.append(PlanFile(name, info.st_size, datetime.fromtimestamp(info.st_mtime, UTC)))
    found.sort(key=lambda plan: (plan.modified, plan.name), reverse=True)
    return found[:MAX_LISTED]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value, ensure_ascii=False)[:200]


def _change(entry: Any) -> Change | None:
    if not isinstance(entry, dict):
        return None
    action, kind = entry.get("action"), entry.get("kind")
    if action not in SYMBOLS or not isinstance(kind, str) or not isinstance(entry.get("path", ""), str):
        return None
    fields = []
    for item in entry.get("fields") or ():
        if isinstance(item, dict) and isinstance(item.get("field"), str):
            fields.append((item["field"], _text(item.get("before_text")), _text(item.get("after_text"))))
    to_path, section = entry.get("to_path"), entry.get("section")
    return Change(
        SYMBOLS[action], action, kind, _text(entry.get("title")), entry.get("path") or "",
        to_path if isinstance(to_path, str) else None, _text(entry.get("detail")), tuple(fields), section if section in SECTIONS else "",
    )  # fmt: skip


def _too_large(name: str) -> PlanFileError:
    return PlanFileError(f"{name} is more than the page reads ({MAX_PLAN_BYTES:,} bytes): use `syncd mirror apply --plan {name} --dry-run`")


class _Bounded:
    """A binary file read to at most `limit` bytes (a file that grows while read is refused)."""

    def __init__(self, handle: BinaryIO, limit: int, name: str) -> None:
        self.handle, self.left, self.name = handle, limit, name

    def read(self, size: int) -> bytes:
        raw = self.handle.read(min(size, self.left + 1))
        self.left -= len(raw)
        if self.left < 0:
            raise _too_large(self.name)
        return raw

    def close(self) -> None:
        self.handle.close()


def _open_bounded(path: Path) -> _Bounded:
    """The regular file at `path`, opened once (no link followed, a FIFO not waited on:
    `safe_read.open_regular_file`), no larger than `MAX_PLAN_BYTES`: what is checked is what is
    read. FileNotFoundError when it is no such file; PlanFileError when it is too large."""
    try:
        handle = open_regular_file(path, "plan", follow_links=False)
    except (OSError, FileRefused):  # to the page, not a plan it lists
        raise FileNotFoundError(path.name) from None
    if os.fstat(handle.fileno()).st_size > MAX_PLAN_BYTES:
        handle.close()
        raise _too_large(path.name)
    return _Bounded(handle, MAX_PLAN_BYTES, path.name)


@dataclass(frozen=True)
class PlanQuery:
    """What of a plan the page asks for: one kind and/or action ("": any), one page (from 1)."""

    kind: str = ""
    action: str = ""
    page: int = 1
    size: int = PAGE_SIZE


def read_plan(folder: Path, name: str, query: PlanQuery = PlanQuery()) -> PlanView:
    """The plan `name` of `folder` as one page of its listing (`query`) with the counts of the
    whole listing; FileNotFoundError when there is no such plan file there, PlanFileError (one
    line) when it is not a plan this syncd reads. Blocking: call it off the event loop.

    The file is streamed (`plan_stream`): whatever its size, what is held is its header, one
    page of changes, `MAX_KINDS` kinds and the first `MAX_SHOWN_LEFT` skips and leftovers. Every
    op is checked for shape one at a time; how the ops relate (order, waits) is checked by
    `mirror apply --plan`, which reads the file whole."""
    if not plan_name(name):
        raise FileNotFoundError(name)
    handle = _open_bounded(folder / name)
    try:
        return _stream_view(handle, name, query)
    except JsonStreamError as exc:
        raise PlanFileError(f"{name} cannot be read as a plan: {exc}") from None
    except BadField as exc:  # worded as `saved_from` words it
        raise PlanFileError(f"{name} is a damaged plan: {exc}: make a new plan") from None
    finally:
        handle.close()


def _stream_view(handle: _Bounded, name: str, query: PlanQuery) -> PlanView:
    header: dict[str, Any] = {}
    tally: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    first = (max(query.page, 1) - 1) * query.size
    page: list[Change] = []
    matched = total = entries = 0
    skips: list[dict[str, str]] = []
    left: list[dict[str, str]] = []
    totals = {"ops": 0, "skips": 0, "left_on_target": 0}
    sections: dict[str, tuple[int, int]] = {}
    for member, value, element in members(handle):
        if not element:  # a member, or the end of a streamed list (held as [])
            header[member] = [] if value is LIST_END else value
            continue
        if member == "changes":
            entries += 1
            change = _change(value)
            if change is None:
                continue
            total += 1
            tally[change.action] += 1
            if change.kind in by_kind or len(by_kind) < MAX_KINDS:
                by_kind.setdefault(change.kind, Counter())[change.action] += 1
            if (not query.kind or change.kind == query.kind) and (not query.action or change.action == query.action):
                if first <= matched < first + query.size:
                    page.append(change)
                if change.section:
                    count, starts = sections.get(change.section, (0, matched // query.size + 1))
                    sections[change.section] = (count + 1, starts)
                matched += 1
        elif member in ("ops", "skips"):
            check_element(member, totals[member], value)
            totals[member] += 1
            if member == "skips" and len(skips) < MAX_SHOWN_LEFT:
                skips.append({"kind": _text(value.get("kind")), "title": _text(value.get("title")), "reason": _text(value.get("reason"))})
        elif member == "left_on_target" and isinstance(value, dict):
            totals["left_on_target"] += 1
            if len(left) < MAX_SHOWN_LEFT:
                left.append({"kind": _text(value.get("kind")), "title": _text(value.get("title")), "path": _text(value.get("path"))})
    saved = saved_from(header, Path(name))  # the header checked as `mirror apply --plan` checks it; lists as []
    return PlanView(
        name=name, source=saved.source or str(saved.pair.source_org), target=saved.target or str(saved.pair.target_org),
        mode=saved.mode, created_at=saved.created_at, changes=page,
        counts={action: tally[action] for action in ACTIONS if tally[action]},
        kinds=sorted(by_kind), skips=skips, left=left, warnings=list(saved.plan.warnings),
        refused=saved.plan.refused, unreadable=entries - total, total=total, matched=matched,
        by_kind={kind: {a: n[a] for a in ACTIONS if n[a]} for kind, n in sorted(by_kind.items())},
        page=max(query.page, 1), size=query.size, skips_total=totals["skips"], left_total=totals["left_on_target"],
        sections={SECTIONS[section]: sections[section] for section in SECTIONS if section in sections},
    )  # fmt: skip


def grouped(changes: list[Change]) -> list[tuple[str, str, list[Change]]]:
    """(id, heading, changes) of each non-empty group the page shows: the main listing by
    action (`+ create`...), then each section under its own heading (Access settings)."""
    main = [c for c in changes if not c.section]
    groups = [(action, f"{SYMBOLS[action]} {action}", [c for c in main if c.action == action]) for action in ACTIONS]
    groups += [(section, heading, [c for c in changes if c.section == section]) for section, heading in SECTIONS.items()]
    return [group for group in groups if group[2]]
