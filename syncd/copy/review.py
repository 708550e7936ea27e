"""A plan as people review it: every operation on one line, with the object's title and
path, and for updates each field `before → after` (like `terraform plan`).

Pure: the plan and what it was made from (both snapshots and the id map) in, `Item`s out.
An item is one line of the listing: an op, or one move of a settle step (a settle step
reads the target at run time and moves what is out of place; what it expects to move, from
what was read, is listed move by move). `render` makes the text lines; `Item.to_json` the
machine form (`mirror plan --json`).

Paths name objects the way people see them: a collection or a space by the titles of the
collections above it and its own (`Guides/Inner/Beta`), a site's section or site-space by
the site's title first (`Docs site/Start`), anything else by its title. Creates are shown
where the source has them, everything else where the target has it now. Values are shown as
text (`'title'`, numbers, JSON) shortened to `VALUE_WIDTH` characters; a reference shows the
referenced object's title and its target id (`new` while this plan makes it). What writes the
target's access settings (a plan made `with_access`) comes last, under its own heading
(`SECTIONS`). Nothing here is safe for a terminal by itself: print the lines through
`syncd.safe_text`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from syncd.copy.model import IdMap, Node, Snapshot
from syncd.copy.ops import Op, Plan, Ref
from syncd.copy.rules import ACCESS_KEY, ACCESS_KINDS, RULES, canonical, custom_field_values, page_paths, ref_id, site_of, space_content, title_of, tree_parent

__all__ = ["ACCESS", "ACTIONS", "SECTIONS", "SYMBOLS", "VALUE_WIDTH", "FieldChange", "Item", "counts", "object_path", "render", "review", "section_of", "shorten"]

SYMBOLS: dict[str, str] = {
    "create": "+",
    "adopt": "=",
    "update": "~",
    "content": "⇄",
    "move": "→",
    "settle": "↻",
    "delete": "-",
}
"""One symbol per action of the listing (`patch` ops are shown as `update`), in the order
the listing groups them."""

ACTIONS: tuple[str, ...] = tuple(SYMBOLS)
VALUE_WIDTH = 60
"""Longest value shown in a `before → after` (longer ones end with `…`)."""
ACCESS = "access"
SECTIONS: dict[str, str] = {ACCESS: "Access settings"}
"""Sections of the listing after the main one, with their heading: `Item.section`."""
_SHOWN_ACTION = {"patch": "update"}
_OBJECT_KIND = {"space-custom-field-value": "space"}
"""Ops on a part of an object, shown as the object (a space's custom field values)."""


@dataclass(frozen=True)
class FieldChange:
    """One field of an update: the target's value as read, and the value the plan writes,
    as text (`before`, `after`: shortened, references by title) and as JSON values (ids of
    the target; an object this plan makes as `<new KIND SOURCE_ID>`)."""

    name: str
    before: str
    after: str
    before_value: Any = None
    after_value: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"field": self.name, "before": self.before_value, "after": self.after_value, "before_text": self.before, "after_text": self.after}


@dataclass(frozen=True)
class Item:
    """One line of the listing (see the module docstring). `key` is the op's key (a move
    names its settle step's key); `detail` says more where the line needs it."""

    action: str
    kind: str
    title: str
    path: str
    key: str
    fields: tuple[FieldChange, ...] = ()
    detail: str = ""
    to_path: str | None = None
    """For a move: where the object goes (`path` is where it is now)."""
    section: str = ""
    """The heading it is listed under (`SECTIONS`); "": the main listing."""

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.action]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "symbol": self.symbol, "action": self.action, "kind": self.kind, "title": self.title, "path": self.path, "key": self.key,
        }
        if self.to_path is not None:
            data["to_path"] = self.to_path
        if self.fields:
            data["fields"] = [change.to_json() for change in self.fields]
        if self.detail:
            data["detail"] = self.detail
        if self.section:
            data["section"] = self.section
        return data


def shorten(text: str, width: int = VALUE_WIDTH) -> str:
    """`text` on one line, at most `width` characters (the cut marked with `…`)."""
    flat = " ".join(text.split()) if any(c in text for c in "\n\r\t") else text
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ----- paths -------------------------------------------------------------------------------------


