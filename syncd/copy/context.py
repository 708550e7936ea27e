"""What every part of the planner shares: the two snapshots as read, the id map, and the
plan being written.

Pure: the planner decides from what was READ (the source and the target snapshots and the id
map) and from nothing else. It never predicts what the service will answer: where a created
object lands, the path it derives, the name of a duplicate. Those are checked after each
write (the `want` of a create) and by the settle steps, which read the target at run time.

Conventions of the ops (what apply relies on):
- keys are `{action}:{kind}:{source id}`, with a suffix for the extra ops of one object;
- paths name mapped objects by their literal target id and objects this plan makes by
  `{ref:kind:source id}`; bodies name every object by `Ref(kind, source id)`;
- a create of an object whose id-map entry points at an object gone from the target carries
  the stale id in `target_id`: the new object replaces the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from syncd.catalog import list_path, segment, write_call, write_path
from syncd.copy.model import BOOKKEEPING, IdMap, Node, Snapshot
from syncd.copy.ops import Expect, Op, Plan, Ref, Skip, path_ref
from syncd.copy.rules import RULES, SHAREABLE, canonical, comparable, identity, title_of, unmapped

Mode = Literal["copy", "mirror"]


def seg(value: str) -> str:
    """One path segment (ids are url-safe, names of custom fields and slugs may not be; an
    id `.` or `..` is sent `%2E` / `%2E%2E`, never as a dot segment): `catalog.segment`."""
    return segment(value)


@dataclass(frozen=True)
class ContentStrategy:
    """How space content reaches the target.

    - `same_credentials`: one token reaches both organizations, so a new space is duplicated
      in the source and transferred (content, visibility and all).
    - Else content is imported from a URL. From the source space's own URL when the target's
      token can read it (`readable`: it can read the source organization; or the space is
      shareable: public, unlisted, share-link). Otherwise, when syncd can `serve` content (a
      content source runs with the copy), from the site syncd serves of the space as read;
      `serve_everything` (a restore: the backup is the source, whatever the live source is
      now) serves every space. `files_held`: the file row ids whose bytes syncd holds, when
      known before the run (a backup's blobs); None: they are fetched when served.
    - `restorable`: source spaces that are deleted in the target organization itself (a
      backup restored into the organization it came from) and still in the service's restore
      window: they are brought back (history and comments kept) before anything is imported.
    """

    same_credentials: bool = False
    readable: bool = False
    serve: bool = False
    serve_everything: bool = False
    files_held: frozenset[str] | None = None
    restorable: frozenset[str] = frozenset()
    source_base_url: str | None = None

    def can_import(self, space: Node) -> bool:
        return self.same_credentials or self.readable or space.data.get("visibility") in SHAREABLE

    def served(self, space: Node) -> bool:
        """Whether the space's content is imported from syncd's content source."""
        return self.serve and (self.serve_everything or not self.can_import(space))

    def import_url(self, space: Node) -> str | None:
        urls = space.data.get("urls") or {}
        if isinstance(urls, dict):
            for key in ("app", "published", "public", "location"):
                if isinstance(urls.get(key), str) and urls[key]:
                    return str(urls[key])
        if self.source_base_url:
            return self.source_base_url.rstrip("/") + write_path("space", "get", {"id": seg(space.api_id)})
        return None


class PlanContext:
    """The planner's shared state (see the module docstring)."""

    def __init__(
        self, source: Snapshot, target: Snapshot, idmap: IdMap, *, mode: Mode, adopt: bool, content: ContentStrategy, with_access: bool = False
    ) -> None:
        self.source, self.target, self.idmap = source, target, idmap
        self.mode, self.adopt, self.content = mode, adopt, content
        self.with_access = with_access
        """Whether the target's access settings (`rules.ACCESS_FIELDS`, `ACCESS_KINDS`) are copied."""
        self.org = target.org
        self.plan = Plan()
        self.keys: dict[str, Op] = {}
        self.existing: dict[tuple[str, str], str] = {}
        """(kind, source id) -> target id of objects on the target now (mapped or adopted)."""
        self.reverse: dict[str, dict[str, str]] = {}
        self.planned: dict[tuple[str, str], str] = {}
        """(kind, source id) -> key of the op of this plan that makes it."""
        self.stale: dict[tuple[str, str], str] = {}
        self.site_ops: dict[str, list[str]] = {}
        """Keys of the ops planned for each source site (its settle step waits for them)."""
        for (kind, source_id), entry in idmap.entries.items():
            if target.get(kind, entry.target_id) is not None:
                self.map(kind, source_id, entry.target_id)
            elif kind not in BOOKKEEPING:
                self.stale[(kind, source_id)] = entry.target_id
        self.idmap = idmap

    # -- ids ---------------------------------------------------------------------------

    def map(self, kind: str, source_id: str, target_id: str) -> None:
        self.existing[(kind, source_id)] = target_id
        self.reverse.setdefault(kind, {})[target_id] = source_id

    def tid(self, kind: str, source_id: str | None) -> str | None:
        """The target id of a source object that is on the target now."""
        if source_id is None:
            return None
        if kind == "organization":
            return self.org if source_id == self.source.org else None
        return self.existing.get((kind, source_id))

    def idmap_target(self, kind: str, source_id: str) -> str | None:
        """An id-map entry as recorded (bookkeeping kinds included), whether or not it is on the target."""
        return self.idmap.target(kind, source_id)

    def exists(self, kind: str, source_id: str | None) -> bool:
        """On the target now, or made by this plan."""
        return source_id is not None and (self.tid(kind, source_id) is not None or (kind, source_id) in self.planned)

    def to_source(self, kind: str, target_id: str) -> str:
        if kind == "organization" and target_id == self.org:
            return self.source.org
        return self.reverse.get(kind, {}).get(target_id) or unmapped(kind, target_id)

    def seg(self, kind: str, source_id: str) -> str:
        """A path segment naming a source object on the target (a Ref while it is made)."""
        target_id = self.tid(kind, source_id)
        return seg(target_id) if target_id is not None else path_ref(kind, source_id)

    def path(self, kind: str, call: str, **segments: str) -> str:
        return write_path(kind, call, {"org": seg(self.org), **segments})

    def list_path(self, kind: str) -> str:
        return list_path(kind, {"org": seg(self.org)})

    # -- emitting ----------------------------------------------------------------------

    def skip(self, kind: str, source_id: str | None, title: str, reason: str, excuses: tuple[str, ...] = ()) -> None:
        self.plan.skips.append(Skip(kind, source_id, title, reason, excuses))

    def emit(self, op: Op, after: Iterable[str | None] = ()) -> Op:
        """Add an op (once per key); `after` keys not in the plan are dropped."""
        if op.key in self.keys:
            return self.keys[op.key]
        wanted = [*op.after, *after]
        op.after = [k for k in dict.fromkeys(k for k in wanted if k) if k in self.keys and k != op.key]
        self.plan.ops.append(op)
        self.keys[op.key] = op
        if op.action == "adopt" and op.source_id is not None and op.target_id is not None:
            self.map(op.kind, op.source_id, op.target_id)
        elif op.action == "create":
            for made in op.products:
                self.planned[made] = op.key
        return op

    def producer(self, kind: str, source_id: str | None) -> str | None:
        return self.planned.get((kind, source_id)) if source_id is not None else None

    # -- objects -----------------------------------------------------------------------

    def title(self, kind: str, node: Node) -> str:
        return title_of(kind, node)

    def desired(self, kind: str, node: Node) -> dict[str, Any]:
        return canonical(kind, node, self.source)

    def current(self, kind: str, target_id: str) -> dict[str, Any] | None:
        node = self.target.get(kind, target_id)
        return comparable(kind, canonical(kind, node, self.target), self.to_source) if node is not None else None

    def equivalent(self, kind: str, node: Node, candidates: Iterable[Node]) -> str | None:
        """A target object with the same identity, mapped to no other source object."""
        want = identity(kind, node, self.source)
        taken = self.reverse.get(kind, {})
        for candidate in candidates:
            if candidate.id not in taken and identity(kind, candidate, self.target, self.to_source) == want:
                return candidate.id
        return None

    def ensure(self, kind: str, node: Node, candidates: Callable[[], Iterable[Node]], create: Callable[[], Op | None]) -> bool:
        """Whether the object is (or will be) on the target: mapped, adopted (an equivalent
        object already there), or created by the op `create` returns."""
        if self.tid(kind, node.id) is not None or (kind, node.id) in self.planned:
            return True
        if self.adopt and (match := self.equivalent(kind, node, candidates())) is not None:
            self.emit(Op(key=f"adopt:{kind}:{node.id}", action="adopt", kind=kind, source_id=node.id, target_id=match, title=self.title(kind, node), recipe="adopt"))
            return True
        op = create()
        if op is None:
            return False
        stale = self.stale.get((kind, node.id))
        if stale is not None:
            op.target_id = stale
            op.note = (f"replaces {stale}, which is gone from the target; " + op.note).rstrip("; ")
        self.emit(op)
        return True

    def ref_value(self, kind: str, name: str, value: Any, node: Node) -> Any:
        """A desired value as a body carries it: a reference becomes a Ref (None when the
        referenced object is not copied: reported as a skip)."""
        rule = RULES[kind]
        for path, ref_kind in rule.refs.items():
            head, _, rest = path.partition(".")
            if head != name or value is None:
                continue
            ref = value.get(rest) if rest and isinstance(value, dict) else (None if rest else value)
            if ref is None:
                continue
            if not self.exists(ref_kind, ref):
                self.skip(kind, node.id, self.title(kind, node), f"{name} names a {ref_kind} that is not copied ({ref})")
                return _UNWRITABLE
            return {**value, rest: Ref(ref_kind, ref)} if rest else Ref(ref_kind, ref)
        return value

    def create_body(self, kind: str, node: Node, values: dict[str, Any]) -> dict[str, Any]:
        """The kind's create fields that have a value, references as Refs."""
        rule = RULES[kind]
        body: dict[str, Any] = {}
        for name in rule.create:
            value = values.get(name)
            if value is None:
                continue
            written = self.ref_value(kind, name, value, node)
            if written is not _UNWRITABLE:
                body[rule.body_name(name)] = written
        return body

    def want(self, kind: str, node: Node, values: dict[str, Any], *, exclude: Iterable[str] = ()) -> dict[str, Any]:
        """What a new object must look like after its create: the kind's patchable fields,
        references as Refs (checked against the answer; what differs is patched)."""
        rule = RULES[kind]
        skipped = set(exclude)
        out: dict[str, Any] = {}
        for name in rule.patch:
            if name in skipped:
                continue
            value = values.get(name)
            if value is None and name not in rule.nullable:
                continue
            written = self.ref_value(kind, name, value, node)
            if written is not _UNWRITABLE:
                out[name] = written
        return out

    def patch_existing(
        self, kind: str, node: Node, target_id: str, path: str, *, exclude: Iterable[str] = (), always: Iterable[str] = (), key: str | None = None
    ) -> None:
        """Patch the writable fields of an object on the target that differ from the source;
        report the others (not writable, not removable) as skips. `key`: the op's own key
        (a second patch of one object, of other fields)."""
        rule = RULES[kind]
        desired = self.desired(kind, node)
        current = self.current(kind, target_id)
        if current is None:
            return
        title = self.title(kind, node)
        excluded = set(exclude) | set(rule.structural)
        body: dict[str, Any] = {}
        for name in rule.fields:
            if name in excluded or desired.get(name) == current.get(name):
                continue
            value = desired.get(name)
            if name not in rule.patch:
                if value is not None:
                    self.skip(kind, node.id, title, f"{name} cannot be changed after creation (source {value!r}, target {current.get(name)!r})", (name,))
                continue
            if value is None and name not in rule.nullable:
                self.skip(kind, node.id, title, f"{name} cannot be removed through the API (target has {current.get(name)!r})", (name,))
                continue
            written = self.ref_value(kind, name, value, node)
            if written is not _UNWRITABLE:
                body[rule.body_name(name)] = written
        self.report_unwritable(kind, node, target_id)
        if not body:
            return
        for name in always:
            body.setdefault(rule.body_name(name), desired.get(name))
        self.emit(Op(
            key=key or f"patch:{kind}:{node.id}", action="patch", kind=kind, source_id=node.id, target_id=target_id, title=title,
            method=write_call(kind, "patch").method, path=path, body=body,
        ))

    def report_unwritable(self, kind: str, node: Node, target_id: str | None) -> None:
        """Skips for the kind's non-writable fields whose values differ (or, for a new object,
        are set in the source)."""
        rule = RULES[kind]
        other = self.target.get(kind, target_id) if target_id else None
        for name, reason in rule.skip_fields.items():
            value = node.data.get(name)
            if value is None or value is False:
                continue
            if other is None or other.data.get(name) != value:
                self.skip(kind, node.id, self.title(kind, node), f"{name} {value!r} not copied: {reason}", (name,))

    def create_op(self, kind: str, node: Node, path: str, body: Any, expect: Expect, *, serial: str | None, want: dict[str, Any] | None, patch_path: str | None) -> Op:
        call = write_call(kind, "create")
        return Op(
            key=f"create:{kind}:{node.id}", action="create", kind=kind, source_id=node.id, title=self.title(kind, node),
            method=call.method, path=path, body=body, expect=expect, serial=serial,
            want=want or None, spec={"patch": patch_path} if want and patch_path else None,
        )


class _Unwritable:
    """Marks a value that cannot be written (its reference is not copied)."""


_UNWRITABLE: Any = _Unwritable()

__all__ = ["ContentStrategy", "Mode", "PlanContext", "seg"]
