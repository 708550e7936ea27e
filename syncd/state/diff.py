"""Pure functions over recorded changes: totals per kind and op, and net changes across runs.

Every recorded change carries the state of its resource before and after its run (hash,
parent, position; no "before" for created, no "after" for deleted). The net change between
two snapshots A < B is then found per resource from the first change after A (its state at
A) and the last change up to B (its state at B): created then deleted is nothing, updated
twice is one update, moved away and back is nothing.

An update also records which fields changed, old and new value (`changed_fields`, bounded:
at most `MAX_FIELDS` fields, each value cut to `MAX_VALUE` characters of JSON), so `syncd
diff` can say what changed, not only that something did. Across runs the fields compose
like the rest: a field's old value is its first, its new value its last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["MAX_FIELDS", "MAX_VALUE", "OPS", "ChangeSummary", "Op", "changed_fields", "compose", "compose_fields", "summarise"]

MAX_FIELDS = 20
"""Changed fields kept per change row: a page whose every field changed stays one short row."""
MAX_VALUE = 200
"""Characters of JSON kept of each old and new value (a document body is not copied twice)."""
_MAX_DEPTH = 8
"""Objects nested deeper are compared, and shown, whole."""

Op = Literal["created", "updated", "moved", "deleted"]
OPS: tuple[Op, ...] = ("created", "updated", "moved", "deleted")
_OP_ORDER = {op: index for index, op in enumerate(OPS)}


@dataclass(frozen=True)
class ChangeSummary:
    """Counts of changes per kind and op, e.g. `counts["page"]["updated"] == 3`."""

    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(sum(ops.values()) for ops in self.counts.values())

    def __bool__(self) -> bool:
        return self.total > 0

    def by_op(self) -> dict[str, int]:
        """Totals per op over all kinds, every op present (0 when none)."""
        totals = dict.fromkeys(OPS, 0)
        for ops in self.counts.values():
            for op, count in ops.items():
                totals[op] = totals.get(op, 0) + count
        return totals

    def get(self, kind: str, op: str) -> int:
        return self.counts.get(kind, {}).get(op, 0)

    def rows(self) -> list[tuple[str, int, int, int, int]]:
        """(kind, created, updated, moved, deleted) per kind, sorted: ready for a table."""
        return [
            (kind, *(self.counts[kind].get(op, 0) for op in OPS))  # type: ignore[misc]
            for kind in sorted(self.counts)
        ]

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {kind: dict(sorted(ops.items(), key=lambda item: _OP_ORDER.get(item[0], 9)))
                for kind, ops in sorted(self.counts.items())}


def summarise(changes: Iterable[Mapping[str, Any]]) -> ChangeSummary:
    """Count changes (rows with `kind` and `op`, each one change or, with `count`, that many)
    per kind and op."""
    counts: dict[str, dict[str, int]] = {}
    for change in changes:
        ops = counts.setdefault(change["kind"], {})
        ops[change["op"]] = ops.get(change["op"], 0) + change.get("count", 1)
    return ChangeSummary(counts)


def compose(changes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Net changes of a sequence of recorded changes given in commit order.

    Returns rows shaped like recorded changes (tenant, kind, id, op, old_hash, new_hash,
    old_parent_id, parent_id, old_position, position, title; updates also `fields` and
    `fields_omitted`, see `compose_fields`), sorted by tenant, kind, op, id.
    A resource both updated and moved yields two rows, as a single run records it.
    """
    first: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    last: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    updates: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for change in changes:
        key = (change["tenant"], change["kind"], change["id"])
        first.setdefault(key, change)
        last[key] = change
        if change["op"] == "updated":
            updates.setdefault(key, []).append(change)
    net: list[dict[str, Any]] = []
    for key, start in first.items():
        end = last[key]
        existed, exists = start["op"] != "created", end["op"] != "deleted"
        base = {
            "tenant": key[0], "kind": key[1], "id": key[2],
            "old_hash": start["old_hash"] if existed else None,
            "new_hash": end["new_hash"] if exists else None,
            "old_parent_id": start["old_parent_id"] if existed else None,
            "parent_id": end["parent_id"] if exists else start["old_parent_id"],
            "old_position": start["old_position"] if existed else None,
            "position": end["position"] if exists else start["old_position"],
            "title": end["title"] if end["title"] is not None else start["title"],
        }
        if not existed and exists:
            net.append({**base, "op": "created"})
        elif existed and not exists:
            net.append({**base, "op": "deleted"})
        elif existed and exists:
            if base["old_hash"] != base["new_hash"]:
                fields, omitted = compose_fields(updates.get(key, []))
                net.append({**base, "op": "updated", "fields": fields, "fields_omitted": omitted})
            if (base["old_parent_id"], base["old_position"]) != (base["parent_id"], base["position"]):
                net.append({**base, "op": "moved"})
    net.sort(key=lambda row: (row["tenant"], row["kind"], _OP_ORDER[row["op"]], row["id"]))
    return net


