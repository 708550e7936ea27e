"""Plans people review and save, like Terraform's: `mirror plan` lists every operation with
its title, path and `before → after` (a golden text); `--out` saves it and `apply --plan`
sends exactly its operations, or refuses in one line when a side changed since; deletes are
confirmed on a terminal or with `--yes`; `--json` on plan, apply, verify and restore prints
one document that matches its schema.

One emulator process per behaviour profile for the module (`default`, and `divergent`, which
names, places and orders things otherwise wherever the spec is silent): the golden plan and
the exact calls of a saved plan are checked under both; every test takes a fresh pair of
empty organizations, and the CLI runs in-process (`syncd.cli.main`), except one check through
the installed console script.

syncd's state is on both backends (`backend`): a SQLite file, then PostgreSQL. The golden plan
and the saved plan's calls run in a SQLite file under both profiles and in PostgreSQL under
the default one (the profile is the service's behaviour, the backend syncd's own).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from syncd.cli import main
from syncd.copy.planfile import load_plan
from tests.cli_zygote import emulator_process
from tests.console_script import run_installed
from tests.hostile.cli_support import clean_env
from tests.loopback import EmulatorClient
from tests.schema_support import check_output
from tests.state_support import use_backend

TOKEN = "review-token"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Emulator(EmulatorClient):
    """The module's emulator: a fresh pair of empty organizations for each test."""

    def __init__(self, url: str, report: dict[str, Any], token: str) -> None:
        super().__init__(url, report, token)
        self.pairs = count()

    def pair(self) -> tuple[str, str]:
        first = 2 * next(self.pairs)
        return self.orgs[first], self.orgs[first + 1]

    def write_routes(self) -> Counter[tuple[str, str]]:
        """(method, route) -> write requests served so far (404s and faults included)."""
        routes = self.admin("GET", "/_emulator/stats")["routes"]
        return Counter({(r["method"], r["route"]): r["count"] for r in routes if r["method"] in WRITES})


@pytest.fixture(scope="module", params=["default", "divergent"])
def emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with emulator_process(token=TOKEN, spec="orgs=0,empty_orgs=40", seed=4, profile=request.param) as running:
        yield Emulator(running.url, running.report, TOKEN)


DEFAULT_ONLY = pytest.mark.parametrize("emulator", ["default"], indirect=True)
"""For what does not depend on the service's choices (refusals, questions, JSON shapes): the
golden plan and the exact calls of a saved plan run under both profiles."""

BOTH_PROFILES = pytest.mark.parametrize(
    ("emulator", "backend"), [("default", "sqlite"), ("divergent", "sqlite"), ("default", "postgresql")],
    indirect=["emulator"], scope="module", ids=["default-sqlite", "divergent-sqlite", "default-postgresql"],
)
"""The golden plan and the exact calls of a saved plan: each profile, each backend (not every pair)."""