def object_path(kind: str, node: Node | None, view: Snapshot) -> str:
    """Where an object is, by titles (see the module docstring)."""
    if node is None:
        return ""
    title = title_of(kind, node)
    if kind in ("collection", "space"):
        parts, seen = [title], {node.id}
        parent = tree_parent(node)
        while parent is not None and parent not in seen:
            seen.add(parent)
            above = view.get("collection", parent)
            if above is None:
                break
            parts.append(title_of("collection", above))
            parent = tree_parent(above)
        return "/".join(reversed(parts))
    site = view.get("site", site_of(node)) if kind != "site" else None
    if kind == "site-space":
        section = view.get("site-section", ref_id(node.data.get("section")))
        middle = [title_of("site-section", section)] if section is not None else []
        return "/".join([title_of("site", site), *middle, title]) if site is not None else title
    if kind == "site-adaptive-schema" and site is not None:
        return title_of("site", site)
    if site is not None:
        return f"{title_of('site', site)}/{title}"
    return title


# ----- the listing -------------------------------------------------------------------------------


@dataclass
class _Reviewer:
    source: Snapshot
    target: Snapshot
    idmap: IdMap
    adopted: dict[tuple[str, str], str] = field(default_factory=dict)
    _sources: dict[str, dict[str, str]] = field(default_factory=dict)

    def target_id(self, kind: str, source_id: str) -> str | None:
        if kind == "organization" and source_id == self.source.org:
            return self.target.org
        return self.idmap.target(kind, source_id) or self.adopted.get((kind, source_id))

    def source_id(self, kind: str, target_id: str) -> str | None:
        if kind not in self._sources:
            self._sources[kind] = {**self.idmap.sources_of(kind), **{t: s for (k, s), t in self.adopted.items() if k == kind}}
        return self._sources[kind].get(target_id)

    # -- values --------------------------------------------------------------------------

    def ref_text(self, kind: str, value: Any, side: str) -> str:
        """A reference as `'Title' (target id)`; `side` says whose id `value` is (a Ref is a
        source object)."""
        if isinstance(value, Ref):
            node = self.source.get(value.kind, value.source_id)
            mapped = self.target_id(value.kind, value.source_id)
            return f"{title_of(value.kind, node)!r} ({mapped or 'new'})" if node is not None else f"({mapped or 'new ' + value.kind})"
        target_id = ref_id(value)
        if target_id is None:
            return self.value_text(value)
        node = (self.target if side == "target" else self.source).get(kind, target_id)
        return f"{title_of(kind, node)!r} ({target_id})" if node is not None else f"({target_id})"

    def value_text(self, value: Any) -> str:
        if isinstance(value, Ref):
            return self.ref_text(value.kind, value, "source")
        if isinstance(value, str):
            return shorten(repr(value))
        if value is None or isinstance(value, (bool, int, float)):
            return json.dumps(value)
        plain = _resolved(value, self)
        return shorten(json.dumps(plain, ensure_ascii=False, sort_keys=True, default=str))

    # -- ops -----------------------------------------------------------------------------

    def items(self, plan: Plan) -> list[Item]:
        for op in plan.ops:
            if op.action == "adopt" and op.source_id is not None and op.target_id is not None:
                self.adopted[(op.kind, op.source_id)] = op.target_id
        out: list[Item] = []
        for op in plan.ops:
            out += self.settle(op) if op.action == "settle" else [self.item(op)]
        return sorted(out, key=_listing_order)

    def item(self, op: Op) -> Item:
        action = _SHOWN_ACTION.get(op.action, op.action)
        kind = _OBJECT_KIND.get(op.kind, op.kind)
        node, view = self.located(op)
        title = title_of(kind, node) if node is not None and kind != "site-adaptive-schema" else op.title
        path = object_path(kind, node, view) if node is not None else op.title
        fields: tuple[FieldChange, ...] = ()
        detail = ""
        if op.action == "patch":
            fields = tuple(self.patch_fields(op))
        elif op.action == "content":
            fields = tuple(self.content_fields(op))
            detail = "as syncd serves it" if op.recipe == "import-served" else "from the source space's URL"
        elif op.action == "adopt":
            detail = f"already on the target ({op.target_id}): taken into the id map"
        elif op.action == "create" and (op.recipe == "undelete" or op.target_id):
            detail = op.note  # brought back, or replaces an object gone from the target
        elif op.action == "delete":
            detail = "syncd created it; the source no longer has it"
        return Item(action, kind, title, path, op.key, fields, detail, section=section_of(op))

    def located(self, op: Op) -> tuple[Node | None, Snapshot]:
        """The object an op is about, and the side it is read from (module docstring)."""
        kind = _OBJECT_KIND.get(op.kind, op.kind)
        if op.action in ("create", "adopt") or (op.target_id is None and op.source_id is not None):
            node = self.source.get(kind, op.source_id)
            if op.action == "adopt" and op.target_id is not None and self.target.get(kind, op.target_id) is not None:
                return self.target.get(kind, op.target_id), self.target
            return node, self.source
        if op.target_id is not None and (node := self.target.get(kind, op.target_id)) is not None:
            return node, self.target
        return self.source.get(kind, op.source_id), self.source

    def patch_fields(self, op: Op) -> Iterable[FieldChange]:
        body = op.body if isinstance(op.body, dict) else {}
        if op.kind == "space-custom-field-value":
            node = self.target.get("space", op.target_id)
            current = custom_field_values(node, self.target) if node is not None else {}
            for name, value in (body.get("values") or {}).items():
                after = value.get("value") if isinstance(value, dict) else value
                yield self.change(f"customFields.{name}", current.get(name), after)
            return
        rule = RULES.get(op.kind)
        node = self.target.get(op.kind, op.target_id) if op.target_id else None
        current = canonical(op.kind, node, self.target) if node is not None and rule is not None else {}
        names = {rule.body_name(name): name for name in rule.fields} if rule is not None else {}
        refs = rule.refs if rule is not None else {}
        for key, after in body.items():
            name = names.get(key, key)
            before = current.get(name) if name in current else (node.data.get(key) if node is not None else None)
            yield self.change(name, before, after, refs.get(name))

    def change(self, name: str, before: Any, after: Any, ref_kind: str | None = None) -> FieldChange:
        if ref_kind is not None:
            before_text = self.ref_text(ref_kind, before, "target") if before is not None else "null"
            after_text = self.ref_text(ref_kind, after, "source") if after is not None else "null"
        else:
            before_text, after_text = self.value_text(before), self.value_text(after)
        return FieldChange(name, before_text, after_text, _plain(before, self), _plain(after, self))

    def content_fields(self, op: Op) -> Iterable[FieldChange]:
        assert op.source_id is not None
        wanted = space_content(self.source, op.source_id)
        current = space_content(self.target, op.target_id) if op.target_id else ((), ())
        src, tgt = page_paths(wanted[0]), page_paths(current[0])
        changed = sum(1 for path in src if path in tgt and src[path] != tgt[path])
        if src != tgt:
            after = f"{len(src)} pages" + (f" ({changed} changed)" if changed else "")
            yield FieldChange("pages", f"{len(tgt)} pages", after, len(tgt), len(src))
        if wanted[1] != current[1]:
            yield FieldChange("files", f"{len(current[1])} files", f"{len(wanted[1])} files", len(current[1]), len(wanted[1]))

    def settle(self, op: Op) -> list[Item]:
        """A settle step's line (what it does besides moving), then one line per move."""
        spec = op.spec or {}
        moves = spec.get("moves") or []
        site = self.target.get("site", op.target_id) if op.kind == "site" and op.target_id else None
        others = [line for line in op.preview if not line.startswith("move ")]
        if moves:
            others.append(f"{len(moves)} move(s), listed with →")
        head_path = title_of("site", site) if site is not None else (op.title if op.kind == "site" else "")
        out = [Item("settle", op.kind, op.title, head_path, op.key, detail="read the target, then " + ("; ".join(others) or "check the layout"))]
        for move in moves:
            out.append(self.move(op, str(move[0]), str(move[1]), move[2] if len(move) > 2 else _SAME))
        return out

    def move(self, op: Op, kind: str, target_id: str, parent: Any) -> Item:
        """One move of a settle step: a tree move names the source parent it goes under."""
        node = self.target.get(kind, target_id)
        title = title_of(kind, node) if node is not None else target_id
        here = object_path(kind, node, self.target)
        now = tree_parent(node) if node is not None and kind in ("collection", "space") else None
        if parent is _SAME or now == (self.target_id("collection", parent) if parent else None):
            return Item("move", kind, title, here, op.key, detail="to its place among its siblings")
        source_id = self.source_id(kind, target_id)
        own = self.source.get(kind, source_id)
        name = title_of(kind, own) if own is not None else title
        above = self.source.get("collection", parent) if parent else None
        there = f"{object_path('collection', above, self.source)}/{name}" if above is not None else name
        return Item("move", kind, title, here, op.key, to_path=there)