def _by_id(value: Any) -> dict[str, Any] | None:
    """A list of objects with distinct string ids, as id -> object; None for any other list."""
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        return None
    ids = [item.get("id") for item in value]
    if not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
        return None
    return dict(zip(ids, value, strict=True))


def _flatten(value: Any, prefix: str, depth: int, out: dict[str, Any]) -> None:
    """Leaves of `value` by dotted path: objects by key, lists of objects with ids by id
    (`children[ID].title`, and `children[order]` the ids in order), other lists whole."""
    if depth < _MAX_DEPTH and isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), depth + 1, out)
        return
    items = _by_id(value) if depth < _MAX_DEPTH and prefix else None
    if items is None:
        out[prefix] = value
        return
    out[f"{prefix}[order]"] = list(items)
    for key, inner in items.items():
        _flatten(inner, f"{prefix}[{key}]", depth + 1, out)


_ABSENT = object()


def _bounded(value: Any) -> tuple[Any, bool]:
    """`value`, or the first MAX_VALUE characters of its JSON when longer (and True)."""
    if value is _ABSENT:
        return None, False
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if len(text) <= MAX_VALUE:
        return value, False
    return text[:MAX_VALUE] + "…", True


def _field_order(name: str) -> tuple[int, str]:
    return (0 if name in ("title", "name", "path", "label") else 1, name)


def changed_fields(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, ignore: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], int]:
    """The fields that differ between two versions of an object, and how many more did.

    Each is `{"field": "a.b", "old": ..., "new": ...}` (dotted paths into nested objects; a
    field absent on one side has `"absent": "old"` or `"new"` and None there; a value cut to
    MAX_VALUE characters has `"cut": true`), titles first then by name, at most MAX_FIELDS;
    the second value counts those left out. Top-level fields in `ignore` (the kind's volatile
    fields, left out of its hash too) are not compared."""
    skip = set(ignore)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _flatten({k: v for k, v in (old or {}).items() if k not in skip}, "", 0, before)
    _flatten({k: v for k, v in (new or {}).items() if k not in skip}, "", 0, after)
    names = sorted((name for name in before.keys() | after.keys()
                    if before.get(name, _ABSENT) != after.get(name, _ABSENT)), key=_field_order)  # fmt: skip
    rows = [_field_row(name, before.get(name, _ABSENT), after.get(name, _ABSENT)) for name in names[:MAX_FIELDS]]
    return rows, max(0, len(names) - MAX_FIELDS)


def _field_row(name: str, old: Any, new: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"field": name}
    (row["old"], cut_old), (row["new"], cut_new) = _bounded(old), _bounded(new)
    if old is _ABSENT or new is _ABSENT:
        row["absent"] = "old" if old is _ABSENT else "new"
    if cut_old or cut_new:
        row["cut"] = True
    return row


def compose_fields(changes: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]] | None, int]:
    """The net changed fields of a sequence of updates of one object, in commit order: each
    field's first old value and last new value, dropped when they are equal again. None
    when an update in the sequence recorded no fields (a state file older than the feature)."""
    net: dict[str, dict[str, Any]] = {}
    omitted = 0
    for change in changes:
        rows = change.get("fields")
        if rows is None:
            return None, 0
        omitted = max(omitted, int(change.get("fields_omitted") or 0))
        for row in rows:
            entry = net.setdefault(row["field"], {"field": row["field"], "old": row["old"], "absent_old": row.get("absent") == "old"})
            entry["new"], entry["absent_new"] = row["new"], row.get("absent") == "new"
            entry["cut"] = entry.get("cut", False) or bool(row.get("cut"))
    kept = []
    for entry in net.values():
        absent_old, absent_new, cut = entry.pop("absent_old"), entry.pop("absent_new"), entry.pop("cut")
        if (entry["old"], absent_old) == (entry["new"], absent_new) and not cut:
            continue  # changed, then changed back
        if absent_old or absent_new:
            entry["absent"] = "old" if absent_old else "new"
        if cut:
            entry["cut"] = True
        kept.append(entry)
    kept.sort(key=lambda row: _field_order(row["field"]))
    return kept[:MAX_FIELDS], omitted + max(0, len(kept) - MAX_FIELDS)
