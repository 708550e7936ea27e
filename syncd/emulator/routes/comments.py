"""Comments, replies and reactions on spaces and on change requests.

Both path families share one model: a `comment` record carries `space` and
`changeRequest` (None for comments on the space itself); a `comment-reply` record carries
its `comment`. Threads keep creation order in `store.orders[("comments", space, cr)]`
and `store.orders[("comment-replies", comment)]`, so lists never scan every comment.
A space's `comments` field counts its open (space-family) comments and is kept current here.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, forbidden, not_found
from syncd.emulator.routes.members import render_user
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces
from syncd.emulator.store import Record, Store, iso, parse_iso

routes = web.RouteTableDef()

COMMENT, REPLY = "comment", "comment-reply"
CHANGE_REQUEST = "change-request"
STATUSES = ("all", "open", "resolved")
FORMATS = ("document", "markdown")
ORDERS = ("asc", "desc")
REACTION_MAX = 50
SPACE_BASE = "/v1/spaces/{spaceId}/comments"
CR_BASE = "/v1/spaces/{spaceId}/change-requests/{changeRequestId}/comments"


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


def _permissions(store: Store, record: Record, user_id: str | None) -> dict[str, bool]:
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
        "permissions": _permissions(store, record, user_id),
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
        "permissions": _permissions(store, record, user_id),
    }
    return h.strip_none(data)


# ----- validation -------------------------------------------------------------------------


def _markdown(body: dict[str, Any], *, required: bool) -> str | None:
    """The `body` document's markdown: a non-empty string."""
    doc = h.obj(body, "body", required=required)
    if doc is None:
        return None
    markdown = doc.get("markdown")
    if not isinstance(markdown, str):
        raise bad_request("body.markdown: is required and must be a string")
    if not markdown.strip():
        raise bad_request("body.markdown: must not be empty")
    return markdown


def _reaction_list(body: dict[str, Any], name: str) -> list[str]:
    emojis = h.string_list(body, name, item_max_len=REACTION_MAX) or []
    if any(not e.strip() for e in emojis):
        raise bad_request(f"{name}: reactions must be non-empty emoji strings")
    return emojis


class _Update:
    """A validated PUT body for a comment or reply, applied only once all of it is valid."""

    def __init__(self, body: dict[str, Any], *, allow_resolved: bool) -> None:
        self.resolved = h.boolean(body, "resolved") if allow_resolved else None
        self.markdown = _markdown(body, required=False)
        self.added = _reaction_list(body, "addedReactions")
        self.removed = _reaction_list(body, "removedReactions")

    def apply(self, store: Store, record: Record, user_id: str) -> None:
        if self.markdown is not None:
            if record["postedBy"] != user_id:
                raise forbidden("body: only the author can edit a comment")
            if self.markdown != record["body"]:
                record["body"] = self.markdown
                record["editedAt"] = store.now_iso()
        react(store, record, user_id, self.added, self.removed)


# ----- route helpers ----------------------------------------------------------------------


