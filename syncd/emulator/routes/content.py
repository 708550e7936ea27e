"""Space content: the routes of a space's revision, pages, files, links, backlinks, search and
content import, file downloads and the admin's page edits; the generator's pages and files and
their dump kinds. Where content lives is in `content_model`, links and search in
`content_links`, and the answers shared with change requests in `content_answers`."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator import revisions
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.http import ADMIN_PREFIX
from syncd.emulator.routes.content_answers import (
    admin_add_page,
    admin_edit_page,
    answer_backlinks,
    answer_file,
    answer_files,
    answer_links,
    answer_page,
    answer_page_links,
    answer_pages,
    answer_revision,
    import_into,
)
from syncd.emulator.routes.content_links import search_revision
from syncd.emulator.routes.content_model import (
    BLOB,
    FILE,
    FILES_PREFIX,
    PAGE,
    Holder,
    locate_all,
    register_blob,
    remove_page,
    render_file,
    render_page,
    space_app_url,
    space_holder,
    unique_slug,
)
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces, set_space_content
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

SEARCH_MAX = 512


# ----- routes: space content, links and search ---------------------------------------------


def _query(request: web.Request) -> str:
    query = h.query_text(request, "query", required=True, max_len=SEARCH_MAX)
    if not query or not query.strip():
        raise bad_request("query: must not be empty")
    return query


def _holder(request: web.Request) -> Holder:
    store = h.store_of(request)
    space = live_space(store, request.match_info["spaceId"], h.user_of(request))
    return space_holder(store, space, h.base_url(request))


@routes.get("/v1/spaces/{spaceId}/content")
async def get_content(request: web.Request) -> web.Response:
    return answer_revision(request, _holder(request))


@routes.post("/v1/spaces/{spaceId}/content/import")
async def import_content(request: web.Request) -> web.Response:
    return await import_into(request, _holder)


@routes.get("/v1/spaces/{spaceId}/content/pages")
async def get_pages(request: web.Request) -> web.Response:
    return answer_pages(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/files")
async def list_files(request: web.Request) -> web.Response:
    return answer_files(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/files/{fileId}")
async def get_file(request: web.Request) -> web.Response:
    return answer_file(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/files/{fileId}/backlinks")
async def get_file_backlinks(request: web.Request) -> web.Response:
    return answer_backlinks(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/page/{pageId}")
async def get_page(request: web.Request) -> web.Response:
    return answer_page(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/content/page/{pageId}/links")
async def get_page_links(request: web.Request) -> web.Response:
    return answer_page_links(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/links")
async def get_space_links(request: web.Request) -> web.Response:
    return answer_links(request, _holder(request))


@routes.get("/v1/spaces/{spaceId}/search")
async def search_space(request: web.Request) -> web.Response:
    query = _query(request)
    holder = _holder(request)
    return h.list_answer(request, search_revision(h.store_of(request), holder, query), lambda item: item)


@routes.get("/v1/orgs/{organizationId}/search")
async def search_org(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    query = _query(request)
    base = h.base_url(request)
    groups: list[dict[str, Any]] = []
    for space in org_spaces(store, org["id"]):
        pages = search_revision(store, space_holder(store, space, base), query)
        if pages:
            score = max(page["score"] for page in pages)
            groups.append({"object": "search-space-result", "type": "space", "id": space["id"], "title": space["title"], "score": score, "pages": pages})
    groups.sort(key=lambda group: -group["score"])
    rank = 0
    for group in groups:
        for page in group["pages"]:
            rank += 1
            page["rank"] = rank
    return h.list_answer(request, groups, lambda item: item)


# ----- file downloads (a signed CDN URL in the real service: no auth) ---------------------


@routes.get(FILES_PREFIX + "/{blob}/{name}")
async def download_file(request: web.Request) -> web.Response:
    store = h.store_of(request)
    blob = store.get(BLOB, request.match_info["blob"])
    if blob is None:
        raise not_found("file not found")
    data = revisions.held_bytes(store).get(blob["blob"]) if blob.get("held") else revisions.file_bytes(blob)
    if data is None:
        raise not_found("file bytes no longer held: the emulator keeps imported files' bytes within a memory bound")
    return web.Response(
        body=data,
        content_type=blob["contentType"],
        headers={"Content-Disposition": f"inline; filename*=UTF-8''{quote(request.match_info['name'])}"},
    )


# ----- admin: edit content as a user of the app would (tests and demo) ---------------------


def _admin_holder(request: web.Request) -> Holder:
    store = h.store_of(request)
    space = store.get(SPACE, request.match_info["spaceId"])
    if space is None or space.get("deletedAt"):
        raise not_found(f"space {request.match_info['spaceId']!r} not found")
    return space_holder(store, space, h.base_url(request))


@routes.post(ADMIN_PREFIX + "/spaces/{spaceId}/pages")
async def admin_create_space_page(request: web.Request) -> web.Response:
    holder = _admin_holder(request)
    return admin_add_page(h.store_of(request), holder, await h.json_body(request))


@routes.patch(ADMIN_PREFIX + "/spaces/{spaceId}/pages/{pageId}")
async def admin_patch_space_page(request: web.Request) -> web.Response:
    holder = _admin_holder(request)
    return admin_edit_page(h.store_of(request), holder, request.match_info["pageId"], await h.json_body(request))


@routes.delete(ADMIN_PREFIX + "/spaces/{spaceId}/pages/{pageId}")
async def admin_delete_space_page(request: web.Request) -> web.Response:
    store, holder = h.store_of(request), _admin_holder(request)
    page_id = request.match_info["pageId"]
    revision = holder.revision(store)
    pages = remove_page(revision["pages"], page_id)
    if pages is None:
        raise not_found(f"page {page_id!r} not found in the content")
    holder.commit(revisions.commit(store, pages, revision["files"], parents=[revision["id"]])["id"])
    return h.no_content()


# ----- generator ----------------------------------------------------------------------------

PAGE_TITLES = (
    "Getting started", "Installation", "Configuration", "Authentication", "Webhooks", "Rate limits",
    "Troubleshooting", "FAQ", "Release notes", "Architecture", "Deploying", "Monitoring", "Billing",
    "Permissions", "Data model", "Migrations", "Backups", "Command line", "SDKs", "Error codes",
    "Glossary", "Security", "Roadmap", "Contributing", "Testing", "Performance", "Logging", "Alerts",
)  # fmt: skip
TOPICS = ("the API", "your workspace", "the dashboard", "a new project", "production", "the CLI", "single sign-on", "exports")
EMOJIS = ("1f4d8", "1f680", "2699", "1f4a1", "1f512", "1f41b")
IMAGE_FILES = (("architecture-diagram.png", 1600, 900), ("dashboard-screenshot.png", 1280, 800), ("logo.svg", 512, 512), ("flow-chart.jpg", 1024, 768))
PDF_FILES = ("api-reference.pdf", "security-whitepaper.pdf", "onboarding-checklist.pdf")
CONTENT_TYPES = {"png": "image/png", "svg": "image/svg+xml", "jpg": "image/jpeg", "pdf": "application/pdf"}

_TEMPLATES = (
    """# %(title)s

