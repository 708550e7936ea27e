"""Change requests: proposed edits to a space, in their own revisions.

A change request forks the space's current revision; `base` remembers the space revision its
content was last based on (at creation, then at each update), which gives `outdated` and the
common ancestor of the three-way, page-level merge used by both merge (change request into
the space) and update (space into the change request). The space's counters
(`changeRequests`, `changeRequestsOpen`, `changeRequestsDraft`) are recomputed whenever a
change request is created or changes status.
"""

from __future__ import annotations

from typing import Any

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.routes.content_model import Holder, locate_all, space_app_url
from syncd.emulator.routes.members import render_user
from syncd.emulator.routes.space_model import SPACE, set_space_content
from syncd.emulator.store import Record, Store

CHANGE_REQUEST = "change-request"


# ----- model ------------------------------------------------------------------------------


def order_key(space_id: str) -> tuple[str, ...]:
    return ("change-requests", space_id)


def space_change_requests(store: Store, space_id: str) -> list[Record]:
    """The space's change requests in creation order."""
    table = store.tables[CHANGE_REQUEST]
    return [table[cr_id] for cr_id in store.ordered(order_key(space_id)) if cr_id in table]


def refresh_counters(store: Store, space: Record) -> None:
    """Recount the space's change requests (total, open, draft) after a change."""
    records = space_change_requests(store, space["id"])
    space["changeRequests"] = len(records)
    space["changeRequestsOpen"] = sum(1 for r in records if r["status"] == "open")
    space["changeRequestsDraft"] = sum(1 for r in records if r["status"] == "draft")


def new_change_request(store: Store, space: Record, user_id: str, subject: str = "", status: str = "draft") -> Record:
    """A change request forking the space's current revision (same page ids, own revision)."""
    ts = store.now_iso()
    base = revisions.get(store, space["revision"])
    fork = revisions.commit(store, base["pages"], base["files"], parents=[base["id"]])
    record: Record = {
        "org": space["org"],
        "space": space["id"],
        "number": store.next_number(f"change-requests:{space['id']}"),
        "status": status,
        "subject": subject,
        "createdBy": user_id,
        "contributors": [user_id],
        "createdAt": ts,
        "updatedAt": ts,
        "revision": fork["id"],
        "revisionInitial": space["revision"],
        "base": space["revision"],
        "comments": 0,
    }
    store.add(CHANGE_REQUEST, record)
    store.place(order_key(space["id"]), record["id"])
    refresh_counters(store, space)
    return record


def find_change_request(store: Store, space: Record, ref: str) -> Record:
    """A change request of the space by id or by number; 404 otherwise."""
    record = store.get(CHANGE_REQUEST, ref)
    if record is None and ref.isdigit():
        record = next((r for r in space_change_requests(store, space["id"]) if r["number"] == int(ref)), None)
    if record is None or record["space"] != space["id"]:
        raise not_found(f"change request {ref!r} not found in space {space['id']!r}")
    return record


def is_outdated(store: Store, record: Record) -> bool:
    space = store.get(SPACE, record["space"])
    return record["status"] != "merged" and space is not None and space["revision"] != record["base"]


def touch(store: Store, record: Record, user_id: str | None) -> None:
    record["updatedAt"] = store.now_iso()
    if user_id and user_id not in record["contributors"]:
        record["contributors"].append(user_id)


def holder_for(store: Store, space: Record, record: Record, base: str, user_id: str | None = None) -> Holder:
    """The change request as a content holder: writes give it a new revision."""

    def commit(revision_id: str) -> None:
        record["revision"] = revision_id
        touch(store, record, user_id)

    app_url = f"{space_app_url(space, base)}~/changes/{record['number']}/"
    return Holder(space, record["revision"], app_url, {"type": "changeRequest", "changeRequest": record["id"]}, commit)


# ----- three-way merge of page trees -------------------------------------------------------


class _Flat:
    """A page tree as nodes (pages without children), parents and sibling orders."""

    def __init__(self, pages: list[Record]) -> None:
        self.nodes: dict[str, Record] = {}
        self.parent: dict[str, str | None] = {}
        self.children: dict[str | None, list[str]] = {None: []}
        for loc in locate_all(pages):
            page_id = loc.page["id"]
            self.nodes[page_id] = {k: v for k, v in loc.page.items() if k != "pages"}
            self.parent[page_id] = loc.parent
            self.children.setdefault(loc.parent, []).append(page_id)


