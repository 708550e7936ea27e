"""Which creates into one listing may be in flight together, decided from the plan.

Creates into one listing (`Op.serial`) took turns one at a time so that after a lost answer
"what appeared" was one object. They may overlap when each one can still find its own object
among several new ones: when the siblings being created are told apart by the name the create
SENDS (the kind's natural key: a title, a name, a slug), all different within the group once
normalised. A create whose object cannot be told apart that way (no such name, the same name
as a sibling's, a recipe of several calls, a name the service derives) keeps its turn alone.

The placement look (`syncd.copy.placement`) needs two creates of a kind one after the other,
so a positional kind overlaps only once where its new objects land is settled; where the
creates then land in another order than the plan's, the settle steps move them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from syncd.catalog import BY_NAME
from syncd.copy.ops import Op
from syncd.copy.rules import RULES

__all__ = [
    "Names", "group_names", "name_field", "names_from_json", "names_to_json", "normal_name", "overlap_width", "placement_settled", "sent_name",
    "told_apart",
]


def normal_name(value: str) -> str:
    """A name as siblings are told apart by it: case and runs of white space do not count, so
    that two names a service might take for one are never taken for two."""
    return " ".join(value.split()).casefold()


def name_field(kind: str) -> str | None:
    """The body field of `kind` whose sent value names the new object (its natural key), or
    None when its key is not one field (a site-space: its space and section)."""
    rule = RULES.get(kind)
    if rule is None or not isinstance(rule.key, str):
        return None
    return rule.body_name(rule.key)


def sent_name(op: Op) -> str | None:
    """The normalised name a plain create sends, or None (not a plain create, no name)."""
    if op.action != "create" or op.recipe != "call" or op.side != "target" or not isinstance(op.body, Mapping):
        return None
    field = name_field(op.kind)
    value = op.body.get(field) if field else None
    return normal_name(value) if isinstance(value, str) and value.strip() else None


def told_apart(ops: Sequence[Op]) -> dict[str, str]:
    """op key -> normalised name, for the ops of one serial group that may overlap: plain
    creates whose name no other create of the same kind in the group sends."""
    named = {op.key: (op.kind, name) for op in ops if (name := sent_name(op)) is not None}
    counts = Counter(named.values())
    return {key: name for key, (kind, name) in named.items() if counts[(kind, name)] == 1}


def placement_settled(kind: str, wanted: bool) -> bool:
    """Whether creates of `kind` may land in any order: a kind without positions, or one
    whose placement look is done (`Placement.wanted` is False)."""
    spec = BY_NAME.get(kind)
    return not (spec is not None and spec.ordered) or not wanted


def overlap_width(distinct: bool, settled: bool, wide: int) -> int:
    """How many creates of a group may be in flight together with this one: `wide` (the
    apply's concurrency) when its name tells it apart (`distinct`) and its kind's placement
    is settled, else 1 (today's one after another)."""
    return max(1, wide) if distinct and settled else 1


@dataclass(frozen=True)
class Names:
    """How a create sent while siblings may be in flight finds its object after a lost answer:
    by the value at `field` (normalised) equal to `mine`; a new object named as one of
    `others` (the group's other creates of its kind) is theirs.

    `sent` is every name the group's creates of its kind send, `mine` included or not: one
    set shared by the whole group (`group_names`). A set of the others per create made the
    names of a group of N creates N x N: 28 MB for 3,200 spaces in 20 collections."""

    field: str
    mine: str
    sent: frozenset[str]

    @property
    def others(self) -> frozenset[str]:
        """The names the group's other creates of its kind send."""
        return self.sent - {self.mine}

    def theirs(self, name: str | None) -> bool:
        """Whether `name` is one a sibling create sends (not this one's)."""
        return name is not None and name != self.mine and name in self.sent

    def of(self, item: object) -> str | None:
        value = item.get(self.field) if isinstance(item, Mapping) else None
        return normal_name(value) if isinstance(value, str) else None


def names_to_json(names: Names) -> dict[str, Any]:
    return {"field": names.field, "mine": names.mine, "others": sorted(names.others)}


def names_from_json(data: Any) -> Names | None:
    """The `names` a journaled intent holds (None: sent alone, or by an older syncd)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("field"), str) or not isinstance(data.get("mine"), str):
        return None
    return Names(data["field"], data["mine"], frozenset(str(o) for o in data.get("others") or ()))


def group_names(ops: Sequence[Op]) -> dict[str, Names]:
    """op key -> its `Names`, for the ops of one serial group that may overlap (`told_apart`):
    the others are every name the group's creates of its kind send."""
    distinct = told_apart(ops)
    sent: dict[str, set[str]] = {}
    for op in ops:
        if (name := sent_name(op)) is not None:
            sent.setdefault(op.kind, set()).add(name)
    shared = {kind: frozenset(names) for kind, names in sent.items()}  # one set per kind, not one per create
    out: dict[str, Names] = {}
    for op in ops:
        field = name_field(op.kind)
        if op.key in distinct and field is not None:
            out[op.key] = Names(field, distinct[op.key], shared[op.kind])
    return out
