"""Access settings are the target's own (issue 39): a copy leaves who may join or sign in to
the target (its emailDomains, inviteLinks, defaultRole, sso and SAML providers) as the target
has them, says so in one skip line and does not count them in verify; `--with-access`
(`mirror plan/apply`, `restore`; `with_access = true` on a daemon mirror job) copies them,
listed under their own heading.

The source and the target start with different access settings, every field and a SAML
provider of the same label (adopted and patched when access is copied). The copy itself runs
in-process against the emulator under `default`, `divergent` and a `mixed:SEED` profile, and on
both state backends; the command line (`mirror plan`, `apply --plan`, `restore`) against an
emulator process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from syncd.cli import main
from syncd.config import JobConfig
from syncd.copy.invariants import Bounds, check_ops
from syncd.copy.ops import Op
from syncd.copy.rules import ACCESS_KEY
from syncd.daemon.jobs import execute_job, save_mirror_plan
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.ui.plans import grouped, read_plan
from syncd.daemon.ui.render import render
from tests.cli_zygote import emulator_process
from tests.copy_support import Blank, Org, blank, keys, rich_source  # noqa: F401 - `blank` is a fixture
from tests.loopback import EmulatorClient
from tests.schema_support import check_output
from tests.test_plan_review import run

ACCESS = ("emailDomains", "inviteLinks", "defaultRole", "sso")
SOURCE_ACCESS = {"emailDomains": ["internal.example.com"], "inviteLinks": False, "defaultRole": "edit", "sso": True}
TARGET_ACCESS = {"emailDomains": ["partner.example.net"], "inviteLinks": True, "defaultRole": "read", "sso": False}
KEPT = (
    "emailDomains, inviteLinks, defaultRole, sso, SAML providers (1 in the source, 1 on the target) kept as the target has them: "
    "--with-access copies them"
)

PROFILES = pytest.mark.parametrize(
    ("emulator_profile", "state"),
    [("default", "sqlite"), ("divergent", "sqlite"), ("mixed:39", "sqlite"), ("default", "postgresql")],
    indirect=["state"], ids=["default-sqlite", "divergent-sqlite", "mixed:39-sqlite", "default-postgresql"],
)  # fmt: skip


# ----- the copy, in-process ----------------------------------------------------------------------


def access(organization: dict[str, Any], providers: list[dict[str, Any]]) -> dict[str, Any]:
    """Who may join or sign in, from the API's answers: the fields, and each SAML provider by its
    values (its default team by title: ids differ between organizations)."""
    saml = sorted(
        (p["label"], p["entityID"], p["ssoURL"], p["certificate"], p.get("defaultRole"), (p.get("defaultTeam") or {}).get("title"))
        for p in providers
    )
    return {**{name: organization.get(name) for name in ACCESS}, "saml": saml}


async def access_of(org: Org) -> dict[str, Any]:
    return access(await org.call("GET", f"/v1/orgs/{org.id}"), await org.api.all_items(f"/v1/orgs/{org.id}/saml"))


async def different_access(blank: Blank) -> None:
    """A source (`rich_source`: a SAML provider 'Okta' naming team 'Writers') and a target whose
    access settings differ in every field; the target's own 'Okta' points elsewhere, to no team."""
    await rich_source(blank.source)
    await blank.source.call("PATCH", f"/v1/orgs/{blank.source.id}", SOURCE_ACCESS)
    await blank.target.saml("Okta", ssoURL="https://idp.partner.example.net/sso", entityID="partner", certificate="partner-cert", defaultRole="read")
    await blank.target.call("PATCH", f"/v1/orgs/{blank.target.id}", TARGET_ACCESS)


