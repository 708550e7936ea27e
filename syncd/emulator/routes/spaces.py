"""Collections and spaces: the organization's content tree.

Collections and spaces under one parent share a single sibling order (the move API names
both as `{type: "space", space: id}`); the key is `("tree", org_id, parent_id or "")`.
Deleted spaces keep their record with `deletedAt` for the 7 days they can be restored.

Profile rows played here: a deleted space still listed (`deleted_spaces_listed`: in the
organization's space listing and in its collection's, after the live ones, with `deletedAt`),
a collection delete refused while the collection holds something (`collection_delete_refused`),
and a transfer that gives what it moves new ids (`transfer_new_id`, `rekey`).

The records, lookups and renderings other families share are in `space_model`.
"""

from __future__ import annotations

import random
from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.profile import land, profile_of
from syncd.emulator.routes.space_model import (
    COLLECTION,
    SPACE,
    deleted_spaces,
    live_space,
    new_collection,
    new_space,
    org_collections,
    org_spaces,
    purge_expired,
    render_collection,
    render_space,
    tree_children,
    tree_key,
    walk_tree,
)
from syncd.emulator.store import ROLES, Record, Store

routes = web.RouteTableDef()

EDIT_MODES = ("live", "locked")
SPACE_CONTENT_KINDS = ("change-request", "comment", "comment-reply")
"""Kinds that live inside a space and follow it to another organization."""
FIELD_VALUE = "space-custom-field-value"
EMOJI_MAX = 50
TITLE_MAX = 50


# ----- moves, transfers and new ids --------------------------------------------------------


def _descendants(store: Store, collection: Record) -> list[tuple[str, Record]]:
    return walk_tree(store, collection["org"], collection["id"])


def _move_in_tree(store: Store, record: Record, body: dict[str, Any]) -> None:
    """Apply a move body (`parent`, `position`) to a collection or space."""
    org_id = record["org"]
    new_parent = record.get("parent")
    if "parent" in body:
        new_parent = body["parent"]
        if new_parent is not None:
            if not isinstance(new_parent, str):
                raise bad_request("parent: must be a collection id or null")
            target = store.get(COLLECTION, new_parent)
            if target is None or target["org"] != org_id:
                raise bad_request(f"parent: collection {new_parent!r} not found in this organization")
            if record["id"] in store.tables[COLLECTION]:
                inside = {r["id"] for _, r in _descendants(store, record)} | {record["id"]}
                if new_parent in inside:
                    raise bad_request("parent: a collection cannot move into itself or its descendants")
    before, after = h.position(body, "space", "space")
    key = tree_key(org_id, new_parent)
    for ref in (before, after):
        if ref is not None and ref not in store.orders[key]:
            raise bad_request(f"position: {ref!r} is not a sibling under the target parent")
    store.unplace(tree_key(org_id, record.get("parent")), record["id"])
    record["parent"] = new_parent
    store.place(key, record["id"], before=before, after=after)
    if record["id"] in store.tables[SPACE]:
        if new_parent is None and record.get("visibility") == "in-collection":
            record["visibility"] = "private"
        record["updatedAt"] = store.now_iso()


def _transfer(store: Store, user_id: str, record: Record, org_id: str, collection_id: str | None) -> None:
    """Move a collection (with everything under it) or a space to another organization."""
    store.org_for(user_id, org_id)
    store.require_admin(user_id, org_id)
    store.require_admin(user_id, record["org"])
    if collection_id is not None:
        target = store.get(COLLECTION, collection_id)
        if target is None or target["org"] != org_id:
            raise bad_request(f"collection: {collection_id!r} not found in organization {org_id!r}")
    moving = [record] + ([r for _, r in _descendants(store, record)] if record["id"] in store.tables[COLLECTION] else [])
    old_org = record["org"]
    store.unplace(tree_key(old_org, record.get("parent")), record["id"])
    for item in moving[1:]:
        store.orders[tree_key(org_id, item["parent"])] = store.orders.pop(tree_key(old_org, item["parent"]), [])
    for item in moving:
        item["org"] = org_id
    record["parent"] = collection_id
    store.place(tree_key(org_id, collection_id), record["id"])
    for item in moving:
        if item["id"] in store.tables[SPACE]:
            item["updatedAt"] = store.now_iso()
    moved_ids = {m["id"] for m in moving}
    for kind in SPACE_CONTENT_KINDS:
        for dependent in store.tables[kind].values():
            if dependent.get("space") in moved_ids:
                dependent["org"] = org_id
    # Custom field values name fields of the old organization: they do not travel.
    for key in [k for k, v in store.tables[FIELD_VALUE].items() if v.get("space") in moved_ids]:
        store.remove(FIELD_VALUE, key)


