"""The emulator's behaviour profiles over loopback HTTP: `divergent` differs from `default` at
every point the spec leaves open, and `default` keeps its behaviour at each of them.

Each test runs against both profiles (the same seed, so the same organizations) and says
what each answers; the last ones run the real `syncd sync` and `syncd backup` against
`divergent` in a process of its own (syncd's state in a SQLite file, then in PostgreSQL).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from syncd.cli import main
from syncd.emulator import http as emulator_http
from syncd.emulator.app import create_app
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.process import EmulatorProcess
from tests.cli_zygote import emulator_process
from syncd.emulator.profile import DEFAULT, DIVERGENT, PROFILES, get_profile
from syncd.emulator.routes.members import org_teams
from syncd.emulator.routes.settings_model import org_custom_fields
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN, Api
from tests.oracle import mirror_mismatches
from tests.state_support import use_backend

SPEC = (
    "orgs=2,collections=4,spaces=8,pages=3,files=3,sites=3,sections=3,members=4,teams=3,saml=2,openapi=3,"
    "translations=2,custom_fields=3,comments=3,change_requests=1,integrations=2"
)
BIG = "orgs=1,collections=1,spaces=110,pages=1,files=0,sites=0,members=0,teams=0,saml=0,openapi=0,translations=0,custom_fields=0,comments=0,change_requests=0,integrations=0"
PROFILE_NAMES = ("default", "divergent")
EXTRA_KEYS = {"etag", "x-emulator", "hasMore", "requestId"}


@dataclass
class Served:
    api: Api
    store: Store
    org: str
    other_org: str
    profile: str

    @property
    def divergent(self) -> bool:
        return self.profile == "divergent"

    async def admin(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self.api.call(method, self.api.base + "/_emulator" + path, json=body)
        assert status < 300, data
        return data

    async def create(self, path: str, body: Any = None, method: str = "POST") -> str:
        """Id of what a create made, whatever the profile answers (201 whole, 200 minimal)."""
        status, data = await self.api.call(method, path, json=body)
        assert status == (200 if self.divergent else 201), data
        return str(data["id"])

    async def ids(self, path: str, **params: Any) -> list[str]:
        return [item["id"] for item in await self.api.all_items(path, **params)]


@pytest.fixture(params=PROFILE_NAMES)
async def served(request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    """A generated emulator in one profile (the same seed in both: the same organizations)."""
    store = Store(seed=5)
    generated = generate(store, parse_spec(SPEC), seed=5, all_token=ALL_TOKEN)
    async with serve_emulator(store, profile=request.param) as running, aiohttp.ClientSession() as session:
        yield Served(Api(session, running.url, ALL_TOKEN), store, generated.org_ids[0], generated.org_ids[1], request.param)


def _folded(values: list[Any]) -> list[Any]:
    return sorted(values, key=lambda pair: (str(pair[0]).casefold(), pair[1]))


# ----- selection ----------------------------------------------------------------------------


def test_unknown_profile_is_a_value_error_and_a_one_line_exit_2() -> None:
    with pytest.raises(ValueError, match="unknown emulator profile 'nope' \\(known: default, divergent, mixed:SEED\\)"):
        create_app(Store(), profile="nope")
    done = subprocess.run(
        [sys.executable, "-m", "syncd.cli", "emulator", "serve", "--profile", "nope", "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "unknown emulator profile 'nope'" in done.stderr
    assert set(PROFILES) == {"default", "divergent"} and DEFAULT.name == "default" and DIVERGENT.name == "divergent"
    for name in ("mixed:", "mixed:x", "mixed:-1", "mixed:" + "9" * 19, "mixed:\u0663"):
        with pytest.raises(ValueError, match="unknown emulator profile"):
            get_profile(name)
    assert get_profile("mixed:7") == get_profile("mixed:7") and get_profile("mixed:7").name == "mixed:7"


async def test_info_names_the_profile(served: Served) -> None:
    status, info = await served.api.get(served.api.base + "/_emulator/info")
    assert status == 200 and info["profile"] == served.profile


async def test_both_profiles_serve_the_same_canonical_dump() -> None:
    """The generator and the dump ignore the profile: a seed gives the same organizations."""
    dumps = {}
    for name in PROFILE_NAMES:
        store = Store(seed=5)
        generated = generate(store, parse_spec(SPEC), seed=5, all_token=ALL_TOKEN)
        async with serve_emulator(store, profile=name) as running, aiohttp.ClientSession() as session:
            api = Api(session, running.url, ALL_TOKEN)
            dumps[name] = [(await api.get(f"{running.url}/_emulator/orgs/{org}/dump"))[1] for org in generated.org_ids]
    assert dumps["default"] == dumps["divergent"]
    assert not EXTRA_KEYS & set(json.dumps(dumps["divergent"]).replace('"', " ").split())


# ----- 1. duplicate -------------------------------------------------------------------------


async def test_duplicate_title_and_place(served: Served) -> None:
    api, org = served.api, served.org
    collection = await served.create(f"/v1/orgs/{org}/collections", {"title": "Dup box"})
    first = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Alpha", "parent": collection})
    await served.create(f"/v1/orgs/{org}/spaces", {"title": "Beta", "parent": collection})
    before = await served.ids(f"/v1/collections/{collection}/spaces")
    original = before[-1] if served.divergent else before[0]  # "Alpha", wherever it landed
    assert original == first
    copy_id = await served.create(f"/v1/spaces/{original}/duplicate")
    _, copy = await api.get(f"/v1/spaces/{copy_id}")
    after = await served.ids(f"/v1/collections/{collection}/spaces")
    if served.divergent:
        assert copy["title"] == "Alpha (copy)" and after == [copy_id] + before
    else:
        assert copy["title"] == "Alpha" and after == [first, copy_id] + before[1:]  # right after Alpha
    long_id = await served.create(f"/v1/orgs/{org}/spaces", {"title": "L" * 50})
    _, long_copy = await api.get(f"/v1/spaces/{await served.create(f'/v1/spaces/{long_id}/duplicate')}")
    assert long_copy["title"] == ("L" * 43 + " (copy)" if served.divergent else "L" * 50)


# ----- 2. where a new object lands ----------------------------------------------------------


async def test_created_and_transferred_objects_land_first_or_last(served: Served) -> None:
    org, other = served.org, served.other_org
    at = 0 if served.divergent else -1

    def landed(ids: list[str], new_id: str) -> bool:
        return ids[at] == new_id and len(ids) > 1

    collection = await served.create(f"/v1/orgs/{org}/collections", {"title": "Landing"})
    assert landed(await served.ids(f"/v1/orgs/{org}/collections", nested=False), collection)
    await served.create(f"/v1/orgs/{org}/spaces", {"title": "Resident", "parent": collection})
    space = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Newcomer", "parent": collection})
    assert landed(await served.ids(f"/v1/collections/{collection}/spaces"), space)
    root_space = await served.create(f"/v1/orgs/{org}/spaces", {"title": "Root newcomer"})
    root_order = served.store.ordered(("tree", org, ""))
    assert root_order[at] == root_space

    # a transfer may give a new id (the transfer-id row): where it lands, by the id it answers
    status, moved = await served.api.post(f"/v1/spaces/{space}/transfer", {"organization": other})
    assert status == 200
    assert landed(await served.ids(f"/v1/orgs/{other}/spaces"), moved["id"])
    status, moved = await served.api.post(f"/v1/collections/{collection}/transfer", {"organization": other})
    assert status == 200
    assert landed(await served.ids(f"/v1/orgs/{other}/collections", nested=False), moved["id"])

    site = next(s for s in served.store.where("site", org=org) if served.store.ordered(("site", s["id"])))
    base = f"/v1/orgs/{org}/sites/{site['id']}"
    section = await served.create(f"{base}/sections", {"title": "Landing section", "spaceId": None})
    assert served.store.ordered(("site", site["id"]))[at] == section
    assert landed(await served.ids(f"{base}/sections"), section)
    group = await served.create(f"{base}/section-groups", {"title": "Landing group"})
    assert landed(await served.ids(f"{base}/section-groups"), group)
    joiners = [await served.create(f"{base}/sections", {"title": f"Joiner {n}", "spaceId": None}) for n in (1, 2)]
    for joiner in joiners:
        status, _ = await served.api.post(f"{base}/section-groups/{group}/sections", {"sectionId": joiner})
        assert status == 200
    _, groups = await served.api.get(f"{base}/section-groups")
    members = [s["id"] for s in next(g for g in groups["items"] if g["id"] == group)["sections"]]
    assert members == (joiners[::-1] if served.divergent else joiners)

    spaces = [s["id"] for s in served.store.where("space", org=org) if not s.get("deletedAt")]
    await served.create(f"{base}/site-spaces", {"spaceId": spaces[0], "sectionId": section})
    site_space = await served.create(f"{base}/site-spaces", {"spaceId": spaces[1], "sectionId": section})
    _, listed = await served.api.get(f"{base}/sections")
    in_section = [r["id"] for r in next(s for s in listed["items"] if s["id"] == section)["siteSpaces"]]
    assert landed(in_section, site_space)


async def test_moves_keep_their_documented_semantics(served: Served) -> None:
    org = served.org
    collection = await served.create(f"/v1/orgs/{org}/collections", {"title": "Moves"})
    a = await served.create(f"/v1/orgs/{org}/spaces", {"title": "A", "parent": collection})
    b = await served.create(f"/v1/orgs/{org}/spaces", {"title": "B", "parent": collection})
    status, _ = await served.api.post(f"/v1/spaces/{a}/move", {"position": {"before": {"type": "space", "space": b}}})
    assert status == 200 and await served.ids(f"/v1/collections/{collection}/spaces") == [a, b]
    status, _ = await served.api.post(f"/v1/spaces/{a}/move", {"parent": collection})  # no position: to the end
    assert status == 200 and await served.ids(f"/v1/collections/{collection}/spaces") == [b, a]


# ----- 3. paths and slugs -------------------------------------------------------------------


async def test_paths_of_sections_and_site_spaces(served: Served) -> None:
    org = served.org
    space = await served.create(f"/v1/orgs/{org}/spaces", {"title": "My Space!"})
    twin = await served.create(f"/v1/orgs/{org}/spaces", {"title": "my  space"})
    site = await served.create(f"/v1/orgs/{org}/sites", {"title": "Paths"})
    base = f"/v1/orgs/{org}/sites/{site}"
    first = await served.create(f"{base}/sections", {"title": "Hello, World", "spaceId": None})
    await served.create(f"{base}/sections", {"title": "hello world", "spaceId": None})
    await served.create(f"{base}/sections", {"title": "!!", "spaceId": None})
    paths = sorted(s["path"] for s in await served.api.all_items(f"{base}/sections"))
    await served.create(f"{base}/site-spaces", {"spaceId": space, "sectionId": first})
    await served.create(f"{base}/site-spaces", {"spaceId": twin, "sectionId": first})
    section = next(s for s in await served.api.all_items(f"{base}/sections") if s["id"] == first)
    site_space_paths = sorted(r["path"] for r in section["siteSpaces"] if r["space"]["id"] in (space, twin))
    if served.divergent:
        assert paths == ["hello_world", "hello_world_1", "section"]
        assert site_space_paths == ["my_space", "my_space_1"]
    else:
        assert paths == ["hello-world", "hello-world-2", "section"]
        assert site_space_paths == ["my-space", "my-space-2"]


# ----- 4. order of lists the spec leaves open -----------------------------------------------


async def test_unordered_lists_are_sorted_and_positional_lists_are_not(served: Served) -> None:
    api, store, org = served.api, served.store, served.org

    async def pairs(path: str, label: Any, **params: Any) -> list[tuple[Any, str]]:
        return [(label(item), item["id"]) for item in await api.all_items(path, **params)]

    space = next(s for s in store.where("space", org=org) if len(store.tables["revision"][s["revision"]]["files"]) > 1)
    first_integration = store.where("integration", org=org)[0]["name"]
    lists = {
        "teams": (f"/v1/orgs/{org}/teams", lambda i: i["title"], [t["id"] for t in org_teams(store, org)]),
        "custom fields": (f"/v1/orgs/{org}/custom-fields", lambda i: i["name"], [f["id"] for f in org_custom_fields(store, org)]),
        "translations": (f"/v1/orgs/{org}/translations", lambda i: i["title"], [r["id"] for r in store.where("translation-settings", org=org)]),
        "openapi": (f"/v1/orgs/{org}/openapi", lambda i: i["slug"], [r["id"] for r in store.where("openapi-spec", org=org)]),
        "saml": (f"/v1/orgs/{org}/saml", lambda i: i["label"], [r["id"] for r in store.where("saml-provider", org=org)]),
        "sites": (f"/v1/orgs/{org}/sites", lambda i: i["title"], [r["id"] for r in store.where("site", org=org)]),
        "files": (f"/v1/spaces/{space['id']}/content/files", lambda i: i["name"], [f["id"] for f in store.tables["revision"][space["revision"]]["files"]]),
    }
    differs = 0
    for name, (path, label, created) in lists.items():
        got = await pairs(path, label)
        if served.divergent:
            assert got == _folded(got), name
            differs += [i for _, i in got] != created
        else:
            assert [i for _, i in got] == created, name
    assert differs >= 2 or not served.divergent
    _, sso = await api.get(f"/v1/orgs/{org}/sso")
    labels = [(i["label"], i["id"]) for i in sso["items"]]
    assert labels == (_folded(labels) if served.divergent else [(r["label"], r["id"]) for r in store.where("saml-provider", org=org)])

    members = [(m["user"]["email"], m["id"]) for m in await api.all_items(f"/v1/orgs/{org}/members")]
    joined = [m["id"] for m in await api.all_items(f"/v1/orgs/{org}/members", sort="joinedAt", order="desc")]
    assert (members == _folded(members)) if served.divergent else ([i for _, i in members] == joined)
    integrations = [(i["title"], i["name"]) for i in await api.all_items("/v1/integrations")]
    assert (integrations == _folded(integrations)) if served.divergent else ([n for _, n in integrations] == list(store.tables["integration"]))
    installs = [(store.orgs[i["target"]["organization"]]["title"], i["id"]) for i in await api.all_items(f"/v1/integrations/{first_integration}/installations")]
    assert (installs == _folded(installs)) if served.divergent else ([i for _, i in installs] == [r["id"] for r in store.where("integration-installation", integration=first_integration)])

    # Positional lists come in position order whatever the profile.
    assert await served.ids(f"/v1/orgs/{org}/collections") == [r["id"] for kind, r in _walk(store, org) if kind == "collection"]
    assert await served.ids(f"/v1/orgs/{org}/spaces") == [r["id"] for kind, r in _walk(store, org) if kind == "space"]
    site = next(s for s in store.where("site", org=org) if store.ordered(("site", s["id"])))
    base = f"/v1/orgs/{org}/sites/{site['id']}"
    from syncd.emulator.routes.site_model import site_groups, site_sections, site_site_spaces

    assert await served.ids(f"{base}/sections") == [s["id"] for s in site_sections(store, site["id"])]
    assert await served.ids(f"{base}/section-groups") == [g["id"] for g in site_groups(store, site["id"])]
    assert await served.ids(f"{base}/site-spaces") == [r["id"] for r in site_site_spaces(store, site["id"])]
    # A list with an `order` parameter keeps honouring it.
    comment_space = next(s for s in store.where("space", org=org) if len(store.ordered(("comments", s["id"], ""))) > 1)
    for order in ("asc", "desc"):
        got = [c["postedAt"] for c in await api.all_items(f"/v1/spaces/{comment_space['id']}/comments", order=order)]
        assert got == sorted(got, reverse=order == "desc")


def _walk(store: Store, org: str) -> list[tuple[str, dict[str, Any]]]:
    from syncd.emulator.routes.space_model import walk_tree

    return walk_tree(store, org)


# ----- 5. paging ----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILE_NAMES)
async def test_page_cap_of_the_profile(profile: str) -> None:
    store = Store(seed=2)
    generated = generate(store, parse_spec(BIG), seed=2, all_token=ALL_TOKEN)
    async with serve_emulator(store, profile=profile) as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        status, page = await api.get(f"/v1/orgs/{generated.org_ids[0]}/spaces", limit=1000)
        assert status == 200 and page["count"] == 110
        assert len(page["items"]) == (100 if profile == "divergent" else 110)
        assert ("next" in page) == (profile == "divergent")
        assert len(await api.all_items(f"/v1/orgs/{generated.org_ids[0]}/spaces")) == 110


async def test_page_tokens_expire_after_the_ttl(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    path = f"/v1/orgs/{served.org}/spaces"
    expired = {"error": {"code": 400, "message": "page: the page token has expired; list again from the first page"}}
    _, first = await served.api.get(path, limit=2)
    token = first["next"]["page"]
    # The profile's own lifetime: 30 s in divergent, forever in default.
    now = time.monotonic()
    monkeypatch.setattr(emulator_http, "token_clock", lambda: now + 31)
    status, body = await served.api.get(path, limit=2, page=token)
    assert (status, body) == ((400, expired) if served.divergent else (200, body))
    # The admin knob, in either profile, on a clock the test moves: a loaded machine cannot
    # age a token between two calls.
    clock = [now]
    monkeypatch.setattr(emulator_http, "token_clock", lambda: clock[0])
    assert await served.admin("PUT", "/page-tokens", {"ttl": 0.05}) == {"ttl": 0.05}
    _, first = await served.api.get(path, limit=2)
    clock[0] += 0.04
    status, _ = await served.api.get(path, limit=2, page=first["next"]["page"])
    assert status == 200  # young enough
    clock[0] += 0.02
    assert await served.api.get(path, limit=2, page=first["next"]["page"]) == (400, expired)
    assert await served.admin("PUT", "/page-tokens", {"ttl": None}) == {"ttl": None}
    status, _ = await served.api.get(path, limit=2, page=first["next"]["page"])
    assert status == 200
    for bad in ({}, {"ttl": -1}, {"ttl": "soon"}, {"ttl": True}):
        status, _ = await served.api.call("PUT", served.api.base + "/_emulator/page-tokens", json=bad)
        assert status == 400


def test_page_tokens_carry_their_issue_time() -> None:
    token = emulator_http._encode_page(4, "/v1/x")
    offset, scope, issued = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert (offset, scope) == (4, "/v1/x") and abs(issued - time.monotonic()) < 5
    legacy = base64.urlsafe_b64encode(b'[4,"/v1/x"]').decode().rstrip("=")
    assert emulator_http._decode_page(legacy, "/v1/x", ttl=0.0) == 4  # no issue time: never expires


# ----- 6. unknown fields --------------------------------------------------------------------


async def test_unknown_fields_on_objects_and_envelopes(served: Served) -> None:
    api, org = served.api, served.org
    space_id = next(s["id"] for s in served.store.where("space", org=org) if not s.get("deletedAt"))
    _, space = await api.get(f"/v1/spaces/{space_id}")
    _, again = await api.get(f"/v1/spaces/{space_id}")
    _, page = await api.get(f"/v1/orgs/{org}/spaces", limit=2)
    _, page2 = await api.get(f"/v1/orgs/{org}/spaces", limit=2)
    site = next(s for s in served.store.where("site", org=org) if served.store.where("site-space", site=s["id"]))
    _, site_spaces = await api.get(f"/v1/orgs/{org}/sites/{site['id']}/site-spaces")
    status, error = await api.get("/v1/spaces/nope")
    assert status == 404 and set(error) == {"error"}
    if not served.divergent:
        for data in (space, page, site_spaces):
            assert not EXTRA_KEYS & _all_keys(data)
        return
    assert space["x-emulator"] == {"profile": "divergent"} and len(space["etag"]) == 16
    assert again["etag"] == space["etag"]
    assert all({"etag", "x-emulator"} <= set(item) for item in page["items"])
    assert page["hasMore"] is True and page["requestId"] != page2["requestId"]
    nested = site_spaces["items"][0]["space"]
    assert nested["object"] == "space" and "etag" in nested and site_spaces["hasMore"] is False
    status, _ = await api.patch(f"/v1/spaces/{space_id}", {"title": "Renamed"})
    assert status == 200
    _, renamed = await api.get(f"/v1/spaces/{space_id}")
    assert renamed["etag"] != space["etag"]
    _, dump = await api.get(f"{api.base}/_emulator/orgs/{org}/dump")
    assert not EXTRA_KEYS & _all_keys(dump)


def _all_keys(data: Any) -> set[str]:
    if isinstance(data, dict):
        return set(data) | {k for v in data.values() for k in _all_keys(v)}
    if isinstance(data, list):
        return {k for v in data for k in _all_keys(v)}
    return set()


# ----- 7. a site's first section ------------------------------------------------------------


async def test_first_section_and_root_site_spaces(served: Served) -> None:
    org = served.org
    a, b, c, d = [await served.create(f"/v1/orgs/{org}/spaces", {"title": f"Root {n}"}) for n in "ABCD"]
    site = await served.create(f"/v1/orgs/{org}/sites", {"title": "Flat", "spaces": [a, b]})
    base = f"/v1/orgs/{org}/sites/{site}"
    section = await served.create(f"{base}/sections", {"title": "First", "spaceId": c})
    later = await served.create(f"{base}/site-spaces", {"spaceId": d})
    by_space = {r["space"]["id"]: r for r in await served.api.all_items(f"{base}/site-spaces")}
    assert by_space[d]["id"] == later and by_space[d]["section"] == section
    assert by_space[c]["section"] == section
    if served.divergent:
        assert "section" not in by_space[a] and "section" not in by_space[b]
    else:
        assert by_space[a]["section"] == by_space[b]["section"] == section
    _, got = await served.api.get(base)
    assert got["siteSpaces"] == 4


# ----- 8. what a create answers -------------------------------------------------------------


async def test_what_a_create_answers(served: Served) -> None:
    api, org = served.api, served.org
    member = next(iter(served.store.members[org]))
    creates = [
        ("POST", f"/v1/orgs/{org}/collections", {"title": "Made"}, "collection"),
        ("POST", f"/v1/orgs/{org}/spaces", {"title": "Made space", "emoji": "1f680"}, "space"),
        ("PUT", f"/v1/orgs/{org}/teams", {"title": "Made team", "members": [member]}, "team"),
        ("POST", f"/v1/orgs/{org}/custom-fields", {"name": "made", "type": "text"}, "custom-field"),
        ("POST", f"/v1/orgs/{org}/sites", {"title": "Made site"}, "site"),
    ]
    for method, path, body, kind in creates:
        status, data = await api.call(method, path, json=body)
        location = api.last_headers.get("Location")
        if served.divergent:
            assert status == 200 and location is None, (path, status)
            assert set(data) - {"etag", "x-emulator"} == {"object", "id"} | set(body), data
            assert data["object"] == kind and data.get("title", body.get("title")) == body.get("title")
        else:
            assert status == 201 and data["object"] == kind and len(data) > len(body) + 2, path
    status, whole = await api.get(f"/v1/orgs/{org}/sites/{data['id']}")  # the last create: a site
    assert status == 200 and "createdAt" in whole and set(whole) > {"object", "id", "title"}
    _, space = await api.post(f"/v1/orgs/{org}/spaces", {"title": "Located"})
    assert ("Location" in api.last_headers) == (not served.divergent)
    status, dup = await api.post(f"/v1/spaces/{space['id']}/duplicate")
    assert (status, set(dup) - {"etag", "x-emulator"} == {"object", "id"}) == ((200, True) if served.divergent else (201, False))


# ----- the read side of syncd against the divergent profile --------------------------------

SYNC_TOKEN = "profile-token"


@pytest.fixture(scope="module")
def divergent_process() -> Iterator[EmulatorProcess]:
    with emulator_process(token=SYNC_TOKEN, spec="orgs=2,collections=3,spaces=8,pages=3,files=1,sites=2,sections=3,members=3,teams=2,comments=1,change_requests=1,integrations=1", seed=3, profile="divergent") as proc:
        yield proc


def test_sync_and_backup_against_divergent(
    divergent_process: EmulatorProcess, backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The syncs keep syncd's state on `backend`; the backup is a SQLite file either way."""
    assert divergent_process.report["profile"] == "divergent"
    url = divergent_process.url
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", url)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", SYNC_TOKEN)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    state = use_backend(backend, request, monkeypatch, tmp_path / "state")
    assert main(["sync", "src"]) == 0
    assert main(["sync", "src"]) == 0
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["status"] for r in runs] == ["complete", "complete"]
    out = tmp_path / "b.db"
    assert main(["backup", "src", "--out", str(out), "--with-files"]) == 0
    assert "0 failed" in capsys.readouterr().out
    import urllib.request

    for org in divergent_process.report["organizations"]:
        with urllib.request.urlopen(f"{url}/_emulator/orgs/{org['id']}/dump") as resp:
            dump = json.load(resp)
        for db in (state, out):
            assert mirror_mismatches(db, "src", dump, org=org["id"]) == [], (db, org)
    with StateStore(out) as mirror:
        assert [r["status"] for r in mirror.runs("src")] == ["complete"]