@PROFILES
async def test_a_copy_keeps_the_targets_access_settings_and_with_access_copies_them(blank: Blank) -> None:
    await different_access(blank)
    source, target = await access_of(blank.source), await access_of(blank.target)
    assert all(source[name] != target[name] for name in (*ACCESS, "saml")), (source, target)

    report = await blank.copy()
    assert report.equal, report.verification.counts()
    assert await access_of(blank.target) == target  # nothing of it written
    assert [s.reason for s in report.skips if s.title == "access settings"] == [KEPT]  # one line says so
    assert {e.kind for e in report.verification.excused} >= {"organization", "saml-provider"}  # not counted as differences
    plan, _, _, _ = await blank.plan()
    assert not [op.key for op in plan.ops if op.kind == "saml-provider" or op.key == ACCESS_KEY], plan.ops

    report = await blank.copy(with_access=True)
    assert report.equal, report.verification.counts()
    assert await access_of(blank.target) == source
    assert not [s for s in report.skips if s.title == "access settings"]
    listed = {(item.section, item.kind, item.action) for item in report.listing}
    assert {("access", "organization", "update"), ("access", "saml-provider", "adopt"), ("access", "saml-provider", "update")} <= listed
    plan, _, _, _ = await blank.plan(with_access=True)
    assert plan.ops == [], plan.ops  # a copy with access is then complete


