"""A scoped crawl: what it reads, and what of it the mirror records.

How (the crawler calls these hooks; `Scope()` makes every one of them a no-op):

- an organization's collections are read first, before its other listings, so that every
  space's path is known when its row arrives; a space out of scope is not descended into
  (its content is not read), nor a site out of scope (its sections, site-spaces...);
- with an `--include`, the organization-wide listings (members, teams, custom fields, ...)
  are not read at all: they are out of scope (`syncd.selection`);
- at the end, before the run is merged, `syncd.selection.select` decides over what the run
  staged (with every collection, space and site its listings held): rows out of scope are
  unstaged, and rows the mirror already holds that are out of scope are carried forward as
  they were. So a scoped run records only what is in scope, and never deletes, changes or
  moves what it left out: an object that left the scope since the mirror last saw it keeps
  its last recorded state until a run whose scope holds it;
- when an organization's collections could not be read, no path is known: nothing of its
  content tree is in scope that run (the run is partial anyway, and nothing is deleted).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from syncd import catalog
from syncd.scope import EVERYTHING, Scope
from syncd.selection import LINK_KINDS, ORG_WIDE, VALUE_KINDS, Dependency, Item, content_dependencies, item_of_row, select, tree_paths
from syncd.state import StateStore
from syncd.state.rows import Row

__all__ = ["ORG_LEVEL", "CrawlScope"]

ORG_LEVEL = frozenset(kind.name for kind in catalog.KINDS if kind.scope is None)
"""Kinds outside any space: the selection decides them (content follows its space)."""


@dataclass
class CrawlScope:
    """The scope of one crawl, and what it learnt on the way (see the module docstring)."""

    scope: Scope = EVERYTHING
    collections: dict[str, dict[str, Item]] = field(default_factory=lambda: defaultdict(dict))
    paths: dict[str, dict[tuple[str, str], tuple[str, ...]]] = field(default_factory=dict)
    undecided: set[str] = field(default_factory=set)
    dependencies: list[Dependency] = field(default_factory=list)
    left_out: int = 0
    """Rows read but not recorded (out of scope)."""

    @property
    def active(self) -> bool:
        return not self.scope.everything

    def ref(self, scope_ref: str) -> str:
        """The run's `scope_ref`: runs of different scopes are never compared or confused."""
        return f"{scope_ref} [{self.scope.describe()}]" if self.active else scope_ref

    def reads(self, kind: catalog.Kind, parent_kind: str) -> bool:
        """Whether a child listing of a `parent_kind` row is read like any other."""
        if not self.active or parent_kind != "organization":
            return True
        if kind.name == "collection":
            return False  # read first (`read_first`)
        return not (kind.name in ORG_WIDE and self.scope.include)

    def read_first(self) -> str | None:
        """The kind read under each organization before anything else (None: none)."""
        return "collection" if self.active else None

    def note(self, org: str, rows: Iterable[Row]) -> None:
        """Collections of `org` as their listing gave them."""
        if not self.active:
            return
        for row in rows:
            if row.kind == "collection":
                parent = (row.parent_kind, row.parent_id) if row.parent_kind and row.parent_id else None
                self.collections[org][row.id] = Item(row.kind, row.id, parent, row.data)

    def collections_read(self, org: str, ok: bool) -> None:
        if not ok:
            self.undecided.add(org)
        self.paths[org] = tree_paths(self.collections[org].values())

    def descends(self, row: Row) -> bool:
        """Whether the content of a space, or the children of a site, are read."""
        if not self.active or row.kind not in ("space", "site"):
            return True
        if row.kind == "site":
            return self.scope.selects((str(row.data.get("title") or ""),))
        org = row.org or ""
        if org in self.undecided:
            return False
        base: tuple[str, ...] = ()
        if row.parent_kind == "collection":
            known = self.paths.get(org, {}).get(("collection", row.parent_id or ""))
            if known is None:
                return False  # a collection that appeared after its listing was read
            base = known
        return self.scope.selects(base + (str(row.data.get("title") or ""),))

    def finish(self, store: StateStore, run: int, tenant: str, orgs: Iterable[str]) -> None:
        """Unstage what is out of scope and carry forward what the mirror holds out of it."""
        if not self.active:
            return
        for org in orgs:
            staged = [item_of_row(row) for row in store.staged_rows(run, org, ORG_LEVEL)]
            selection = select(self.scope, staged, undecided=org in self.undecided)
            held = [item_of_row(row) for kind in sorted(ORG_LEVEL) for row in store.current(tenant, kind=kind, org=org)]
            before = select(self.scope, held)
            read = {item.key for item in staged}
            out = [item.key for item in staged if item.key not in selection]
            self.left_out += store.unstage(run, out)
            store.carry_rows(run, tenant, [item.key for item in held if item.key not in selection and (item.key in read or item.key not in before)])
            content = list(store.staged_rows(run, org, VALUE_KINDS | LINK_KINDS))
            space_of = {(row["kind"], row["id"]): str(row["scope"]).removeprefix("space:") for row in content if str(row["scope"]).startswith("space:")}
            self.dependencies += selection.dependencies + content_dependencies(selection, (item_of_row(row) for row in content), space_of)
