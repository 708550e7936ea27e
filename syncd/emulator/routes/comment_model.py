"""Comments, replies and reactions on spaces and on change requests.

Both path families share one model: a `comment` record carries `space` and
`changeRequest` (None for comments on the space itself); a `comment-reply` record carries
its `comment`. Threads keep creation order in `store.orders[("comments", space, cr)]`
and `store.orders[("comment-replies", comment)]`, so lists never scan every comment.
A space's `comments` field counts its open (space-family) comments and is kept current here.
"""

from __future__ import annotations

from typing import Any

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.errors import not_found
from syncd.emulator.routes.members import render_user
from syncd.emulator.routes.space_model import SPACE
from syncd.emulator.store import Record, Store

COMMENT, REPLY = "comment", "comment-reply"
CHANGE_REQUEST = "change-request"


# ----- model ------------------------------------------------------------------------------


def thread_key(space_id: str, change_request_id: str | None) -> tuple[str, ...]:
    return ("comments", space_id, change_request_id or "")


def replies_key(comment_id: str) -> tuple[str, ...]:
    return ("comment-replies", comment_id)


def find_change_request(store: Store, space_id: str, ref: str) -> Record:
    """A change request of the space, addressed by id or by number; 404 otherwise."""
    for record in store.tables[CHANGE_REQUEST].values():
        if record.get("space") == space_id and (record["id"] == ref or str(record.get("number")) == ref):
            return record
    raise not_found(f"change request {ref!r} not found in space {space_id!r}")


def content_revision(store: Store, space: Record, change_request: Record | None) -> str:
    """The revision comments are posted against: the change request's, else the space's."""
    if change_request is not None and change_request.get("revision"):
        return change_request["revision"]
    return space["revision"]


def _count_open(store: Store, comment: Record, delta: int) -> None:
    """Keep the space's `comments` (open comments on the space itself) current."""
    if comment.get("changeRequest") is not None or comment["status"] != "open":
        return
    space = store.get(SPACE, comment["space"])
    if space is not None:
        space["comments"] = max(0, space.get("comments", 0) + delta)


def new_comment(
    store: Store,
    space: Record,
    markdown: str,
    user_id: str,
    change_request: Record | None = None,
    page: str | None = None,
    node: str | None = None,
    **fields: Any,
) -> Record:
    """An open comment, appended to its thread (pass `status`/`postedAt` in `fields` to seed)."""
    record: Record = {
        "org": space["org"],
        "space": space["id"],
        "changeRequest": change_request["id"] if change_request else None,
        "postedBy": user_id,
        "postedAt": store.now_iso(),
        "body": markdown,
        "status": "open",
        "reactions": [],
        "replies": 0,
        "page": page,
        "node": node,
        "revision": content_revision(store, space, change_request),
    }
    record.update(fields)
    store.add(COMMENT, record)
    store.orders[thread_key(space["id"], record["changeRequest"])].append(record["id"])
    _count_open(store, record, +1)
    return record


def new_reply(store: Store, comment: Record, markdown: str, user_id: str, **fields: Any) -> Record:
    record: Record = {
        "org": comment["org"],
        "space": comment["space"],
        "changeRequest": comment.get("changeRequest"),
        "comment": comment["id"],
        "postedBy": user_id,
        "postedAt": store.now_iso(),
        "body": markdown,
        "reactions": [],
    }
    record.update(fields)
    store.add(REPLY, record)
    store.orders[replies_key(comment["id"])].append(record["id"])
    comment["replies"] = comment.get("replies", 0) + 1
    return record


def thread_comments(store: Store, space_id: str, change_request_id: str | None) -> list[Record]:
    """Comments of a space or change request in creation order."""
    return [store.tables[COMMENT][cid] for cid in store.orders.get(thread_key(space_id, change_request_id), ())]


def comment_replies(store: Store, comment_id: str) -> list[Record]:
    return [store.tables[REPLY][rid] for rid in store.orders.get(replies_key(comment_id), ())]