@pytest.mark.parametrize("state", ["sqlite"], indirect=True)
async def test_a_mirror_deletes_the_saml_providers_it_made_only_with_access(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    assert (await blank.copy(mode="mirror", with_access=True)).equal
    await blank.source.call("DELETE", f"/v1/orgs/{blank.source.id}/saml/{ids['saml']}")
    plan, _, _, _ = await blank.plan(mode="mirror")
    assert not keys(plan, "delete")
    assert [s.reason.split(" kept")[0] for s in plan.skips if s.title == "access settings"] == ["SAML providers (0 in the source, 1 on the target)"]
    report = await blank.copy(mode="mirror")
    assert report.equal and len(await blank.api.all_items(f"/v1/orgs/{blank.target.id}/saml")) == 1
    report = await blank.copy(mode="mirror", with_access=True)
    assert report.equal and await blank.api.all_items(f"/v1/orgs/{blank.target.id}/saml") == []


def test_a_run_without_access_refuses_ops_that_write_them() -> None:
    """Defence in depth: whoever made the plan (a file may be edited), a run that keeps the
    target's access settings applies no op that writes them."""
    saml = Op(key="create:saml-provider:P", action="create", kind="saml-provider", source_id="P", title="Okta", method="POST",
              path="/v1/orgs/T/saml", body={"label": "Okta"})  # fmt: skip
    org = Op(key=ACCESS_KEY, action="patch", kind="organization", source_id="S", target_id="T", title="Org", method="PATCH",
             path="/v1/orgs/T", body={"emailDomains": ["a.example.com"], "ai": True})  # fmt: skip
    other = Op(key="patch:organization:S", action="patch", kind="organization", source_id="S", target_id="T", title="Org", method="PATCH",
               path="/v1/orgs/T", body={"ai": True})  # fmt: skip
    kept = check_ops([saml, org, other], Bounds(target_org="T", mode="copy", max_delete=0))
    assert [line.split("': ")[0] + "'" for line in kept] == ["op 'create:saml-provider:P'", f"op '{ACCESS_KEY}'"], kept
    assert "writes the organization's emailDomains: the run keeps the target's access settings (--with-access copies them)" in kept[1]
    assert check_ops([saml, org, other], Bounds(target_org="T", mode="copy", max_delete=0, with_access=True)) == []


# ----- the daemon's mirror job ---------------------------------------------------------------------


def mirror_job(blank: Blank, **options: Any) -> Any:
    return TypeAdapter(JobConfig).validate_python(
        {"name": "partner", "kind": "mirror", "source": f"src:{blank.orgs[0]}", "target": f"dst:{blank.orgs[1]}", **options}
    )


@pytest.mark.parametrize("state", ["sqlite"], indirect=True)
async def test_a_mirror_job_copies_access_only_with_with_access(blank: Blank, tmp_path: Path) -> None:
    await different_access(blank)
    source, target = await access_of(blank.source), await access_of(blank.target)
    plain, with_access = mirror_job(blank), mirror_job(blank, with_access=True)
    assert plain.with_access is False and with_access.with_access is True

    folder = tmp_path / "plans"
    saved = await save_mirror_plan(blank.settings, with_access, folder, datetime(2026, 12, 7, 5, 0, tzinfo=UTC))
    assert json.loads(saved.read_text())["options"]["with_access"] is True
    view = read_plan(folder, saved.name)  # what the page shows: the access settings under their own heading
    (access,) = [(heading, changes) for group, heading, changes in grouped(view.changes) if group == "access"]
    assert access[0] == "Access settings" and {c.kind for c in access[1]} == {"organization", "saml-provider"}
    assert all(c.section == "access" for c in access[1]) and not [c for c in view.changes if c.kind == "saml-provider" and not c.section]
    html = render("plan.html", plan=view, groups=grouped(view.changes), shown=len(view.changes), kind="", action="", actions=list(view.counts),
                  page_name="plans", session=None, fleet=False, now=datetime.now(UTC), title="Plan")  # fmt: skip
    assert '<section class="group" id="group-access">\n<h2>Access settings <small>' in html, html
    assert "<code>emailDomains</code>: [&#34;partner.example.net&#34;] → [&#34;internal.example.com&#34;]" in html, html

    first = await execute_job(blank.settings, plain, DaemonMetrics())
    assert first.outcome == "succeeded", first.summary
    assert await access_of(blank.target) == target
    second = await execute_job(blank.settings, with_access, DaemonMetrics())
    assert second.outcome == "succeeded", second.summary
    assert await access_of(blank.target) == source


def test_config_check_shows_a_mirror_jobs_with_access(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "syncd.toml"
    tenants = '[tenants.src]\nbase_url = "http://src"\ntoken = "src-token-0123"\n[tenants.dst]\nbase_url = "http://dst"\ntoken = "dst-token-0123"\n'
    jobs = (
        '[[jobs]]\nname = "partner"\nkind = "mirror"\nsource = "src:a"\ntarget = "dst:b"\nwith_access = true\n'
        '[[jobs]]\nname = "plain"\nkind = "mirror"\nsource = "src:a"\ntarget = "dst:c"\n'
    )
    path.write_text(tenants + jobs)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["config", "check", "--config", str(path)]) == 0
    rows = {line.split("│")[1].strip(): line for line in capsys.readouterr().out.splitlines() if line.count("│") > 3}
    assert "with_access" in rows["partner"] and "with_access" not in rows["plain"], rows
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    assert [job["with_access"] for job in json.loads(capsys.readouterr().out)["jobs"]] == [True, False]
    path.write_text(tenants + '[[jobs]]\nname = "s"\nkind = "sync"\nsource = "src"\nwith_access = true\n')
    assert main(["config", "check", "--config", str(path)]) == 2
    assert "with_access: only allowed on mirror jobs" in capsys.readouterr().err


# ----- the command line ----------------------------------------------------------------------------

TOKEN = "access-token"


class Emulator(EmulatorClient):
    """Fresh empty organizations for each test: a source, then targets."""

    def __init__(self, url: str, report: dict[str, Any], token: str) -> None:
        super().__init__(url, report, token)
        self.used = count()

    def take(self, n: int) -> list[str]:
        return [self.orgs[next(self.used)] for _ in range(n)]

    def access(self, org: str) -> dict[str, Any]:
        return access(self.api("GET", f"/v1/orgs/{org}"), self.api("GET", f"/v1/orgs/{org}/saml?limit=1000")["items"])

    def source(self, org: str) -> None:
        team = self.api("PUT", f"/v1/orgs/{org}/teams", {"title": "Writers"})["id"]
        self.api("POST", f"/v1/orgs/{org}/saml", {"label": "Okta", "ssoURL": "https://idp.internal.example.com/sso", "entityID": "internal",
                                                  "certificate": "internal-cert", "defaultRole": "edit", "defaultTeam": team})  # fmt: skip
        self.api("POST", f"/v1/orgs/{org}/spaces", {"title": "Handbook"})
        self.api("PATCH", f"/v1/orgs/{org}", SOURCE_ACCESS)

    def target(self, org: str) -> None:
        """The target's own 'Okta' (adopted and patched when access is copied)."""
        self.api("POST", f"/v1/orgs/{org}/saml", {"label": "Okta", "ssoURL": "https://idp.partner.example.net/sso", "entityID": "partner"})
        self.api("PATCH", f"/v1/orgs/{org}", TARGET_ACCESS)


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with emulator_process(token=TOKEN, spec="orgs=0,empty_orgs=12", seed=39) as running:
        yield Emulator(running.url, running.report, TOKEN)


@pytest.fixture
def env(emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)
    for key, value in {"SYNCD_STATE_DIR": str(tmp_path / "state"), "SYNCD_LOG_LEVEL": "warning", "COLUMNS": "160"}.items():
        monkeypatch.setenv(key, value)
    for name in ("SRC", "DST"):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", emulator.url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", TOKEN)
    return tmp_path