async def test_the_profile_changes_while_the_emulator_runs() -> None:
    """`PUT /_emulator/profile`: one emulator serves one profile, then another (the property
    test of the open points runs many profiles on one emulator)."""
    store = Store()
    org = generate(store, parse_spec("orgs=1,spaces=2"), seed=1, all_token="t").org_ids[0]
    async with serve_emulator(store) as running, aiohttp.ClientSession() as session:

        async def put(body: object) -> tuple[int, object]:
            async with session.put(f"{running.url}/_emulator/profile", json=body) as resp:
                return resp.status, await resp.json()

        async def info() -> object:
            async with session.get(f"{running.url}/_emulator/info") as resp:
                return (await resp.json())["profile"]

        assert await info() == "default"
        assert await put({"name": "divergent"}) == (200, {"profile": "divergent", "cap": 100, "ttl": 30.0})
        assert await info() == "divergent"
        async with session.post(f"{running.url}/v1/orgs/{org}/collections", json={"title": "C"},
                                headers={"Authorization": "Bearer t"}) as resp:
            assert resp.status == 200 and set(await resp.json()) <= {"object", "id", "title", "etag", "x-emulator"}  # minimal create
        assert (await put({"name": "mixed:7"}))[0] == 200 and await info() == "mixed:7"
        status, answer = await put({"name": "nope"})
        assert status == 400 and "unknown emulator profile 'nope'" in str(answer) and await info() == "mixed:7"
        assert (await put({}))[0] == 400
