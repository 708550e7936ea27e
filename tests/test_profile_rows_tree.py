"""Five rows of the emulator's behaviour profiles, each played both ways over loopback HTTP:
a deleted space still listed, a collection delete refused, a minimal PATCH answer, a transfer
that gives a new id, a created object's title tidied (`syncd.emulator.profile.ROWS`).

`PROBES` maps each row to `probe(session, base, token) -> observation`: run against a fresh
emulator generated with `PROBE_SPEC` (and a token that sees every organization), it observes
something `default` and `divergent` answer differently. Another test imports it to check that
every row is played both ways.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from tests.copy_support import blank  # noqa: F401 - a fixture

PROBE_SPEC = "orgs=1,collections=2,spaces=4,pages=2,sites=1,empty_orgs=1"
TOKEN = "rows-tree-token"
EXTRAS = {"etag", "x-emulator"}
"""Fields the unknown-fields row adds to every object (not this file's rows)."""


# ----- the probes -----------------------------------------------------------------------------


async def _call(session: aiohttp.ClientSession, base: str, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with session.request(method, base + path, json=body, headers={"Authorization": f"Bearer {token}"}) as resp:
        raw = await resp.read()
        return resp.status, (await resp.json(content_type=None)) if raw else None


async def _items(session: aiohttp.ClientSession, base: str, token: str, path: str) -> list[Any]:
    items: list[Any] = []
    page: str | None = None
    while True:
        query = f"?limit=1000&page={page}" if page else "?limit=1000"
        status, data = await _call(session, base, token, "GET", path + query)
        assert status == 200, (path, status, data)
        items.extend(data["items"])
        page = (data.get("next") or {}).get("page")
        if not page:
            return items


async def _orgs(session: aiohttp.ClientSession, base: str, token: str) -> tuple[str, str]:
    """(an organization with spaces, one without): the generator's `orgs=1,empty_orgs=1`."""
    full = empty = None
    for org in await _items(session, base, token, "/v1/orgs"):
        if await _items(session, base, token, f"/v1/orgs/{org['id']}/spaces"):
            full = full or org["id"]
        else:
            empty = empty or org["id"]
    assert full and empty, "the probe needs an organization with spaces and an empty one"
    return full, empty


async def _create(session: aiohttp.ClientSession, base: str, token: str, path: str, body: Any) -> str:
    status, data = await _call(session, base, token, "POST", path, body)
    assert status in (200, 201), (path, status, data)
    return str(data["id"])


async def probe_deleted_space_listed(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Whether a space just deleted is still in its organization's listing."""
    org, _ = await _orgs(session, base, token)
    space = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[0]["id"]
    status, _ = await _call(session, base, token, "DELETE", f"/v1/spaces/{space}")
    assert status == 204
    return any(item["id"] == space for item in await _items(session, base, token, f"/v1/orgs/{org}/spaces"))


async def probe_collection_delete(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """The status of deleting a collection that holds a space, and whether the space is live."""
    org, _ = await _orgs(session, base, token)
    collection = await _create(session, base, token, f"/v1/orgs/{org}/collections", {"title": "Probe box"})
    space = await _create(session, base, token, f"/v1/orgs/{org}/spaces", {"title": "Probe space", "parent": collection})
    status, _ = await _call(session, base, token, "DELETE", f"/v1/collections/{collection}")
    _, after = await _call(session, base, token, "GET", f"/v1/spaces/{space}")
    return status, bool(after.get("deletedAt"))


async def probe_patch_answer(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """The fields of a space's PATCH answer (the unknown-fields row's extras left aside)."""
    org, _ = await _orgs(session, base, token)
    space = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[0]["id"]
    status, answer = await _call(session, base, token, "PATCH", f"/v1/spaces/{space}", {"title": "Probed"})
    assert status == 200, answer
    return tuple(sorted(set(answer) - EXTRAS))


async def probe_transfer_id(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Whether a transferred space keeps its id, and whether the old id still answers."""
    org, other = await _orgs(session, base, token)
    space = (await _items(session, base, token, f"/v1/orgs/{org}/spaces"))[0]["id"]
    status, answer = await _call(session, base, token, "POST", f"/v1/spaces/{space}/transfer", {"organization": other})
    assert status == 200, answer
    old_status, _ = await _call(session, base, token, "GET", f"/v1/spaces/{space}")
    return answer["id"] == space, old_status


SENT_TITLE = "  Probe\t  shelf "
"""A title with white space a service may tidy: at both ends, a tab, a run of spaces."""


async def probe_create_keeps_name(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """The titles a created collection and space bear, in their answers and their listings."""
    org, _ = await _orgs(session, base, token)
    titles = []
    for kind in ("collections", "spaces"):
        status, answer = await _call(session, base, token, "POST", f"/v1/orgs/{org}/{kind}", {"title": SENT_TITLE})
        assert status in (200, 201), answer
        listed = next(i for i in await _items(session, base, token, f"/v1/orgs/{org}/{kind}") if i["id"] == answer["id"])
        titles += [answer["title"], listed["title"]]
    return tuple(titles)


Probe = Callable[[aiohttp.ClientSession, str, str], Awaitable[Any]]
PROBES: dict[str, Probe] = {
    "deleted-space-listed": probe_deleted_space_listed,
    "collection-delete": probe_collection_delete,
    "patch-answer": probe_patch_answer,
    "transfer-id": probe_transfer_id,
    "create-keeps-name": probe_create_keeps_name,
}


# ----- serving ---------------------------------------------------------------------------------


class Served:
    def __init__(self, session: aiohttp.ClientSession, base: str, profile: str, store: Store) -> None:
        self.session, self.base, self.profile, self.store = session, base, profile, store

    @property
    def divergent(self) -> bool:
        return self.profile == "divergent"

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return await _call(self.session, self.base, TOKEN, method, path, body)

    async def items(self, path: str) -> list[Any]:
        return await _items(self.session, self.base, TOKEN, path)

    async def ids(self, path: str) -> list[str]:
        return [item["id"] for item in await self.items(path)]

    async def create(self, path: str, body: Any = None) -> str:
        return await _create(self.session, self.base, TOKEN, path, body)


PROFILES = ("default", "divergent")


@pytest.mark.parametrize("row", sorted(PROBES))
async def test_every_probe_tells_the_profiles_apart(row: str) -> None:
    seen = {}
    for profile in PROFILES:
        store = Store(seed=3)
        generate(store, parse_spec(PROBE_SPEC), seed=3, all_token=TOKEN)
        async with serve_emulator(store, profile=profile) as running, aiohttp.ClientSession() as session:
            seen[profile] = await PROBES[row](session, running.url, TOKEN)
        hash(seen[profile])
    assert seen["default"] != seen["divergent"], seen


@pytest.fixture(params=PROFILES)
async def served(request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    store = Store(seed=11)
    generate(store, parse_spec(PROBE_SPEC + ",comments=2,change_requests=1,sections=2"), seed=11, all_token=TOKEN)
    async with serve_emulator(store, profile=request.param) as running, aiohttp.ClientSession() as session:
        yield Served(session, running.url, request.param, store)


# ----- deleted-space-listed ---------------------------------------------------------------------


async def test_a_deleted_space_is_listed_with_deleted_at_or_left_out(served: Served) -> None:
    org, _ = await _orgs(served.session, served.base, TOKEN)
    box = await served.create(f"/v1/orgs/{org}/collections", {"title": "Box"})
    inside = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Inside", "parent": box})
    kept = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Kept", "parent": box})
    assert (await served.call("DELETE", f"/v1/spaces/{inside}"))[0] == 204
    listed = {item["id"]: item for item in await served.items(f"/v1/orgs/{org}/spaces")}
    in_box = {item["id"]: item for item in await served.items(f"/v1/collections/{box}/spaces")}
    _, got = await served.call("GET", f"/v1/spaces/{inside}")
    assert got["deletedAt"]  # both: a deleted space answers with deletedAt while it can be restored
    assert not listed[kept].get("deletedAt") and kept in in_box
    if served.divergent:
        assert listed[inside]["deletedAt"] and in_box[inside]["deletedAt"]
        assert list(in_box)[-1] == inside  # after the live ones
    else:
        assert inside not in listed and inside not in in_box
    # restored: live again, listed once, either way
    assert (await served.call("POST", f"/v1/spaces/{inside}/restore"))[0] == 200
    listed_ids = await served.ids(f"/v1/orgs/{org}/spaces")
    assert listed_ids.count(inside) == 1
    assert not any(item.get("deletedAt") for item in await served.items(f"/v1/orgs/{org}/spaces"))


async def test_spaces_a_collection_delete_took_along_are_listed_or_left_out(served: Served) -> None:
    org, _ = await _orgs(served.session, served.base, TOKEN)
    box = await served.create(f"/v1/orgs/{org}/collections", {"title": "Box"})
    inside = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Inside", "parent": box})
    assert (await served.call("DELETE", f"/v1/spaces/{inside}"))[0] == 204  # empty it first (collection-delete row)
    assert (await served.call("DELETE", f"/v1/collections/{box}"))[0] == 204
    listed = {item["id"]: item for item in await served.items(f"/v1/orgs/{org}/spaces")}
    assert (inside in listed) == served.divergent
    if served.divergent:
        assert listed[inside]["deletedAt"]


# ----- collection-delete -----------------------------------------------------------------------


async def test_deleting_a_collection_that_holds_something(served: Served) -> None:
    org, _ = await _orgs(served.session, served.base, TOKEN)
    box = await served.create(f"/v1/orgs/{org}/collections", {"title": "Box"})
    sub = await served.create(f"/v1/orgs/{org}/collections", {"title": "Sub", "parent": box})
    space = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Deep", "parent": sub})
    status, answer = await served.call("DELETE", f"/v1/collections/{box}")
    if served.divergent:
        assert status == 400 and answer["error"]["code"] == 400 and "not empty" in answer["error"]["message"]
        # nothing changed
        assert (await served.call("GET", f"/v1/collections/{box}"))[0] == 200
        assert (await served.call("GET", f"/v1/collections/{sub}"))[0] == 200
        _, got = await served.call("GET", f"/v1/spaces/{space}")
        assert not got.get("deletedAt") and got["parent"] == sub
        # children first: then it goes
        assert (await served.call("DELETE", f"/v1/collections/{sub}"))[0] == 400
        assert (await served.call("DELETE", f"/v1/spaces/{space}"))[0] == 204
        assert (await served.call("DELETE", f"/v1/collections/{sub}"))[0] == 204  # a deleted space is not held
        assert (await served.call("DELETE", f"/v1/collections/{box}"))[0] == 204
    else:
        assert status == 204 and answer is None
        assert (await served.call("GET", f"/v1/collections/{sub}"))[0] == 404
        _, got = await served.call("GET", f"/v1/spaces/{space}")
        assert got["deletedAt"]
    assert (await served.call("GET", f"/v1/collections/{box}"))[0] == 404
    empty = await served.create(f"/v1/orgs/{org}/collections", {"title": "Empty"})
    assert (await served.call("DELETE", f"/v1/collections/{empty}"))[0] == 204  # an empty one goes either way


# ----- patch-answer ----------------------------------------------------------------------------


async def test_a_patch_answers_the_whole_object_or_what_was_sent(served: Served) -> None:
    org, _ = await _orgs(served.session, served.base, TOKEN)
    space = (await served.ids(f"/v1/orgs/{org}/spaces"))[0]
    collection = (await served.ids(f"/v1/orgs/{org}/collections"))[0]
    status, answer = await served.call("PATCH", f"/v1/spaces/{space}", {"title": "Renamed", "emoji": "1f680"})
    assert status == 200
    status, coll = await served.call("PATCH", f"/v1/collections/{collection}", {"description": "Described"})
    assert status == 200
    status, org_answer = await served.call("PATCH", f"/v1/orgs/{org}", {"title": "Org renamed"})
    assert status == 200
    if served.divergent:
        assert set(answer) - EXTRAS == {"object", "id", "title", "emoji"} and answer["title"] == "Renamed"
        assert set(coll) - EXTRAS == {"object", "id", "description"} and coll["description"] == "Described"
        assert set(org_answer) - EXTRAS == {"object", "id", "title"}
    else:
        assert answer["visibility"] and answer["title"] == "Renamed" and answer["emoji"] == "1f680"
        assert coll["title"] and coll["description"] == "Described"
        assert "createdAt" in org_answer or len(org_answer) > 3
    _, got = await served.call("GET", f"/v1/spaces/{space}")
    assert got["title"] == "Renamed" and got["visibility"]  # the change is made either way


# ----- transfer-id -----------------------------------------------------------------------------


async def test_a_transferred_space_keeps_its_id_or_gets_a_new_one(served: Served) -> None:
    org, other = await _orgs(served.session, served.base, TOKEN)
    spaces = await served.items(f"/v1/orgs/{org}/spaces")
    space = spaces[0]["id"]
    pages_before = await served.call("GET", f"/v1/spaces/{space}/content")
    comments_before = await served.ids(f"/v1/spaces/{space}/comments")
    status, answer = await served.call("POST", f"/v1/spaces/{space}/transfer", {"organization": other})
    assert status == 200
    new = answer["id"]
    assert (new != space) == served.divergent
    assert await served.ids(f"/v1/orgs/{other}/spaces") == [new]
    assert space not in await served.ids(f"/v1/orgs/{org}/spaces")
    _, got = await served.call("GET", f"/v1/spaces/{new}")
    assert got["organization"] == other and got["id"] == new
    old_status, _ = await served.call("GET", f"/v1/spaces/{space}")
    assert old_status == (404 if served.divergent else 200)
    # what lives in the space follows it
    pages_after = await served.call("GET", f"/v1/spaces/{new}/content")
    def outline(pages: list[Any]) -> list[Any]:
        return [(p["id"], p["title"], outline(p.get("pages") or [])) for p in pages]

    assert pages_after[0] == 200 and outline(pages_after[1]["pages"]) == outline(pages_before[1]["pages"])
    assert await served.ids(f"/v1/spaces/{new}/comments") == comments_before
    # it can be transferred back, and moved, by the id the service answered
    status, back = await served.call("POST", f"/v1/spaces/{new}/transfer", {"organization": org})
    assert status == 200 and back["organization"] == org and (back["id"] == new) != served.divergent


async def test_a_transferred_collection_and_what_it_holds(served: Served) -> None:
    org, other = await _orgs(served.session, served.base, TOKEN)
    box = await served.create(f"/v1/orgs/{org}/collections", {"title": "Box"})
    sub = await served.create(f"/v1/orgs/{org}/collections", {"title": "Sub", "parent": box})
    space = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Deep", "parent": sub})
    status, answer = await served.call("POST", f"/v1/collections/{box}/transfer", {"organization": other})
    assert status == 200
    collections = {item["title"]: item for item in await served.items(f"/v1/orgs/{other}/collections")}
    spaces = {item["title"]: item for item in await served.items(f"/v1/orgs/{other}/spaces")}
    assert collections["Box"]["id"] == answer["id"]
    assert collections["Sub"]["parent"] == answer["id"] and spaces["Deep"]["parent"] == collections["Sub"]["id"]
    assert await served.ids(f"/v1/collections/{collections['Sub']['id']}/spaces") == [spaces["Deep"]["id"]]
    if served.divergent:
        assert answer["id"] != box and collections["Sub"]["id"] != sub and spaces["Deep"]["id"] != space
        for path in (f"/v1/collections/{box}", f"/v1/collections/{sub}", f"/v1/spaces/{space}"):
            assert (await served.call("GET", path))[0] == 404
    else:
        assert (answer["id"], collections["Sub"]["id"], spaces["Deep"]["id"]) == (box, sub, space)


# ----- what syncd reads of them ----------------------------------------------------------------


async def test_a_crawl_records_no_deleted_space_whether_or_not_it_is_listed(served: Served, state: Any) -> None:
    """A listed space with `deletedAt` is read as absent: no row of the space (nor of its place
    in its collection), and the mirror equals the emulator's dump (which holds live spaces)."""
    from syncd.api import TenantClient
    from syncd.emulator.canonical import dump_org
    from syncd.read.crawl import Crawler
    from syncd.state import StateStore
    from tests.oracle import mirror_mismatches

    org, _ = await _orgs(served.session, served.base, TOKEN)
    box = await served.create(f"/v1/orgs/{org}/collections", {"title": "Box"})
    gone = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Gone", "parent": box})
    kept = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Kept", "parent": box})

    async def crawl() -> Any:
        async with TenantClient("src", served.base, TOKEN, concurrency=4) as client:
            with StateStore(state) as mirror:
                return await Crawler(client, mirror, "src", workers=4).crawl(org)

    first = await crawl()
    assert first.status == "complete", first.stats.errors
    assert (await served.call("DELETE", f"/v1/spaces/{gone}"))[0] == 204
    listed = await served.ids(f"/v1/orgs/{org}/spaces")
    assert (gone in listed) == served.divergent
    second = await crawl()
    assert second.status == "complete" and second.stats.errors == []
    with StateStore(state) as mirror:
        ids = {(row["kind"], row["id"].rsplit("/", 1)[-1]) for row in mirror.current("src")}
        changes = {(c["op"], c["kind"], c["id"].rsplit("/", 1)[-1]) for c in mirror.changes(second.run)}
    assert ("space", kept) in ids and ("collection-space", kept) in ids
    assert ("space", gone) not in ids and ("collection-space", gone) not in ids
    assert ("deleted", "space", gone) in changes
    store = served.store
    assert mirror_mismatches(state, "src", dump_org(store, org)) == []


# ----- mirror-mode deletes under both collection-delete answers -----------------------------------


@pytest.mark.parametrize("emulator_profile", ["default", "divergent"])
async def test_mirror_deletes_children_first_and_a_refused_delete_is_reported_then_finished(blank: Any) -> None:
    """What syncd made and the source no longer has goes, children first (so a service that
    refuses to delete a collection holding something still deletes it); a delete refused
    because the collection still holds a space (its own delete refused) is reported, not
    fatal, and the next run finishes it; a collection holding what syncd did not make stays."""
    from tests.copy_support import Org

    source, target = blank.source, blank.target
    outer = await source.collection("Outer")
    inner = await source.collection("Inner", outer)
    deep = await source.space("Deep", inner)
    held = await source.collection("Held")
    await source.space("Mine", held)
    await source.space("Stays")
    first = await blank.copy()
    assert first.equal and not first.failed, first.failed

    async def target_ids(kind: str) -> dict[str, str]:
        items = await blank.api.all_items(f"/v1/orgs/{blank.orgs[1]}/{kind}")
        return {item["title"]: item["id"] for item in items if not item.get("deletedAt")}

    made = await target_ids("collections") | await target_ids("spaces")
    foreign = await Org(blank.api, blank.orgs[1]).space("Not by syncd", made["Held"])
    for path in (f"/v1/spaces/{deep}", f"/v1/collections/{inner}", f"/v1/collections/{outer}"):  # children first: both answers
        await source.call("DELETE", path)
    for title in ("Mine",):
        mine = next(s["id"] for s in await blank.api.all_items(f"/v1/orgs/{blank.orgs[0]}/spaces") if s["title"] == title)
        await source.call("DELETE", f"/v1/spaces/{mine}")
    await source.call("DELETE", f"/v1/collections/{held}")

    # the delete of "Deep" is refused once: its collections' deletes are refused too, or take it along
    blank.running.emulator.forbidden[:] = [rf"^DELETE /v1/spaces/{made['Deep']}$"]
    second = await blank.copy(mode="mirror", max_delete=10)
    blank.running.emulator.forbidden[:] = []
    assert any("Held" in s.title and "did not create" in s.reason for s in second.skips)
    assert any("Deep" in line or made["Deep"] in line for line in second.failed)
    third = await blank.copy(mode="mirror", max_delete=10)
    assert not third.failed, third.failed
    collections, spaces = await target_ids("collections"), await target_ids("spaces")
    assert set(collections) == {"Held"} and set(spaces) == {"Stays", "Not by syncd"}
    assert spaces["Not by syncd"] == foreign
    assert any("Held" in s.title and "did not create" in s.reason for s in third.skips)