def test_mirror_plan_says_what_it_keeps_and_lists_access_under_its_own_heading(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.take(2)
    emulator.source(src)
    emulator.target(dst)
    kept = "  skip organization 'access settings': " + KEPT
    code, out, err = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}")
    assert code == 2, err
    assert [line for line in out.splitlines() if "access settings" in line] == [kept], out
    assert "Access settings:" not in out and "saml-provider" not in out

    code, out, err = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--with-access")
    assert code == 2, err
    listing = out.splitlines()
    heading = listing.index("Access settings:")
    access = listing[heading + 1 :]
    assert access[0].startswith("= adopt  saml-provider 'Okta'"), out
    assert any(line.startswith("~ update saml-provider 'Okta'") for line in access) and "      entityID: 'partner' → 'internal'" in access, out
    update = next(i for i, line in enumerate(access) if line.startswith("~ update organization"))
    assert access[update + 1 : update + 5] == [
        "      emailDomains: [\"partner.example.net\"] → [\"internal.example.com\"]",
        "      defaultRole: 'read' → 'edit'",
        "      sso: false → true",
        "      inviteLinks: true → false",
    ], out
    assert not [line for line in listing[:heading] if "saml-provider" in line or "emailDomains" in line] and "'access settings'" not in out

    code, out, _ = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--with-access", "--json")
    document = check_output("mirror-plan", out)
    assert code == 2 and document["options"]["with_access"] is True
    access_changes = {(c["kind"], c["action"]) for c in document["changes"] if c.get("section") == "access"}
    assert access_changes == {("organization", "update"), ("saml-provider", "adopt"), ("saml-provider", "update")}
    assert not [c for c in document["changes"] if c["kind"] == "saml-provider" and c.get("section") != "access"]


def test_a_saved_plan_is_applied_with_the_access_it_was_made_with(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.take(2)
    emulator.source(src)
    emulator.target(dst)
    source, target = emulator.access(src), emulator.access(dst)
    assert run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--with-access", "--out", "access.json")[0] == 2
    assert run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--out", "plain.json")[0] == 2
    writes = emulator.writes()
    code, _, err = run(capsys, "mirror", "apply", "--plan", "access.json")
    assert code == 2 and "access.json was made with --with-access (it writes the target's access settings): give --with-access" in err, err
    code, _, err = run(capsys, "mirror", "apply", "--plan", "plain.json", "--with-access")
    assert code == 2 and "plain.json was made without --with-access" in err, err
    assert emulator.writes() == writes  # nothing was written
    code, out, err = run(capsys, "mirror", "apply", "--plan", "access.json", "--with-access")
    assert code == 0, out + err
    assert emulator.access(dst) == source != target


def test_a_restore_keeps_the_targets_access_unless_with_access(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.take(2)
    emulator.source(src)
    emulator.target(dst)
    source, target = emulator.access(src), emulator.access(dst)
    code, out, err = run(capsys, "backup", f"src:{src}", "--out", str(env / "backup.db"))
    assert code == 0, out + err
    code, out, err = run(capsys, "restore", str(env / "backup.db"), f"dst:{dst}")
    assert code == 0, out + err
    assert "skip organization 'access settings': " in out and emulator.access(dst) == target
    code, out, err = run(capsys, "restore", str(env / "backup.db"), f"dst:{dst}", "--with-access")
    assert code == 0, out + err
    assert emulator.access(dst) == source != target and "'access settings'" not in out
