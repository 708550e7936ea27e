"""Operations: what `plan` produces and `apply` executes.

An op is one write call. Its path and body may hold `Ref`s: references to objects by their
SOURCE id, resolved through the id map when the op runs (after the ops it depends on have
created them). Ops are plain data and round-trip through JSON, so a plan can be printed,
saved and journaled.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Action = Literal["create", "patch", "move", "delete", "content", "adopt"]
ACTIONS: tuple[str, ...] = ("adopt", "create", "patch", "content", "move", "delete")


@dataclass(frozen=True)
class Ref:
    """An object named by its source identity; apply swaps in its target id."""

    kind: str
    source_id: str

    def to_json(self) -> dict[str, list[str]]:
        return {"$ref": [self.kind, self.source_id]}


@dataclass(frozen=True)
class Target:
    """An object named by its id on the target (for ops on objects that exist there)."""

    kind: str
    target_id: str

    def to_json(self) -> dict[str, list[str]]:
        return {"$target": [self.kind, self.target_id]}


Value = Any
"""JSON values, where any value may also be a Ref or a Target."""

PATH_REF = re.compile(r"\{ref:([^:{}]+):([^{}]+)\}")
"""`{ref:KIND:SOURCE_ID}` in an op's path: the target id of that source object."""


def path_ref(kind: str, source_id: str) -> str:
    """A path segment naming a source object, resolved through the id map by apply."""
    return f"{{ref:{kind}:{source_id}}}"


def path_refs(path: str) -> list[Ref]:
    return [Ref(kind, source_id) for kind, source_id in PATH_REF.findall(path)]


@dataclass(frozen=True)
class Match:
    """How to find, on the target, the object a create would make: after an answer was
    lost, apply lists `path` and adopts the item whose `field` equals `value` (and whose
    `parent_field` equals `parent`, when given) instead of creating it again."""

    path: str
    params: Mapping[str, Value]
    field: str
    value: Value
    parent_field: str | None = None
    parent: Value = None


@dataclass
class Op:
    """One write call of a plan.

    `key` is unique in the plan and stable across plans of the same change (e.g.
    "create:space:<source id>"): the journal uses it to recognise an op it already sent.
    `after` lists keys of ops that must be done first. `produces` names extra id-map
    entries read from the answer: (kind, source id, dotted path of the target id), e.g. the
    site-space a section creation makes. `client` is "target" except for the source side of
    a duplicate-and-transfer content copy.
    """

    key: str
    action: Action
    kind: str
    source_id: str | None
    target_id: str | None
    method: str
    path: str
    params: dict[str, Value] = field(default_factory=dict)
    body: dict[str, Value] | None = None
    after: list[str] = field(default_factory=list)
    title: str = ""
    match: Match | None = None
    produces: list[tuple[str, str, str]] = field(default_factory=list)
    client: Literal["target", "source"] = "target"
    result_id_field: str = "id"
    """Field of the answer holding the new object's id (what the id map records)."""
    note: str = ""


@dataclass(frozen=True)
class Skip:
    """Something the plan will not copy, and why (never a crash)."""

    kind: str
    source_id: str | None
    title: str
    reason: str


@dataclass
class Plan:
    ops: list[Op] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    refused: str | None = None
    """Why the plan must not be applied (e.g. deletes beyond --max-delete), or None."""

    def counts(self) -> dict[str, Counter[str]]:
        """kind -> action -> number of ops (what `mirror plan` prints)."""
        totals: dict[str, Counter[str]] = {}
        for op in self.ops:
            totals.setdefault(op.kind, Counter())[op.action] += 1
        return totals

    def writes(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)


def encode(value: Value) -> Any:
    """JSON form of a value that may hold Refs and Targets."""
    if isinstance(value, (Ref, Target)):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Value:
    if isinstance(value, dict):
        if set(value) == {"$ref"} and isinstance(value["$ref"], list):
            return Ref(*value["$ref"])
        if set(value) == {"$target"} and isinstance(value["$target"], list):
            return Target(*value["$target"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def refs_in(value: Value) -> Iterable[Ref]:
    """Every Ref inside a value (to order ops and to check the id map has them)."""
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from refs_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from refs_in(v)


def op_to_json(op: Op) -> dict[str, Any]:
    data = {
        "key": op.key, "action": op.action, "kind": op.kind, "source_id": op.source_id,
        "target_id": op.target_id, "method": op.method, "path": op.path,
        "params": encode(op.params), "body": encode(op.body), "after": list(op.after),
        "title": op.title, "produces": [list(p) for p in op.produces], "client": op.client,
        "result_id_field": op.result_id_field, "note": op.note,
    }
    if op.match is not None:
        data["match"] = {
            "path": op.match.path, "params": encode(op.match.params), "field": op.match.field,
            "value": encode(op.match.value), "parent_field": op.match.parent_field, "parent": encode(op.match.parent),
        }
    return data


def op_from_json(data: Mapping[str, Any]) -> Op:
    match = data.get("match")
    return Op(
        key=data["key"], action=data["action"], kind=data["kind"], source_id=data.get("source_id"),
        target_id=data.get("target_id"), method=data["method"], path=data["path"],
        params=decode(data.get("params") or {}), body=decode(data.get("body")), after=list(data.get("after") or []),
        title=data.get("title", ""),
        match=Match(match["path"], decode(match.get("params") or {}), match["field"], decode(match["value"]),
                    match.get("parent_field"), decode(match.get("parent"))) if match else None,
        produces=[tuple(p) for p in data.get("produces") or []], client=data.get("client", "target"),
        result_id_field=data.get("result_id_field", "id"), note=data.get("note", ""),
    )
