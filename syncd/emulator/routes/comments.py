"""Comments, replies and reactions on spaces and on change requests: the routes of both path
families, the generator's threads and their dump kinds. The model the two families share and
its rendering are in `comment_model`."""

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
from syncd.emulator.routes.comment_model import (
    CHANGE_REQUEST,
    COMMENT,
    REPLY,
    PageIndex,
    comment_replies,
    content_revision,
    delete_comment,
    delete_reply,
    find_change_request,
    new_comment,
    new_reply,
    permissions,
    react,
    render_comment,
    render_reply,
    set_resolved,
    thread_comments,
)
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces
from syncd.emulator.store import Record, Store, iso, parse_iso

routes = web.RouteTableDef()

STATUSES = ("all", "open", "resolved")
FORMATS = ("document", "markdown")
ORDERS = ("asc", "desc")
REACTION_MAX = 50
SPACE_BASE = "/v1/spaces/{spaceId}/comments"
CR_BASE = "/v1/spaces/{spaceId}/change-requests/{changeRequestId}/comments"


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
    if not permissions(ctx.store, record, ctx.user)["delete"]:
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
    if not permissions(ctx.store, record, ctx.user)["delete"]:
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