def set_resolved(store: Store, comment: Record, resolved: bool, user_id: str) -> None:
    """Resolve or reopen a comment; the space's open-comment count follows."""
    if resolved == (comment["status"] == "resolved"):
        return
    _count_open(store, comment, -1)
    if resolved:
        comment.update(status="resolved", resolvedAt=store.now_iso(), resolvedBy=user_id)
    else:
        comment["status"] = "open"
        comment.pop("resolvedAt", None)
        comment.pop("resolvedBy", None)
    _count_open(store, comment, +1)


def delete_comment(store: Store, comment: Record) -> None:
    """Remove a comment with its replies."""
    _count_open(store, comment, -1)
    for reply_id in store.orders.pop(replies_key(comment["id"]), []):
        store.remove(REPLY, reply_id)
    store.unplace(thread_key(comment["space"], comment.get("changeRequest")), comment["id"])
    store.remove(COMMENT, comment["id"])


def delete_reply(store: Store, comment: Record, reply: Record) -> None:
    store.unplace(replies_key(comment["id"]), reply["id"])
    store.remove(REPLY, reply["id"])
    comment["replies"] = max(0, comment.get("replies", 0) - 1)


def react(store: Store, record: Record, user_id: str, added: list[str], removed: list[str]) -> None:
    """Add then remove the user's reactions; emojis nobody reacts with any more disappear."""
    reactions: list[Record] = record.setdefault("reactions", [])
    now = store.now_iso()
    for emoji in added:
        entry = next((r for r in reactions if r["emoji"] == emoji), None)
        if entry is None:
            entry = {"emoji": emoji, "users": []}
            reactions.append(entry)
        if all(u["user"] != user_id for u in entry["users"]):
            entry["users"].append({"user": user_id, "reactedAt": now})
    for emoji in removed:
        for entry in reactions:
            if entry["emoji"] == emoji:
                entry["users"] = [u for u in entry["users"] if u["user"] != user_id]
    record["reactions"] = [r for r in reactions if r["users"]]


# ----- rendering --------------------------------------------------------------------------


