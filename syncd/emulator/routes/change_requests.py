"""Change requests: proposed edits to a space, in their own revisions.

A change request forks the space's current revision; `base` remembers the space revision its
content was last based on (at creation, then at each update), which gives `outdated` and the
common ancestor of the three-way, page-level merge used by both merge (change request into
the space) and update (space into the change request). The space's counters
(`changeRequests`, `changeRequestsOpen`, `changeRequestsDraft`) are recomputed whenever a
change request is created or changes status.
"""

from __future__ import annotations

import random
from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.http import ADMIN_PREFIX
from syncd.emulator.routes import content
from syncd.emulator.routes.content import Holder
from syncd.emulator.routes.members import render_user
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces, set_space_content
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

CHANGE_REQUEST = "change-request"
STATUSES = ("draft", "open", "archived", "merged")
SETTABLE_STATUSES = ("draft", "open", "archived")
ORDER_BY = ("updatedAt", "createdAt")
SUBJECT_MAX = 100
PDF_PREFIX = "/_pdf/change-requests"


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

    app_url = f"{content.space_app_url(space, base)}~/changes/{record['number']}/"
    return Holder(space, record["revision"], app_url, {"type": "changeRequest", "changeRequest": record["id"]}, commit)


# ----- three-way merge of page trees -------------------------------------------------------


class _Flat:
    """A page tree as nodes (pages without children), parents and sibling orders."""

    def __init__(self, pages: list[Record]) -> None:
        self.nodes: dict[str, Record] = {}
        self.parent: dict[str, str | None] = {}
        self.children: dict[str | None, list[str]] = {None: []}
        for loc in content.locate_all(pages):
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