def section_of(op: Op) -> str:
    """The section an op is listed under: `ACCESS` for what writes the target's access settings."""
    return ACCESS if op.kind in ACCESS_KINDS or op.key == ACCESS_KEY else ""


def _listing_order(item: Item) -> tuple[Any, ...]:
    """By section, grouped by action, then by path: the same plan lists the same way whatever
    order the service's listings came in (the ops keep the order they run in)."""
    return (item.section, ACTIONS.index(item.action), item.path, item.kind, item.title, item.to_path or "", item.key)


_SAME: Any = object()
"""A move among the same siblings (a site's navigation)."""


def _plain(value: Any, reviewer: _Reviewer) -> Any:
    """A value as JSON: a Ref as its target id, or `<new KIND SOURCE_ID>` while it is made."""
    if isinstance(value, Ref):
        return reviewer.target_id(value.kind, value.source_id) or f"<new {value.kind} {value.source_id}>"
    if isinstance(value, dict):
        return {str(k): _plain(v, reviewer) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, reviewer) for v in value]
    return value


def _resolved(value: Any, reviewer: _Reviewer) -> Any:
    """A body value with Refs as `title (target id)` text (for JSON values)."""
    if isinstance(value, Ref):
        return reviewer.ref_text(value.kind, value, "source")
    if isinstance(value, dict):
        return {k: _resolved(v, reviewer) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_resolved(v, reviewer) for v in value]
    return value


