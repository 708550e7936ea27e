"""Scoping (`--include` / `--exclude`, a job's `include` / `exclude`): the glob matcher, the
selection over an organization, and scoped sync, backup, export, mirror and restore against
an emulator on loopback (organizations built through its API, the CLI run in-process). What
keeps syncd's state (scoped syncs, mirrors, a job) runs on both backends: a SQLite file, then
PostgreSQL; backups (always a SQLite file: the artifact, not the state) on one."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.cli import main
from syncd.config import TargetRef, load_settings
from syncd.daemon.jobs import execute_job
from syncd.daemon.metrics import DaemonMetrics
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from syncd.errors import ConfigError
from syncd.read.backup import backup
from syncd.read.sync import StateLocation, sync_into
from syncd.scope import Pattern, Scope, ScopeError
from syncd.selection import Item, content_dependencies, select
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN, Api
from tests.copy_support import Blank, Org, blank, rich_source  # noqa: F401 - `blank` is a fixture
from tests.loopback import http
from tests.schema_support import assert_valid
from tests.state_support import is_pg, use_backend

# ----- the glob matcher ---------------------------------------------------------------------------


def _path(text: str) -> tuple[str, ...]:
    return tuple(text.split("/"))


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("API", "API", True),
        ("API", "Engineering/API", True),  # unanchored: at any depth
        ("/API", "Engineering/API", False),  # anchored at the root
        ("/Engineering/API", "Engineering/API", True),
        ("API", "Engineering/APIs", False),
        ("/Engineering/*", "Engineering/API", True),
        ("/Engineering/*", "Engineering/API/Reference", False),  # * stays in one segment
        ("/Engineering/**", "Engineering/API/Reference", True),  # ** crosses segments
        ("/Engineering/**", "Engineering", False),  # below it, not itself
        ("**/Drafts", "A/B/Drafts", True),
        ("Eng*", "Engineering", True),
        ("A?I", "API", True),
        ("A?I", "A/I", False),  # ? is never a /
        ("[AB]PI", "API", True),
        ("[!A]PI", "API", False),
        ("[a-z]pi", "api", True),
        ("{API,Web}", "Web", True),
        ("/Eng/{API,Web}", "Eng/Web", True),
        ("/Eng/{API,Web}", "Eng/CLI", False),
        ("api", "API", False),  # case-sensitive
        (r"a\*b", "a*b", True),
        (r"a\*b", "axb", False),
    ],
)
def test_a_glob_matches_a_path(pattern: str, path: str, expected: bool) -> None:
    assert Pattern.parse(pattern).matches(_path(path)) is expected


def test_a_slash_inside_a_title_is_written_escaped() -> None:
    assert Pattern.parse(r"Q\/A").matches(("Q/A",))
    assert not Pattern.parse(r"Q\/A").matches(("Q", "A"))
    assert Pattern.parse("Q*").matches(("Q/A",))  # one segment, whatever it holds
    assert Pattern.parse("/Q/A").matches(("Q", "A")) and not Pattern.parse("/Q/A").matches(("Q/A",))


def test_a_match_on_a_collection_counts_for_what_is_under_it_and_an_exclude_wins() -> None:
    scope = Scope.parse(["Engineering"], ["Engineering/Old"])
    assert scope.selects(_path("Engineering"), collection=True)
    assert scope.selects(_path("Engineering/API/Reference"))
    assert not scope.selects(_path("Engineering/Old"), collection=True)
    assert not scope.selects(_path("Engineering/Old/Notes"))
    assert not scope.selects(_path("Handbook"))
    only_out = Scope.parse(exclude=["/Archive"])
    assert only_out.selects(_path("Handbook")) and not only_out.selects(_path("Archive/2019"))
    assert Scope().selects(_path("anything")) and Scope().everything


def test_a_trailing_slash_matches_collections_only() -> None:
    scope = Scope.parse(exclude=["Archive/"])
    assert not scope.selects(_path("Archive"), collection=True)
    assert not scope.selects(_path("Archive/Old"))  # under the collection
    assert scope.selects(_path("Archive"))  # a space titled Archive


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "an empty pattern matches nothing"),
        ("[abc", "'[' at position 1 is never closed with ']'"),
        ("{a,b", "'{' at position 1 is never closed with '}'"),
        ("a}", "'}' at position 2 closes no '{'"),
        ("{a,{b}}", "braces do not nest"),
        ("a\\", "ends with a lone '\\'"),
        ("a//b", "'//' at position 2 is an empty path segment"),
        ("/", "names no title"),
        ("[z-a]", "the set at position 1 is not valid"),
        ("a\nb", "holds a control character"),
    ],
)
def test_an_invalid_pattern_is_one_clear_line(pattern: str, message: str) -> None:
    with pytest.raises(ScopeError) as caught:
        Pattern.parse(pattern, "--exclude")
    assert message in str(caught.value) and str(caught.value).startswith("--exclude")
    assert "\n" not in str(caught.value) and caught.value.exit_code == 2


def test_the_cli_refuses_an_invalid_pattern_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "src", "--include", "{docs"]) == 2
    err = capsys.readouterr().err
    assert err == "syncd: error: --include '{docs': '{' at position 1 is never closed with '}'\n"
    assert main(["mirror", "plan", "a:1", "b:2", "--exclude", "[x"]) == 2
    assert "--exclude '[x'" in capsys.readouterr().err


# ----- the selection over one organization --------------------------------------------------------


def _items() -> list[Item]:
    org = ("organization", "o")
    return [
        Item("organization", "o", None, {"title": "Org"}),
        Item("collection", "eng", org, {"title": "Engineering"}),
        Item("collection", "api", ("collection", "eng"), {"title": "API"}),
        Item("collection", "arc", org, {"title": "Archive"}),
        Item("space", "ref", ("collection", "api"), {"title": "Reference"}),
        Item("space", "old", ("collection", "arc"), {"title": "Old"}),
        Item("space", "hb", org, {"title": "Handbook"}),
        Item("page", "ref/p1", ("space", "ref"), {"title": "Intro"}),
        Item("page", "ref/p2", ("page", "ref/p1"), {"title": "Nested"}),
        Item("page", "old/p1", ("space", "old"), {"title": "Old page"}),
        Item("team", "t", org, {"title": "Writers"}),
        Item("site", "docs", org, {"title": "Docs"}),
        Item("site-space", "ss1", ("site", "docs"), {"space": {"id": "ref"}}),
        Item("site-space", "ss2", ("site", "docs"), {"space": {"id": "old"}}),
        Item("site-section", "sec", ("site", "docs"), {"title": "Start"}),
        Item("collection-space", "api/ref", ("collection", "api"), {"id": "ref"}),
    ]


def test_the_selection_brings_content_parents_and_reports_what_is_outside() -> None:
    chosen = select(Scope.parse(["Reference", "Docs"]), _items())
    kept = {key[1] for key in chosen.kept}
    assert kept == {"o", "eng", "api", "ref", "ref/p1", "ref/p2", "docs", "ss1", "sec", "api/ref"}
    assert chosen.path("space", "ref") == "Engineering/API/Reference"
    lines = [d.line() for d in chosen.dependencies]
    assert "space 'Engineering/API/Reference' needs collection 'Engineering/API', outside the scope: its parent, kept as the place of what is in scope" in lines
    assert any(line.startswith("space 'Engineering/API/Reference' needs collection 'Engineering'") for line in lines)
    assert "site 'Docs' needs space 'Archive/Old', outside the scope: the site publishes it; that site-space is left out" in lines
    assert len(lines) == 3


def test_an_exclude_keeps_organization_wide_objects_and_an_include_leaves_them_out() -> None:
    excluded = select(Scope.parse(exclude=["/Archive"]), _items())
    assert {"t", "hb", "docs", "ss1", "eng"} <= {key[1] for key in excluded.kept}
    assert not {"arc", "old", "old/p1", "ss2"} & {key[1] for key in excluded.kept}
    included = select(Scope.parse(["Handbook"]), _items())
    assert {key[1] for key in included.kept} == {"o", "hb"}


def test_content_dependencies_name_custom_fields_and_links_outside_the_scope() -> None:
    chosen = select(Scope.parse(["Reference"]), _items())
    rows = [
        Item("space-custom-field-value", "ref/owner", ("space", "ref"), {"customField": {"name": "owner"}, "value": "x"}),
        Item("space-link", "ref/h1", ("space", "ref"), {"targetReference": {"kind": "url", "url": "http://h/app/o/o/s/old/page"}}),
        Item("space-link", "ref/h2", ("space", "ref"), {"targetReference": {"kind": "space", "space": "hb"}}),
        Item("space-link", "old/h1", ("space", "old"), {"targetReference": {"kind": "space", "space": "hb"}}),  # out of scope itself
    ]
    space_of = {item.key: item.id.split("/")[0] for item in rows}
    lines = [d.line() for d in content_dependencies(chosen, rows, space_of)]
    assert lines == [
        "space 'Engineering/API/Reference' needs custom-field 'owner', outside the scope: it has a value of it "
        "(custom fields are organization-wide: an --include leaves them out)",
        "space 'Engineering/API/Reference' needs space 'Archive/Old', outside the scope: it links to it; the link is kept as it is",
        "space 'Engineering/API/Reference' needs space 'Handbook', outside the scope: it links to it; the link is kept as it is",
    ]


# ----- on loopback: sync, backup, export ----------------------------------------------------------


async def _source(blank: Blank) -> dict[str, str]:
    """rich_source (Guides/Alpha, Guides/Inner/Beta, Gamma, a team, a custom field with a value
    in Alpha, a site publishing Alpha and Beta) plus an Archive collection holding Old."""
    return await _source_org(blank.source)


def _titles(db: StateLocation, tenant: str = "src") -> dict[str, list[str]]:
    with StateStore(db, readonly=True) as mirror:
        rows = list(mirror.current(tenant))
    out: dict[str, list[str]] = {}
    for row in rows:
        if row["kind"] in ("collection", "space", "site", "team"):
            out.setdefault(row["kind"], []).append(row["data"]["title"])
    return {kind: sorted(titles) for kind, titles in out.items()}


async def test_a_scoped_sync_records_only_its_scope_and_never_deletes_what_it_left_out(blank: Blank, other_state: StateLocation) -> None:
    ids = await _source(blank)
    src = TargetRef("src", blank.orgs[0])
    fresh = blank.db
    result, _ = await sync_into(blank.settings, src, fresh, scope=Scope.parse(["Beta"]))
    assert _titles(fresh) == {"collection": ["Guides", "Inner"], "space": ["Beta"]}
    assert result.scope.left_out > 0 and result.status == "complete"
    assert [d.needs for d in result.scope.dependencies] == ["Guides/Inner", "Guides"]  # the parents, reported
    with StateStore(fresh, readonly=True) as mirror:
        assert [run["scope_ref"] for run in mirror.runs()] == [f"src:{blank.orgs[0]} [include Beta]"]

    full = other_state
    await sync_into(blank.settings, src, full)
    everything = _titles(full)
    assert everything["space"] == ["Alpha", "Beta", "Gamma", "Old"]
    # Outside the scope the source changes: a rename and a delete. In it: a delete.
    await blank.source.call("PATCH", f"/v1/spaces/{ids['Old']}", {"title": "Renamed"})
    await blank.source.call("DELETE", f"/v1/spaces/{ids['Gamma']}")
    await blank.source.call("DELETE", f"/v1/spaces/{ids['Beta']}")
    result, _ = await sync_into(blank.settings, src, full, scope=Scope.parse(["Guides"]))
    assert result.summary.to_dict() == {"space": {"deleted": 1}}  # Beta; Gamma and Old are not this run's business
    assert _titles(full)["space"] == ["Alpha", "Gamma", "Old"]
    assert _titles(full)["team"] == ["Writers"]  # not read with an include, not deleted either
    result, _ = await sync_into(blank.settings, src, full)
    assert _titles(full)["space"] == ["Alpha", "Renamed"]


@pytest.mark.parametrize("state", ["sqlite"], indirect=True)  # what is checked is the backup file, never syncd's state
async def test_a_scoped_backup_holds_only_the_chosen_site_and_reports_what_it_publishes(blank: Blank, tmp_path: Path) -> None:
    await _source(blank)
    out = tmp_path / "site.db"
    report = await backup(blank.settings, TargetRef("src", blank.orgs[0]), out, scope=Scope.parse(["Docs site"], ["Beta"]))
    assert _titles(out) == {"site": ["Docs site"]}  # with an include, no space unless chosen
    lines = sorted(d.line() for d in report.crawl.scope.dependencies)
    assert lines == [
        "site 'Docs site' needs space 'Guides/Alpha', outside the scope: the site publishes it; that site-space is left out",
        "site 'Docs site' needs space 'Guides/Inner/Beta', outside the scope: the site publishes it; that site-space is left out",
    ]
    with StateStore(out, readonly=True) as mirror:
        assert sum(1 for _ in mirror.current("src", kind="site-space")) == 0
        assert sum(1 for _ in mirror.current("src", kind="site-section")) == 1


def test_scoped_backup_export_mirror_and_restore_on_the_command_line(served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = served.build(lambda source, target: _source_org(source))
    src, dst = f"src:{served.orgs[0]}", f"dst:{served.orgs[1]}"
    # backup --json carries the scope and the dependencies; the export is scoped too.
    whole = tmp_path / "whole.db"
    code, document = _cli_json(capsys, "backup", src, "--out", str(whole), "--exclude", "/Archive", "--json")
    assert code == 0 and document["include"] == [] and document["exclude"] == ["/Archive"] and document["dependencies"] == []
    assert_valid("backup", document)
    assert _titles(whole)["space"] == ["Alpha", "Beta", "Gamma"] and _titles(whole)["team"] == ["Writers"]
    code, document = _cli_json(capsys, "export", str(whole), str(tmp_path / "out"), "--include", "/Guides/Inner", "--json")
    assert code == 0 and document["spaces"] == 1
    assert [d["needs"] for d in document["dependencies"]] == ["Guides"]  # kept as the parent
    assert_valid("export", document)
    org_dir = next(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert sorted(p.name for p in org_dir.iterdir()) == ["guides", "organization.json"]
    assert sorted(p.name for p in (org_dir / "guides").iterdir()) == ["collection.json", "inner"]
    assert (org_dir / "guides" / "inner" / "beta" / "space.json").exists()

    # A scoped mirror: only /Guides is copied; the target's own objects stay.
    served.build(_target_org)
    assert main(["mirror", "apply", src, dst, "--mode", "mirror", "--yes", "--include", "/Guides"]) == 0
    out = capsys.readouterr().out
    assert "warning: space 'Guides/Alpha' needs custom-field 'owner', outside the scope" in out
    assert served.titles(1) == {"collection": ["Guides", "Inner", "Theirs"], "space": ["Alpha", "Beta", "Keep me"], "site": [], "team": []}
    # All but the target's own collection (then it is not even "extra" on the target); then a
    # mirror that excludes the Archive: the Archive's copy is out of scope on both sides, so
    # neither the source's deleting Old nor anything else touches it.
    assert main(["mirror", "apply", src, dst, "--mode", "mirror", "--yes", "--exclude", "/Theirs"]) == 0
    assert served.titles(1)["space"] == ["Alpha", "Beta", "Gamma", "Keep me", "Old"]
    served.build(lambda source, target: _change_source(source, ids))
    assert main(["mirror", "apply", src, dst, "--mode", "mirror", "--yes", "--exclude", "Archive", "--exclude", "/Theirs"]) == 0
    assert served.titles(1)["space"] == ["Alpha", "Beta", "Gamma 2", "Keep me", "Old"]
    code, document = _cli_json(capsys, "mirror", "verify", src, dst, "--exclude", "Archive", "--exclude", "/Theirs", "--json")
    assert code == 0 and document["equal"] and document["verification"]["counts"]["extra"] == 0
    code, document = _cli_json(capsys, "mirror", "verify", src, dst, "--json")
    assert code == 0 and document["verification"]["counts"]["left_on_target"] > 0  # copy mode: the target's own objects are left there
    code, _ = _cli_json(capsys, "mirror", "verify", src, dst, "--mode", "mirror", "--json")
    assert code == 1  # unscoped, the copy of Old and the target's own objects are extra
    # With the Archive in scope, the mirror deletes Old's copy: syncd made it, the source lost it.
    assert main(["mirror", "apply", src, dst, "--mode", "mirror", "--yes", "--exclude", "/Theirs"]) == 0
    assert served.titles(1)["space"] == ["Alpha", "Beta", "Gamma 2", "Keep me"]
    # A scoped restore into the third (empty) organization.
    capsys.readouterr()
    assert main(["restore", str(whole), f"dst:{served.orgs[2]}", "--include", "Gamma", "--include", "Inner"]) == 0, capsys.readouterr().out
    assert served.titles(2) == {"collection": ["Guides", "Inner"], "space": ["Beta", "Gamma"], "site": [], "team": []}


def test_a_saved_plan_keeps_its_scope(served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    served.build(lambda source, target: _source_org(source))
    src, dst = f"src:{served.orgs[0]}", f"dst:{served.orgs[1]}"
    plan = tmp_path / "plan.json"
    assert main(["mirror", "plan", src, dst, "--include", "/Archive", "--out", str(plan)]) == 2
    saved = json.loads(plan.read_text())
    assert saved["options"]["include"] == ["/Archive"] and saved["options"]["exclude"] == []
    assert_valid("mirror-plan", saved)
    capsys.readouterr()
    assert main(["mirror", "apply", "--plan", str(plan), "--include", "/Guides"]) == 2
    assert "--include and --exclude were fixed when the plan was made" in capsys.readouterr().err
    assert main(["mirror", "apply", "--plan", str(plan)]) == 0  # read again with the plan's scope: not stale
    assert served.titles(1) == {"collection": ["Archive"], "space": ["Old"], "site": [], "team": []}


# ----- a job ---------------------------------------------------------------------------------------


async def test_a_job_with_include_and_exclude_in_its_configuration(blank: Blank, tmp_path: Path) -> None:
    await _source(blank)
    config = tmp_path / "syncd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        + (f'state_url = "{blank.db}"\n' if is_pg(blank.db) else "")
        + f'[tenants.src]\nbase_url = "{blank.running.url}"\ntoken = "{ALL_TOKEN}"\n'
        f'[[jobs]]\nname = "guides"\nkind = "sync"\nsource = "src:{blank.orgs[0]}"\ninclude = ["/Guides"]\nexclude = ["Beta"]\n'
        f'[[jobs]]\nname = "nightly"\nkind = "backup"\nsource = "src:{blank.orgs[0]}"\nexclude = ["/Guides", "/Archive"]\n'
    )
    settings = load_settings(config, {})
    assert [job.scope.describe() for job in settings.jobs] == ["include /Guides; exclude Beta", "exclude /Guides, /Archive"]
    outcome = await execute_job(settings, settings.jobs[0], DaemonMetrics())
    assert outcome.outcome == "succeeded" and outcome.summary["include"] == ["/Guides"]
    assert _titles(blank.db) == {"collection": ["Guides", "Inner"], "space": ["Alpha"]}
    outcome = await execute_job(settings, settings.jobs[1], DaemonMetrics())
    assert outcome.outcome == "succeeded", outcome.summary
    assert _titles(Path(outcome.summary["file"])) == {"site": ["Docs site"], "space": ["Gamma"], "team": ["Writers"]}
    assert len(outcome.summary["dependencies"]) == 2  # the site publishes Alpha and Beta

    config.write_text(config.read_text().replace('exclude = ["Beta"]', 'exclude = ["{Beta"]'))
    with pytest.raises(ConfigError) as caught:
        load_settings(config, {})
    assert str(caught.value) == f"{config}: jobs[0].exclude: pattern '{{Beta': '{{' at position 1 is never closed with '}}'"


# ----- helpers ------------------------------------------------------------------------------------


async def _source_org(org: Org) -> dict[str, str]:
    ids = await rich_source(org)
    ids["archive"] = await org.collection("Archive")
    ids["Old"] = await org.space("Old", ids["archive"])
    return ids


async def _target_org(source: Org, target: Org) -> None:
    await target.space("Keep me", await target.collection("Theirs"))


async def _change_source(source: Org, ids: dict[str, str]) -> None:
    await source.call("DELETE", f"/v1/spaces/{ids['Old']}")
    await source.call("PATCH", f"/v1/spaces/{ids['Gamma']}", {"title": "Gamma 2"})


@dataclass
class Served:
    """An emulator with three empty organizations, served by a thread: the CLI runs in the
    test's own (main) thread, as it does for a user, signal handlers and all."""

    url: str
    orgs: list[str]

    def build(self, change: Callable[[Org, Org], Awaitable[Any]]) -> Any:
        """Change the source and the target through the API, as a user would."""

        async def run() -> Any:
            async with aiohttp.ClientSession() as session:
                api = Api(session, self.url, ALL_TOKEN)
                return await change(Org(api, self.orgs[0]), Org(api, self.orgs[1]))

        return anyio.run(run)

    def titles(self, index: int) -> dict[str, list[str]]:
        """Titles of an organization's collections, spaces, sites and teams, as listed now."""
        out = {}
        for kind, path in (("collection", "collections"), ("space", "spaces"), ("site", "sites"), ("team", "teams")):
            status, data = http("GET", f"{self.url}/v1/orgs/{self.orgs[index]}/{path}?limit=1000", ALL_TOKEN)
            assert status == 200 and not data.get("next"), (status, data)
            out[kind] = sorted(item["title"] for item in data["items"])
        return out


@pytest.fixture
def served(backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """The emulator; the CLI's tenants on it, its state on `backend`."""
    store = Store(seed=11)
    generated = generate(store, parse_spec("orgs=0,empty_orgs=3"), seed=11, all_token=ALL_TOKEN)
    ready, found = threading.Event(), {}

    async def serve() -> None:
        found["loop"], found["stop"] = asyncio.get_running_loop(), asyncio.Event()
        async with serve_emulator(store) as running:
            found["url"] = running.url
            ready.set()
            await found["stop"].wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    for name in ("SRC", "DST"):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", found["url"])
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", ALL_TOKEN)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    use_backend(backend, request, monkeypatch, tmp_path / "state")
    monkeypatch.chdir(tmp_path)
    try:
        yield Served(found["url"], list(generated.org_ids))
    finally:
        found["loop"].call_soon_threadsafe(found["stop"].set)
        thread.join(30)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """The in-process CLI and the JSON document it printed."""
    capsys.readouterr()
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)