@pytest.fixture
def env(emulator: Emulator, backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """syncd's environment (also for a process of its own): the tenants, the state on `backend`."""
    monkeypatch.chdir(tmp_path)
    values = {"SYNCD_STATE_DIR": str(tmp_path / "state"), "SYNCD_LOG_LEVEL": "warning", "COLUMNS": "100"}
    for name in ("SRC", "DST"):
        values[f"SYNCD_TENANTS__{name}__BASE_URL"] = emulator.url
        values[f"SYNCD_TENANTS__{name}__TOKEN"] = TOKEN
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    state = use_backend(backend, request, monkeypatch, tmp_path / "state")
    if backend == "postgresql":
        values["SYNCD_STATE_URL"] = str(state)
    return values


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


class Source:
    """The source organization of the golden plan, made call by call."""

    def __init__(self, emulator: Emulator, org: str) -> None:
        self.emulator, self.org = emulator, org

    def collection(self, title: str, **fields: Any) -> str:
        made = self.emulator.api("POST", f"/v1/orgs/{self.org}/collections", {"title": title})["id"]
        if fields:
            self.emulator.api("PATCH", f"/v1/collections/{made}", fields)
        return str(made)

    def space(self, title: str, parent: str | None = None) -> str:
        return str(self.emulator.api("POST", f"/v1/orgs/{self.org}/spaces", {"title": title, **({"parent": parent} if parent else {})})["id"])


def copied_and_changed(emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> tuple[str, str, dict[str, str]]:
    """A source copied into a target, then changed in the source: a collection made, a
    space renamed, a collection's description changed, a space moved into another
    collection, a collection (that syncd made on the target) deleted."""
    src, dst = emulator.pair()
    source = Source(emulator, src)
    ids = {"guides": source.collection("Guides", description="All the guides")}
    ids["archive"] = source.collection("Archive")
    ids["doomed"] = source.collection("Old notes")
    ids["alpha"] = source.space("Alpha", ids["guides"])
    ids["beta"] = source.space("Beta", ids["guides"])
    ids["gamma"] = source.space("Gamma")
    code, out, _ = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}")
    assert code == 0, out
    emulator.api("PATCH", f"/v1/spaces/{ids['alpha']}", {"title": "Alpha, renamed"})
    emulator.api("PATCH", f"/v1/collections/{ids['guides']}", {"description": "Every guide we have, from the first steps to the " + "x" * 40})
    emulator.api("POST", f"/v1/spaces/{ids['beta']}/move", {"parent": ids["archive"]})
    ids["new"] = source.collection("Brand new")
    emulator.api("DELETE", f"/v1/collections/{ids['doomed']}")
    return src, dst, ids


GOLDEN = """\
+ create collection 'Brand new'                       Brand new
~ update collection 'Guides'                          Guides
      description: 'All the guides' → 'Every guide we have, from the first steps to the xxxxxxxxx…
~ update space      'Alpha'                           Guides/Alpha
      title: 'Alpha' → 'Alpha, renamed'
→ move   space      'Beta'                            Guides/Beta → Archive/Beta
↻ settle tree       'order of collections and spaces' — read the target, then place 1 new collection(s) under the root; 1 move(s), listed with →
- delete collection 'Old notes'                       Old notes — syncd created it; the source no longer has it
planned operations
 kind         create   update   move   settle   delete
───────────────────────────────────────────────────────
 collection        1        1                        1
 space                      1      1
 tree                                       1
 total             1        2      1        1        1
  skip member '2 member': members cannot be created through the API: invite them to the target organization
  skip organization 'title': title not copied: the target organization keeps its own title
  skip organization 'access settings': emailDomains kept as the target has them: --with-access copies them
"""


def lines(text: str) -> list[str]:
    """Text as lines without trailing blanks (what a table pads with), blank lines dropped."""
    return [line.rstrip() for line in text.splitlines() if line.strip()]


@BOTH_PROFILES
def test_golden_plan_lists_every_operation_with_titles_paths_and_before_after(emulator: Emulator, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    src, dst, _ = copied_and_changed(emulator, capsys)
    code, out, err = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--mode", "mirror")
    assert code == 2, err  # changes pending
    assert lines(out) == lines(GOLDEN), "\n" + out
    # A dry run names what each call is about, never just an id.
    code, out, _ = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--dry-run")
    assert code == 2
    assert re.search(r"^  - delete collection 'Old notes': DELETE /v1/collections/\S+$", out, re.M), out
    assert re.search(r"^  ~ update space 'Alpha, renamed': PATCH /v1/spaces/\S+ \{\"title\": \"Alpha, renamed\"\}$", out, re.M), out


@BOTH_PROFILES
def test_a_saved_plan_applied_on_unchanged_sides_sends_exactly_its_operations(emulator: Emulator, env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src, dst, _ = copied_and_changed(emulator, capsys)
    plan_file = tmp_path / "reviewed.json"
    code, out, _ = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--out", str(plan_file))
    assert code == 2 and f"plan saved to {plan_file}" in out
    assert plan_file.stat().st_mode & 0o777 == 0o600  # it names objects of both organizations
    saved = load_plan(plan_file)
    expected: Counter[tuple[str, str]] = Counter()
    for op in saved.plan.ops:
        if op.recipe == "call":
            expected[(op.method, op.path)] += 1
        elif op.recipe == "settle-tree":  # each move it expects, from what was read
            for kind, target_id, _ in op.spec["moves"]:  # type: ignore[index]
                expected[("POST", f"/v1/{kind.replace('collection', 'collections').replace('space', 'spaces')}/{target_id}/move")] += 1
        else:
            raise AssertionError(f"the scenario has no {op.recipe} step: {op.key}")
    before = emulator.write_routes()
    code, out, err = run(capsys, "mirror", "apply", "--plan", str(plan_file), "--json")  # SRC and DST from the file; no question
    assert code == 0, out + err
    report = check_output("mirror-apply", out)
    sent = emulator.write_routes() - before
    (round_,) = report["rounds"]  # no second round: nothing was left
    assert round_["ops"] == len(saved.plan.ops) and report["equal"] and not report["outside_plan"]
    # Every call of the plan was sent once, on its own route, and every move its settle step
    # expected; the only other writes are checks of a create's answer (a field the answer
    # left out, patched: the divergent profile's minimal create answers), which the create op
    # carries (its `want`). `fixes` counts both kinds of calls an op adds to its own.
    calls = sum(1 for op in saved.plan.ops if op.recipe == "call")
    fixes = round_["apply"]["stats"]["fixes"]
    assert sum(sent.values()) == round_["apply"]["writes"] == calls + fixes >= sum(expected.values()), (sent, expected)
    for (method, path), n in expected.items():
        routes = [route for (m, route) in sent if m == method and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", route), path)]
        assert len(routes) == 1 and sent[(method, routes[0])] >= n, (method, path, sent)
        sent[(method, routes[0])] -= n
    created = {op.kind for op in saved.plan.ops if op.action == "create"}
    assert all(method == "PATCH" and any(kind in route for kind in created) for (method, route), n in sent.items() if n > 0), sent
    assert run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--mode", "mirror")[0] == 0  # nothing left


@DEFAULT_ONLY
def test_a_stale_plan_is_refused_in_one_line_and_nothing_is_written(emulator: Emulator, env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src, dst, ids = copied_and_changed(emulator, capsys)
    plan_file = tmp_path / "plan.json"
    assert run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--out", str(plan_file))[0] == 2
    emulator.api("PATCH", f"/v1/spaces/{ids['gamma']}", {"title": "Gamma, changed after the plan"})
    before = emulator.write_routes()
    code, out, err = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}", "--plan", str(plan_file))
    assert (code, out) == (2, "")
    assert err.endswith("the source changed since the plan was made (" + load_plan(plan_file).created_at + "): make a new plan\n")
    assert err.count("\n") == 1 and emulator.write_routes() == before
    # The target changing makes a plan stale too (someone renamed a space there).
    assert run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--out", str(plan_file))[0] == 2
    target_space = emulator.api("GET", f"/v1/orgs/{dst}/spaces?limit=1000")["items"][0]
    emulator.api("PATCH", f"/v1/spaces/{target_space['id']}", {"title": "Renamed on the target"})
    before = emulator.write_routes()
    code, _, err = run(capsys, "mirror", "apply", "--plan", str(plan_file))
    assert code == 2 and "the target changed since the plan was made" in err and err.count("\n") == 1
    assert emulator.write_routes() == before
    # A plan names its organizations: others are refused; so are options the plan fixed.
    other = emulator.pair()[1]
    code, _, err = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{other}", "--plan", str(plan_file))
    assert code == 2 and f"dst:{other} is not the plan's target" in err
    code, _, err = run(capsys, "mirror", "apply", "--plan", str(plan_file), "--mode", "mirror")
    assert code == 2 and "fixed when the plan was made" in err
    code, out, _ = run(capsys, "mirror", "apply", "--plan", str(plan_file), "--dry-run")  # reads nothing, sends nothing
    assert code == 2 and "dry run of a saved plan: 5 steps would be sent" in out and "  - delete collection 'Old notes': DELETE" not in out
    assert "  ~ update space 'Alpha, renamed': PATCH /v1/spaces/" in out and emulator.write_routes() == before
    (tmp_path / "not-a-plan.json").write_text('{"ops": []}')
    code, _, err = run(capsys, "mirror", "apply", "--plan", str(tmp_path / "not-a-plan.json"))
    assert code == 2 and "is not a syncd plan" in err


@DEFAULT_ONLY
def test_deletes_are_confirmed_on_a_terminal_or_by_yes(emulator: Emulator, env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst, _ = copied_and_changed(emulator, capsys)
    args = ("mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror")
    before = emulator.write_routes()
    code, out, err = run(capsys, *args)  # stdin is not a terminal here
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "the plan deletes 1 object(s)" in err and "'Old notes'" in err and "add --yes" in err
    with terminal(monkeypatch, "no\n"):
        code, out, err = run(capsys, *args)
    assert code == 2 and "Delete 1 object(s)" in err and "apply cancelled: nothing was written" in err
    assert "- delete collection 'Old notes'" in out  # the whole plan was shown before the question
    assert emulator.write_routes() == before
    with terminal(monkeypatch, "yes\n"):
        code, out, err = run(capsys, *args)
    assert code == 0, out + err
    assert ": equal" in out and emulator.write_routes() != before
    assert not [c for c in emulator.dump(dst)["collection"] if "Old notes" in c[0]]


class terminal:  # noqa: N801 - reads as a phrase: `with terminal(...)`
    """stdin is a pseudo-terminal that holds `typed` (what a person types at the prompt)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, typed: str) -> None:
        self.monkeypatch, self.typed = monkeypatch, typed

    def __enter__(self) -> None:
        import pty

        self.master, slave = pty.openpty()
        os.write(self.master, self.typed.encode())
        self.stdin = os.fdopen(slave, "r")
        assert self.stdin.isatty()
        self.monkeypatch.setattr(sys, "stdin", self.stdin)

    def __exit__(self, *exc: object) -> None:
        self.monkeypatch.setattr(sys, "stdin", sys.__stdin__)
        self.stdin.close()
        os.close(self.master)


@DEFAULT_ONLY
def test_json_of_plan_apply_verify_and_restore_matches_the_schemas(emulator: Emulator, env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src, dst, ids = copied_and_changed(emulator, capsys)
    code, out, err = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--json", "--out", str(tmp_path / "plan.json"))
    assert code == 2
    plan = check_output("mirror-plan", out)
    assert (tmp_path / "plan.json").read_text() == out  # --json prints what --out saves, both written as they are made
    assert plan["mode"] == "mirror" and plan["source"]["org"] == src and plan["target"]["org"] == dst
    update = next(c for c in plan["changes"] if c["action"] == "update" and c["kind"] == "space")
    assert update["path"] == "Guides/Alpha" and update["fields"] == [
        {"field": "title", "before": "Alpha", "after": "Alpha, renamed", "before_text": "'Alpha'", "after_text": "'Alpha, renamed'"}
    ]
    move = next(c for c in plan["changes"] if c["action"] == "move")
    assert (move["symbol"], move["path"], move["to_path"]) == ("→", "Guides/Beta", "Archive/Beta")
    assert plan["counts"] == {"collection": {"create": 1, "update": 1, "delete": 1}, "space": {"update": 1, "move": 1}, "tree": {"settle": 1}}

    code, out, _ = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--dry-run", "--json")
    dry = check_output("mirror-plan", out)
    assert code == 2 and len(dry["calls"]) == len(dry["ops"]) == 5

    code, out, err = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--yes", "--json")
    applied = check_output("mirror-apply", out)
    assert code == 0 and applied["equal"] and applied["rounds"][0]["ops"] == 5 and applied["verification"]["counts"]["missing"] == 0
    assert [c["key"] for c in applied["changes"]] == [c["key"] for c in plan["changes"]]

    code, out, _ = run(capsys, "mirror", "verify", f"src:{src}", f"dst:{dst}", "--json")
    verified = check_output("mirror-verify", out)
    assert code == 0 and verified["equal"] and verified["verification"]["counts"]["identical"] > 0

    assert run(capsys, "backup", f"src:{src}", "--out", str(tmp_path / "b.db"))[0] == 0
    empty = emulator.pair()[0]
    code, out, _ = run(capsys, "restore", str(tmp_path / "b.db"), f"dst:{empty}", "--dry-run", "--json")
    assert code == 2 and check_output("mirror-plan", out)["calls"]
    (tmp_path / "restore-plan.json").write_text(out)
    code, _, err = run(capsys, "mirror", "apply", "--plan", str(tmp_path / "restore-plan.json"))
    assert code == 2 and "this plan restores a backup" in err and err.count("\n") == 1
    code, out, err = run(capsys, "restore", str(tmp_path / "b.db"), f"dst:{empty}", "--json")
    restored = check_output("restore", out)
    assert code == 0 and restored["equal"], err
    assert {c["path"] for c in restored["changes"] if c["action"] == "create"} >= {"Guides/Alpha, renamed", "Archive/Beta", "Brand new"}


@DEFAULT_ONLY
def test_plan_json_through_the_installed_console_script(emulator: Emulator, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stdout is exactly the one document; progress and warnings go to stderr."""
    src, dst = emulator.pair()
    Source(emulator, src).space("Only space")
    ran = run_installed("mirror", "plan", f"src:{src}", f"dst:{dst}", "--json", env=clean_env(**env), cwd=tmp_path)
    ran.assert_clean()
    assert ran.code == 2, ran.show()
    document = check_output("mirror-plan", ran.stdout)
    assert [(c["action"], c["kind"], c["path"]) for c in document["changes"] if c["action"] == "create"] == [("create", "space", "Only space")]
    ran = run_installed("mirror", "verify", f"src:{src}", f"dst:{dst}", "--json", env=clean_env(**env), cwd=tmp_path)
    assert ran.code == 1 and check_output("mirror-verify", ran.stdout)["verification"]["counts"]["missing"] == 1, ran.show()


def test_the_restore_schema_is_the_apply_schema() -> None:
    """`restore --json` prints what `mirror apply --json` prints: one shape, two names."""
    folder = Path(__file__).parents[1] / "syncd" / "schemas"
    apply, restore = (json.loads((folder / f"{name}.json").read_text()) for name in ("mirror-apply", "restore"))
    assert {k: v for k, v in apply.items() if k not in ("$id", "title", "description")} == {
        k: v for k, v in restore.items() if k not in ("$id", "title", "description")
    }


def _row(kind: str, row_id: str, data: dict[str, Any], parent: tuple[str, str] | None = None, position: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "id": row_id, "parent_kind": parent[0] if parent else None, "parent_id": parent[1] if parent else None, "position": position, "data": data}


def test_references_custom_field_values_and_site_moves_read_as_titles() -> None:
    """Pure: a reference shows the referenced object's title and target id on both sides, a
    space's custom field value its old and new value, a site's navigation move its site."""
    from syncd.copy import IdMap, Snapshot, plan_copy
    from syncd.copy.context import ContentStrategy
    from syncd.copy.review import render, review

    def side(org: str, p: str, saml_team: str, value: str, order: tuple[str, str]) -> Snapshot:
        top = ("organization", org)
        return Snapshot.from_rows(p, org, [
            _row("organization", org, {"title": org}),
            _row("team", f"{p}T1", {"title": "Writers"}, top), _row("team", f"{p}T2", {"title": "Editors"}, top),
            _row("saml-provider", f"{p}P", {"label": "Okta", "defaultTeam": {"id": f"{p}{saml_team}"}}, top),
            _row("custom-field", f"{p}F", {"name": "owner", "title": "Owner", "type": "text"}, top),
            _row("space", f"{p}S", {"title": "Handbook"}, top, 0),
            _row("space-custom-field-value", f"{p}S/owner", {"customField": {"name": "owner"}, "value": value}, ("space", f"{p}S")),
            _row("site", f"{p}W", {"title": "Docs site"}, top),
            *(_row("site-section", f"{p}{name}", {"title": name, "path": name.lower()}, ("site", f"{p}W"), i) for i, name in enumerate(order)),
        ])

    source = side("SORG", "s", "T2", "docs team", ("Start", "Reference"))
    target = side("TORG", "t", "T1", "nobody", ("Reference", "Start"))
    idmap = IdMap()
    for kind, name in (("team", "T1"), ("team", "T2"), ("saml-provider", "P"), ("custom-field", "F"), ("space", "S"), ("site", "W"),
                       ("site-section", "Start"), ("site-section", "Reference")):
        idmap.put(kind, f"s{name}", f"t{name}", "created")
    plan = plan_copy(source, target, idmap, content=ContentStrategy(same_credentials=True), with_access=True)
    shown = "\n".join(render(review(plan, source, target, idmap)))
    assert "~ update saml-provider 'Okta'" in shown and "      defaultTeam: 'Writers' (tT1) → 'Editors' (tT2)" in shown, shown
    assert "~ update space         'Handbook'" in shown and "      customFields.owner: 'nobody' → 'docs team'" in shown, shown
    assert re.search(r"^→ move   site-section +'(Start|Reference)' +Docs site/(Start|Reference) — to its place among its siblings$", shown, re.M), shown
