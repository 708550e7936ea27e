"""Helpers of the write-side tests: organizations built call by call through the emulator's
API, settings pointing at it, and snapshots read by the real crawler. `blank` keeps syncd's
state on both backends (`tests.state_support.state`): a SQLite file, then PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from syncd.config import Settings, TargetRef, load_settings
from syncd.copy import IdMap, Snapshot, copy_org, plan_copy
from syncd.copy.context import ContentStrategy
from syncd.copy.journal import Pair, load_idmap
from syncd.copy.ops import Plan
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.read.sync import StateLocation, sync_into
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN, Api
from tests.state_support import is_pg

MOVE_REF = {
    "collection": ("space", "space"),
    "space": ("space", "space"),
    "site-section": ("site-section", "siteSection"),
    "site-section-group": ("site-section", "id"),
    "site-space": ("site-space", "siteSpace"),
}


class Org:
    """One organization of the emulator, changed through its API like a user would."""

    def __init__(self, api: Api, org: str) -> None:
        self.api, self.id = api, org

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self.api.call(method, path, json=body)
        assert status < 300, (method, path, status, data)
        return data

    async def collection(self, title: str, parent: str | None = None, **fields: Any) -> str:
        made = await self.call("POST", f"/v1/orgs/{self.id}/collections", {"title": title, **({"parent": parent} if parent else {})})
        if fields:
            await self.call("PATCH", f"/v1/collections/{made['id']}", fields)
        return str(made["id"])

    async def space(self, title: str, parent: str | None = None, **fields: Any) -> str:
        made = await self.call("POST", f"/v1/orgs/{self.id}/spaces", {"title": title, **({"parent": parent} if parent else {})})
        if fields:
            await self.call("PATCH", f"/v1/spaces/{made['id']}", fields)
        return str(made["id"])

    async def team(self, title: str) -> str:
        return str((await self.call("PUT", f"/v1/orgs/{self.id}/teams", {"title": title}))["id"])

    async def custom_field(self, name: str, field_type: str = "text", **fields: Any) -> str:
        return str((await self.call("POST", f"/v1/orgs/{self.id}/custom-fields", {"name": name, "type": field_type, **fields}))["id"])

    async def saml(self, label: str, **fields: Any) -> str:
        return str((await self.call("POST", f"/v1/orgs/{self.id}/saml", {"label": label, **fields}))["id"])

    async def value(self, space: str, name: str, value: Any) -> None:
        await self.call("PATCH", f"/v1/spaces/{space}/custom-fields", {"values": {name: {"value": value}}})

    async def site(self, title: str, **fields: Any) -> str:
        made = await self.call("POST", f"/v1/orgs/{self.id}/sites", {"title": title})
        if fields:
            await self.call("PATCH", f"/v1/orgs/{self.id}/sites/{made['id']}", fields)
        return str(made["id"])

    async def section(self, site: str, space: str, title: str, **fields: Any) -> tuple[str, str]:
        """(section id, the id of the site-space made with it)."""
        made = await self.call("POST", f"/v1/orgs/{self.id}/sites/{site}/sections", {"spaceId": space, "title": title})
        if fields:
            await self.call("PATCH", f"/v1/orgs/{self.id}/sites/{site}/sections/{made['id']}", fields)
        items = await self.api.all_items(f"/v1/orgs/{self.id}/sites/{site}/site-spaces")
        (site_space,) = [i for i in items if i.get("section") == made["id"] and i["space"]["id"] == space]
        return str(made["id"]), str(site_space["id"])

    async def site_space(self, site: str, space: str, section: str | None = None, **fields: Any) -> str:
        made = await self.call("POST", f"/v1/orgs/{self.id}/sites/{site}/site-spaces", {"spaceId": space, **({"sectionId": section} if section else {})})
        if fields:
            await self.call("PATCH", f"/v1/orgs/{self.id}/sites/{site}/site-spaces/{made['id']}", fields)
        return str(made["id"])

    async def group(self, site: str, title: str, sections: list[str] | None = None) -> str:
        body: dict[str, Any] = {"title": title, **({"sections": sections} if sections else {})}
        return str((await self.call("POST", f"/v1/orgs/{self.id}/sites/{site}/section-groups", body))["id"])

    async def move(self, kind: str, item: str, *, site: str | None = None, parent: Any = "keep", before: str | None = None, after: str | None = None) -> None:
        ref_type, key = MOVE_REF[kind]
        body: dict[str, Any] = {} if parent == "keep" else {"parent": parent}
        if before or after:
            body["position"] = {"before" if before else "after": {"type": ref_type, key: before or after}}
        base = {
            "collection": "/v1/collections", "space": "/v1/spaces", "site-section": f"/v1/orgs/{self.id}/sites/{site}/sections",
            "site-section-group": f"/v1/orgs/{self.id}/sites/{site}/section-groups", "site-space": f"/v1/orgs/{self.id}/sites/{site}/site-spaces",
        }[kind]
        await self.call("POST", f"{base}/{item}/move", body)


def settings_for(url: str, state: Path, state_url: str | None = None, **tokens: str) -> Settings:
    """Settings with one tenant per keyword (name=token) on the emulator at `url`; the mirror
    in `state/syncd.db`, or in the PostgreSQL at `state_url` (`state` then holds the rest)."""
    env = {"SYNCD_STATE_DIR": str(state), "SYNCD_LOG_LEVEL": "error"}
    if state_url is not None:
        env["SYNCD_STATE_URL"] = state_url
    for name, token in tokens.items():
        env[f"SYNCD_TENANTS__{name.upper()}__BASE_URL"] = url
        env[f"SYNCD_TENANTS__{name.upper()}__TOKEN"] = token
    empty = state / "no-config.toml"
    state.mkdir(parents=True, exist_ok=True)
    empty.write_text("")
    return load_settings(empty, env)


def settings_at(url: str, state_dir: Path, location: StateLocation, **tokens: str) -> Settings:
    """settings_for whose mirror is `location` (`tests.state_support.state`): a SQLite file
    (which must be `state_dir/syncd.db`, where syncd looks), or a PostgreSQL URL."""
    if not is_pg(location):
        assert location == state_dir / "syncd.db", (location, state_dir)
        return settings_for(url, state_dir, **tokens)
    return settings_for(url, state_dir, str(location), **tokens)


def assert_no_state_file(location: StateLocation, state_dir: Path) -> None:
    """With the state in PostgreSQL, syncd made no SQLite state in `state_dir` (a code path that
    ignored state_url would otherwise pass unseen)."""
    if is_pg(location):
        files = [name for name in ("syncd.db", "daemon.db") if (state_dir / name).exists()]
        assert not files, f"{state_dir}: {', '.join(files)} made although the state is in PostgreSQL"


async def read(settings: Settings, ref: TargetRef, db: StateLocation) -> Snapshot:
    """What the crawler records of an organization, as the planner sees it."""
    await sync_into(settings, ref, db)
    with StateStore(db) as mirror:
        return Snapshot.from_mirror(mirror, settings.tenant(ref.tenant).name, str(ref.org))


async def plan_between(settings: Settings, src: TargetRef, dst: TargetRef, db: StateLocation, **options: Any) -> tuple[Plan, Snapshot, Snapshot, IdMap]:
    """Read both organizations and plan (content: same credentials unless told)."""
    source, target = await read(settings, src, db), await read(settings, dst, db)
    with StateStore(db) as mirror:
        idmap = load_idmap(mirror, Pair(source.tenant, source.org, target.tenant, target.org))
    content = options.pop("content", ContentStrategy(same_credentials=True))
    return plan_copy(source, target, idmap, content=content, **options), source, target, idmap


def keys(plan: Plan, action: str | None = None) -> list[str]:
    return [op.key for op in plan.ops if action is None or op.action == action]


@dataclass
class Blank:
    """An emulator with three empty organizations: a source, a target, a spare."""

    running: RunningEmulator
    api: Api
    orgs: list[str]
    settings: Settings
    db: StateLocation
    """Where syncd's state is: `state_dir/syncd.db`, or a PostgreSQL URL (settings' state_url)."""

    @property
    def source(self) -> Org:
        return Org(self.api, self.orgs[0])

    @property
    def target(self) -> Org:
        return Org(self.api, self.orgs[1])

    def refs(self, target: int = 1) -> tuple[TargetRef, TargetRef]:
        return TargetRef("src", self.orgs[0]), TargetRef("dst", self.orgs[target])

    async def plan(self, **options: Any):  # type: ignore[no-untyped-def]
        src, dst = self.refs()
        return await plan_between(self.settings, src, dst, self.db, **options)

    async def copy(self, **options: Any):  # type: ignore[no-untyped-def]
        src, dst = self.refs()
        return await copy_org(self.settings, src, dst, db=self.db, **options)  # type: ignore[arg-type]


@pytest.fixture
async def blank(state: StateLocation, emulator_profile: str, tmp_path: Path) -> AsyncIterator[Blank]:
    """Three empty organizations; syncd's state on `state`'s backend (a test runs on both)."""
    store = Store(seed=11)
    generated = generate(store, parse_spec("orgs=0,empty_orgs=3"), seed=11, all_token=ALL_TOKEN)
    state_dir = tmp_path / "state"  # where `state` puts its SQLite file
    async with serve_emulator(store, profile=emulator_profile) as running, aiohttp.ClientSession() as session:
        settings = settings_at(running.url, state_dir, state, src=ALL_TOKEN, dst=ALL_TOKEN)
        yield Blank(running, Api(session, running.url, ALL_TOKEN), generated.org_ids, settings, state)
    assert_no_state_file(state, state_dir)


async def rich_source(org: Org) -> dict[str, str]:
    ids = {"guides": await org.collection("Guides", description="All the guides", defaultLevel="edit")}
    ids["inner"] = await org.collection("Inner", ids["guides"])
    for title, parent in (("Alpha", ids["guides"]), ("Beta", ids["inner"]), ("Gamma", None)):
        ids[title] = await org.space(title, parent, emoji="1f680")
    ids["team"] = await org.team("Writers")
    ids["field"] = await org.custom_field("owner", title="Owner")
    await org.value(ids["Alpha"], "owner", "docs team")
    ids["saml"] = await org.saml("Okta", defaultTeam=ids["team"], ssoURL="https://sso.example.com/x", entityID="e", certificate="c")
    ids["site"] = await org.site("Docs site")
    ids["section"], ids["first"] = await org.section(ids["site"], ids["Alpha"], "Start", icon="book")
    ids["second"] = await org.site_space(ids["site"], ids["Beta"], ids["section"], condition="visitor.claims.beta == true")
    ids["group"] = await org.group(ids["site"], "Everything", [ids["section"]])
    return ids