def review(plan: Plan, source: Snapshot, target: Snapshot, idmap: IdMap) -> list[Item]:
    """Every op of the plan as a line (a settle step: its line and one per move)."""
    return _Reviewer(source, target, idmap).items(plan)


def counts(items: Sequence[Item]) -> dict[str, dict[str, int]]:
    """kind -> action -> number of lines (the summary table)."""
    out: dict[str, Counter[str]] = {}
    for item in items:
        out.setdefault(item.kind, Counter())[item.action] += 1
    return {kind: {a: by_action[a] for a in ACTIONS if by_action[a]} for kind, by_action in sorted(out.items())}


def render(items: Sequence[Item], *, title_width: int = 40) -> list[str]:
    """Text lines: `SYMBOL ACTION KIND 'TITLE' PATH`, columns aligned, a move's `from → to`,
    an update's fields below it (`    name: before → after`), details after ` — `; each
    section after the main listing under its heading (`SECTIONS`)."""
    if not items:
        return []
    kind_width = max(len(item.kind) for item in items)
    action_width = max(len(item.action) for item in items)
    titles = [shorten(repr(item.title), title_width) for item in items]
    width = max(len(title) for title in titles)
    lines: list[str] = []
    section = ""
    for item, title in zip(items, titles, strict=True):
        if item.section != section:
            section = item.section
            lines.append(f"{SECTIONS.get(section, section)}:")
        where = item.path if item.to_path is None else f"{item.path} → {item.to_path}"
        line = f"{item.symbol} {item.action:<{action_width}} {item.kind:<{kind_width}} {title:<{width}} {where}".rstrip()
        if item.detail:
            line += f" — {item.detail}"
        lines.append(line)
        lines += [f"      {change.name}: {change.before} → {change.after}" for change in item.fields]
    return lines