This page explains how %(title_l)s works with %(topic)s. Read [%(title_a)s](%(link_a)s) first if you are new here.

{%% hint style="info" %%}
You need the *edit* role on %(topic)s.
{%% endhint %%}

## Before you begin

- An account with the *edit* role
- Access to %(topic)s
- About %(n)s minutes

## Steps

1. Open the settings of %(topic)s.
2. Follow the instructions in [%(title_b)s](%(link_b)s).
3. Save, then check the result.

{%% code title="run.sh" %%}
```bash
syncd run --profile %(slug)s --retries %(n)s
```
{%% endcode %%}
""",
    """# %(title)s

%(title)s keeps %(topic)s consistent across environments.

## Overview

| Setting | Default |
| --- | --- |
| `timeout` | %(n)s s |
| `mode` | strict |

See also [%(title_a)s](%(link_a)s) and the older notes in [the archive](%(broken)s).

## Example

{%% tabs %%}
{%% tab title="JSON" %%}
```json
{"name": "%(slug)s", "enabled": true, "limit": %(n)s}
```
{%% endtab %%}

{%% tab title="Command line" %%}
Run `syncd config --limit %(n)s` in a shell.
{%% endtab %%}
{%% endtabs %%}

The limit grows with the load:

$$
limit = %(n)s \\times requests
$$
""",
    """# %(title)s

