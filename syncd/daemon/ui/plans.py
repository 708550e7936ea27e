"""Saved plans as the page shows them: the files of the plans folder, one plan's changes.

Why a folder and not a path from the page: the page may only show what the operator put where
the daemon looks (`<state_dir>/plans`, where `mirror plan --out` can write and where the page's
"plan now" saves), never a path a request names. A plan file is untrusted like any file: its
name must be plain, its size is bounded, it must be a plan this syncd applies (`load_plan`
checks it whole), and every line of its listing is checked for shape before it is shown.
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
from typing import Any

from syncd.copy.planfile import PlanFileError, plan_data, saved_from
from syncd.copy.review import ACTIONS, SECTIONS, SYMBOLS

__all__ = ["MAX_PLAN_BYTES", "Change", "PlanFile", "PlanView", "filtered", "grouped", "plan_files", "plan_name", "read_plan"]

MAX_PLAN_BYTES = 64 * 1024 * 1024
"""A plan larger than this is not read (a million operations are about 400 MB: use the CLI)."""
MAX_LISTED = 500
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


def _read_bounded(path: Path) -> bytes:
    """The bytes of the regular file at `path`, opened once (no link followed, a FIFO not waited
    on) and read to at most `MAX_PLAN_BYTES`: what is checked is what is read.
    FileNotFoundError when it is no such file; PlanFileError when it is too large."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise FileNotFoundError(path.name) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileNotFoundError(path.name)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_PLAN_BYTES + 1)
    if len(raw) > MAX_PLAN_BYTES:
        raise PlanFileError(f"{path.name} is more than the page reads ({MAX_PLAN_BYTES:,} bytes): use `syncd mirror apply --plan {path.name} --dry-run`")
    return raw


def read_plan(folder: Path, name: str) -> PlanView:
    """The plan `name` of `folder`; FileNotFoundError when there is no such plan file there,
    PlanFileError (one line) when it is not a plan this syncd reads."""
    if not plan_name(name):
        raise FileNotFoundError(name)
    raw = _read_bounded(folder / name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanFileError(f"{name} cannot be read as a plan: {exc}") from None
    document = plan_data(text, Path(name))
    saved = saved_from(document, Path(name))  # the whole document checked as `mirror apply --plan` checks it
    raw_changes = document.get("changes")
    entries = raw_changes if isinstance(raw_changes, list) else []
    changes = [change for change in map(_change, entries) if change is not None]
    tally = Counter(change.action for change in changes)
    skips = [
        {"kind": _text(s.get("kind")), "title": _text(s.get("title")), "reason": _text(s.get("reason"))}
        for s in document.get("skips") or () if isinstance(s, dict)
    ]
    raw_left = document.get("left_on_target")
    left = [
        {"kind": _text(item.get("kind")), "title": _text(item.get("title")), "path": _text(item.get("path"))}
        for item in (raw_left if isinstance(raw_left, list) else ()) if isinstance(item, dict)
    ]
    return PlanView(
        name=name, source=saved.source or str(saved.pair.source_org), target=saved.target or str(saved.pair.target_org),
        mode=saved.mode, created_at=saved.created_at, changes=changes,
        counts={action: tally[action] for action in ACTIONS if tally[action]},
        kinds=sorted({change.kind for change in changes}), skips=skips, left=left, warnings=list(saved.plan.warnings),
        refused=saved.plan.refused, unreadable=len(entries) - len(changes),
    )  # fmt: skip


def filtered(changes: list[Change], kind: str | None, action: str | None) -> list[Change]:
    """The changes of one kind and/or one action (None or empty: any)."""
    return [c for c in changes if (not kind or c.kind == kind) and (not action or c.action == action)]


def grouped(changes: list[Change]) -> list[tuple[str, str, list[Change]]]:
    """(id, heading, changes) of each non-empty group the page shows: the main listing by
    action (`+ create`...), then each section under its own heading (Access settings)."""
    main = [c for c in changes if not c.section]
    groups = [(action, f"{SYMBOLS[action]} {action}", [c for c in main if c.action == action]) for action in ACTIONS]
    groups += [(section, heading, [c for c in changes if c.section == section]) for section, heading in SECTIONS.items()]
    return [group for group in groups if group[2]]
