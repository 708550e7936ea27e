"""Operations: what the planner produces and apply executes (plain data, JSON round-trip).

An op is one step of a copy: one write call (a create, a patch, a delete, a content import),
a recipe of a few calls that belong together (a section with its first site-space, a space
duplicated in the source and transferred), or a settle step that reads a listing of the target
at run time and puts what it finds in order (positions, paths, defaults, group membership).

Ids never cross tenants: paths and bodies name objects made by this plan as `Ref(kind,
source id)` (in a path: `{ref:KIND:SOURCE_ID}`), resolved through the id map when the op
runs, after the ops that make them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Action = Literal["adopt", "create", "patch", "content", "move", "settle", "delete"]
ACTIONS: tuple[str, ...] = ("adopt", "create", "patch", "content", "move", "settle", "delete")
Side = Literal["target", "source"]
Recipe = Literal["call", "adopt", "duplicate-transfer", "import", "import-served", "undelete", "section", "settle-tree", "settle-site"]


@dataclass(frozen=True)
class Ref:
    """An object named by its source identity; apply swaps in its target id."""

    kind: str
    source_id: str

    def to_json(self) -> dict[str, list[str]]:
        return {"$ref": [self.kind, self.source_id]}


PATH_REF = re.compile(r"\{ref:([^:{}]+):([^{}]+)\}")
"""`{ref:KIND:SOURCE_ID}` in an op's path: the target id of that source object."""


def path_ref(kind: str, source_id: str) -> str:
    return f"{{ref:{kind}:{source_id}}}"


def path_refs(path: str) -> list[Ref]:
    return [Ref(kind, source_id) for kind, source_id in PATH_REF.findall(path)]


@dataclass(frozen=True)
class Expect:
    """Where the object a create makes shows up, to find it after a lost answer: in the
    listing at `path` (of the `side` tenant), under `parent_field == parent` when given.
    What the call made is what APPEARED there since its intent was written: an id no read saw
    before, mapped to no other source object, and none of `exclude` (the original of a
    duplicate). Field values are never predicted."""

    path: str
    side: Side = "target"
    parent_field: str | None = None
    parent: Any = None
    exclude: tuple[Any, ...] = ()
    id_field: str = "id"


@dataclass
class Op:
    """One step of a plan (see the module docstring).

    `key` is unique in the plan and stable across plans of the same change (e.g.
    "create:space:<source id>"). `after` names ops that must be done first (the ops that make
    the objects its Refs name are waited for anyway). Ops with the same `serial` (creates into
    one listing) take turns: one at a time, so that "what appeared" after a lost answer is one
    object, or side by side where the names they send tell them apart (`syncd.copy.overlap`).
    `want` holds, for a create, the canonical values the new object must have: the answer is
    compared with them and what differs is patched in the same run. `spec` is a recipe's data.
    `preview` says what a settle step expects to do, from what was read.
    """

    key: str
    action: Action
    kind: str
    source_id: str | None
    title: str = ""
    recipe: Recipe = "call"
    method: str = ""
    path: str = ""
    body: Any = None
    side: Side = "target"
    target_id: str | None = None
    after: list[str] = field(default_factory=list)
    serial: str | None = None
    expect: Expect | None = None
    want: dict[str, Any] | None = None
    spec: dict[str, Any] | None = None
    preview: list[str] = field(default_factory=list)
    makes: list[tuple[str, str]] = field(default_factory=list)
    """(kind, source id) of objects the op makes besides its own (a section's first
    site-space): ops naming them wait for this one."""
    note: str = ""

    @property
    def creates(self) -> bool:
        """Whether the op makes a new object (not idempotent: journaled and reconciled)."""
        return self.action == "create"

    @property
    def products(self) -> list[tuple[str, str]]:
        """(kind, source id) of what the op puts in the id map."""
        own = [(self.kind, self.source_id)] if self.source_id is not None and self.action in ("create", "adopt") else []
        return own + list(self.makes)


@dataclass(frozen=True)
class Skip:
    """Something the plan will not copy, and why (never a crash). `excuses` names what verify
    may find different because of it: `missing`, or fields such as `pages` and `files`; or
    `kind:KIND`, every difference of every object of that kind (a kind the plan leaves as the
    target has it: the SAML providers of a copy without access settings)."""

    kind: str
    source_id: str | None
    title: str
    reason: str
    excuses: tuple[str, ...] = ()


WHOLE_KIND = "kind:"
"""The prefix of an excuse that covers a whole kind (`Skip.excuses`)."""


