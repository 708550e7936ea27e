"""plan(source, target, idmap, mode) -> Plan: the write calls that make the target match.

Pure: snapshots and the id map in, ops out. The planner keeps a model of the target
(simulate.TargetModel) and runs each op it emits on it, so every later decision sees the
state the API will really be in: where a create puts the new object (last among its
siblings), the path the service gives a new section, which site-space a section's creation
makes, which default a container falls back to. Moves are then computed against that state,
minimally (syncd.ordering.moved_items), and every op names what it waits for in `after`.

Copy order (DESIGN.md): organization settings, teams, custom fields, translations, OpenAPI
specs, SAML providers, collections (parents first), spaces, custom field values of spaces,
space content, sites and their settings, section groups, sections (and their group
membership), site-spaces, paths, the default section and site-spaces, adaptive schemas, the
organization's default content, then moves that restore the source's order, then deletes
(mirror mode only).

Conventions of the ops (what apply relies on):
- Keys are `{action}:{kind}:{source id}`, with a suffix for the extra steps of one object
  (`:path`, `:path-tmp`, `:default-section`, `:default-site-space`, `:group`, `:duplicate`).
- Paths name objects by literal target id when they are mapped, by `{ref:kind:source id}`
  when they are made by this plan; bodies name objects by `Ref(kind, source id)`.
- `adopt` ops have method "" and path "": apply only records `(kind, source_id) ->
  target_id` ('adopted').
- A create whose source object is mapped to a target object that no longer exists carries
  the stale target id in `target_id` (and a note): it replaces that entry.
- Same credentials on both sides: a new space is `content:space-duplicate:<id>:duplicate`
  (client "source", POST /v1/spaces/<source id>/duplicate; apply records (space-duplicate,
  source id) -> the duplicate's id) then `create:space:<id>`, the transfer, whose path names
  `{ref:space-duplicate:<id>}`; its answer is the space, recorded as (space, source id).
- Section group membership changes are `move` ops on the section (POST
  .../section-groups/{group}/sections, DELETE .../section-groups/{group}/sections/{section}).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from syncd.catalog import BY_NAME, DERIVED, placeholders
from syncd.ordering import moved_items
from syncd.replay.ops import Match, Op, Plan, Ref, Skip, path_ref, path_refs, refs_in
from syncd.replay.rules import (
    COVERED,
    NOT_COPIED,
    RULES,
    SECTION_CREATE_TITLE_MAX,
    SHAREABLE,
    TEAM_MEMBERS_REASON,
    SnapshotView,
    canonical,
    comparable,
    container_site_spaces,
    group_sections,
    identity,
    ref_id,
    site_top_order,
    space_content,
    title_of,
    tree_parent,
    unmapped,
)
from syncd.replay.simulate import ModelError, TargetModel
from syncd.replay.snapshot import IdMap, Node, Snapshot

Mode = Literal["copy", "mirror"]
PLACEHOLDER = "~new-"
"""Prefix of the ids the planning model gives objects this plan creates."""

DELETE_ORDER: tuple[str, ...] = (
    "site-space",
    "site-section",
    "site-section-group",
    "site",
    "saml-provider",
    "openapi-spec",
    "translation",
    "custom-field",
    "team",
    "space",
    "collection",
)
"""Children before parents."""


@dataclass(frozen=True)
class ContentStrategy:
    """How space content reaches the target.

    `same_credentials`: one token reaches both organizations, so a new space is duplicated
    in the source and transferred (content, visibility and all). Otherwise content is
    imported from the source space's URL (`source_base_url` builds one when the snapshot has
    none), which works when `importable(space)` says the target can read it: by default when
    the space is shareable (public, unlisted, share-link) or the credentials are the same.
    """

    same_credentials: bool = False
    source_base_url: str | None = None
    importable: Callable[[Node], bool] | None = None

    def can_import(self, space: Node) -> bool:
        if self.importable is not None:
            return self.importable(space)
        return self.same_credentials or space.data.get("visibility") in SHAREABLE

    def import_url(self, space: Node) -> str | None:
        urls = space.data.get("urls") or {}
        for key in ("app", "published", "public", "location"):
            if isinstance(urls.get(key), str) and urls[key]:
                return str(urls[key])
        if self.source_base_url:
            return f"{self.source_base_url.rstrip('/')}/v1/spaces/{space.id}"
        return None


def plan(
    source: Snapshot,
    target: Snapshot,
    idmap: IdMap,
    mode: Mode = "copy",
    *,
    max_delete: int = 10,
    adopt: bool = True,
    content: ContentStrategy | None = None,
) -> Plan:
    """The ops that make `target` match `source` (see the module docstring)."""
    return _Planner(source, target, idmap, mode, max_delete, adopt, content or ContentStrategy()).run()


def _seg(value: str) -> str:
    return quote(str(value), safe="")


class _Planner:
    def __init__(self, source: Snapshot, target: Snapshot, idmap: IdMap, mode: Mode, max_delete: int, adopt: bool, content: ContentStrategy) -> None:
        self.source, self.target, self.idmap = source, target, idmap
        self.mode, self.max_delete, self.adopt, self.content = mode, max_delete, adopt, content
        self.src = SnapshotView(source)
        self.model = TargetModel.from_snapshot(target, source=self.src, id_prefix=PLACEHOLDER)
        self.org = target.org
        self.plan = Plan()
        self.keys: set[str] = set()
        self.map: dict[tuple[str, str], str] = {}
        self.rev: dict[str, dict[str, str]] = {}
        self.stale: dict[tuple[str, str], str] = {}
        self.producer: dict[tuple[str, str], str] = {}
        self.tail: dict[tuple[str, ...], str] = {}
        self.moved_by: dict[tuple[str, str], str] = {}
        self.deferred: list[tuple[str, Node, Node, str, str, str]] = []
        self.duplicate_of: dict[str, str] = {}
        for (kind, source_id), entry in idmap.entries.items():
            if kind == "space-duplicate":
                self.duplicate_of[source_id] = entry.target_id
                self.model.duplicates[entry.target_id] = source_id
                self.model._used.add(entry.target_id)
            elif (kind, entry.target_id) in self.model.nodes:
                self._map(kind, source_id, entry.target_id)
            else:
                self.stale[(kind, source_id)] = entry.target_id
        self.pending_duplicates = set(self.duplicate_of.values())

    # ----- mapping ------------------------------------------------------------------------

    def _map(self, kind: str, source_id: str, target_id: str) -> None:
        old = self.map.get((kind, source_id))
        if old is not None:
            self.rev.get(kind, {}).pop(old, None)
        self.map[(kind, source_id)] = target_id
        self.rev.setdefault(kind, {})[target_id] = source_id

    def tid(self, kind: str, source_id: str | None) -> str | None:
        """The target id (or planning placeholder) of a source object."""
        if source_id is None:
            return None
        if kind == "organization":
            return self.org if source_id == self.source.org else None
        if kind == "space-duplicate":
            return self.duplicate_of.get(source_id)
        return self.map.get((kind, source_id))

    def to_source(self, kind: str, target_id: str) -> str:
        if kind == "organization" and target_id == self.org:
            return self.source.org
        return self.rev.get(kind, {}).get(target_id) or unmapped(kind, target_id)

    def seg(self, kind: str, source_id: str) -> str:
        """A path segment naming a source object on the target."""
        target_id = self.tid(kind, source_id)
        if target_id is None or target_id.startswith(PLACEHOLDER) or (kind, source_id) in self.producer:
            return path_ref(kind, source_id)  # made (or adopted) by this plan: wait for it
        return _seg(target_id)

    def literal(self, target_id: str | None) -> str | None:
        return None if target_id is None or target_id.startswith(PLACEHOLDER) else target_id

    def path(self, kind: str, call: str, **ctx: str) -> str:
        writes = BY_NAME[kind].writes
        found = writes.call(call) if writes else None
        if found is None:
            raise KeyError(f"{kind} has no {call} call")
        template = found.path
        values = {"org": _seg(self.org), **ctx}
        for name in placeholders(template):
            template = template.replace("{" + name + "}", values[name], 1)
        return template

    def list_path(self, kind: str, **ctx: str) -> str:
        template = BY_NAME[kind].path
        values = {"org": _seg(self.org), **ctx}
        for name in placeholders(template):
            template = template.replace("{" + name + "}", values[name], 1)
        return template

    # ----- emitting -----------------------------------------------------------------------

    def skip(self, kind: str, source_id: str | None, title: str, reason: str) -> None:
        self.plan.skips.append(Skip(kind, source_id, title, reason))

    def emit(self, op: Op, *, after: Iterable[str | None] = (), chain: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        """Add an op (after what it waits for) and run it on the model; None when the model
        says the service would refuse it (reported as a skip instead)."""
        if op.key in self.keys:
            return None
        wanted = [k for k in after if k]
        refs = [*refs_in(op.body), *refs_in(op.params), *path_refs(op.path)]
        wanted += [p for r in refs if (p := self.producer.get((r.kind, r.source_id)))]
        if op.source_id and (p := self.producer.get((op.kind, op.source_id))):
            wanted.append(p)
        if chain is not None and chain in self.tail:
            wanted.append(self.tail[chain])
        try:
            answer = self.model.execute(op, self.tid)
        except ModelError as exc:
            self.skip(op.kind, op.source_id, op.title, f"not planned: the target would refuse {op.method} {op.path}: {exc}")
            return None
        op.after = [k for k in dict.fromkeys(wanted) if k != op.key and k in self.keys]
        self.plan.ops.append(op)
        self.keys.add(op.key)
        if chain is not None:
            self.tail[chain] = op.key
        return answer

    def created(self, op: Op, answer: dict[str, Any] | None) -> str | None:
        if answer is None or op.source_id is None:
            return None
        new_id = answer.get(op.result_id_field)
        if not isinstance(new_id, str):
            return None
        self._map(op.kind, op.source_id, new_id)
        self.producer[(op.kind, op.source_id)] = op.key
        return new_id

    # ----- the run ------------------------------------------------------------------------

    def run(self) -> Plan:
        self.report_uncopied()
        self.safely("organization", None, self.organization)
        for kind in ("team", "custom-field", "translation", "openapi-spec", "saml-provider"):
            for node in self.created_order(kind):
                self.safely(kind, node, self.flat, kind, node)
        tree_order = self.collections()
        self.spaces(tree_order)
        for node in self.source_spaces():
            self.safely("space", node, self.custom_field_values, node)
        for node in self.source_spaces():
            self.safely("space", node, self.space_content, node)
        for site in self.created_order("site"):
            self.safely("site", site, self.site, site)
        self.safely("organization", None, self.default_content)
        self.safely("collection", None, self.tree_moves, tree_order)
        for site in self.src.of_kind("site"):
            self.safely("site", site, self.site_moves, site)
        if self.mode == "mirror":
            self.safely("organization", None, self.deletes)
        self.plan.skips = list(dict.fromkeys(self.plan.skips))
        return self.plan

    def safely(self, kind: str, node: Node | None, step: Callable[..., Any], *args: Any) -> None:
        """One step of the plan; odd data it cannot handle becomes a skip, never a crash."""
        try:
            step(*args)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            title = self.rule_title(kind, node) if node is not None else kind
            self.skip(kind, node.id if node is not None else None, title, f"cannot plan this: {type(exc).__name__}: {exc}")

    def created_order(self, kind: str) -> list[Node]:
        """Objects of an unordered kind in creation order: their listings answer in that order,
        so creating them in it makes the target list like the source."""
        return sorted(
            self.src.of_kind(kind),
            key=lambda n: (n.position if n.position is not None else 1 << 30, str(n.data.get("createdAt") or ""), n.id),
        )

    def report_uncopied(self) -> None:
        for kind in self.src.kinds():
            if kind in RULES or kind in COVERED or kind in DERIVED:
                continue
            nodes = self.src.of_kind(kind)
            reason = NOT_COPIED.get(kind) or (f"{kind} is not copied" if kind in BY_NAME else f"unknown kind {kind!r}: not copied")
            self.skip(kind, None, f"{len(nodes)} {kind}", reason)

    # ----- generic per object -------------------------------------------------------------

    def rule_title(self, kind: str, node: Node) -> str:
        return title_of(kind, node)

    def desired(self, kind: str, node: Node) -> dict[str, Any]:
        return canonical(kind, node, self.src)

    def current(self, kind: str, target_id: str) -> dict[str, Any] | None:
        node = self.model.get(kind, target_id)
        return comparable(kind, canonical(kind, node, self.model), self.to_source) if node is not None else None

    def equivalent(self, kind: str, node: Node, candidates: Iterable[Node]) -> str | None:
        want = identity(kind, node, self.src)
        taken = self.rev.get(kind, {})
        for candidate in candidates:
            if candidate.id in taken or candidate.id.startswith(PLACEHOLDER):
                continue
            if identity(kind, candidate, self.model, self.to_source) == want:
                return candidate.id
        return None

    def ensure(self, kind: str, node: Node, candidates: Callable[[], Iterable[Node]], create: Callable[[], str | None]) -> str | None:
        """The object's target id: mapped, adopted (an equivalent target object), or created."""
        found = self.tid(kind, node.id)
        if found is not None:
            return found
        if self.adopt:
            match = self.equivalent(kind, node, candidates())
            if match is not None:
                op = Op(
                    key=f"adopt:{kind}:{node.id}", action="adopt", kind=kind, source_id=node.id, target_id=match,
                    method="", path="", title=self.rule_title(kind, node),
                )
                if self.emit(op) is not None:
                    self._map(kind, node.id, match)
                    self.producer[(kind, node.id)] = op.key
                    return match
        return create()

    def create_body(self, kind: str, node: Node, values: dict[str, Any]) -> dict[str, Any]:
        """The create body: the kind's create fields that have a value, references as Refs."""
        rule = RULES[kind]
        body: dict[str, Any] = {}
        for name in rule.create:
            value = values.get(name)
            if value is None:
                continue
            ref_kind = rule.refs.get(name)
            body[rule.body_name(name)] = Ref(ref_kind, value) if ref_kind else value
        return body

    def create_op(
        self, kind: str, node: Node, path: str, body: dict[str, Any] | None, match: Match | None, *, method: str | None = None
    ) -> Op:
        writes = BY_NAME[kind].writes
        assert writes is not None and writes.create is not None
        stale = self.stale.get((kind, node.id))
        return Op(
            key=f"create:{kind}:{node.id}", action="create", kind=kind, source_id=node.id, target_id=stale,
            method=method or writes.create.method, path=path, body=body, title=self.rule_title(kind, node), match=match,
            note=f"replaces {stale}, which is gone from the target" if stale else "",
        )

    def sync_fields(self, kind: str, node: Node, target_id: str, path: str, *, exclude: Iterable[str] = (), always: Iterable[str] = ()) -> None:
        """Patch the writable fields that differ; report the others as skips."""
        rule = RULES[kind]
        desired = self.desired(kind, node)
        current = self.current(kind, target_id)
        if current is None:
            return
        title = self.rule_title(kind, node)
        excluded = set(exclude) | set(rule.structural)
        body: dict[str, Any] = {}
        for name in rule.fields:
            if name in excluded or desired.get(name) == current.get(name):
                continue
            value = desired.get(name)
            if name not in rule.patch:
                if value is None:
                    continue  # the source says nothing about it
                self.skip(kind, node.id, title, f"{name} cannot be changed after creation (source {value!r}, target {current.get(name)!r})")
                continue
            if value is None and name not in rule.nullable:
                self.skip(kind, node.id, title, f"{name} cannot be removed through the API (target has {current.get(name)!r})")
                continue
            written = self.written(kind, node, name, value)
            if written is _UNWRITABLE:
                continue
            body[rule.body_name(name)] = written
        target_node = self.model.get(kind, target_id)
        for name, reason in rule.skip_fields.items():
            value = node.data.get(name)
            if value is not None and value is not False and target_node is not None and target_node.data.get(name) != value:
                self.skip(kind, node.id, title, f"{name} {value!r} not copied: {reason}")
        if not body:
            return
        for name in always:
            body.setdefault(name, desired.get(name))
        writes = BY_NAME[kind].writes
        assert writes is not None and writes.patch is not None
        self.emit(
            Op(
                key=f"patch:{kind}:{node.id}", action="patch", kind=kind, source_id=node.id, target_id=self.literal(target_id),
                method=writes.patch.method, path=path, body=body, title=title,
            )
        )

    def written(self, kind: str, node: Node, name: str, value: Any) -> Any:
        """A desired value as the body carries it (references as Refs), or _UNWRITABLE."""
        rule = RULES[kind]
        for path, ref_kind in rule.refs.items():
            head, _, rest = path.partition(".")
            if head != name or value is None:
                continue
            ref = value if not rest else value.get(rest) if isinstance(value, dict) else None
            if ref is None:
                continue
            if self.tid(ref_kind, ref) is None:
                self.skip(kind, node.id, self.rule_title(kind, node), f"{name} names a {ref_kind} that is not copied ({ref})")
                return _UNWRITABLE
            return Ref(ref_kind, ref) if not rest else {**value, rest: Ref(ref_kind, ref)}
        return value

    # ----- organization and flat kinds ----------------------------------------------------

    def organization(self) -> None:
        node = self.src.get("organization", self.source.org)
        if node is None or self.model.get("organization", self.org) is None:
            return
        self.sync_fields("organization", node, self.org, self.path("organization", "patch"), exclude=("defaultContent",))

    def default_content(self) -> None:
        node = self.src.get("organization", self.source.org)
        if node is None:
            return
        desired = self.desired("organization", node).get("defaultContent")
        current = (self.current("organization", self.org) or {}).get("defaultContent")
        if desired == current:
            return
        value = self.written("organization", node, "defaultContent", desired)
        if value is _UNWRITABLE:
            return
        self.emit(
            Op(
                key="patch:organization:default-content", action="patch", kind="organization", source_id=node.id, target_id=self.org,
                method="PATCH", path=self.path("organization", "patch"), body={"defaultContent": value}, title="default content",
            )
        )

    def flat_ctx(self, kind: str, node: Node) -> dict[str, str]:
        if kind == "team":
            return {"team": self.seg(kind, node.id)}
        if kind == "openapi-spec":
            return {"spec": _seg(str(node.data.get("slug")))}
        if kind == "custom-field":
            return {"name": _seg(str(node.data.get("name")))}
        return {"id": self.seg(kind, node.id)}

    def flat(self, kind: str, node: Node) -> None:
        """Teams, custom fields, translations, OpenAPI specs, SAML providers."""
        title = self.rule_title(kind, node)
        rule = RULES[kind]
        values = self.desired(kind, node)
        key = rule.key if isinstance(rule.key, str) else rule.key[0]
        if values.get(key) in (None, ""):
            self.skip(kind, node.id, title, f"it has no {key}: not copied")
            return
        if kind == "openapi-spec" and values.get("source") is None:
            self.skip(kind, node.id, title, "its source text could not be read: not copied")
            return

        def create() -> str | None:
            body = self.create_body(kind, node, values)
            for name, ref_kind in rule.refs.items():
                ref = values.get(name)
                if ref is not None and self.tid(ref_kind, ref) is None:
                    self.skip(kind, node.id, title, f"{name} names a {ref_kind} that is not copied ({ref})")
                    body.pop(rule.body_name(name), None)
            if kind == "openapi-spec":
                body = {"source": values["source"]}
                path = self.path(kind, "create", spec=_seg(str(values["slug"])))
            else:
                path = self.path(kind, "create")
            match = Match(self.list_path(kind), {}, rule.title_field if kind != "custom-field" else "name", values.get(key))
            op = self.create_op(kind, node, path, body, match)
            return self.created(op, self.emit(op))

        target_id = self.ensure(kind, node, lambda: self.model.children(kind, ("organization", self.org)), create)
        if target_id is None:
            return
        always = ("title",) if kind == "translation" else ()
        patch_path = self.path(kind, "patch", **{k: v for k, v in self.flat_ctx(kind, node).items()})
        self.sync_fields(kind, node, target_id, patch_path, always=always)
        if kind == "team" and isinstance(node.data.get("members"), int) and node.data["members"] > 0:
            self.skip(kind, node.id, title, TEAM_MEMBERS_REASON)

    # ----- collections and spaces ---------------------------------------------------------

    def collections(self) -> list[str | None]:
        """Collections parents first; returns the source parents in that order (None = root)."""
        order: list[str | None] = [None]
        seen: set[str] = set()
        index = 0
        while index < len(order):
            parent = order[index]
            index += 1
            for node in self.src.children("collection", self.tree_key(self.source.org, parent)):
                if node.id in seen:
                    continue
                seen.add(node.id)
                done: list[bool] = []
                self.safely("collection", node, self.collection, node, parent, done)
                if done:
                    order.append(node.id)
        for node in self.src.of_kind("collection"):
            if node.id not in seen:
                self.skip("collection", node.id, self.rule_title("collection", node), "its parent collection is not in the source: not copied")
        return order

    @staticmethod
    def tree_key(org: str, parent: str | None) -> tuple[str, str]:
        return ("collection", parent) if parent else ("organization", org)

    def tree_parent_target(self, kind: str, node: Node, parent: str | None) -> tuple[bool, str | None]:
        """(ok, target parent id) of a collection or space's parent."""
        if parent is None:
            return True, None
        target_parent = self.tid("collection", parent)
        if target_parent is None:
            self.skip(kind, node.id, self.rule_title(kind, node), "its parent collection is not copied")
            return False, None
        return True, target_parent

    def collection(self, node: Node, parent: str | None, done: list[bool]) -> None:
        """Adopt, create or patch one collection; `done` gets True when it is on the target."""
        ok, target_parent = self.tree_parent_target("collection", node, parent)
        if not ok:
            return
        values = self.desired("collection", node)
        chain = ("tree", target_parent or "")

        def create() -> str | None:
            body = self.create_body("collection", node, values)
            match = Match(self.list_path("collection"), {}, "title", values.get("title"), "parent", Ref("collection", parent) if parent else None)
            op = self.create_op("collection", node, self.path("collection", "create"), body, match)
            return self.created(op, self.emit(op, chain=chain))

        siblings = lambda: self.model.children("collection", self.tree_key(self.org, target_parent))
        target_id = self.ensure("collection", node, siblings, create)
        if target_id is None:
            return
        done.append(True)
        self.sync_fields("collection", node, target_id, self.path("collection", "patch", id=self.seg("collection", node.id)))

    def source_spaces(self) -> list[Node]:
        return [n for n in self.src.of_kind("space") if n.id not in self.pending_duplicates]

    def spaces(self, parents: list[str | None]) -> None:
        reachable = set(parents)
        for parent in parents:
            for node in self.src.children("space", self.tree_key(self.source.org, parent)):
                if node.id not in self.pending_duplicates:
                    self.safely("space", node, self.space, node, parent)
        for node in self.source_spaces():
            parent = tree_parent(node)
            if parent is not None and parent not in reachable:
                self.skip("space", node.id, self.rule_title("space", node), "its parent collection is not copied")

    def space(self, node: Node, parent: str | None) -> None:
        ok, target_parent = self.tree_parent_target("space", node, parent)
        if not ok:
            return
        values = self.desired("space", node)
        chain = ("tree", target_parent or "")
        parent_ref = Ref("collection", parent) if parent else None
        match = Match(self.list_path("space"), {}, "title", values.get("title"), "parent", parent_ref)

        def create() -> str | None:
            if self.content.same_credentials:
                return self.duplicate_and_transfer(node, parent_ref, match, chain)
            body = self.create_body("space", node, values)
            op = self.create_op("space", node, self.path("space", "create"), body, match)
            return self.created(op, self.emit(op, chain=chain))

        siblings = lambda: self.model.children("space", self.tree_key(self.org, target_parent))
        target_id = self.ensure("space", node, siblings, create)
        if target_id is None:
            return
        self.sync_fields("space", node, target_id, self.path("space", "patch", id=self.seg("space", node.id)))

    def duplicate_and_transfer(self, node: Node, parent_ref: Ref | None, match: Match, chain: tuple[str, ...]) -> str | None:
        title = self.rule_title("space", node)
        if self.tid("space-duplicate", node.id) is None:
            parent = tree_parent(node)
            dup = Op(
                key=f"content:space-duplicate:{node.id}:duplicate", action="content", kind="space-duplicate", source_id=node.id,
                target_id=None, method="POST", path=f"/v1/spaces/{_seg(node.id)}/duplicate", title=title, client="source",
                # After a lost answer: the space of the source's listing with the same title and
                # parent that is neither the original nor one a crawl saw before (apply checks).
                match=Match(f"/v1/orgs/{_seg(self.source.org)}/spaces", {}, "title", node.data.get("title"), "parent", parent),
                note="a copy in the source organization, transferred to the target by the next op",
            )
            answer = self.emit(dup)
            if answer is None or not isinstance(answer.get("id"), str):
                return None
            self.duplicate_of[node.id] = answer["id"]
            self.producer[("space-duplicate", node.id)] = dup.key
        body: dict[str, Any] = {"organization": self.org}
        if parent_ref is not None:
            body["collection"] = parent_ref
        op = self.create_op("space", node, self.path("space", "transfer", id=path_ref("space-duplicate", node.id)), body, match, method="POST")
        op.note = (op.note + "; " if op.note else "") + "transfers the duplicate (content included) into the target"
        return self.created(op, self.emit(op, chain=chain))

    def custom_field_values(self, node: Node) -> None:
        target_id = self.tid("space", node.id)
        if target_id is None:
            return
        desired = self.desired("space", node).get("customFields") or {}
        current = (self.current("space", target_id) or {}).get("customFields") or {}
        fields = {str(f.data.get("name")): f for f in self.src.of_kind("custom-field")}
        known = {str(f.data.get("name")) for f in self.model.of_kind("custom-field")}
        values: dict[str, Any] = {}
        after: list[str | None] = []
        for name in sorted(set(desired) | set(current)):
            if desired.get(name) == current.get(name):
                continue
            if name not in known:
                self.skip("space", node.id, self.rule_title("space", node), f"custom field {name!r} is not on the target: its value is not copied")
                continue
            values[name] = {"value": desired.get(name)}
            if name in fields:
                after.append(self.producer.get(("custom-field", fields[name].id)))
        if not values:
            return
        self.emit(
            Op(
                key=f"patch:space-custom-field-value:{node.id}", action="patch", kind="space-custom-field-value", source_id=node.id,
                target_id=self.literal(target_id), method="PATCH", path=self.path("space-custom-field-value", "patch", space=self.seg("space", node.id)),
                body={"values": values}, title=self.rule_title("space", node),
            ),
            after=after,
        )

    def space_content(self, node: Node) -> None:
        target_id = self.tid("space", node.id)
        if target_id is None:
            return
        if space_content(self.src, node.id) == space_content(self.model, target_id):
            return
        title = self.rule_title("space", node)
        url = self.content.import_url(node)
        if not self.content.can_import(node) or url is None:
            why = "it has no URL" if url is None else f"the source space is {node.data.get('visibility') or 'not shareable'} and the target's credentials cannot read it"
            state = "created empty" if target_id.startswith(PLACEHOLDER) else "left with its current content"
            self.skip("space", node.id, title, f"space {title!r} {state}: its content cannot be copied ({why}); copy it by hand or use one token for both")
            return
        self.emit(
            Op(
                key=f"content:space:{node.id}", action="content", kind="space", source_id=node.id, target_id=self.literal(target_id),
                method="POST", path=self.path("space", "import", id=self.seg("space", node.id)),
                body={"url": url, "source": "website"}, title=title, note="imports the source space's content from its URL",
            )
        )

    # ----- sites --------------------------------------------------------------------------

    def site_ctx(self, site_id: str, kind: str | None = None, node_id: str | None = None) -> dict[str, str]:
        ctx = {"site": self.seg("site", site_id)}
        if kind is not None and node_id is not None:
            ctx["id"] = self.seg(kind, node_id)
        return ctx

    def site(self, site: Node) -> None:
        values = self.desired("site", site)

        def create() -> str | None:
            body = self.create_body("site", site, values)
            op = self.create_op("site", site, self.path("site", "create"), body, Match(self.list_path("site"), {}, "title", values.get("title")))
            return self.created(op, self.emit(op))

        target_site = self.ensure("site", site, lambda: self.model.children("site", ("organization", self.org)), create)
        if target_site is None:
            return
        self.sync_fields("site", site, target_site, self.path("site", "patch", id=self.seg("site", site.id)))
        for group in self.src.children("site-section-group", ("site", site.id)):
            self.group(site, target_site, group)
        sections = self.src.children("site-section", ("site", site.id))
        for section in sections:
            self.section(site, target_site, section)
        self.memberships(site, target_site, sections)
        for section_id in [None, *(s.id for s in sections)]:
            for node in container_site_spaces(self.src, site.id, section_id):
                self.site_space(site, target_site, node, section_id)
        self.section_paths(site, target_site, sections)
        for section_id in [None, *(s.id for s in sections)]:
            self.site_space_paths(site, target_site, section_id)
        self.defaults(site, target_site, sections)
        self.adaptive_schema(site, target_site)

    def site_children(self, target_site: str, kind: str) -> Callable[[], list[Node]]:
        return lambda: self.model.children(kind, ("site", target_site))

    def group(self, site: Node, target_site: str, node: Node) -> None:
        values = self.desired("site-section-group", node)

        def create() -> str | None:
            body = self.create_body("site-section-group", node, values)
            ctx = self.site_ctx(site.id)
            op = self.create_op(
                "site-section-group", node, self.path("site-section-group", "create", **ctx), body,
                Match(self.list_path("site-section-group", **ctx), {}, "title", values.get("title")),
            )
            return self.created(op, self.emit(op, chain=("top", target_site)))

        target_id = self.ensure("site-section-group", node, self.site_children(target_site, "site-section-group"), create)
        if target_id is not None:
            self.sync_fields("site-section-group", node, target_id, self.path("site-section-group", "patch", **self.site_ctx(site.id, "site-section-group", node.id)))

    def section(self, site: Node, target_site: str, node: Node) -> None:
        values = self.desired("site-section", node)
        title = self.rule_title("site-section", node)

        def create() -> str | None:
            first = next(
                (ss for ss in container_site_spaces(self.src, site.id, node.id) if self.tid("space", ref_id(ss.data.get("space"))) is not None),
                None,
            )
            if first is not None:
                made_for, space_id = first.id, ref_id(first.data.get("space"))
            else:  # an empty section: made with any copied space, whose site-space then goes
                made_for = f"{node.id}#seed"
                space_id = next((n.id for n in self.source_spaces() if self.tid("space", n.id) is not None), None)
                if space_id is None:
                    self.skip("site-section", node.id, title, "a section is created with a space, and no space is copied: not copied")
                    return None
            assert space_id is not None
            sent_title = str(values.get("title") or "")[:SECTION_CREATE_TITLE_MAX]
            ctx = self.site_ctx(site.id)
            op = self.create_op(
                "site-section", node, self.path("site-section", "create", **ctx), {"spaceId": Ref("space", space_id), "title": sent_title},
                Match(self.list_path("site-section", **ctx), {}, "title", sent_title),
            )
            before = set(self.model.nodes)
            answer = self.emit(op, chain=("top", target_site))
            new_id = self.created(op, answer)
            if new_id is None or answer is None:
                return None
            for index, made in enumerate(answer.get("siteSpaces") or []):
                if ("site-space", made.get("id")) not in before and ref_id(made.get("space")) == self.tid("space", space_id):
                    op.produces.append(("site-space", made_for, f"siteSpaces.{index}.id"))
                    self._map("site-space", made_for, made["id"])
                    self.producer[("site-space", made_for)] = op.key
                    break
            if first is None and self.tid("site-space", made_for) is not None:
                self.emit(
                    Op(
                        key=f"delete:site-space:{made_for}", action="delete", kind="site-space", source_id=made_for, target_id=None,
                        method="DELETE", path=self.path("site-space", "delete", **self.site_ctx(site.id, "site-space", made_for)),
                        title=title, note="the site-space a section is created with; the source's section has none",
                    ),
                    chain=("ss", target_site, new_id),
                )
            return new_id

        target_id = self.ensure("site-section", node, self.site_children(target_site, "site-section"), create)
        if target_id is not None:
            self.sync_fields("site-section", node, target_id, self.path("site-section", "patch", **self.site_ctx(site.id, "site-section", node.id)), exclude=("path",))

    def memberships(self, site: Node, target_site: str, sections: list[Node]) -> None:
        """Sections into and out of section groups: removals, then additions in order."""
        wanted: list[tuple[Node, str, str | None]] = []
        for node in sections:
            target_id = self.tid("site-section", node.id)
            if target_id is None:
                continue
            group = ref_id(node.data.get("sectionGroup"))
            desired = self.tid("site-section-group", group) if group else None
            if group and desired is None:
                self.skip("site-section", node.id, self.rule_title("site-section", node), "its section group is not copied: left at the top level")
            wanted.append((node, target_id, desired))
        writes = BY_NAME["site-section-group"].writes
        assert writes is not None
        for node, target_id, desired in wanted:
            current = self.model.section_group(target_id)
            if current is None or current == desired:
                continue
            group_source = self.to_source("site-section-group", current)
            ctx = {**self.site_ctx(site.id), "id": _seg(current) if not current.startswith(PLACEHOLDER) else path_ref("site-section-group", group_source), "section": self.seg("site-section", node.id)}
            call = writes.call("remove-section")
            assert call is not None
            self.emit(
                Op(
                    key=f"move:site-section:{node.id}:ungroup", action="move", kind="site-section", source_id=node.id, target_id=self.literal(target_id),
                    method=call.method, path=self.path("site-section-group", "remove-section", **ctx), title=self.rule_title("site-section", node),
                    note="takes the section out of its section group",
                ),
                chain=("top", target_site),
            )
        for node, target_id, desired in wanted:
            if desired is None or self.model.section_group(target_id) == desired:
                continue
            group_source = self.to_source("site-section-group", desired)
            call = writes.call("add-section")
            assert call is not None
            self.emit(
                Op(
                    key=f"move:site-section:{node.id}:group", action="move", kind="site-section", source_id=node.id, target_id=self.literal(target_id),
                    method=call.method, path=self.path("site-section-group", "add-section", **self.site_ctx(site.id, "site-section-group", group_source)),
                    body={"sectionId": Ref("site-section", node.id)}, title=self.rule_title("site-section", node),
                    note="puts the section at the end of its section group",
                ),
                chain=("group", desired),
            )

    def site_space(self, site: Node, target_site: str, node: Node, section_id: str | None) -> None:
        title = self.rule_title("site-space", node)
        space_id = ref_id(node.data.get("space"))
        if self.tid("space", space_id) is None:
            self.skip("site-space", node.id, title, f"its space is not copied ({space_id})")
            return
        target_section = self.tid("site-section", section_id) if section_id else None
        if section_id and target_section is None:
            self.skip("site-space", node.id, title, "its section is not copied")
            return
        if section_id is None and self.tid("site-space", node.id) is None and self.model.default_section.get(target_site):
            self.skip("site-space", node.id, title, "the target site has sections, so a site-space cannot be added at its root")
            return
        container = target_section or ""
        chain = ("ss", target_site, container)

        def create() -> str | None:
            body: dict[str, Any] = {"spaceId": Ref("space", space_id)}
            if section_id:
                body["sectionId"] = Ref("site-section", section_id)
            ctx = self.site_ctx(site.id)
            match = Match(self.list_path("site-space", **ctx), {}, "space.id", Ref("space", space_id), "section", Ref("site-section", section_id) if section_id else None)
            op = self.create_op("site-space", node, self.path("site-space", "create", **ctx), body, match)
            return self.created(op, self.emit(op, chain=chain))

        target_id = self.ensure("site-space", node, self.site_children(target_site, "site-space"), create)
        if target_id is None:
            return
        if target_id not in self.model.container_order(target_site, target_section):
            self.skip("site-space", node.id, title, "it is in another section on the target, and a site-space cannot move between sections")
            return
        self.sync_fields("site-space", node, target_id, self.path("site-space", "patch", **self.site_ctx(site.id, "site-space", node.id)), exclude=("path",))

    def section_paths(self, site: Node, target_site: str, sections: list[Node]) -> None:
        items = [(n, t) for n in sections if (t := self.tid("site-section", n.id)) is not None]
        siblings = self.model.children("site-section", ("site", target_site))
        self.paths("site-section", site, items, {n.id: str(n.data.get("path")) for n in siblings}, ("top", target_site))

    def site_space_paths(self, site: Node, target_site: str, section_id: str | None) -> None:
        target_section = self.tid("site-section", section_id) if section_id else None
        if section_id and target_section is None:
            return
        order = self.model.container_order(target_site, target_section)
        nodes = container_site_spaces(self.src, site.id, section_id)
        items = [(n, t) for n in nodes if (t := self.tid("site-space", n.id)) is not None and t in order]
        current = {i: str(self.model.nodes[("site-space", i)].data.get("path")) for i in order}
        self.paths("site-space", site, items, current, ("ss", target_site, target_section or ""))

    def paths(self, kind: str, site: Node, items: list[tuple[Node, str]], current: dict[str, str], chain: tuple[str, ...]) -> None:
        """Path patches among siblings whose paths must stay unique: one waits for the
        sibling that holds its new path to leave it; a cycle goes through a temporary path."""
        pending: dict[str, tuple[Node, str]] = {}
        for node, target_id in items:
            wanted = node.data.get("path")
            if isinstance(wanted, str) and wanted and current.get(target_id) != wanted:
                pending[target_id] = (node, wanted)
        holder = {path: target_id for target_id, path in current.items()}
        freed: dict[str, str] = {}
        after_creates = self.tail.get(chain)

        def patch(target_id: str, node: Node, path: str, suffix: str) -> None:
            old = current[target_id]
            op = Op(
                key=f"patch:{kind}:{node.id}:{suffix}", action="patch", kind=kind, source_id=node.id, target_id=self.literal(target_id),
                method="PATCH", path=self.path(kind, "patch", **self.site_ctx(site.id, kind, node.id)), body={"path": path},
                title=self.rule_title(kind, node),
            )
            if self.emit(op, after=[after_creates, freed.get(path)]) is not None:
                holder.pop(old, None)
                holder[path] = target_id
                current[target_id] = path
                freed[old] = op.key

        while pending:
            progress = False
            for target_id, (node, wanted) in list(pending.items()):
                blocker = holder.get(wanted)
                if blocker is None or blocker == target_id:
                    patch(target_id, node, wanted, "path")
                elif blocker not in pending:
                    if self.doomed(kind, blocker):
                        self.deferred.append((kind, site, node, target_id, wanted, blocker))
                    else:
                        self.skip(kind, node.id, self.rule_title(kind, node), f"path {wanted!r} is used by another {kind} on the target")
                else:
                    continue
                del pending[target_id]
                progress = True
            if not progress:
                target_id, (node, wanted) = next(iter(pending.items()))
                temporary = f"{wanted}-syncd-tmp"
                n = 2
                while temporary in holder:
                    temporary, n = f"{wanted}-syncd-tmp-{n}", n + 1
                patch(target_id, node, temporary, "path-tmp")

    def defaults(self, site: Node, target_site: str, sections: list[Node]) -> None:
        default_section = next((s.id for s in sections if s.data.get("default")), None)
        wanted = self.tid("site-section", default_section)
        if wanted is not None and self.model.default_section.get(target_site) != wanted:
            self.emit(
                Op(
                    key=f"patch:site:{site.id}:default-section", action="patch", kind="site", source_id=site.id, target_id=self.literal(target_site),
                    method="PATCH", path=self.path("site", "patch", id=self.seg("site", site.id)),
                    body={"defaultSiteSection": Ref("site-section", default_section)}, title=self.rule_title("site", site),
                )
            )
        for section in [None, *sections]:
            section_id = section.id if section else None
            target_section = self.tid("site-section", section_id) if section_id else None
            if section_id and target_section is None:
                continue
            nodes = container_site_spaces(self.src, site.id, section_id)
            default = next((n.id for n in nodes if n.data.get("default")), None)
            wanted = self.tid("site-space", default)
            if wanted is None or self.model.default_site_space.get((target_site, target_section or "")) == wanted:
                continue
            if section is None:
                key, kind, source_id, path = f"patch:site:{site.id}:default-site-space", "site", site.id, self.path("site", "patch", id=self.seg("site", site.id))
                title = self.rule_title("site", site)
            else:
                key, kind, source_id = f"patch:site-section:{section.id}:default-site-space", "site-section", section.id
                path = self.path("site-section", "patch", **self.site_ctx(site.id, "site-section", section.id))
                title = self.rule_title("site-section", section)
            self.emit(
                Op(
                    key=key, action="patch", kind=kind, source_id=source_id, target_id=self.literal(target_section or target_site),
                    method="PATCH", path=path, body={"defaultSiteSpace": Ref("site-space", default)}, title=title,
                )
            )

    def adaptive_schema(self, site: Node, target_site: str) -> None:
        node = self.src.get("site-adaptive-schema", f"{site.id}/site-adaptive-schema")
        target_id = f"{target_site}/site-adaptive-schema"
        if node is None or self.model.get("site-adaptive-schema", target_id) is None:
            return
        desired = self.desired("site-adaptive-schema", node)
        if desired == self.current("site-adaptive-schema", target_id):
            return
        self.emit(
            Op(
                key=f"patch:site-adaptive-schema:{node.id}", action="patch", kind="site-adaptive-schema", source_id=node.id,
                target_id=self.literal(target_site) and target_id, method="PUT",
                path=self.path("site-adaptive-schema", "patch", site=self.seg("site", site.id)), body={"jsonSchema": desired["jsonSchema"]},
                title=f"adaptive schema of {self.rule_title('site', site)}",
            )
        )

    # ----- moves --------------------------------------------------------------------------

    def order(
        self, desired: list[tuple[str, str]], current: list[tuple[str, str]], move: Callable[[tuple[str, str], tuple[str, tuple[str, str]] | None], None]
    ) -> None:
        """The fewest moves that put `desired` (target items) in that order among `current`
        (items elsewhere are moved in too). Each move names a neighbour already in place."""
        wanted = set(desired)
        present = [item for item in current if item in wanted]
        name = {item: f"{item[0]}:{item[1]}" for item in desired}
        position = {name[item]: float(index) for index, item in enumerate(present)}
        moved = set(moved_items([name[item] for item in desired if name[item] in position], position))
        moving = {item for item in desired if name[item] in moved or name[item] not in position}
        if not moving:
            return
        kept = [index for index, item in enumerate(desired) if item not in moving]
        if not kept:
            previous: tuple[str, str] | None = None
            for item in desired:
                move(item, ("after", previous) if previous else None)
                previous = item
            return
        for index in range(kept[0] - 1, -1, -1):
            move(desired[index], ("before", desired[index + 1]))
        for index in range(kept[0] + 1, len(desired)):
            if desired[index] in moving:
                move(desired[index], ("after", desired[index - 1]))

    def move_op(
        self, kind: str, target_id: str, path: str, body: dict[str, Any], anchor: tuple[str, str] | None, after: Iterable[str | None] = (), *, chain: tuple[str, ...]
    ) -> None:
        """A move (after the creates and membership changes of its list, and after the move
        of the sibling it names)."""
        source_id = self.to_source(kind, target_id)
        op = Op(
            key=f"move:{kind}:{source_id}", action="move", kind=kind, source_id=source_id, target_id=self.literal(target_id),
            method="POST", path=path, body=body, title=self.rule_title(kind, self.src.get(kind, source_id) or Node(kind, source_id, None, None, {})),
        )
        waits = [*after, self.moved_by.get(anchor) if anchor else None, self.tail.get(chain)]
        if self.emit(op, after=waits) is not None:
            self.moved_by[(kind, target_id)] = op.key

    def position(self, anchor: tuple[str, tuple[str, str]] | None, ref_type: str, key: str) -> dict[str, Any]:
        if anchor is None:
            return {}
        side, (kind, target_id) = anchor
        return {"position": {side: {"type": ref_type, key: Ref(kind, self.to_source(kind, target_id))}}}

    def tree_moves(self, parents: list[str | None]) -> None:
        """Collections list by list, parents first (a collection never moves into one that is
        still inside it), then spaces."""
        for kind in ("collection", "space"):
            for parent in parents:
                target_parent = self.tid("collection", parent) if parent else None
                if parent and target_parent is None:
                    continue
                desired: list[tuple[str, str]] = []
                for node in self.src.children(kind, self.tree_key(self.source.org, parent)):
                    target_id = self.tid(kind, node.id)
                    if target_id is not None and (kind, target_id) in self.model.nodes:
                        desired.append((kind, target_id))
                current = [item for item in self.model.tree_order(target_parent) if item[0] == kind]
                ancestors = self.ancestor_moves(parent)

                def move(item: tuple[str, str], anchor: tuple[str, tuple[str, str]] | None, parent: str | None = parent, target_parent: str | None = target_parent, ancestors: list[str | None] = ancestors) -> None:
                    node = self.model.get(item[0], item[1])
                    body: dict[str, Any] = {}
                    if node is not None and ref_id(node.data.get("parent")) != target_parent:
                        body["parent"] = Ref("collection", parent) if parent else None
                    body.update(self.position(anchor, "space", "space"))
                    path = self.path(item[0], "move", id=self.seg(item[0], self.to_source(*item)))
                    self.move_op(item[0], item[1], path, body, anchor[1] if anchor else None, ancestors, chain=("tree", target_parent or ""))

                self.order(desired, current, move)

    def ancestor_moves(self, parent: str | None) -> list[str | None]:
        """Move ops of a collection and its source ancestors (to wait for)."""
        out: list[str | None] = []
        seen: set[str] = set()
        while parent and parent not in seen:
            seen.add(parent)
            target_id = self.tid("collection", parent)
            if target_id is not None:
                out.append(self.moved_by.get(("collection", target_id)))
            node = self.src.get("collection", parent)
            parent = tree_parent(node) if node else None
        return out

    def site_moves(self, site: Node) -> None:
        target_site = self.tid("site", site.id)
        if target_site is None or self.model.get("site", target_site) is None:
            return
        move_ref = {"site-section": "siteSection", "site-section-group": "id"}

        def mapped(kind: str, source_id: str | None) -> tuple[str, str] | None:
            target_id = self.tid(kind, source_id)
            return (kind, target_id) if target_id is not None and (kind, target_id) in self.model.nodes else None

        def mover(chain: tuple[str, ...]) -> Callable[[tuple[str, str], tuple[str, tuple[str, str]] | None], None]:
            def move_item(item: tuple[str, str], anchor: tuple[str, tuple[str, str]] | None) -> None:
                kind, target_id = item
                path = self.path(kind, "move", **self.site_ctx(site.id, kind, self.to_source(kind, target_id)))
                body = self.position(anchor, "site-section", move_ref[kind])
                self.move_op(kind, target_id, path, body, anchor[1] if anchor else None, chain=chain)

            return move_item

        top = [m for k, i in site_top_order(self.src, site.id) if (m := mapped(k, i))]
        self.order(top, self.model.top_order(target_site), mover(("top", target_site)))
        for group in self.src.children("site-section-group", ("site", site.id)):
            target_group = self.tid("site-section-group", group.id)
            if target_group is None:
                continue
            desired = [m for s in group_sections(self.src, site.id, group.id) if (m := mapped("site-section", s))]
            current = [("site-section", s) for s in self.model.group_order(target_group)]
            self.order([d for d in desired if d in current], current, mover(("group", target_group)))

        for section in [None, *self.src.children("site-section", ("site", site.id))]:
            target_section = self.tid("site-section", section.id) if section else None
            if section and target_section is None:
                continue
            current = [("site-space", i) for i in self.model.container_order(target_site, target_section)]
            desired = [m for n in container_site_spaces(self.src, site.id, section.id if section else None) if (m := mapped("site-space", n.id))]
            chain = ("ss", target_site, target_section or "")

            def move_site_space(item: tuple[str, str], anchor: tuple[str, tuple[str, str]] | None, chain: tuple[str, ...] = chain) -> None:
                path = self.path("site-space", "move", **self.site_ctx(site.id, "site-space", self.to_source(*item)))
                self.move_op("site-space", item[1], path, self.position(anchor, "site-space", "siteSpace"), anchor[1] if anchor else None, chain=chain)

            self.order([d for d in desired if d in current], current, move_site_space)

    # ----- deletes ------------------------------------------------------------------------

    def deletes(self) -> None:
        """What syncd created and the source no longer has, children first, capped."""
        if not self.src.of_kind("collection") and not self.source_spaces():
            copied = sum(1 for (kind, _), m in self.idmap.entries.items() if kind in ("collection", "space"))
            if copied:
                self.plan.refused = (
                    f"the source looks empty (no collections and no spaces) while {copied} were copied from it before: "
                    "refusing to delete anything; check the source's token and organization"
                )
        doomed: dict[str, list[tuple[str, str]]] = {kind: [] for kind in DELETE_ORDER}
        for (kind, source_id), entry in self.idmap.entries.items():
            if kind not in doomed or entry.origin != "created" or self.src.get(kind, source_id) is not None:
                continue
            if (kind, entry.target_id) in self.model.nodes:
                doomed[kind].append((source_id, entry.target_id))
        doomed_ids = {(kind, t) for kind, items in doomed.items() for _, t in items}
        doomed["collection"].sort(key=lambda item: -self.depth(item[1]))
        doomed["space"].sort(key=lambda item: -self.depth(item[1]))
        moves = [op.key for op in self.plan.ops if op.action == "move"]  # deletes go last
        contents = {(kind, t): self.inside(kind, t) for kind, items in doomed.items() for _, t in items}
        delete_key: dict[tuple[str, str], str] = {}
        count = 0
        for kind in DELETE_ORDER:
            for source_id, target_id in doomed[kind]:
                node = self.model.get(kind, target_id)
                if node is None:
                    continue
                inside = contents[(kind, target_id)]
                title = title_of(kind, node)
                kept = [item for item in inside if item not in doomed_ids]
                if kept:
                    self.skip(kind, source_id, title, f"not deleted: it holds {len(kept)} object(s) syncd did not create or still copies")
                    continue
                writes = BY_NAME[kind].writes
                assert writes is not None and writes.delete is not None
                ctx = self.delete_ctx(kind, node)
                op = Op(
                    key=f"delete:{kind}:{source_id}", action="delete", kind=kind, source_id=source_id, target_id=target_id,
                    method="DELETE", path=self.path(kind, "delete", **ctx), title=title, note="created by syncd; gone from the source",
                )
                waits = [delete_key.get(item) for item in inside] + moves + [self.tail.get(c) for c in self.chains_of(kind, node)]
                if self.emit(op, after=waits) is not None:
                    delete_key[(kind, target_id)] = op.key
                    count += 1
        self.deferred_paths(delete_key)
        if count > self.max_delete and self.plan.refused is None:
            self.plan.refused = (
                f"{count} deletes exceed --max-delete {self.max_delete}; nothing was applied. "
                "Check the source, then re-run with a higher --max-delete if they are intended"
            )

    def doomed(self, kind: str, target_id: str) -> bool:
        """Whether the object goes in this plan's deletes (mirror mode: created by syncd, and
        its source is gone)."""
        source_id = self.rev.get(kind, {}).get(target_id)
        return (
            self.mode == "mirror"
            and source_id is not None
            and self.src.get(kind, source_id) is None
            and self.idmap.origin(kind, source_id) == "created"
        )

    def deferred_paths(self, delete_key: dict[tuple[str, str], str]) -> None:
        """Paths held by objects this plan deletes: set once they are gone."""
        for kind, site, node, target_id, wanted, blocker in self.deferred:
            if (kind, blocker) in self.model.nodes:
                self.skip(kind, node.id, self.rule_title(kind, node), f"path {wanted!r} is used by another {kind} on the target")
                continue
            self.emit(
                Op(
                    key=f"patch:{kind}:{node.id}:path", action="patch", kind=kind, source_id=node.id, target_id=self.literal(target_id),
                    method="PATCH", path=self.path(kind, "patch", **self.site_ctx(site.id, kind, node.id)), body={"path": wanted},
                    title=self.rule_title(kind, node), note="after the delete of the object that held this path",
                ),
                after=[delete_key.get((kind, blocker))],
            )

    def chains_of(self, kind: str, node: Node) -> list[tuple[str, ...]]:
        """The sibling lists an object is in (a delete waits for their creates: a create
        that ran after the delete could take the path or place it frees)."""
        if kind in ("collection", "space"):
            return [("tree", ref_id(node.data.get("parent")) or "")]
        site = node.parent[1] if node.parent else ""
        if kind == "site-space":
            return [("ss", site, ref_id(node.data.get("section")) or "")]
        if kind in ("site-section", "site-section-group"):
            return [("top", site)] + ([("ss", site, node.id)] if kind == "site-section" else [("group", node.id)])
        return []

    def depth(self, target_id: str) -> int:
        depth, seen = 0, set()
        node = self.model.nodes.get(("collection", target_id)) or self.model.nodes.get(("space", target_id))
        while node is not None and ref_id(node.data.get("parent")) and node.id not in seen:
            seen.add(node.id)
            depth += 1
            node = self.model.nodes.get(("collection", str(ref_id(node.data.get("parent")))))
        return depth

    def inside(self, kind: str, target_id: str) -> list[tuple[str, str]]:
        """Objects that deleting this one deletes with it."""
        if kind == "collection":
            return list(self.model._descendants(target_id))
        if kind == "site":
            return [(n.kind, n.id) for n in self.model.nodes.values() if n.parent == ("site", target_id) and n.kind in ("site-section", "site-section-group", "site-space")]
        if kind == "site-section":
            node = self.model.nodes.get(("site-section", target_id))
            site = node.parent[1] if node and node.parent else ""
            return [("site-space", i) for i in self.model.container_order(site, target_id)]
        if kind == "space":  # its site-spaces disappear with it
            return [(n.kind, n.id) for n in self.model.of_kind("site-space") if ref_id(n.data.get("space")) == target_id]
        return []

    def delete_ctx(self, kind: str, node: Node) -> dict[str, str]:
        if kind in ("site-section", "site-section-group", "site-space"):
            site = node.parent[1] if node.parent else ""
            return {"site": _seg(site), "id": _seg(node.id)}
        if kind == "team":
            return {"team": _seg(node.id)}
        if kind == "openapi-spec":
            return {"spec": _seg(str(node.data.get("slug")))}
        if kind == "custom-field":
            return {"name": _seg(str(node.data.get("name")))}
        return {"id": _seg(node.id)}


class _Unwritable:
    """Marks a value that cannot be written (its reference is not copied)."""


_UNWRITABLE: Any = _Unwritable()


__all__ = ["ContentStrategy", "Mode", "plan"]
