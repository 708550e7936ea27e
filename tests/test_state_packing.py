"""Each object's JSON packed in the SQLite file (issue 44): zstd with a dictionary per kind
(`syncd.state.packing`, `syncd.state.dictionaries`, migration 0006).

Real files throughout, and the real CLI against an emulator process for the commands: what a
mirror or backup stores is packed, and every read of it (the current view, one object, field
values, titles, changed fields, carried rows, export, check, restore) gives the objects as
they were read; a file of the release before packing (0001-0005) is read as it is when opened
read-only and upgraded, objects unchanged, by the first write; a damaged packed value is one
line naming the file and the object; a dictionary row is never rewritten."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database

from syncd.read.backup import blobs_dir
from syncd.state import MIGRATIONS, Row, StateError, StateStore, content_hash, migrate, packing, stored_hash
from syncd.state.dictionaries import MIN_OBJECTS, SAMPLES
from syncd.state.packing import MAX_PACKED, PackedDataError
from syncd.state.rows import stored_of_hex
from syncd.state.sqlite_schema import PACKED, applied_migrations
from syncd.state.tables import RESOURCES, index_name
from tests.cli_zygote import emulator_process
from tests.loopback import EmulatorClient
from tests.schema_support import check_output
from tests.state_support import unpacked
from tests.test_plan_review import run as syncd
from tests.thread_emulator import command_folder

TENANT = "t"
SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=5,pages=24,files=1,sites=1,sections=2"
"""120 pages (and their links): kinds with a dictionary, and kinds of a few objects without one."""


def _page(number: int, title: str | None = None, **more: Any) -> dict[str, Any]:
    return {"id": f"p{number:04}", "title": title or f"Page {number}", "path": f"space/page-{number}", "kind": "document",
            "description": "", "revision": {"id": f"r{number}", "createdAt": "2026-01-01T00:00:00Z"}, "layout": {"cover": True}} | more  # fmt: skip


def _row(kind: str, data: dict[str, Any], position: int = 0, parent: str = "s1", scope: str | None = None) -> Row:
    return Row(TENANT, kind, str(data["id"]), "o", "space", parent, position, f"/{kind}s/{parent}", scope, data, stored_hash(data))


def _run(store: StateStore, rows: list[Row], carry: str | None = None) -> int:
    """One run of `rows` (their listings read cleanly), `carry` a scope carried forward."""
    run = store.start_run("sync", TENANT, TENANT)
    store.stage(run, rows)
    for listing in sorted({row.listing for row in rows if row.listing}):
        store.record_listing(run, TENANT, listing, True)
    if carry is not None:
        store.carry_scope(run, TENANT, carry)
    store.finish_run(run)
    return run


def _stored(path: Path, where: str = "") -> dict[tuple[str, str], tuple[Any, str]]:
    """(kind, id) -> (data as stored, hash), read by a plain connection."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {(k, i): (d, h) for k, i, d, h in conn.execute(f"SELECT kind, id, data, hash FROM resources {where}")}