def rekey(store: Store, moved: list[Record]) -> None:
    """Give each moved collection or space a new id (`transfer_new_id`): its record, the
    sibling orders and every reference to it (a child's `parent`, what lives in a space, a
    site-space, a team's or an integration's spaces) follow; the old id is unknown after."""
    renamed: dict[str, str] = {}
    for item in moved:
        kind = COLLECTION if item["id"] in store.tables[COLLECTION] else SPACE
        new_id = store.new_id()
        renamed[item["id"]] = new_id
        store.tables[kind][new_id] = store.tables[kind].pop(item["id"])
        item["id"] = new_id
    if not renamed:
        return

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return renamed.get(value, value)
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {renamed.get(k, k) if isinstance(k, str) else k: swap(v) for k, v in value.items()}
        return value

    for kind, table in store.tables.items():
        if kind == revisions.REVISION:
            continue  # content holds no space or collection id
        for record in table.values():
            for field, value in list(record.items()):
                if field != "id":
                    record[field] = swap(value)
    store.orders = type(store.orders)(store.orders.default_factory, {tuple(swap(list(k))): swap(v) for k, v in store.orders.items()})


# ----- validation -------------------------------------------------------------------------


def _space_fields(body: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if "title" in body:
        fields["title"] = h.text(body, "title", max_len=TITLE_MAX)
    if "emoji" in body:
        fields["emoji"] = h.text(body, "emoji", max_len=EMOJI_MAX)
    if "editMode" in body:
        fields["editMode"] = h.choice(body, "editMode", EDIT_MODES)
    if "defaultLevel" in body:
        fields["defaultLevel"] = h.choice(body, "defaultLevel", ROLES)
    return fields


def _parent_collection(store: Store, org_id: str, body: dict[str, Any]) -> str | None:
    parent = h.text(body, "parent", nullable=True)
    if parent is not None:
        collection = store.get(COLLECTION, parent)
        if collection is None or collection["org"] != org_id:
            raise bad_request(f"parent: collection {parent!r} not found in this organization")
    return parent


# ----- collections ------------------------------------------------------------------------


@routes.get("/v1/orgs/{organizationId}/collections")
async def list_collections(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    nested = h.query_bool(request, "nested", default=True)
    if nested:
        items = org_collections(store, org["id"])
    else:
        items = [r for r in tree_children(store, org["id"], None) if r["id"] in store.tables[COLLECTION]]
    base = h.base_url(request)
    return h.list_answer(request, items, lambda r: render_collection(store, r, base))


@routes.post("/v1/orgs/{organizationId}/collections")
async def create_collection(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    body = await h.json_body(request, required=False)
    title = profile_of(request).created_title(h.text(body, "title", max_len=50, default="Untitled")) or "Untitled"
    parent = _parent_collection(store, org["id"], body)
    record = new_collection(store, org["id"], title, parent)
    land(store, profile_of(request), tree_key(org["id"], parent), record["id"])
    return h.json_answer(render_collection(store, record, h.base_url(request)), status=201)


def _collection(request: web.Request) -> Record:
    return h.store_of(request).visible(COLLECTION, request.match_info["collectionId"], h.user_of(request), "collection")


@routes.get("/v1/collections/{collectionId}")
async def get_collection(request: web.Request) -> web.Response:
    return h.json_answer(render_collection(h.store_of(request), _collection(request), h.base_url(request)))


@routes.patch("/v1/collections/{collectionId}")
async def patch_collection(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _collection(request)
    body = await h.json_body(request)
    if "title" in body:
        record["title"] = h.text(body, "title", max_len=50)
    if "description" in body:
        record["description"] = h.text(body, "description", max_len=100, nullable=True)
    if "defaultLevel" in body:
        record["defaultLevel"] = h.choice(body, "defaultLevel", ROLES)
    return h.json_answer(render_collection(store, record, h.base_url(request)))


@routes.delete("/v1/collections/{collectionId}")
async def delete_collection(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _collection(request)
    held = tree_children(store, record["org"], record["id"])
    if held and profile_of(request).collection_delete_refused:
        raise bad_request(
            f"collection {record['id']!r} is not empty ({len(held)} space(s) or collection(s)): move or delete them first"
        )
    now = store.now_iso()
    for kind, item in reversed(_descendants(store, record)):
        if kind == SPACE:
            item["deletedAt"] = now
            store.unplace(tree_key(item["org"], item["parent"]), item["id"])
            item["parent"] = None
        else:
            store.remove(COLLECTION, item["id"])
            store.orders.pop(tree_key(item["org"], item["id"]), None)
    store.unplace(tree_key(record["org"], record.get("parent")), record["id"])
    store.orders.pop(tree_key(record["org"], record["id"]), None)
    store.remove(COLLECTION, record["id"])
    return h.no_content()


@routes.get("/v1/collections/{collectionId}/spaces")
async def list_collection_spaces(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _collection(request)
    spaces = [r for r in tree_children(store, record["org"], record["id"]) if r["id"] in store.tables[SPACE]]
    if profile_of(request).deleted_spaces_listed:
        spaces += deleted_spaces(store, record["org"], record["id"])
    base = h.base_url(request)
    return h.list_answer(request, spaces, lambda r: render_space(store, r, base))


@routes.post("/v1/collections/{collectionId}/move")
async def move_collection(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _collection(request)
    body = await h.json_body(request, required=False)
    _move_in_tree(store, record, body)
    return h.json_answer(render_collection(store, record, h.base_url(request)))


@routes.post("/v1/collections/{collectionId}/transfer")
async def transfer_collection(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _collection(request)
    body = await h.json_body(request)
    org_id = h.text(body, "organization", required=True)
    _transfer(store, h.user_of(request), record, org_id, None)
    if profile_of(request).transfer_new_id:
        rekey(store, [record] + [r for _, r in _descendants(store, record)])
    land(store, profile_of(request), tree_key(org_id, None), record["id"])
    return h.json_answer(render_collection(store, record, h.base_url(request)))


# ----- spaces -----------------------------------------------------------------------------


@routes.get("/v1/orgs/{organizationId}/spaces")
async def list_org_spaces(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    spaces = org_spaces(store, org["id"])
    if profile_of(request).deleted_spaces_listed:
        spaces += deleted_spaces(store, org["id"])
    base = h.base_url(request)
    return h.list_answer(request, spaces, lambda r: render_space(store, r, base))


@routes.post("/v1/orgs/{organizationId}/spaces")
async def create_space(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    body = await h.json_body(request, required=False)
    fields = _space_fields(body)
    title = profile_of(request).created_title(fields.pop("title", None) or "") or "Untitled"
    parent = _parent_collection(store, org["id"], body)
    if "language" in body:
        fields["language"] = h.text(body, "language", max_len=10)
    record = new_space(store, org["id"], title, parent, **fields)
    land(store, profile_of(request), tree_key(org["id"], parent), record["id"])
    base = h.base_url(request)
    response = h.json_answer(render_space(store, record, base), status=201)
    response.headers["Location"] = f"{base}/v1/spaces/{record['id']}"
    return response


def _space(request: web.Request) -> Record:
    return live_space(h.store_of(request), request.match_info["spaceId"], h.user_of(request))


@routes.get("/v1/spaces/{spaceId}")
async def get_space(request: web.Request) -> web.Response:
    store = h.store_of(request)
    record = store.visible(SPACE, request.match_info["spaceId"], h.user_of(request), "space")
    if purge_expired(store, record):
        raise not_found(f"space {record['id']!r} not found")
    return h.json_answer(render_space(store, record, h.base_url(request)))


@routes.patch("/v1/spaces/{spaceId}")
async def patch_space(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _space(request)
    body = await h.json_body(request)
    fields = _space_fields(body)
    if fields:
        record.update(fields)
        record["updatedAt"] = store.now_iso()
    return h.json_answer(render_space(store, record, h.base_url(request)))


@routes.delete("/v1/spaces/{spaceId}")
async def delete_space(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _space(request)
    record["deletedAt"] = store.now_iso()
    store.unplace(tree_key(record["org"], record.get("parent")), record["id"])
    return h.no_content()


@routes.post("/v1/spaces/{spaceId}/restore")
async def restore_space(request: web.Request) -> web.Response:
    store = h.store_of(request)
    record = store.visible(SPACE, request.match_info["spaceId"], h.user_of(request), "space")
    if purge_expired(store, record):
        raise not_found(f"space {record['id']!r} not found: deleted more than 7 days ago")
    if not record.get("deletedAt"):
        raise bad_request("space is not deleted")
    record.pop("deletedAt", None)
    parent = record.get("parent")
    if parent is not None and store.get(COLLECTION, parent) is None:
        record["parent"] = parent = None
    store.place(tree_key(record["org"], parent), record["id"])
    record["updatedAt"] = store.now_iso()
    return h.json_answer(render_space(store, record, h.base_url(request)))


@routes.post("/v1/spaces/{spaceId}/duplicate")
async def duplicate_space(request: web.Request) -> web.Response:
    """A copy of the space under the same parent; its title and place follow the profile."""
    store, record, profile = h.store_of(request), _space(request), profile_of(request)
    revision = revisions.copy_into(store, record["revision"], fresh_ids=True)
    copy_fields = {k: record[k] for k in ("emoji", "visibility", "editMode", "defaultLevel", "language") if k in record}
    title = profile.duplicate_title(record["title"], TITLE_MAX)
    duplicate = new_space(store, record["org"], title, record.get("parent"), revision=revision["id"], **copy_fields)
    key = tree_key(record["org"], record.get("parent"))
    if profile.duplicate_first:
        store.place(key, duplicate["id"], before=store.orders[key][0])
    else:
        store.place(key, duplicate["id"], after=record["id"])
    return h.json_answer(render_space(store, duplicate, h.base_url(request)), status=201)


@routes.post("/v1/spaces/{spaceId}/move")
async def move_space(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _space(request)
    body = await h.json_body(request, required=False)
    _move_in_tree(store, record, body)
    return h.json_answer(render_space(store, record, h.base_url(request)))


@routes.post("/v1/spaces/{spaceId}/transfer")
async def transfer_space(request: web.Request) -> web.Response:
    store, record = h.store_of(request), _space(request)
    body = await h.json_body(request)
    org_id = h.text(body, "organization", required=True)
    collection = h.text(body, "collection", nullable=True)
    _transfer(store, h.user_of(request), record, org_id, collection)
    if profile_of(request).transfer_new_id:
        rekey(store, [record])
    land(store, profile_of(request), tree_key(org_id, collection), record["id"])
    if collection is None and record.get("visibility") == "in-collection":
        record["visibility"] = "private"
    return h.json_answer(render_space(store, record, h.base_url(request)))


# ----- generator and canonical dump -------------------------------------------------------

SPACE_EMOJIS = ("1f4d8", "1f680", "1f4a1", "2699", "1f9ea", "1f512", "")
WORDS = (
    "Platform Billing Onboarding Security Analytics Mobile Payments Search Identity Storage "
    "Network Reporting Compliance Design Support Release Data Integrations Admin Developer"
).split()


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """Nested collections (up to 3 levels) and spaces, some at the root, some inside."""
    collections: list[Record] = []
    for i in range(params.get("collections", 0)):
        parent = rng.choice(collections)["id"] if collections and rng.random() < 0.5 else None
        if parent and store.get(COLLECTION, parent).get("parent") and rng.random() < 0.5:
            parent = None
        title = f"{rng.choice(WORDS)} {i + 1}"
        collections.append(
            new_collection(store, org_id, title, parent, description=f"Everything about {title.lower()}", defaultLevel=rng.choice(("read", "comment", "edit")))
        )
    for i in range(params.get("spaces", 0)):
        parent = rng.choice(collections)["id"] if collections and rng.random() < 0.7 else None
        visibility = rng.choice(("public", "unlisted", "private", "share-link") + (("in-collection",) if parent else ()))
        new_space(
            store,
            org_id,
            f"{rng.choice(WORDS)} guide {i + 1}",
            parent,
            emoji=rng.choice(SPACE_EMOJIS),
            visibility=visibility,
            defaultLevel=rng.choice(("read", "comment", "edit")),
        )


def _tree_parent(store: Store, record: Record) -> tuple[str, str] | None:
    return (COLLECTION, record["parent"]) if record.get("parent") else None


DUMP = [
    DumpKind(
        name=COLLECTION,
        records=org_collections,
        render=render_collection,
        label=lambda data: data["title"],
        parent=_tree_parent,
        refs={"parent": COLLECTION},
    ),
    DumpKind(
        name=SPACE,
        records=org_spaces,
        render=render_space,
        label=lambda data: data["title"],
        parent=_tree_parent,
        refs={"parent": COLLECTION},
        volatile=frozenset({"revision", "deletedAt", "comments", "changeRequests", "changeRequestsOpen", "changeRequestsDraft"}),
    ),
]