def wholly_excused(skips: Iterable[Skip]) -> set[str]:
    """The kinds whose every object a skip excuses (`kind:KIND`): the target keeps them as
    they are (its SAML providers without --with-access), so they are neither differences nor
    objects a copy leaves behind."""
    return {name.removeprefix(WHOLE_KIND) for skip in skips for name in skip.excuses if name.startswith(WHOLE_KIND)}


@dataclass(frozen=True)
class Leftover:
    """An object the copy leaves on the target although no source object maps to it (the
    source dropped it, or the target had it of its own): what copy mode keeps by design."""

    kind: str
    target_id: str
    title: str
    path: str
    """Where it is on the target, by titles (`Collection/Space`), as the plan's review shows paths."""

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "target_id": self.target_id, "title": self.title, "path": self.path}


@dataclass
class Plan:
    ops: list[Op] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    refused: str | None = None
    """Why the plan must not be applied (e.g. deletes beyond --max-delete), or None."""
    warnings: list[str] = field(default_factory=list)
    left: list[Leftover] = field(default_factory=list)
    """Target objects the plan leaves although the source has nothing for them (`Leftover`)."""

    def counts(self) -> dict[str, Counter[str]]:
        """kind -> action -> number of ops (what `mirror plan` prints)."""
        totals: dict[str, Counter[str]] = {}
        for op in self.ops:
            totals.setdefault(op.kind, Counter())[op.action] += 1
        return totals

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)


def encode(value: Any) -> Any:
    """JSON form of a value that may hold Refs."""
    if isinstance(value, Ref):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$ref"} and isinstance(value["$ref"], list) and len(value["$ref"]) == 2:
            return Ref(*value["$ref"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def refs_in(value: Any) -> Iterable[Ref]:
    """Every Ref inside a value (to order ops and to check the id map has them)."""
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, str):
        yield from path_refs(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from refs_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from refs_in(v)


def consumed(op: Op) -> list[Ref]:
    """The objects an op names (and so waits for)."""
    refs = [*path_refs(op.path), *refs_in(op.body), *refs_in(op.spec)]
    if op.expect is not None:
        refs += [*path_refs(op.expect.path), *refs_in(op.expect.parent)]
    return refs


def expect_to_json(expect: Expect) -> dict[str, Any]:
    return {
        "path": expect.path, "side": expect.side, "parent_field": expect.parent_field, "parent": encode(expect.parent),
        "exclude": encode(list(expect.exclude)), "id_field": expect.id_field,
    }


def expect_from_json(data: Mapping[str, Any]) -> Expect:
    return Expect(
        path=str(data["path"]), side=data.get("side", "target"), parent_field=data.get("parent_field"),
        parent=decode(data.get("parent")), exclude=tuple(decode(data.get("exclude") or [])), id_field=data.get("id_field", "id"),
    )


def op_to_json(op: Op) -> dict[str, Any]:
    data: dict[str, Any] = {
        "key": op.key, "action": op.action, "kind": op.kind, "source_id": op.source_id, "title": op.title,
        "recipe": op.recipe, "method": op.method, "path": op.path, "body": encode(op.body), "side": op.side,
        "target_id": op.target_id, "after": list(op.after), "serial": op.serial, "note": op.note,
    }
    if op.expect is not None:
        data["expect"] = expect_to_json(op.expect)
    if op.want is not None:
        data["want"] = encode(op.want)
    if op.spec is not None:
        data["spec"] = encode(op.spec)
    if op.preview:
        data["preview"] = list(op.preview)
    if op.makes:
        data["makes"] = [list(item) for item in op.makes]
    return data


def op_from_json(data: Mapping[str, Any]) -> Op:
    return Op(
        key=data["key"], action=data["action"], kind=data["kind"], source_id=data.get("source_id"), title=data.get("title", ""),
        recipe=data.get("recipe", "call"), method=data.get("method", ""), path=data.get("path", ""), body=decode(data.get("body")),
        side=data.get("side", "target"), target_id=data.get("target_id"), after=list(data.get("after") or []),
        serial=data.get("serial"), expect=expect_from_json(data["expect"]) if data.get("expect") else None,
        want=decode(data.get("want")), spec=decode(data.get("spec")), preview=list(data.get("preview") or []),
        makes=[(str(k), str(i)) for k, i in data.get("makes") or []], note=data.get("note", ""),
    )


__all__ = [
    "ACTIONS",
    "PATH_REF",
    "Action",
    "Expect",
    "Leftover",
    "Op",
    "Plan",
    "Recipe",
    "Ref",
    "Side",
    "Skip",
    "WHOLE_KIND",
    "wholly_excused",
    "consumed",
    "decode",
    "encode",
    "expect_from_json",
    "expect_to_json",
    "op_from_json",
    "op_to_json",
    "path_ref",
    "path_refs",
    "refs_in",
]
