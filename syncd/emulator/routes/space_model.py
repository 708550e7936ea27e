"""Collections and spaces as records: the content tree's keys, lookups and renderings, which
the spaces routes and every family that points at a space share.

Collections and spaces under one parent share a single sibling order (the move API names
both as `{type: "space", space: id}`); the key is `("tree", org_id, parent_id or "")`.
Deleted spaces keep their record with `deletedAt` for the 7 days they can be restored.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.errors import not_found
from syncd.emulator.store import Record, Store, parse_iso

COLLECTION, SPACE = "collection", "space"
VISIBILITIES = ("public", "unlisted", "share-link", "visitor-auth", "in-collection", "private")
RESTORE_WINDOW = timedelta(days=7)


# ----- model ------------------------------------------------------------------------------


def tree_key(org_id: str, parent_id: str | None) -> tuple[str, ...]:
    return ("tree", org_id, parent_id or "")


def new_collection(store: Store, org_id: str, title: str, parent: str | None = None, **fields: Any) -> Record:
    record: Record = {
        "org": org_id,
        "title": title,
        "parent": parent,
        "defaultLevel": "read",
        "createdAt": store.now_iso(),
    }
    record.update(fields)
    store.add(COLLECTION, record)
    store.place(tree_key(org_id, parent), record["id"])
    return record


def new_space(store: Store, org_id: str, title: str, parent: str | None = None, **fields: Any) -> Record:
    """A space with an empty first revision, placed last under its parent."""
    ts = store.now_iso()
    record: Record = {
        "org": org_id,
        "title": title,
        "emoji": "",
        "visibility": "in-collection" if parent else "private",
        "parent": parent,
        "editMode": "live",
        "defaultLevel": "read",
        "createdAt": ts,
        "updatedAt": ts,
        "comments": 0,
        "changeRequests": 0,
        "changeRequestsOpen": 0,
        "changeRequestsDraft": 0,
    }
    record.update(fields)
    if "revision" not in record:
        record["revision"] = revisions.commit(store, [], [])["id"]
    store.add(SPACE, record)
    store.place(tree_key(org_id, parent), record["id"])
    return record


def set_space_content(store: Store, space: Record, revision_id: str) -> None:
    """Point a space at a new revision: its `revision` and `updatedAt` change together."""
    space["revision"] = revision_id
    space["updatedAt"] = store.now_iso()


def purge_expired(store: Store, space: Record) -> bool:
    """Remove a space deleted more than 7 days ago; True when it is gone."""
    deleted = space.get("deletedAt")
    if deleted and store.now() - parse_iso(deleted) > RESTORE_WINDOW:
        store.remove(SPACE, space["id"])
        return True
    return False


def live_space(store: Store, space_id: str, user_id: str) -> Record:
    """A visible, not deleted space (404 otherwise): what most routes operate on."""
    space = store.visible(SPACE, space_id, user_id, "space")
    if space.get("deletedAt"):
        raise not_found(f"space {space_id!r} not found (it is deleted)")
    return space


def tree_children(store: Store, org_id: str, parent_id: str | None) -> list[Record]:
    out = []
    for item_id in store.ordered(tree_key(org_id, parent_id)):
        record = store.get(COLLECTION, item_id) or store.get(SPACE, item_id)
        if record is not None and not record.get("deletedAt"):
            out.append(record)
    return out


def deleted_spaces(store: Store, org_id: str, collection_id: str | None = None) -> list[Record]:
    """Spaces of an organization deleted within the restore window (expired ones purged),
    in creation order; `collection_id` given: only those whose `parent` is still that collection."""
    out = []
    for record in list(store.tables[SPACE].values()):
        if record.get("org") != org_id or not record.get("deletedAt") or purge_expired(store, record):
            continue
        if collection_id is None or record.get("parent") == collection_id:
            out.append(record)
    return out


def walk_tree(store: Store, org_id: str, parent_id: str | None = None) -> list[tuple[str, Record]]:
    """(kind, record) of the whole tree below a parent, depth first in sibling order."""
    out: list[tuple[str, Record]] = []
    for record in tree_children(store, org_id, parent_id):
        kind = COLLECTION if record["id"] in store.tables[COLLECTION] else SPACE
        out.append((kind, record))
        if kind == COLLECTION:
            out.extend(walk_tree(store, org_id, record["id"]))
    return out


def org_collections(store: Store, org_id: str) -> list[Record]:
    return [r for kind, r in walk_tree(store, org_id) if kind == COLLECTION]


def org_spaces(store: Store, org_id: str) -> list[Record]:
    return [r for kind, r in walk_tree(store, org_id) if kind == SPACE]


# ----- rendering --------------------------------------------------------------------------


def render_collection(store: Store, record: Record, base: str) -> dict[str, Any]:
    data = {
        "object": "collection",
        "id": record["id"],
        "title": record["title"],
        "description": record.get("description"),
        "organization": record["org"],
        "parent": record.get("parent"),
        "defaultLevel": record.get("defaultLevel", "read"),
        "urls": {
            "location": f"{base}/v1/collections/{record['id']}",
            "app": f"{base}/app/o/{record['org']}/c/{record['id']}/",
        },
        "permissions": {"view": True, "admin": True, "viewInviteLinks": True, "create": True},
    }
    return h.strip_none(data)


def space_urls(record: Record, base: str) -> dict[str, str]:
    urls = {
        "location": f"{base}/v1/spaces/{record['id']}",
        "app": f"{base}/app/o/{record['org']}/s/{record['id']}/",
    }
    if record.get("visibility") != "private":
        urls["published"] = f"{base}/pub/s/{record['id']}/"
    if record.get("visibility") == "public":
        urls["public"] = f"{base}/pub/s/{record['id']}/"
    return urls


def render_space(store: Store, record: Record, base: str) -> dict[str, Any]:
    data = {
        "object": "space",
        "id": record["id"],
        "title": record["title"],
        "emoji": record.get("emoji", ""),
        "visibility": record["visibility"],
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
        "deletedAt": record.get("deletedAt"),
        "editMode": record.get("editMode", "live"),
        "urls": space_urls(record, base),
        "organization": record["org"],
        "parent": record.get("parent"),
        "language": record.get("language"),
        "revision": record["revision"],
        "defaultLevel": record.get("defaultLevel", "read"),
        "mergeRules": {"type": "inherit"},
        "comments": record.get("comments", 0),
        "changeRequests": record.get("changeRequests", 0),
        "changeRequestsOpen": record.get("changeRequestsOpen", 0),
        "changeRequestsDraft": record.get("changeRequestsDraft", 0),
        "permissions": {
            "view": True,
            "access": True,
            "admin": True,
            "viewInviteLinks": True,
            "edit": record.get("editMode", "live") == "live",
            "triggerGitSync": False,
            "comment": True,
            "merge": True,
            "review": True,
            "installIntegration": True,
        },
    }
    return h.strip_none(data)
