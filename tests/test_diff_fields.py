"""`syncd diff` says what changed: each field old → new for an update, from → to for a move;
what the mirror records for it (bounded), and state files older than the record."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from syncd.cli import main
from syncd.commands.change_lines import CHANGES_SHOWN, change_lines
from syncd.state import StateStore, Row, content_hash
from syncd.state.diff import MAX_FIELDS, MAX_VALUE, changed_fields, compose_fields
from tests.state_support import sqlite_only, unpacked, use_backend
from tests.thread_emulator import ThreadEmulator, module_thread_emulator, use_tenants

SPEC = "orgs=1,collections=2,spaces=4,pages=2,files=0,sites=0"


def test_changed_fields_names_each_field_old_and_new_title_first() -> None:
    old = {"title": "A", "visibility": "public", "meta": {"tags": ["x"], "owner": "ann"}, "gone": 1, "urls": "u1"}
    new = {"title": "B", "visibility": "public", "meta": {"tags": ["x", "y"], "owner": "ann"}, "added": None, "urls": "u2"}
    fields, omitted = changed_fields(old, new, ignore={"urls"})
    assert omitted == 0
    assert fields == [
        {"field": "title", "old": "A", "new": "B"},
        {"field": "added", "old": None, "new": None, "absent": "old"},
        {"field": "gone", "old": 1, "new": None, "absent": "new"},
        {"field": "meta.tags", "old": ["x"], "new": ["x", "y"]},
    ]


def test_lists_of_objects_with_ids_are_compared_by_id() -> None:
    old = {"children": [{"id": "a", "title": "A"}, {"id": "b", "title": "B"}], "tags": ["x"]}
    new = {"children": [{"id": "b", "title": "B"}, {"id": "a", "title": "A2"}], "tags": ["x"]}
    fields, _ = changed_fields(old, new)
    assert fields == [
        {"field": "children[a].title", "old": "A", "new": "A2"},
        {"field": "children[order]", "old": ["a", "b"], "new": ["b", "a"]},
    ]


def test_changed_fields_are_bounded() -> None:
    old = {f"f{i:02}": i for i in range(MAX_FIELDS + 5)} | {"body": "a" * 5000}
    new = {f"f{i:02}": -i - 1 for i in range(MAX_FIELDS + 5)} | {"body": "b" * 5000}
    fields, omitted = changed_fields(old, new)
    assert len(fields) == MAX_FIELDS and omitted == 6
    body = next(f for f in fields if f["field"] == "body")
    assert body["cut"] and len(body["old"]) == MAX_VALUE + 1 and body["old"].endswith("…")


def test_fields_compose_across_runs_and_changes_back_vanish() -> None:
    one = {"fields": [{"field": "title", "old": "A", "new": "B"}, {"field": "x", "old": 1, "new": 2}]}
    two = {"fields": [{"field": "title", "old": "B", "new": "C"}, {"field": "x", "old": 2, "new": 1}]}
    assert compose_fields([one, two]) == ([{"field": "title", "old": "A", "new": "C"}], 0)
    assert compose_fields([one, {"fields": None}]) == (None, 0)


def test_lines_are_limited_and_say_how_many_more() -> None:
    changes = [
        {"tenant": "t", "kind": "page", "id": f"p{i}", "op": "updated", "title": f"P{i}",
         "fields": [{"field": f"f{j}", "old": j, "new": j + 1} for j in range(12)], "fields_omitted": 0}
        for i in range(CHANGES_SHOWN + 7)
    ]  # fmt: skip
    lines = change_lines(changes, lambda tenant, id: "")
    assert lines[-1].startswith("... and 7 more change(s)") and "--all" in lines[-1]
    assert "    ... and 4 more field(s) (--all shows them)" in lines
    every = change_lines(changes, lambda tenant, id: "", every=True)
    assert not any(line.startswith("...") or "more field" in line for line in every)
    assert len(every) == len(changes) * 13


def test_an_update_records_its_fields_on_either_backend(state: Path | str) -> None:
    """The merge records old -> new per field (on PostgreSQL outside SQL: it cannot call Python),
    leaving out a kind's volatile fields; other ops record none."""

    def run(mirror: StateStore, data: dict[str, object], position: int = 0, kind: str = "space") -> int:
        number = mirror.start_run("sync", "t", "t")
        kept = {k: v for k, v in data.items() if k != "updatedAt"}
        mirror.stage(number, [Row("t", kind, "s1", "o", "org", "o", position, f"/{kind}s", None, data, content_hash(kept))])
        mirror.record_listing(number, "t", f"/{kind}s", True)
        mirror.finish_run(number, volatile={"space": ["updatedAt"]})
        return number

    with StateStore(state) as mirror:
        first = run(mirror, {"title": "A", "updatedAt": "1", "meta": {"tags": ["x"]}})
        second = run(mirror, {"title": "B", "updatedAt": "2", "meta": {"tags": ["x", "y"]}})
        third = run(mirror, {"title": "B", "updatedAt": "3", "meta": {"tags": ["x", "y"]}}, position=4)
        assert [(c["op"], c["fields"]) for c in mirror.changes(first)] == [("created", None)]
        [update] = mirror.changes(second)
        assert update["op"] == "updated" and update["fields_omitted"] == 0
        assert update["fields"] == [
            {"field": "title", "old": "A", "new": "B"},
            {"field": "meta.tags", "old": ["x"], "new": ["x", "y"]},
        ]
        assert mirror.changes(third) == []  # only the volatile field and a lone position changed
        # A kind with no volatile fields at all: every field counts, and none is left out.
        run(mirror, {"title": "A", "updatedAt": "1"}, kind="team")
        [update] = mirror.changes(run(mirror, {"title": "B", "updatedAt": "2"}, kind="team"))
        assert update["op"] == "updated" and update["fields"] == [
            {"field": "title", "old": "A", "new": "B"},
            {"field": "updatedAt", "old": "1", "new": "2"},
        ]
        # More changed fields than are kept: the record says how many were left out.
        many = {f"f{i:02}": i for i in range(MAX_FIELDS + 3)}
        run(mirror, many, kind="team")
        [update] = mirror.changes(run(mirror, {k: -v - 1 for k, v in many.items()}, kind="team"))
        assert len(update["fields"]) == MAX_FIELDS and update["fields_omitted"] == 3


