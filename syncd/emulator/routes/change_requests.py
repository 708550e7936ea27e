"""Change requests: their routes, their content (the content routes' shapes, read and written
through a change request's holder), their PDF, their generator and their dump kinds. What a
change request is, its merge and update, and its rendering are in `change_request_model`."""

from __future__ import annotations

import random

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.http import ADMIN_PREFIX
from syncd.emulator.routes import content_answers
from syncd.emulator.routes.change_request_model import (
    CHANGE_REQUEST,
    find_change_request,
    holder_for,
    merge,
    new_change_request,
    refresh_counters,
    render_change_request,
    space_change_requests,
    touch,
    update,
)
from syncd.emulator.routes.content_model import Holder, edit_page, find_page, locate_all
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

STATUSES = ("draft", "open", "archived", "merged")
SETTABLE_STATUSES = ("draft", "open", "archived")
ORDER_BY = ("updatedAt", "createdAt")
SUBJECT_MAX = 100
PDF_PREFIX = "/_pdf/change-requests"


# ----- the PDF of a change request -----------------------------------------------------------


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
    if page_id is not None and find_page(store, record["revision"], page_id) is None:
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
    located = locate_all(revisions.get(store, record["revision"])["pages"])
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
    return content_answers.answer_revision(request, _cr_holder(request))


@routes.post(_CONTENT + "/import")
async def import_cr_content(request: web.Request) -> web.Response:
    return await content_answers.import_into(request, _cr_holder)


@routes.get(_CONTENT + "/pages")
async def get_cr_pages(request: web.Request) -> web.Response:
    return content_answers.answer_pages(request, _cr_holder(request))


@routes.get(_CONTENT + "/files")
async def list_cr_files(request: web.Request) -> web.Response:
    return content_answers.answer_files(request, _cr_holder(request))


@routes.get(_CONTENT + "/files/{fileId}")
async def get_cr_file(request: web.Request) -> web.Response:
    return content_answers.answer_file(request, _cr_holder(request))


@routes.get(_CONTENT + "/files/{fileId}/backlinks")
async def get_cr_file_backlinks(request: web.Request) -> web.Response:
    return content_answers.answer_backlinks(request, _cr_holder(request))


@routes.get(_CONTENT + "/page/{pageId}")
async def get_cr_page(request: web.Request) -> web.Response:
    return content_answers.answer_page(request, _cr_holder(request))


@routes.get(_CONTENT + "/page/{pageId}/links")
async def get_cr_page_links(request: web.Request) -> web.Response:
    return content_answers.answer_page_links(request, _cr_holder(request), change_request=True)


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
        return content_answers.admin_add_page(store, holder, body)
    return content_answers.admin_edit_page(store, holder, page_id, body)


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
            located = locate_all(pages)
            target = located[rng.randrange(len(located))] if located else None
            title = target.page["title"] if target else space["title"]
            author = rng.choice(users)
            record = new_change_request(store, space, author, rng.choice(SUBJECTS).format(title=title))
            if target is not None and rng.random() < 0.7:
                markdown = target.page.get("markdown", "") + f"\n## Update\n\nReviewed by the {title.lower()} owners.\n"
                edited = edit_page(store, pages, target.page["id"], markdown=markdown)
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
