"""Pure functions over recorded changes: totals per kind and op, and net changes across runs.

Every recorded change carries the state of its resource before and after its run (hash,
parent, position; no "before" for created, no "after" for deleted). The net change between
two snapshots A < B is then found per resource from the first change after A (its state at
A) and the last change up to B (its state at B): created then deleted is nothing, updated
twice is one update, moved away and back is nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["OPS", "ChangeSummary", "Op", "compose", "summarise"]

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
    """Count changes (rows with `kind` and `op`) per kind and op."""
    counts: dict[str, dict[str, int]] = {}
    for change in changes:
        ops = counts.setdefault(change["kind"], {})
        ops[change["op"]] = ops.get(change["op"], 0) + 1
    return ChangeSummary(counts)


def compose(changes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Net changes of a sequence of recorded changes given in commit order.

    Returns rows shaped like recorded changes (tenant, kind, id, op, old_hash, new_hash,
    old_parent_id, parent_id, old_position, position, title), sorted by tenant, kind, op, id.
    A resource both updated and moved yields two rows, as a single run records it.
    """
    first: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    last: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for change in changes:
        key = (change["tenant"], change["kind"], change["id"])
        first.setdefault(key, change)
        last[key] = change
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
                net.append({**base, "op": "updated"})
            if (base["old_parent_id"], base["old_position"]) != (base["parent_id"], base["position"]):
                net.append({**base, "op": "moved"})
    net.sort(key=lambda row: (row["tenant"], row["kind"], _OP_ORDER[row["op"]], row["id"]))
    return net