emulator = module_thread_emulator(SPEC)


@pytest.fixture
def env(emulator: ThreadEmulator, backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path | str:
    """Where the state of a syncd with tenant `src` on the emulator is (on `backend`)."""
    monkeypatch.chdir(tmp_path)
    use_tenants(monkeypatch, emulator.url, tmp_path / "state")
    return use_backend(backend, request, monkeypatch, tmp_path / "state")


def _db(state: Path | str) -> list[str]:
    """`--db FILE` for a state file (named explicitly, as a user would); a state_url is the default."""
    return ["--db", str(state)] if isinstance(state, Path) else []


def _say(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_diff_shows_a_rename_field_by_field_and_a_move_from_to(
    emulator: ThreadEmulator, env: Path | str, capsys: pytest.CaptureFixture[str]
) -> None:
    org = emulator.org_ids[0]
    collections = emulator.items(f"/v1/orgs/{org}/collections")
    spaces = [s for s in emulator.items(f"/v1/orgs/{org}/spaces") if s.get("parent")]
    renamed, moved = spaces[0], spaces[1]
    there = next(c for c in collections if c["id"] != moved["parent"])
    new_name = f"{renamed['title']}, renamed"  # (the emulator is the module's: each backend renames anew)
    _say(capsys, "sync", f"src:{org}")

    emulator.api("PATCH", f"/v1/spaces/{renamed['id']}", {"title": new_name})
    emulator.api("POST", f"/v1/spaces/{moved['id']}/move", {"parent": there["id"]})
    _say(capsys, "sync", f"src:{org}")
    out = _say(capsys, "diff", *_db(env))

    assert f'~ updated space "{new_name}" ({renamed["id"]})' in out
    assert f'    title: "{renamed["title"]}" → "{new_name}"' in out
    source = next(c for c in collections if c["id"] == moved["parent"])
    assert f'→ moved space "{moved["title"]}" ({moved["id"]})' in out
    line = next(line for line in out.splitlines() if line.startswith("    from "))
    assert f"/ {source['title']} → to " in line and line.split(" → to ")[1].split(",")[0].endswith(f"/ {there['title']}")

    # The same, as JSON: the fields travel with the change.
    assert main(["diff", *_db(env), "--json"]) == 0
    updated = [c for c in json.loads(capsys.readouterr().out)["changes"] if c["op"] == "updated" and c["id"] == renamed["id"]]
    assert updated[0]["fields"] == [{"field": "title", "old": renamed["title"], "new": new_name}]


# SQLite only: the test makes the file what an older syncd wrote; a PostgreSQL state was
# born with the fields column (fleet migration mirror-0001): there is no older one to read.
@sqlite_only
def test_an_older_state_file_still_diffs_and_says_fields_were_not_recorded(
    emulator: ThreadEmulator, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = emulator.org_ids[0]
    space = emulator.items(f"/v1/orgs/{org}/spaces")[2]
    _say(capsys, "sync", f"src:{org}")
    emulator.api("PATCH", f"/v1/spaces/{space['id']}", {"title": "Second name"})
    _say(capsys, "sync", f"src:{org}")
    # Make the file what syncd wrote before changes recorded their fields: as before 0006 (and
    # 0007), then 0005 undone.
    unpacked(env)
    with sqlite3.connect(env) as conn:
        conn.execute("ALTER TABLE changes DROP COLUMN fields")
        conn.execute("DELETE FROM migrations WHERE name = '0005_change_fields'")
    out = _say(capsys, "diff", "--db", str(env))  # read-only: the file is not migrated
    assert f'~ updated space "Second name" ({space["id"]})' in out
    assert "(which fields changed was not recorded" in out
    with sqlite3.connect(env) as conn:
        assert "fields" not in [row[1] for row in conn.execute("PRAGMA table_info(changes)")]

    emulator.api("PATCH", f"/v1/spaces/{space['id']}", {"title": "Third name"})
    _say(capsys, "sync", f"src:{org}")  # writes: migrates, and records fields from now on
    with StateStore(env, readonly=True) as mirror:
        last = mirror.runs()[-1]["id"]
    out = _say(capsys, "diff", "--db", str(env), "--run", str(last))
    assert '    title: "Second name" → "Third name"' in out
    runs = [str(r) for r in range(1, last + 1)]
    out = _say(capsys, "diff", "--db", str(env), "--run", runs[0], "--run", runs[-1])
    assert "(which fields changed was not recorded" in out  # across the old update: unknown, said so