def _pdf(lines: list[str]) -> bytes:
    """A one-page PDF listing the given lines (what the temporary PDF URL serves)."""

    def escape(line: str) -> str:
        return line.encode("latin-1", "replace").decode("latin-1").replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    text = "BT /F1 12 Tf 50 760 Td 16 TL " + " ".join(f"({escape(line)}) '" for line in lines[:45]) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(text)} >>\nstream\n{text}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = "%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n" + "".join(f"{o:010d} 00000 n \n" for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out.encode("latin-1")


# ----- routes -----------------------------------------------------------------------------


def _space(request: web.Request) -> Record:
    return live_space(h.store_of(request), request.match_info["spaceId"], h.user_of(request))


def _change_request(request: web.Request) -> tuple[Record, Record]:
    space = _space(request)
    return space, find_change_request(h.store_of(request), space, request.match_info["changeRequestId"])


def _cr_holder(request: web.Request) -> Holder:
    space, record = _change_request(request)
    return holder_for(h.store_of(request), space, record, h.base_url(request), h.user_of(request))


def _answer(request: web.Request, record: Record) -> web.Response:
    return h.json_answer(render_change_request(h.store_of(request), record, h.base_url(request)))


@routes.get("/v1/spaces/{spaceId}/change-requests")
async def list_change_requests(request: web.Request) -> web.Response:
    store, space = h.store_of(request), _space(request)
    status = h.query_choice(request, "status", STATUSES, default="open")
    order_by = h.query_choice(request, "orderBy", ORDER_BY, default="updatedAt")
    contributor = request.query.get("contributor")
    creator = request.query.get("creator")
    records = [
        r
        for r in space_change_requests(store, space["id"])
        if r["status"] == status
        and (contributor is None or contributor in r["contributors"])
        and (creator is None or r["createdBy"] == creator)
    ]
    records.sort(key=lambda r: (r[order_by or "updatedAt"], r["number"]), reverse=True)
    base = h.base_url(request)
    return h.list_answer(request, records, lambda r: render_change_request(store, r, base))


@routes.post("/v1/spaces/{spaceId}/change-requests")
async def create_change_request(request: web.Request) -> web.Response:
    store, space = h.store_of(request), _space(request)
    body = await h.json_body(request, required=False)
    subject = h.text(body, "subject", max_len=SUBJECT_MAX, default="")
    record = new_change_request(store, space, h.user_of(request), subject)
    base = h.base_url(request)
    response = h.json_answer(render_change_request(store, record, base), status=201)
    response.headers["Location"] = f"{base}/v1/spaces/{space['id']}/change-requests/{record['id']}"
    return response


@routes.get("/v1/spaces/{spaceId}/change-requests/{changeRequestId}")
async def get_change_request(request: web.Request) -> web.Response:
    return _answer(request, _change_request(request)[1])


@routes.patch("/v1/spaces/{spaceId}/change-requests/{changeRequestId}")
async def patch_change_request(request: web.Request) -> web.Response:
    store = h.store_of(request)
    space, record = _change_request(request)
    body = await h.json_body(request)
    subject = h.text(body, "subject", max_len=SUBJECT_MAX)
    status = h.choice(body, "status", SETTABLE_STATUSES)
    if status is not None and record["status"] == "merged":
        raise bad_request("status: a merged change request cannot change status")
    if subject is not None:
        record["subject"] = subject
    if status is not None:
        record["status"] = status
    touch(store, record, h.user_of(request))
    refresh_counters(store, space)
    return _answer(request, record)


@routes.post("/v1/spaces/{spaceId}/change-requests/{changeRequestId}/merge")
async def merge_change_request(request: web.Request) -> web.Response:
    space, record = _change_request(request)
    revision = merge(h.store_of(request), space, record, h.user_of(request))
    return h.json_answer({"revision": revision["id"], "result": "merge"})


@routes.post("/v1/spaces/{spaceId}/change-requests/{changeRequestId}/update")
async def update_change_request(request: web.Request) -> web.Response:
    space, record = _change_request(request)
    revision = update(h.store_of(request), space, record, h.user_of(request))
    return h.json_answer({"revision": revision["id"], "result": "update"})


@routes.get("/v1/spaces/{spaceId}/change-requests/{changeRequestId}/pdf")
async def change_request_pdf(request: web.Request) -> web.Response:
    store = h.store_of(request)
    _, record = _change_request(request)
    only = h.query_bool(request, "only", default=False)
    page_id = request.query.get("page")
    if page_id is not None and content.find_page(store, record["revision"], page_id) is None:
        raise bad_request(f"page: {page_id!r} is not a page of the change request")
    if only and page_id is None:
        raise bad_request("only: needs the page parameter")
    query = f"?page={page_id}&only={'true' if only else 'false'}" if page_id else ""
    return h.json_answer({"url": f"{h.base_url(request)}{PDF_PREFIX}/{record['id']}.pdf{query}"})


@routes.get(PDF_PREFIX + "/{changeRequestId}.pdf")
async def download_pdf(request: web.Request) -> web.Response:
    """The temporary PDF URL (signed in the real service, so no auth here)."""
    store = h.store_of(request)
    record = store.get(CHANGE_REQUEST, request.match_info["changeRequestId"])
    if record is None:
        raise not_found("PDF not found")
    located = content.locate_all(revisions.get(store, record["revision"])["pages"])
    page_id = request.query.get("page")
    if page_id and request.query.get("only") == "true":
        located = [loc for loc in located if loc.page["id"] == page_id]
    lines = [f"Change request #{record['number']}: {record['subject']}", ""]
    lines += ["  " * (loc.depth - 1) + loc.page["title"] for loc in located]
    return web.Response(body=_pdf(lines), content_type="application/pdf")


# ----- change request content (same shapes as space content) --------------------------------

_CONTENT = "/v1/spaces/{spaceId}/change-requests/{changeRequestId}/content"


@routes.get(_CONTENT)
async def get_cr_content(request: web.Request) -> web.Response:
    return content.answer_revision(request, _cr_holder(request))


@routes.post(_CONTENT + "/import")
async def import_cr_content(request: web.Request) -> web.Response:
    return await content.import_into(request, _cr_holder)


@routes.get(_CONTENT + "/pages")
async def get_cr_pages(request: web.Request) -> web.Response:
    return content.answer_pages(request, _cr_holder(request))


@routes.get(_CONTENT + "/files")
async def list_cr_files(request: web.Request) -> web.Response:
    return content.answer_files(request, _cr_holder(request))


@routes.get(_CONTENT + "/files/{fileId}")
async def get_cr_file(request: web.Request) -> web.Response:
    return content.answer_file(request, _cr_holder(request))


@routes.get(_CONTENT + "/files/{fileId}/backlinks")
async def get_cr_file_backlinks(request: web.Request) -> web.Response:
    return content.answer_backlinks(request, _cr_holder(request))


@routes.get(_CONTENT + "/page/{pageId}")
async def get_cr_page(request: web.Request) -> web.Response:
    return content.answer_page(request, _cr_holder(request))


@routes.get(_CONTENT + "/page/{pageId}/links")
async def get_cr_page_links(request: web.Request) -> web.Response:
    return content.answer_page_links(request, _cr_holder(request), change_request=True)


# ----- admin: edit a change request's content (tests and demo) -----------------------------


@routes.post(ADMIN_PREFIX + "/spaces/{spaceId}/change-requests/{changeRequestId}/pages")
async def admin_edit_change_request(request: web.Request) -> web.Response:
    """Add a page to the change request (body: title, markdown, parent), or edit one when the
    body names it with `page`; `user` (a user id) records a contributor."""
    store = h.store_of(request)
    space = store.get(SPACE, request.match_info["spaceId"])
    if space is None or space.get("deletedAt"):
        raise not_found(f"space {request.match_info['spaceId']!r} not found")
    record = find_change_request(store, space, request.match_info["changeRequestId"])
    if record["status"] == "merged":
        raise bad_request("a merged change request cannot be edited")
    body = await h.json_body(request)
    user = h.text(body, "user")
    if user is not None and user not in store.users:
        raise bad_request(f"user: {user!r} is not a user")
    holder = holder_for(store, space, record, h.base_url(request), user)
    page_id = h.text(body, "page")
    if page_id is None:
        return content.admin_add_page(store, holder, body)
    return content.admin_edit_page(store, holder, page_id, body)


# ----- generator and canonical dump -------------------------------------------------------

SUBJECTS = ("Update {title}", "Fix typos in {title}", "Rewrite {title}", "Document {title} limits", "Clarify {title}")
SEED_STATUSES = ("open", "open", "draft", "merged", "archived")


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """Change requests in every third space, statuses varied, some with an edited page."""
    per_space = params.get("change_requests", 0)
    users = list(store.members.get(org_id, {})) or [next(iter(store.users))]
    for space in org_spaces(store, org_id)[::3]:
        for _ in range(per_space):
            pages = revisions.get(store, space["revision"])["pages"]
            located = content.locate_all(pages)
            target = located[rng.randrange(len(located))] if located else None
            title = target.page["title"] if target else space["title"]
            author = rng.choice(users)
            record = new_change_request(store, space, author, rng.choice(SUBJECTS).format(title=title))
            if target is not None and rng.random() < 0.7:
                markdown = target.page.get("markdown", "") + f"\n## Update\n\nReviewed by the {title.lower()} owners.\n"
                edited = content.edit_page(store, pages, target.page["id"], markdown=markdown)
                assert edited is not None
                fork = revisions.get(store, record["revision"])
                record["revision"] = revisions.commit(store, edited, fork["files"], parents=[fork["id"]])["id"]
            status = rng.choice(SEED_STATUSES)
            if status == "merged":
                merge(store, space, record, author)
            else:
                record["status"] = status
                refresh_counters(store, space)


def _change_requests(store: Store, org_id: str) -> list[Record]:
    return [r for space in org_spaces(store, org_id) for r in space_change_requests(store, space["id"])]


DUMP = [
    DumpKind(
        name=CHANGE_REQUEST,
        records=_change_requests,
        render=render_change_request,
        label=lambda data: f"{data['subject']} #{data['number']}",
        parent=lambda store, record: (SPACE, record["space"]),
        refs={"space": SPACE},
        volatile=frozenset({"revision", "revisionInitial", "revisionMergedAncestor", "revisionMerged", "createdBy", "mergedBy", "mergedAt", "outdated", "comments"}),
    ),
]