def _dictionaries(path: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT id, kind, dict, trained_at, objects FROM dictionaries ORDER BY id").fetchall()


def test_objects_are_stored_packed_and_every_read_gives_them_back(tmp_path: Path) -> None:
    path = tmp_path / "mirror.db"
    pages = [_page(n) for n in range(MIN_OBJECTS + 20)]
    teams = [{"id": f"t{n}", "name": f"Team {n}", "members": ["ann", "bob"] * 20, "settings": {"visibility": "all"}} for n in range(3)]
    tiny = {"id": "x", "a": 1}
    with StateStore(path) as store:
        first = _run(store, [_row("page", p, n) for n, p in enumerate(pages)] + [_row("team", t) for t in teams] + [_row("tiny", tiny)])
        assert [row["data"] for row in store.current(TENANT, kind="page")] == pages
        assert [row["data"] for row in store.current(TENANT, kind="team")] == teams
        assert store.current_value(TENANT, "page", "p0007") == pages[7]
        assert store.current_value(TENANT, "tiny", "x") == tiny
        assert store.current_tokens(TENANT, "page", "revision.id")["p0009"] == "r9"
        assert store.current_tokens(TENANT, "page", "layout") == {p["id"]: '{"cover":true}' for p in pages}  # as json_extract gives it
        assert store.location(TENANT, "p0003") == "? / Page 3"  # (its space is not in the file)
        assert {c["id"]: c["title"] for c in store.changes(first)}["t1"] == "Team 1"

    stored = _stored(path)
    assert all(isinstance(data, bytes) and data[1] == 1 for (kind, _), (data, _) in stored.items() if kind == "page")
    assert all(isinstance(data, bytes) and data[1] == 0 for (kind, _), (data, _) in stored.items() if kind == "team")  # no dictionary
    assert stored[("tiny", "x")][0] == '{"id":"x","a":1}'  # packing would not make it shorter: text
    assert [(row[1], row[4]) for row in _dictionaries(path)] == [("page", len(pages))]  # teams: too few for one
    packed = sum(len(stored[("page", p["id"])][0]) for p in pages)
    assert packed * 4 < sum(len(json.dumps(p, separators=(",", ":"))) for p in pages)

    # An update: what changed is recorded from the packed old version; a move and a deletion titled.
    changed = dict(pages[5], title="Renamed", layout={"cover": False})
    with StateStore(path) as store:
        second = _run(store, [_row("page", changed if p is pages[5] else p, n + (n == 6)) for n, p in enumerate(pages) if n != 8]
                      + [_row("team", t) for t in teams] + [_row("tiny", tiny)])  # fmt: skip
        by_op = {(c["op"], c["id"]): c for c in store.changes(second)}
        assert by_op[("updated", "p0005")]["fields"] == [
            {"field": "title", "old": "Page 5", "new": "Renamed"},
            {"field": "layout.cover", "old": True, "new": False},
        ]
        assert by_op[("updated", "p0005")]["title"] == "Renamed" and by_op[("deleted", "p0008")]["title"] == "Page 8"
        assert store.current_value(TENANT, "page", "p0005") == changed and store.current_value(TENANT, "page", "p0008") is None
        assert [c["fields"] for c in store.diff(first, second) if c["op"] == "updated"] == [by_op[("updated", "p0005")]["fields"]]


def test_a_carried_row_keeps_its_packed_value_and_a_scoped_read_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "mirror.db"
    pages = [_page(n) for n in range(MIN_OBJECTS + 5)]
    with StateStore(path) as store:
        _run(store, [_row("page", p, n, scope="space:s1") for n, p in enumerate(pages)])
    before = _stored(path)
    with StateStore(path) as store:
        run = store.start_run("sync", TENANT, TENANT)
        assert store.carry_scope(run, TENANT, "space:s1") == len(pages)
        assert [r["data"] for r in sorted(store.staged_rows(run, "o", ["page"]), key=lambda r: r["id"])] == pages
        store.finish_run(run)
        assert [row["data"] for row in store.current(TENANT, kind="page")] == pages
    assert _stored(path) == before  # the same bytes: carried as they were, not packed again


def test_a_dictionary_row_is_never_rewritten_and_a_kind_gets_one_when_it_has_enough(tmp_path: Path) -> None:
    path = tmp_path / "mirror.db"
    with StateStore(path) as store:
        _run(store, [_row("page", _page(n), n) for n in range(MIN_OBJECTS)] + [_row("space", {"id": f"s{n}", "title": f"S{n}"}) for n in range(10)])
    first = _dictionaries(path)
    assert [(row[0], row[1], row[4]) for row in first] == [(1, "page", MIN_OBJECTS)]
    # Ten times as many pages, changed; then enough spaces for a dictionary of theirs.
    with StateStore(path) as store:
        _run(store, [_row("page", _page(n, f"Other {n}"), n) for n in range(SAMPLES + 200)]
             + [_row("space", {"id": f"s{n}", "title": f"S{n}", "private": n % 2 == 0}) for n in range(MIN_OBJECTS)])  # fmt: skip
        assert store.current_value(TENANT, "page", "p0042")["title"] == "Other 42"
    later = _dictionaries(path)
    assert later[0] == first[0]  # byte for byte: never retrained, never rewritten
    assert [(row[0], row[1]) for row in later] == [(1, "page"), (2, "space")]
    spaces = _stored(path, "WHERE kind = 'space'")
    assert all(isinstance(data, bytes) and data[1] == 2 for data, _ in spaces.values())  # packed with dictionary 2


def test_the_same_objects_get_the_same_dictionary_whatever_order_they_were_read_in(tmp_path: Path) -> None:
    pages = [_page(n) for n in range(SAMPLES + 50)]
    for name, order in (("one.db", pages), ("two.db", pages[::-1])):
        with StateStore(tmp_path / name) as store:
            _run(store, [_row("page", p, int(p["id"][1:])) for p in order])
    assert _dictionaries(tmp_path / "one.db")[0][2] == _dictionaries(tmp_path / "two.db")[0][2]
    assert _dictionaries(tmp_path / "one.db")[0][4] == SAMPLES


def test_a_value_is_unpacked_within_bounds_or_refused_in_one_line(tmp_path: Path) -> None:
    conn = packing.connect(":memory:")
    packer = conn.packer
    text = json.dumps({"title": "x" * 200})
    packed = packer.pack("page", text)
    assert isinstance(packed, bytes) and packed[:2] == b"\x01\x00" and packer.unpack(packed) == text.encode()
    assert packer.pack("page", '{"a":1}') == '{"a":1}'  # too short to gain
    assert packer.pack("page", packed) is packed  # packed already (a carried row)
    damaged = [
        (b"\x02" + packed[1:], "not packed by syncd"),
        (packed[:2], "damaged"),
        (packed[:-3], "damaged"),
        (b"\x01\x07" + packed[2:], "dictionary 7"),
        (b"\x01\x80", "cut short"),
    ]
    for value, why in damaged:
        with pytest.raises(PackedDataError, match=why):
            packer.unpack(value)
        assert packer.sql_json(value) is None  # SQL reads it as NULL: a title or token falls back
    # A dictionary no syncd trains is not loaded.
    conn.execute("CREATE TABLE dictionaries (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, dict BLOB NOT NULL, trained_at TEXT NOT NULL, objects INTEGER NOT NULL)")
    conn.execute("INSERT INTO dictionaries VALUES (9, 'page', zeroblob(2 * 1024 * 1024), 'now', 1), (8, 'page', 'text', 'now', 1)")
    for number in (9, 8):
        with pytest.raises(PackedDataError, match=f"dictionary {number} is not one syncd trains"):
            packer.unpack(bytes([1, number]) + packed[2:])
    # A frame that claims more than syncd packs is refused before anything is allocated.
    with pytest.raises(PackedDataError, match="more than syncd packs"):
        packer.unpack(b"\x01\x00" + _frame_claiming(MAX_PACKED + 1))
    assert packer.unpack(b"\x01\x00" + _frame_claiming(0)) == b""  # (the hand-made frame is one zstd reads)


def _frame_claiming(size: int) -> bytes:
    """The header of a zstd frame that states `size` bytes of content (and holds none)."""
    descriptor = 0b1000_0000 | 0b0010_0000  # a 4-byte content size, single segment
    return b"\x28\xb5\x2f\xfd" + bytes([descriptor]) + size.to_bytes(4, "little") + b"\x01\x00\x00"


# -- the commands, against an emulator ---------------------------------------------------


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorClient]:
    with emulator_process(token="all", spec=SPEC, seed=44, rate=0) as running:
        yield EmulatorClient(running.url, running.report, "all")


