"""How one kind of object appears in the canonical dump: what each route family declares in
its `DUMP` list, below both the families and the dump that walks them (`canonical`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from syncd.emulator.store import Record, Store


@dataclass(frozen=True)
class DumpKind:
    """How one kind of object appears in the canonical dump.

    `records` lists the organization's records in API order; `render` gives the object as a
    GET answers it; `label` names it among its siblings (usually the title); `parent` gives
    the (kind, id) whose path prefixes this one; `refs` maps fields holding ids (or objects
    with an `id`, or lists of either) to the kind they reference; `volatile` fields differ
    between copies by nature and are left out.
    """

    name: str
    records: Callable[[Store, str], Iterable[Record]]
    render: Callable[[Store, Record, str], dict[str, Any]]
    label: Callable[[dict[str, Any]], str]
    parent: Callable[[Store, Record], tuple[str, str] | None] = lambda store, record: None
    refs: Mapping[str, str] = field(default_factory=dict)
    volatile: frozenset[str] = frozenset()
