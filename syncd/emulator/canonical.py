"""Canonical dump of one organization: every object with ids replaced by stable paths.

Two organizations hold the same content exactly when their dumps' `data` are equal, which is
how tests and benchmarks check a copy. Each route family declares its kinds with `DumpKind`
in a module-level `DUMP` list, which `route_table` lists; this module only walks them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.route_table import FAMILIES
from syncd.emulator.store import Record, Store

DUMP_BASE_URL = "http://emulator.invalid"
ALWAYS_VOLATILE = frozenset({"id", "createdAt", "updatedAt", "urls", "organization", "permissions"})


def all_dump_kinds() -> list[DumpKind]:
    kinds: list[DumpKind] = []
    for family in FAMILIES:
        kinds.extend(family.dump)
    return kinds


class _Paths:
    def __init__(self, store: Store, org_id: str, kinds: list[DumpKind]) -> None:
        self.store = store
        self.kinds = {k.name: k for k in kinds}
        self.rendered: dict[tuple[str, str], dict[str, Any]] = {}
        self.records: dict[tuple[str, str], Record] = {}
        self.order: dict[str, list[str]] = defaultdict(list)
        for kind in kinds:
            for record in kind.records(store, org_id):
                key = (kind.name, record["id"])
                self.records[key] = record
                self.rendered[key] = kind.render(store, record, DUMP_BASE_URL)
                self.order[kind.name].append(record["id"])
        self._paths: dict[tuple[str, str], str] = {}
        self._siblings: dict[tuple[str, str], int] = defaultdict(int)
        for name, ids in self.order.items():
            for record_id in ids:
                self.path(name, record_id)

    def path(self, kind_name: str, record_id: str) -> str:
        key = (kind_name, record_id)
        if key in self._paths:
            return self._paths[key]
        if key not in self.records:
            return f"{kind_name}:<outside:{record_id}>"
        kind = self.kinds[kind_name]
        parent = kind.parent(self.store, self.records[key])
        prefix = self.path(*parent) + "/" if parent else ""
        base = f"{prefix}{kind_name}:{kind.label(self.rendered[key])}"
        self._siblings[(kind_name, base)] += 1
        n = self._siblings[(kind_name, base)]
        self._paths[key] = base if n == 1 else f"{base}#{n}"
        return self._paths[key]

    def rewrite(self, value: Any, target_kind: str) -> Any:
        if isinstance(value, str):
            return self.path(target_kind, value)
        if isinstance(value, dict) and "id" in value:
            return self.path(target_kind, value["id"])
        if isinstance(value, list):
            return [self.rewrite(v, target_kind) for v in value]
        return value


def _set_dotted(data: dict[str, Any], dotted: str, fn: Callable[[Any], Any]) -> None:
    head, _, rest = dotted.partition(".")
    if head not in data:
        return
    if rest:
        if isinstance(data[head], dict):
            data[head] = dict(data[head])
            _set_dotted(data[head], rest, fn)
        elif isinstance(data[head], list):
            data[head] = [dict(item) for item in data[head]]
            for item in data[head]:
                _set_dotted(item, rest, fn)
    else:
        data[head] = fn(data[head])


def dump_org(store: Store, org_id: str) -> dict[str, Any]:
    """{"organization": id, "kinds": {kind: [{"path", "id", "data"}]}}: each kind's rows
    grouped by parent (groups in path order), siblings in API order.

    Why grouped: collections and spaces share one sibling order under a parent, which no
    listing shows whole (the collections list and the spaces list each show one kind, and the
    organization's space list walks the tree in an order the spec does not promise). What a
    client can read, and so copy, is each kind's order among its siblings: that is what the
    dump keeps."""
    kinds = all_dump_kinds()
    paths = _Paths(store, org_id, kinds)
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in kinds:
        rows = []
        ids = paths.order.get(kind.name, [])
        parent_path = {record_id: _parent_path(paths, kind, record_id) for record_id in ids}
        for record_id in sorted(ids, key=lambda i: parent_path[i]):
            data = dict(paths.rendered[(kind.name, record_id)])
            for dotted, target in kind.refs.items():
                _set_dotted(data, dotted, lambda v, t=target: paths.rewrite(v, t))
            for name in ALWAYS_VOLATILE | kind.volatile:
                data.pop(name, None)
            rows.append({"path": paths.path(kind.name, record_id), "id": record_id, "data": data})
        out[kind.name] = rows
    return {"organization": org_id, "kinds": out}


def _parent_path(paths: _Paths, kind: DumpKind, record_id: str) -> str:
    parent = kind.parent(paths.store, paths.records[(kind.name, record_id)])
    return paths.path(*parent) if parent else ""


def comparable(dump: Mapping[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """The part of a dump that must match between a source and its copy (ids left out)."""
    return {kind: [(row["path"], row["data"]) for row in rows] for kind, rows in dump["kinds"].items()}