class _Ctx:
    """What every comment route resolves first: store, caller, space, change request."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.store, self.user = h.store_of(request), h.user_of(request)
        self.space = live_space(self.store, request.match_info["spaceId"], self.user)
        ref = request.match_info.get("changeRequestId")
        self.change_request = find_change_request(self.store, self.space["id"], ref) if ref is not None else None
        self.cr_id = self.change_request["id"] if self.change_request else None
        self.base = h.base_url(request)
        self.fmt = h.query_choice(request, "format", FORMATS, default="markdown") or "markdown"

    def comment(self) -> Record:
        comment_id = self.request.match_info["commentId"]
        record = self.store.get(COMMENT, comment_id)
        if record is None or record["space"] != self.space["id"] or record.get("changeRequest") != self.cr_id:
            raise not_found(f"comment {comment_id!r} not found")
        return record

    def reply(self, comment: Record) -> Record:
        reply_id = self.request.match_info["commentReplyId"]
        record = self.store.get(REPLY, reply_id)
        if record is None or record["comment"] != comment["id"]:
            raise not_found(f"comment reply {reply_id!r} not found")
        return record

    def render(self, record: Record, pages: PageIndex | None = None) -> dict[str, Any]:
        return render_comment(self.store, record, self.base, fmt=self.fmt, user_id=self.user, pages=pages)

    def render_reply(self, record: Record) -> dict[str, Any]:
        return render_reply(self.store, record, self.base, fmt=self.fmt, user_id=self.user)

    def page_of_content(self, page_id: str) -> str:
        revision_id = content_revision(self.store, self.space, self.change_request)
        if page_id not in PageIndex(self.store).of(revision_id):
            raise bad_request(f"page: {page_id!r} is not a page of this content")
        return page_id


# ----- comments ---------------------------------------------------------------------------


async def list_comments(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    order = h.query_choice(request, "order", ORDERS, default="desc")
    status = h.query_choice(request, "status", STATUSES, default="all")
    target_page = h.query_text(request, "targetPage")
    authors = set(request.query.getall("authors", []))
    items = thread_comments(ctx.store, ctx.space["id"], ctx.cr_id)
    if status != "all":
        items = [c for c in items if c["status"] == status]
    if target_page is not None:
        items = [c for c in items if c.get("page") == target_page]
    if authors:
        items = [c for c in items if c["postedBy"] in authors]
    items = sorted(items, key=lambda c: parse_iso(c["postedAt"]))
    if order == "desc":
        items.reverse()
    pages = PageIndex(ctx.store)
    return h.list_answer(request, items, lambda c: ctx.render(c, pages))


async def post_comment(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    body = await h.json_body(request)
    markdown = _markdown(body, required=True)
    page = h.text(body, "page", min_len=1, nullable=True)
    node = h.text(body, "node", min_len=1, nullable=True)
    if page is not None:
        ctx.page_of_content(page)
    record = new_comment(ctx.store, ctx.space, markdown or "", ctx.user, ctx.change_request, page=page, node=node)
    return h.json_answer(ctx.render(record))


async def get_comment(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    return h.json_answer(ctx.render(ctx.comment()))


async def put_comment(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    record = ctx.comment()
    update = _Update(await h.json_body(request), allow_resolved=True)
    update.apply(ctx.store, record, ctx.user)
    if update.resolved is not None:
        set_resolved(ctx.store, record, update.resolved, ctx.user)
    return h.json_answer(ctx.render(record))


async def delete_comment_route(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    record = ctx.comment()
    if not _permissions(ctx.store, record, ctx.user)["delete"]:
        raise forbidden("only the author or an organization admin can delete a comment")
    delete_comment(ctx.store, record)
    return h.no_content()


# ----- replies ----------------------------------------------------------------------------


async def list_replies(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    comment = ctx.comment()
    return h.list_answer(request, comment_replies(ctx.store, comment["id"]), ctx.render_reply)


async def post_reply(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    comment = ctx.comment()
    markdown = _markdown(await h.json_body(request), required=True)
    record = new_reply(ctx.store, comment, markdown or "", ctx.user)
    return h.json_answer(ctx.render_reply(record))


async def get_reply(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    return h.json_answer(ctx.render_reply(ctx.reply(ctx.comment())))


async def put_reply(request: web.Request) -> web.Response:
    """Edit or react to a reply; in a change request `resolved` resolves the whole thread."""
    ctx = _Ctx(request)
    comment = ctx.comment()
    record = ctx.reply(comment)
    update = _Update(await h.json_body(request), allow_resolved=ctx.change_request is not None)
    update.apply(ctx.store, record, ctx.user)
    if update.resolved is not None:
        set_resolved(ctx.store, comment, update.resolved, ctx.user)
    return h.json_answer(ctx.render_reply(record))


async def delete_reply_route(request: web.Request) -> web.Response:
    ctx = _Ctx(request)
    comment = ctx.comment()
    record = ctx.reply(comment)
    if not _permissions(ctx.store, record, ctx.user)["delete"]:
        raise forbidden("only the author or an organization admin can delete a reply")
    delete_reply(ctx.store, comment, record)
    return h.no_content()


Handler = Callable[[web.Request], Any]
_OPERATIONS: list[tuple[str, str, Handler]] = [
    ("GET", "", list_comments),
    ("POST", "", post_comment),
    ("GET", "/{commentId}", get_comment),
    ("PUT", "/{commentId}", put_comment),
    ("DELETE", "/{commentId}", delete_comment_route),
    ("GET", "/{commentId}/replies", list_replies),
    ("POST", "/{commentId}/replies", post_reply),
    ("GET", "/{commentId}/replies/{commentReplyId}", get_reply),
    ("PUT", "/{commentId}/replies/{commentReplyId}", put_reply),
    ("DELETE", "/{commentId}/replies/{commentReplyId}", delete_reply_route),
]
for _base in (SPACE_BASE, CR_BASE):
    for _method, _sub, _handler in _OPERATIONS:
        routes.route(_method, _base + _sub)(_handler)


# ----- generator and canonical dump -------------------------------------------------------

COMMENT_TEXTS = (
    "Should we mention the rate limits here?",
    "This example is out of date since the last release.",
    "Typo in the second paragraph: \"recieve\".",
    "Can we add a screenshot of the settings page?",
    "The link to the API reference is broken.",
    "I think this section belongs under *Getting started*.",
    "Please double-check the default value of `timeout`.",
    "Nice write-up! Maybe add a short summary at the top.",
    "Is this still true for self-hosted installations?",
    "We need a warning about data loss before this step.",
)
REPLY_TEXTS = (
    "Good catch, fixing it.",
    "Agreed, I'll update it this week.",
    "Done in the latest change request.",
    "Not sure: let's ask the platform team.",
    "I added a note, can you review?",
)
REACTION_EMOJIS = ("👍", "🎉", "❤️", "👀", "🚀")


def _seed_thread(
    store: Store,
    rng: random.Random,
    space: Record,
    change_request: Record | None,
    users: list[str],
    count: int,
) -> None:
    """`count` comments on a space or change request, with replies, resolutions and reactions."""
    revision = store.get(revisions.REVISION, content_revision(store, space, change_request))
    page_ids = [p["id"] for p in revisions.walk(revision["pages"])] if revision else []
    now = store.now()
    for _ in range(count):
        posted = now - timedelta(days=rng.randint(1, 90), minutes=rng.randint(0, 1439))
        page = rng.choice(page_ids) if page_ids and rng.random() < 0.8 else None
        comment = new_comment(
            store, space, rng.choice(COMMENT_TEXTS), rng.choice(users), change_request, page=page, postedAt=iso(posted)
        )
        at = posted
        for _ in range(rng.randint(0, 2)):
            at += timedelta(minutes=rng.randint(5, 3000))
            new_reply(store, comment, rng.choice(REPLY_TEXTS), rng.choice(users), postedAt=iso(at))
        if rng.random() < 0.3:
            set_resolved(store, comment, True, rng.choice(users))
            comment["resolvedAt"] = iso(at + timedelta(hours=rng.randint(1, 48)))
        if rng.random() < 0.4:
            for user_id in rng.sample(users, rng.randint(1, min(3, len(users)))):
                react(store, comment, user_id, [rng.choice(REACTION_EMOJIS)], [])


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """Comments on about half the spaces (mostly on pages) and on about half the change requests."""
    count = params.get("comments", 0)
    users = list(store.members.get(org_id, {}))
    if not count or not users:
        return
    requests_by_space: dict[str, list[Record]] = defaultdict(list)
    for change_request in store.tables[CHANGE_REQUEST].values():
        requests_by_space[change_request.get("space", "")].append(change_request)
    for space in org_spaces(store, org_id):
        if rng.random() < 0.5:
            _seed_thread(store, rng, space, None, users, count)
        for change_request in requests_by_space.get(space["id"], ()):
            if rng.random() < 0.5:
                _seed_thread(store, rng, space, change_request, users, rng.randint(1, count))


def _org_threads(store: Store, org_id: str) -> list[tuple[str, str | None]]:
    """(space id, change request id or None) of every comment thread of the organization."""
    spaces = org_spaces(store, org_id)
    ids = {s["id"] for s in spaces}
    threads: list[tuple[str, str | None]] = [(s["id"], None) for s in spaces]
    threads += [(cr["space"], cr["id"]) for cr in store.tables[CHANGE_REQUEST].values() if cr.get("space") in ids]
    return threads


def org_comments(store: Store, org_id: str) -> list[Record]:
    """Every comment of the organization's live spaces and their change requests, oldest first."""
    out: list[Record] = []
    for space_id, cr_id in _org_threads(store, org_id):
        out.extend(sorted(thread_comments(store, space_id, cr_id), key=lambda c: parse_iso(c["postedAt"])))
    return out