def _merge_pages(base: list[Record], target: list[Record], source: list[Record]) -> list[Record]:
    """`target` with the changes `source` made since `base`: page edits, additions, deletions
    and moves of the source win; everything else of the target is kept, in its order."""
    b, t, s = _Flat(base), _Flat(target), _Flat(source)
    nodes: dict[str, Record] = {}
    parent: dict[str, str | None] = {}
    from_source: set[str] = set()
    for page_id, node in t.nodes.items():
        if page_id in b.nodes and page_id not in s.nodes:
            continue
        changed = page_id in s.nodes and page_id in b.nodes and s.nodes[page_id] != b.nodes[page_id]
        nodes[page_id] = s.nodes[page_id] if changed else node
        moved = page_id in s.nodes and page_id in b.nodes and s.parent[page_id] != b.parent[page_id]
        parent[page_id] = s.parent[page_id] if moved else t.parent[page_id]
        if moved:
            from_source.add(page_id)
    for page_id, node in s.nodes.items():
        if page_id not in b.nodes and page_id not in t.nodes:
            nodes[page_id], parent[page_id] = node, s.parent[page_id]
            from_source.add(page_id)
    for page_id in nodes:
        seen = {page_id}
        up = parent[page_id]
        while up is not None and up in nodes and up not in seen:
            seen.add(up)
            up = parent[up]
        if parent[page_id] is not None and (parent[page_id] not in nodes or up is not None):
            parent[page_id] = None  # the parent is gone, or the moves made a cycle
    order: dict[str | None, list[str]] = {}
    for page_id in [*t.nodes, *s.nodes]:
        if page_id in nodes and page_id not in from_source:
            siblings = order.setdefault(parent[page_id], [])
            if page_id not in siblings:
                siblings.append(page_id)
    for page_id in s.nodes:
        if page_id in from_source:
            siblings = order.setdefault(parent[page_id], [])
            source_siblings = s.children.get(s.parent[page_id], [])
            before = [x for x in source_siblings[: source_siblings.index(page_id)] if x in siblings]
            siblings.insert(siblings.index(before[-1]) + 1 if before else 0, page_id)
    for page_id in nodes:
        siblings = order.setdefault(parent[page_id], [])
        if page_id not in siblings:
            siblings.append(page_id)

    def build(parent_id: str | None) -> list[Record]:
        return [{**nodes[page_id], "pages": build(page_id)} for page_id in order.get(parent_id, [])]

    return build(None)


def _merge_files(base: list[Record], target: list[Record], source: list[Record]) -> list[Record]:
    b = {f["id"]: f for f in base}
    s = {f["id"]: f for f in source}
    merged = [s[f["id"]] if f["id"] in s and s[f["id"]] != b.get(f["id"], s[f["id"]]) else f for f in target if not (f["id"] in b and f["id"] not in s)]
    known = {f["id"] for f in target}
    return merged + [f for f in source if f["id"] not in b and f["id"] not in known]


def three_way(store: Store, base_id: str, target_id: str, source_id: str) -> tuple[list[Record], list[Record]]:
    base, target, source = (revisions.get(store, r) for r in (base_id, target_id, source_id))
    return (
        _merge_pages(base["pages"], target["pages"], source["pages"]),
        _merge_files(base["files"], target["files"], source["files"]),
    )


def merge(store: Store, space: Record, record: Record, user_id: str) -> Record:
    """Apply the change request to the space: a new space revision; the CR becomes merged."""
    if record["status"] in ("merged", "archived"):
        raise bad_request(f"change request {record['number']} is {record['status']} and cannot be merged")
    pages, files = three_way(store, record["base"], space["revision"], record["revision"])
    revision = revisions.commit(store, pages, files, parents=[space["revision"], record["revision"]], kind="merge", mergedFrom=record["id"])
    set_space_content(store, space, revision["id"])
    ts = store.now_iso()
    record.update(status="merged", revisionMerged=revision["id"], mergedBy=user_id, mergedAt=ts, updatedAt=ts)
    refresh_counters(store, space)
    return revision


def update(store: Store, space: Record, record: Record, user_id: str) -> Record:
    """Pull the space's current content into the change request: a new CR revision."""
    if record["status"] == "merged":
        raise bad_request(f"change request {record['number']} is merged and cannot be updated")
    pages, files = three_way(store, record["base"], record["revision"], space["revision"])
    revision = revisions.commit(store, pages, files, parents=[record["revision"], space["revision"]], kind="update")
    record.update(revision=revision["id"], base=space["revision"], revisionMergedAncestor=space["revision"])
    touch(store, record, user_id)
    return revision


# ----- rendering --------------------------------------------------------------------------


def render_change_request(store: Store, record: Record, base: str) -> dict[str, Any]:
    space = store.get(SPACE, record["space"])
    app = f"{base}/app/o/{record['org']}/s/{record['space']}/~/changes/{record['number']}/"
    data = {
        "object": "change-request",
        "id": record["id"],
        "number": record["number"],
        "status": record["status"],
        "subject": record["subject"],
        "createdBy": render_user(store, record["createdBy"], base),
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
        "mergedBy": render_user(store, record["mergedBy"], base) if record.get("mergedBy") else None,
        "mergedAt": record.get("mergedAt"),
        "space": record["space"],
        "revision": record["revision"],
        "revisionInitial": record["revisionInitial"],
        "revisionMergedAncestor": record.get("revisionMergedAncestor"),
        "revisionMerged": record.get("revisionMerged"),
        "comments": record.get("comments", 0),
        "outdated": space is not None and is_outdated(store, record),
        "urls": {"app": app, "location": f"{base}/v1/spaces/{record['space']}/change-requests/{record['id']}"},
    }
    return h.strip_none(data)