class PageIndex:
    """Pages of revisions by id with their paths, memoized for one batch of renders
    (revisions are immutable, so a revision's index never goes stale)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._by_revision: dict[str, dict[str, tuple[Record, str]]] = {}

    def of(self, revision_id: str) -> dict[str, tuple[Record, str]]:
        if revision_id not in self._by_revision:
            index: dict[str, tuple[Record, str]] = {}
            revision = self.store.get(revisions.REVISION, revision_id)
            stack = [(page, "") for page in reversed(revision["pages"])] if revision else []
            while stack:
                page, prefix = stack.pop()
                path = f"{prefix}{page.get('slug') or revisions.slugify(page.get('title', ''))}"
                index[page["id"]] = (page, path)
                stack.extend((child, path + "/") for child in reversed(page.get("pages", [])))
            self._by_revision[revision_id] = index
        return self._by_revision[revision_id]


def _current_revision(store: Store, comment: Record) -> str | None:
    space = store.get(SPACE, comment["space"])
    change_request = store.get(CHANGE_REQUEST, comment["changeRequest"]) if comment.get("changeRequest") else None
    return content_revision(store, space, change_request) if space else None


def _target(store: Store, record: Record, pages: PageIndex) -> dict[str, Any]:
    target: dict[str, Any] = {"space": record["space"], "revision": record["revision"]}
    if record.get("changeRequest"):
        target["changeRequest"] = record["changeRequest"]
    if record.get("node"):
        target["node"] = {"id": record["node"]}
    if record.get("page"):
        found = pages.of(record["revision"]).get(record["page"])
        current = _current_revision(store, record)
        outdated = current is None or record["page"] not in pages.of(current)
        if found is None:
            target["page"] = {"id": record["page"], "outdated": outdated}
        else:
            page, path = found
            target["page"] = h.strip_none(
                {
                    "id": page["id"],
                    "title": page.get("title"),
                    "emoji": page.get("emoji"),
                    "icon": page.get("icon"),
                    "createdAt": page.get("createdAt"),
                    "updatedAt": page.get("updatedAt"),
                    "path": path,
                    "outdated": outdated,
                }
            )
    return target


def render_body(markdown: str, fmt: str = "markdown") -> dict[str, Any]:
    """`{markdown}`, or with format=document a JSON document of one paragraph per block."""
    if fmt != "document":
        return {"markdown": markdown}
    nodes = [
        {
            "object": "block",
            "type": "paragraph",
            "data": {},
            "nodes": [{"object": "text", "leaves": [{"object": "leaf", "text": block, "marks": []}]}],
        }
        for block in (b.strip() for b in markdown.split("\n\n"))
        if block
    ]
    return {"document": {"object": "document", "data": {}, "nodes": nodes}}


def _reactions(store: Store, record: Record, base: str) -> list[dict[str, Any]]:
    return [
        {
            "emoji": r["emoji"],
            "count": len(r["users"]),
            "users": [{"user": render_user(store, u["user"], base), "reactedAt": u["reactedAt"]} for u in r["users"]],
        }
        for r in record.get("reactions", [])
    ]


def permissions(store: Store, record: Record, user_id: str | None) -> dict[str, bool]:
    own = user_id is None or record["postedBy"] == user_id
    admin = user_id is None or store.role_in(user_id, record["org"]) == "admin"
    return {"view": True, "edit": own, "reply": True, "delete": own or admin}


def comment_location(record: Record, base: str) -> str:
    if record.get("changeRequest"):
        return f"{base}/v1/spaces/{record['space']}/change-requests/{record['changeRequest']}/comments/{record['id']}"
    return f"{base}/v1/spaces/{record['space']}/comments/{record['id']}"


def _repliers(store: Store, record: Record, base: str) -> list[dict[str, Any]]:
    counts: dict[str, list[Any]] = {}
    for reply in comment_replies(store, record["id"]):
        entry = counts.setdefault(reply["postedBy"], [0, reply["postedAt"]])
        entry[0] += 1
        entry[1] = max(entry[1], reply.get("editedAt") or reply["postedAt"])
    return [{"user": render_user(store, uid, base), "count": n, "updatedAt": at} for uid, (n, at) in counts.items()]


def render_comment(
    store: Store,
    record: Record,
    base: str,
    *,
    fmt: str = "markdown",
    user_id: str | None = None,
    pages: PageIndex | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "object": "comment",
        "id": record["id"],
        "postedBy": render_user(store, record["postedBy"], base),
        "postedAt": record["postedAt"],
        "editedAt": record.get("editedAt"),
        "reactions": _reactions(store, record, base),
        "replies": record.get("replies", 0),
        "repliers": _repliers(store, record, base),
        "body": render_body(record["body"], fmt),
        "target": _target(store, record, pages or PageIndex(store)),
        "urls": {"location": comment_location(record, base)},
        "permissions": permissions(store, record, user_id),
        "status": record["status"],
    }
    if record["status"] == "resolved":
        data["resolvedAt"] = record.get("resolvedAt")
        data["resolvedBy"] = render_user(store, record["resolvedBy"], base) if record.get("resolvedBy") else None
    return h.strip_none(data)


def render_reply(
    store: Store, record: Record, base: str, *, fmt: str = "markdown", user_id: str | None = None
) -> dict[str, Any]:
    parent = store.get(COMMENT, record["comment"]) or record
    data = {
        "object": "comment-reply",
        "id": record["id"],
        "postedBy": render_user(store, record["postedBy"], base),
        "postedAt": record["postedAt"],
        "editedAt": record.get("editedAt"),
        "reactions": _reactions(store, record, base),
        "body": render_body(record["body"], fmt),
        "urls": {"location": f"{comment_location(parent, base)}/replies/{record['id']}"},
        "permissions": permissions(store, record, user_id),
    }
    return h.strip_none(data)