def org_replies(store: Store, org_id: str) -> list[Record]:
    return [reply for comment in org_comments(store, org_id) for reply in comment_replies(store, comment["id"])]


def _dump_comment(store: Store, record: Record, base: str) -> dict[str, Any]:
    """A comment as a copy must reproduce it: the target page only (ids of revisions,
    spaces and nodes are per tenant; the parent path already names the space)."""
    data = render_comment(store, record, base)
    page = data["target"].get("page")
    data["target"] = {"page": {"id": page["id"]}} if page else {}
    return data


def _label(data: dict[str, Any]) -> str:
    return data["body"]["markdown"][:40]


_PEOPLE_AND_TIMES = frozenset({"postedBy", "postedAt", "editedAt", "reactions"})

DUMP = [
    DumpKind(
        name=COMMENT,
        records=org_comments,
        render=_dump_comment,
        label=_label,
        parent=lambda store, r: (CHANGE_REQUEST, r["changeRequest"]) if r.get("changeRequest") else (SPACE, r["space"]),
        refs={"target.page": "page"},
        volatile=_PEOPLE_AND_TIMES | {"repliers", "resolvedBy", "resolvedAt"},
    ),
    DumpKind(
        name=REPLY,
        records=org_replies,
        render=render_reply,
        label=_label,
        parent=lambda store, r: (COMMENT, r["comment"]),
        volatile=_PEOPLE_AND_TIMES,
    ),
]