@pytest.fixture
def env(emulator: EmulatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return command_folder(monkeypatch, tmp_path, emulator.url)


def _backup(emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str], name: str = "backup.db") -> Path:
    out = env / name
    code, text, err = syncd(capsys, "backup", f"emu:{emulator.orgs[0]}", "--out", str(out), "--with-files")
    assert code == 0, text + err
    return out


def _tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_backup_is_packed_and_read_as_a_file_of_the_release_before_it_is(
    emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = _backup(emulator, env, capsys)
    stored = _stored(packed)
    kinds = {kind for kind, _ in stored}
    with contextlib.closing(sqlite3.connect(packed)) as conn:
        with_dictionary = {kind for (kind,) in conn.execute("SELECT kind FROM dictionaries")}
        assert PACKED in applied_migrations(Database(conn))
    assert {"page", "page-link"} <= with_dictionary < kinds
    assert sum(isinstance(data, bytes) for data, _ in stored.values()) > len(stored) * 0.9

    # The same backup as the release before packing wrote it: its objects as text, at 0005.
    old = env / "old.db"
    shutil.copyfile(packed, old)
    shutil.copytree(blobs_dir(packed), blobs_dir(old))
    unpacked(old)
    assert {key: json.loads(data) for key, (data, _) in _stored(old).items()} == {
        key: json.loads(_unpack(packed, data) if isinstance(data, bytes) else data) for key, (data, _) in stored.items()
    }
    before = _digest(old)
    for source, folder in ((packed, "new export"), (old, "old export")):
        code, out, err = syncd(capsys, "export", str(source), str(env / folder))
        assert code == 0, out + err
        code, out, err = syncd(capsys, "check", str(source), "--json")
        report = check_output("check", out)
        assert code == 0 and report["healthy"] and report["objects"] == len(stored), out + err
    assert _tree(env / "new export") == _tree(env / "old export") != {}
    assert _digest(old) == before  # read as it is: not migrated, not written
    with contextlib.closing(sqlite3.connect(old)) as conn:
        assert PACKED not in applied_migrations(Database(conn))

    # A restore of the packed backup into the empty organization: equal to it, verified.
    target = f"emu:{emulator.orgs[1]}"
    code, out, err = syncd(capsys, "restore", str(packed), target)
    assert code == 0, out + err
    code, out, err = syncd(capsys, "mirror", "verify", str(packed), target)
    assert code == 0 and out.strip().splitlines()[-1].endswith(": equal"), out + err


def _unpack(path: Path, data: bytes) -> bytes:
    with contextlib.closing(packing.connect(path)) as conn:
        return conn.packer.unpack(data)


def test_a_file_of_the_release_before_packing_is_upgraded_on_a_write_objects_unchanged(
    emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = env / "state" / "syncd.db"
    code, out, err = syncd(capsys, "sync", f"emu:{emulator.orgs[0]}")
    assert code == 0, out + err
    unpacked(mirror)
    old = _stored(mirror)
    assert all(isinstance(data, str) for data, _ in old.values())
    with StateStore(mirror, readonly=True) as store:  # read as it is
        tenant = store.runs()[-1]["tenant"]
        current = {(r["kind"], r["id"]): r["data"] for r in store.current(tenant)}
    assert {key: json.loads(data) for key, (data, _) in old.items()} == current

    code, out, err = syncd(capsys, "sync", f"emu:{emulator.orgs[0]}")  # writes: migrates, packs
    assert code == 0, out + err
    with StateStore(mirror, readonly=True) as store:
        assert {(r["kind"], r["id"]): r["data"] for r in store.current(tenant)} == current
    new = _stored(mirror)
    assert {key: digest for key, (_, digest) in new.items()} == {key: stored_of_hex(digest) for key, (_, digest) in old.items()}  # 0008
    assert sum(isinstance(data, bytes) for data, _ in new.values()) > len(new) * 0.9
    code, out, err = syncd(capsys, "diff", "--db", str(mirror))
    assert code == 0 and "no changes" in out.lower(), out + err


def test_migration_0006_trains_from_the_files_objects_and_packs_them_in_place(tmp_path: Path) -> None:
    """A file made by the first five migrations alone, its rows as the release before wrote them."""
    path = tmp_path / "old.db"
    pages = [_page(n) for n in range(MIN_OBJECTS + 30)]
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        db = Database(conn)
        migrate(db, MIGRATIONS[:5])
        conn.execute("INSERT INTO runs (job, tenant, scope_ref, started_at, finished_at, status) VALUES ('sync', ?, ?, 'a', 'b', 'complete')", [TENANT, TENANT])
        for n, page in enumerate(pages):
            text = json.dumps(page, separators=(",", ":"))
            conn.execute(
                "INSERT INTO resources (tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash, first_seen_run, last_seen_run, deleted_run) "
                "VALUES (?, 'page', ?, 'o', 'space', 's1', ?, '/pages/s1', NULL, ?, ?, 1, 1, ?)",
                [TENANT, page["id"], n, text, content_hash(page), 1 if n == 3 else None],  # one tombstone
            )
        indexes = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'resources' ORDER BY name").fetchall()
    old = _stored(path)
    with StateStore(path, readonly=True) as store:
        assert [r["data"] for r in store.current(TENANT)] == [p for n, p in enumerate(pages) if n != 3]
    with StateStore(path) as store:  # a writer: 0006 runs
        assert [r["data"] for r in store.current(TENANT)] == [p for n, p in enumerate(pages) if n != 3]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert applied_migrations(Database(conn)) == [m.name for m in MIGRATIONS]
        now = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'resources'").fetchall())
        kept = {name: sql for name, sql in indexes if name not in RESOURCES.dropped}  # as the file had them (0006), then 0007
        assert now == kept | {index_name(sql): sql.rstrip(';') for sql in RESOURCES.later_indexes}
        assert conn.execute("SELECT count(*) FROM resources WHERE deleted_run IS NOT NULL").fetchone() == (1,)
    assert [(row[1], row[4]) for row in _dictionaries(path)] == [("page", len(pages))]
    new = _stored(path)
    assert {key: h for key, (_, h) in new.items()} == {("page", page["id"]): stored_hash(page) for page in pages}  # 0008 too
    assert all(_unpack(path, data) == old[key][0].encode() for key, (data, _) in new.items())


def test_a_damaged_packed_value_is_one_line_naming_the_file_and_the_object(
    emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup = _backup(emulator, env, capsys)
    with contextlib.closing(sqlite3.connect(backup)) as conn, conn:
        kind, row_id, data = conn.execute("SELECT kind, id, data FROM resources WHERE kind = 'page' AND typeof(data) = 'blob' ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE resources SET data = ? WHERE kind = ? AND id = ?", [data[:-4], kind, row_id])  # the frame cut short
    code, out, err = syncd(capsys, "export", str(backup), str(env / "export"))
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith("syncd: error: ") and "Traceback" not in err, err
    assert f"{backup}: the data of page {row_id} is packed but does not unpack" in err, err
    code, out, err = syncd(capsys, "check", str(backup), "--json")
    report = check_output("check", out)
    assert code != 0 and not report["healthy"]
    assert [(p["kind"], p["subject"]) for p in report["problems"]] == [("object-damaged", f"page {row_id}")]
    with StateStore(backup, readonly=True) as store:
        tenant = store.runs()[0]["tenant"]
        with pytest.raises(StateError, match=f"page {row_id} is packed but does not unpack"):
            store.current_value(tenant, "page", row_id)
        assert row_id not in store.current_tokens(tenant, "page", "title") or store.current_tokens(tenant, "page", "title")[row_id] is None