<figure><img src=".gitbook/assets/%(image)s" alt="%(image)s"><figcaption><p>Where %(title_l)s fits</p></figcaption></figure>

The diagram above shows where %(title_l)s fits ✅. The full reference is in [%(title_b)s](%(link_b)s).

{%% hint style="warning" %%}
Keep %(topic)s up to date before you change %(title_l)s.
{%% endhint %%}

## Notes

- Changes apply within %(n)s minutes.
- Status of the service: [status page](https://status.example.com).

| Step | Time |
| --- | --- |
| Check | %(n)s s |

{%% tabs %%}
{%% tab title="Console" %%}
Open %(topic)s and choose **Apply**.
{%% endtab %%}

{%% tab title="API" %%}
{%% code title="apply.py" %%}
```python
client.apply("%(slug)s", retries=%(n)s)
```
{%% endcode %%}
{%% endtab %%}
{%% endtabs %%}

<details>

<summary>What if it fails?</summary>

Read [the checklist](.gitbook/assets/%(file)s) and try again.

</details>

{%% embed url="https://www.youtube.com/watch?v=%(slug)s" %%}

$$
t = %(n)s \\cdot n
$$

> Tip: keep %(topic)s up to date before you change %(title_l)s.
""",
    """# %(title)s

Frequently asked questions about %(title_l)s.

## Why does %(title_l)s fail?

Most failures come from %(topic)s. Check [%(title_a)s](%(link_a)s), then [%(title_b)s](%(link_b)s).

<details>

<summary>Where are the logs?</summary>

In the *logs* folder of %(topic)s.

</details>

## Where is the checklist?

Download [the checklist](.gitbook/assets/%(file)s) or read the [old page](%(broken)s).

{%% embed url="https://status.example.com" %%}
""",
)
_TEMPLATES_NO_FILE = (_TEMPLATES[0], _TEMPLATES[1])


def _seed_files(store: Store, rng: random.Random, count: int) -> list[Record]:
    files: list[Record] = []
    for index in range(count):
        if index % 3 == 1:
            name = PDF_FILES[(index // 3) % len(PDF_FILES)]
            record = revisions.new_file(store, name, "application/pdf", rng.randint(20_000, 120_000))
        else:
            name, width, height = IMAGE_FILES[(index + rng.randint(0, 3)) % len(IMAGE_FILES)]
            if any(f["name"] == name for f in files):
                name = f"{index}-{name}"
            ext = name.rsplit(".", 1)[1]
            record = revisions.new_file(store, name, CONTENT_TYPES[ext], rng.randint(2_000, 60_000), dimensions={"width": width, "height": height})
        register_blob(store, record)
        files.append(record)
    return files


def _seed_tree(store: Store, rng: random.Random, count: int, ts: str) -> list[Record]:
    """A tree of `count` pages, nested up to three levels (markdown filled in afterwards)."""
    roots: list[Record] = []
    open_parents: list[tuple[Record, int]] = []
    titles = list(PAGE_TITLES)
    rng.shuffle(titles)
    for index in range(count):
        title = titles[index % len(titles)] + (f" {index // len(titles) + 1}" if index >= len(titles) else "")
        parent: tuple[Record, int] | None = None
        if open_parents and rng.random() < 0.6:
            parent = open_parents[rng.randrange(len(open_parents))]
        siblings = parent[0]["pages"] if parent else roots
        page = {
            "id": store.new_id(),
            "title": title,
            "slug": unique_slug(siblings, title),
            "type": "document",
            "markdown": "",
            "createdAt": ts,
            "updatedAt": ts,
            "pages": [],
        }
        if rng.random() < 0.3:
            page["emoji"] = rng.choice(EMOJIS)
        if rng.random() < 0.5:
            page["description"] = f"How {title.lower()} works"
        siblings.append(page)
        depth = parent[1] + 1 if parent else 1
        if depth < 3:
            open_parents.append((page, depth))
    return roots


def _fill_markdown(store: Store, rng: random.Random, pages: list[Record], files: list[Record]) -> None:
    """Markdown from a few templates, linking to other pages, sometimes to a missing page or a file."""
    located = locate_all(pages)
    templates = _TEMPLATES if files else _TEMPLATES_NO_FILE
    images = [f["name"] for f in files if "dimensions" in f] or [f["name"] for f in files]
    for loc in located:
        page = loc.page
        a = located[rng.randrange(len(located))]
        b = located[rng.randrange(len(located))]
        values = {
            "title": page["title"],
            "title_l": page["title"].lower(),
            "slug": page["slug"],
            "topic": rng.choice(TOPICS),
            "n": rng.randint(2, 60),
            "title_a": a.page["title"],
            "link_a": a.path,
            "title_b": b.page["title"],
            "link_b": b.path,
            "broken": f"archive/{page['slug']}-v1",
            "file": files[rng.randrange(len(files))]["name"] if files else "",
            "image": images[rng.randrange(len(images))] if images else "",
        }
        page["markdown"] = templates[rng.randrange(len(templates))] % values
        page["documentId"] = store.new_id(16)


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """For every space: a page tree, files (images and a PDF), one committed revision."""
    count, file_count = params.get("pages", 0), params.get("files", 0)
    ts = store.now_iso()
    for space in org_spaces(store, org_id):
        files = _seed_files(store, rng, file_count)
        pages = _seed_tree(store, rng, count, ts)
        _fill_markdown(store, rng, pages, files)
        revision = revisions.commit(store, pages, files, parents=[space["revision"]])
        set_space_content(store, space, revision["id"])


# ----- canonical dump -----------------------------------------------------------------------


def _dump_pages(store: Store, org_id: str) -> Iterator[Record]:
    """Every page of every space in document order, wrapped with its space and parent.

    The dump id is the page id; a page id met again (a duplicated space keeps its page ids)
    gets `<space>:<page>` so every record stays distinct.
    """
    seen: set[str] = set()
    for space in org_spaces(store, org_id):
        keys: dict[str, str] = {}
        for loc in locate_all(revisions.get(store, space["revision"])["pages"]):
            key = loc.page["id"] if loc.page["id"] not in seen else f"{space['id']}:{loc.page['id']}"
            seen.add(key)
            keys[loc.page["id"]] = key
            parent = ("page", keys[loc.parent]) if loc.parent else (SPACE, space["id"])
            yield {"id": key, "page": loc.page, "path": loc.path, "space": space, "parent": parent}


def _dump_files(store: Store, org_id: str) -> Iterator[Record]:
    seen: set[str] = set()
    for space in org_spaces(store, org_id):
        for file in revisions.get(store, space["revision"])["files"]:
            key = file["id"] if file["id"] not in seen else f"{space['id']}:{file['id']}"
            seen.add(key)
            yield {"id": key, "file": file, "space": space}


def _render_dumped_page(store: Store, wrapped: Record, base: str) -> dict[str, Any]:
    return render_page(wrapped["page"], wrapped["path"], space_app_url(wrapped["space"], base), body="markdown", nested=False)


DUMP = [
    DumpKind(
        name=PAGE,
        records=_dump_pages,
        render=_render_dumped_page,
        label=lambda data: data["title"],
        parent=lambda store, wrapped: wrapped["parent"],
        volatile=frozenset({"documentId"}),
    ),
    DumpKind(
        name=FILE,
        records=_dump_files,
        render=lambda store, wrapped, base: render_file(store, wrapped["file"], base),
        label=lambda data: data["name"],
        parent=lambda store, wrapped: (SPACE, wrapped["space"]["id"]),
        volatile=frozenset({"downloadURL"}),
    ),
]
