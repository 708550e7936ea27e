"""Rows from a listing's items: what the crawler stages for the mirror.

Each item becomes one `Row` with its id (qualified by its container where the catalog says an
id is only unique there), its parent (a tree page's parent page, or the field that names it),
its position among its siblings and its content hash; an item that cannot be a row (not an
object, no id) is described in `malformed` instead, so the listing is not trusted for deletes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from syncd import catalog
from syncd.catalog import Kind
from syncd.state import Row


class RowMaker:
    """Makes the rows of one tenant's crawl, counting them by kind in `counts`."""

    def __init__(self, tenant: str, counts: Counter[str]) -> None:
        self.tenant = tenant
        self.counts = counts

    def rows(
        self,
        kind: Kind,
        items: Iterable[Any],
        context: Mapping[str, str],
        parent: tuple[str, str] | None,
        listing: str,
        positions: Counter[tuple[str, str] | None],
        malformed: list[str],
        scope: str | None,
    ) -> list[Row]:
        """Rows of one page of a listing; tree pages hang under their parent page; what
        cannot be a row is described in `malformed`."""
        owner = parent[1] if kind.id_is_local and parent else None
        rows: list[Row] = []
        pairs = _flatten(items) if kind.shape == "tree" else ((item, None) for item in items)
        for item, parent_page in pairs:
            row_parent = (kind.name, _qualified(owner, parent_page)) if parent_page else parent
            row = self.row(kind, item, context, row_parent, listing, positions, malformed, owner, scope)
            if row is not None:
                rows.append(row)
        return rows

    def row(
        self,
        kind: Kind,
        item: Any,
        context: Mapping[str, str],
        parent: tuple[str, str] | None,
        listing: str,
        positions: Counter[tuple[str, str] | None] | None,
        malformed: list[str],
        owner: str | None = None,
        scope: str | None = None,
    ) -> Row | None:
        """One Row; `owner` qualifies ids that are only unique under their container."""
        if not isinstance(item, dict):
            malformed.append(f"a {type(item).__name__} instead of an object")
            return None
        if kind.id_field:
            raw_id = catalog.dotted(item, kind.id_field)
            if not isinstance(raw_id, (str, int)) or raw_id == "":
                malformed.append(f"a {kind.name} without {kind.id_field}")
                return None
            raw_id = str(raw_id)
        elif kind.shape == "object":
            raw_id = kind.name
        else:
            raw_id = catalog.content_id(item)
        if kind.parent_field and isinstance(item.get(kind.parent_field), str):
            parent = (kind.parent_field_kind or kind.name, item[kind.parent_field])
        position = None
        if positions is not None:
            position = positions[parent] if kind.ordered else None
            positions[parent] += 1
        data = {k: v for k, v in item.items() if k not in kind.strip} if kind.strip else item
        self.counts[kind.name] += 1
        return Row(
            tenant=self.tenant,
            kind=kind.name,
            id=_qualified(owner, raw_id),
            org=context.get("org"),
            parent_kind=parent[0] if parent else None,
            parent_id=parent[1] if parent else None,
            position=position,
            listing=listing,
            scope=scope,
            data=data,
            hash=catalog.stored_hash(kind, data),
        )


def _flatten(pages: Iterable[Any], parent: str | None = None) -> Iterable[tuple[Any, str | None]]:
    """(page, parent page id) of a nested page tree, in document order."""
    for page in pages:
        yield page, parent
        if isinstance(page, dict) and isinstance(page.get("pages"), list):
            yield from _flatten(page["pages"], page.get("id"))


def _qualified(owner: str | None, raw_id: str) -> str:
    return f"{owner}/{raw_id}" if owner else raw_id
