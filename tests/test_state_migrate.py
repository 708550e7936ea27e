"""`syncd state migrate`: a real SQLite state (crawled from an emulator process, a copy applied
into another organization, a daemon history) moved into a real PostgreSQL (`pg_url`), and read
back through `StateStore` and `FleetRunLog` as the file reads (issue 13).

The state is built once for the module and only read by the migrations; a test that changes it
works on a copy.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from syncd.cli import main
from syncd.daemon.fleet_runs import FleetRunLog
from syncd.daemon.run_history import DIED
from syncd.daemon.runs import RunLog
from tests.cli_zygote import emulator_process
from syncd.state import StateStore, packing
from syncd.state.lock import WriterLock
from syncd.state.rows import stored_of_hex
from tests.loopback import EmulatorClient
from tests.schema_support import check_output
from tests.state_support import stored_hashes_undone

TOKEN = "migrate-token"
SPEC = "orgs=1,empty_orgs=1,collections=1,spaces=2,pages=2,files=1,sites=1,sections=1,members=1,teams=1"
TABLES = ("runs", "resources", "staged", "listings", "scopes", "staged_scopes", "changes", "idmap", "journal")
NUL_TITLE = "Null\x00byte"
NUL_REASON = "stopped\x00by a test"


def _env(monkeypatch: pytest.MonkeyPatch, url: str, state: Path) -> None:
    for name in ("SRC", "DST"):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", TOKEN)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(state))
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)


def _daemon_history(path: Path) -> None:
    """A daemon's runs: finished ones, and one it left running and one queued when it died."""
    log = RunLog(path)
    start = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    for number, (outcome, summary) in enumerate([("succeeded", {"full": True, "objects": 12}), ("partial", {"errors": ["x"]}), ("failed", {})]):
        record = log.new("sync", "sync", "schedule", start + timedelta(minutes=number))
        record.started_at, record.ended_at = record.queued_at, record.queued_at + timedelta(seconds=3.5)
        record.outcome, record.summary, record.error = outcome, summary, "boom" if outcome == "failed" else None
        log.save(record)
    for outcome in ("running", "queued"):
        record = log.new("copy", "mirror", "trigger", start + timedelta(hours=1))
        record.outcome = outcome  # type: ignore[assignment]
        log.save(record)
    log.pause("copy", "ops@host (syncd command line)", start + timedelta(hours=2))  # issue 39: kept by the fleet
    log.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """STATE_DIR of two syncs (one change between them: a title holding a NUL, escaped in the
    JSON), a copy into the empty organization (id map, journal), a failed run whose reason holds
    a NUL (text PostgreSQL cannot hold), a deleted last run (the AUTOINCREMENT counter is above
    every id left) and a daemon history."""
    home = tmp_path_factory.mktemp("migrate")
    state = home / "state"
    with emulator_process(token=TOKEN, spec=SPEC, seed=5) as running, pytest.MonkeyPatch.context() as monkeypatch:
        emulator = EmulatorClient(running.url, running.report, TOKEN)
        _env(monkeypatch, running.url, state)
        src, dst = emulator.orgs
        assert main(["sync", "src"]) == 0
        space = emulator.api("GET", f"/v1/orgs/{src}/spaces")["items"][0]["id"]
        emulator.api("PATCH", f"/v1/spaces/{space}", {"title": NUL_TITLE})
        assert main(["sync", "src"]) == 0
        assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}"]) == 0
    with StateStore(state / "syncd.db") as mirror:
        kept = mirror.start_run("sync", "src", "src")
        mirror.abandon_run(kept, "failed", NUL_REASON)
        gone = mirror.start_run("sync", "src", "src")
        mirror.abandon_run(gone, "failed", "made to be deleted")
    with contextlib.closing(sqlite3.connect(state / "syncd.db")) as conn, conn:
        conn.execute("DELETE FROM runs WHERE id = ?", [gone])
    _daemon_history(state / "daemon.db")
    yield state


@pytest.fixture
def state(built: Path, tmp_path: Path) -> Path:
    """A copy of the built state directory, for a test that changes it."""
    return Path(shutil.copytree(built, tmp_path / "state"))


def migrate(source: Path, url: str, *more: str) -> int:
    return main(["state", "migrate", "--from", str(source), "--to", url, *more])


def rows(location: Path | str, sql: str) -> list[tuple[Any, ...]]:
    if isinstance(location, Path):
        with contextlib.closing(sqlite3.connect(f"{location.as_uri()}?mode=ro", uri=True)) as conn:
            return [tuple(row) for row in conn.execute(sql)]
    with psycopg.connect(location, autocommit=True) as conn:
        conn.adapters.register_loader("json", psycopg.types.string.TextLoader)
        return [tuple(row) for row in conn.execute(sql)]


def count(location: Path | str, table: str) -> int:
    return int(rows(location, f"SELECT count(*) FROM {table}")[0][0])


def pg_counts(url: str) -> dict[str, int]:
    """Rows of every table the migration writes (0 for a table not created yet)."""
    found = {name for (name,) in rows(url, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
    return {table: count(url, table) if table in found else 0 for table in (*TABLES, "fleet_runs")}


def view(location: Path | str) -> dict[str, Any]:
    """What the StateStore reads of every tenant: counts, current rows, runs, changes, scope tokens."""
    with StateStore(location, readonly=True) as mirror:
        tenants = sorted({run["tenant"] for run in mirror.runs()})
        return {
            tenant: (mirror.counts(tenant), list(mirror.current(tenant)), mirror.runs(tenant), mirror.scope_tokens(tenant))
            for tenant in tenants
        } | {"changes": [mirror.changes(run["id"]) for run in mirror.runs()]}


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("syncd: error: "), err
    return err


def test_every_table_and_the_daemon_history_move_and_read_back_the_same(built: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    db = built / "syncd.db"
    assert migrate(built, pg_url, "--json") == 0
    captured = capsys.readouterr()
    document = check_output("state-migrate", captured.out)
    assert "verified" in captured.err and document["verified"] is True
    for table in TABLES:
        assert count(pg_url, table) == count(db, table), table
    assert all(count(db, table) > 0 for table in ("runs", "resources", "changes", "idmap", "journal", "scopes"))
    copied = {t["table"]: (t["rows"], t["copied"]) for t in document["tables"]}
    assert copied["resources"] == (count(db, "resources"),) * 2 and copied["fleet_runs"] == (5, 5)
    assert copied["fleet_job_pauses"] == (1, 1)
    fleet = FleetRunLog(pg_url, "after-the-move")
    try:
        (pause,) = fleet.paused_jobs().values()
    finally:
        fleet.close()
    assert (pause.job, pause.by, pause.at) == ("copy", "ops@host (syncd command line)", datetime(2026, 1, 2, 5, 4, 5, 678000, tzinfo=UTC))

    # counts, every current row, runs, changes, scope tokens; the NUL of a run's reason as U+FFFD
    wanted = view(db)
    for run in wanted["src"][2]:
        run["reason"] = run["reason"] and run["reason"].replace("\x00", "\ufffd")
    assert view(pg_url) == wanted
    assert rows(pg_url, "SELECT reason FROM runs WHERE reason LIKE 'stopped%'") == [(NUL_REASON.replace("\x00", "\ufffd"),)]
    assert document["replaced_nul"] == 1
    assert any(row["data"].get("title") == NUL_TITLE for row in view(pg_url)["src"][1])  # a JSON escape stays one
    assert set(view(db)) == {"src", "dst", "changes"} and document["objects"]["src"] == view(db)["src"][0]
    for table, order in (("idmap", "source_id, target_org"), ("journal", "run, seq")):
        assert rows(pg_url, f"SELECT * FROM {table} ORDER BY {order}") == rows(db, f"SELECT * FROM {table} ORDER BY {order}")

    counter = rows(db, "SELECT seq FROM sqlite_sequence WHERE name = 'runs'")[0][0]
    assert counter > max(row[0] for row in rows(db, "SELECT id FROM runs"))  # the deleted last run
    assert document["next_run_id"] == counter + 1
    with StateStore(pg_url) as mirror:  # a run after the migration: past every id the file gave
        new = mirror.start_run("sync", "src", "src")
        mirror.abandon_run(new)
    assert new == counter + 1

    history = FleetRunLog(pg_url, "replica-1", migrate=False)
    try:
        runs = {run.id: run for run in history.latest(10)}
        daemon = rows(built / "daemon.db", "SELECT id, outcome, summary, started_at FROM runs ORDER BY id")
        assert sorted(runs) == [row[0] for row in daemon]
        assert [runs[row[0]].outcome for row in daemon] == ["succeeded", "partial", "failed", "failed", "cancelled"]
        assert runs[4].error == DIED and document["closed_daemon_runs"] == 2
        assert runs[1].summary == json.loads(daemon[0][2]) and runs[1].started_at == datetime.fromisoformat(daemon[0][3])
        assert history.last_full("sync") == datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
        assert history.new("sync", "sync", "trigger", datetime.now(UTC)).id == 6 == document["next_daemon_run_id"]
    finally:
        history.close()


def test_a_second_migrate_into_the_same_state_is_refused_and_changes_nothing(built: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert migrate(built, pg_url) == 0
    out = capsys.readouterr().out
    assert "verified" in out and "fleet_runs" in out
    before, seen = pg_counts(pg_url), view(pg_url)
    assert migrate(built, pg_url) == 2
    assert "already holds a mirror or run history (rows in runs, resources" in one_error_line(capsys)
    assert pg_counts(pg_url) == before and view(pg_url) == seen


def test_a_state_holding_only_a_fleets_runs_is_refused_too(built: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    history = FleetRunLog(pg_url, "replica-1")
    history.new("sync", "sync", "trigger", datetime.now(UTC))
    history.close()
    assert migrate(built, pg_url) == 2
    assert "(rows in fleet_runs)" in one_error_line(capsys)
    assert pg_counts(pg_url) == {table: 0 for table in TABLES} | {"fleet_runs": 1}


def test_a_run_left_open_is_refused_unless_asked_then_the_next_writer_fails_it(state: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # (what an earlier syncd staged in the file itself: JSON text, as `syncd_json` gives the packed objects back)
    with contextlib.closing(packing.connect(state / "syncd.db")) as conn, conn:
        opened = conn.execute(
            "INSERT INTO runs (job, tenant, scope_ref, started_at, status) VALUES ('sync', 'src', 'src', '2026-01-01T00:00:00.000+00:00', 'running')"
        ).lastrowid
        conn.execute(
            "INSERT INTO staged (run, tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash) "
            "SELECT ?, tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, syncd_json(data), hash FROM resources WHERE tenant = 'src' LIMIT 3",
            [opened],
        )
    assert migrate(state, pg_url) == 2
    assert f"has runs still open ({opened})" in one_error_line(capsys)
    assert pg_counts(pg_url)["runs"] == 0

    assert migrate(state, pg_url, "--with-open-runs") == 0
    assert f"open runs copied as they are: {opened}" in capsys.readouterr().out
    assert count(pg_url, "staged") == 3 and rows(pg_url, f"SELECT status FROM runs WHERE id = {opened}") == [("running",)]
    with StateStore(pg_url) as mirror:  # the tenant's next writer finds it dead, as on the file
        assert mirror.recover() == [opened]
    assert count(pg_url, "staged") == 0 and rows(pg_url, f"SELECT status FROM runs WHERE id = {opened}") == [("failed",)]


def test_a_live_writer_or_daemon_is_refused_before_anything_is_read(state: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    writer = WriterLock(state / "syncd.db")
    writer.acquire()
    try:
        assert migrate(state, pg_url) == 2
        assert f"state file {state / 'syncd.db'} is being written by a syncd process (pid " in one_error_line(capsys)
    finally:
        writer.release()
    daemon = WriterLock(state / "daemon", lock_path=state / "daemon.lock")
    daemon.acquire()
    try:
        assert migrate(state, pg_url) == 2
        assert f"a syncd daemon is running on state directory {state} (pid " in one_error_line(capsys)
    finally:
        daemon.release()
    assert pg_counts(pg_url) == {table: 0 for table in (*TABLES, "fleet_runs")}
    assert migrate(state, pg_url) == 0  # the locks were only looked at: nothing stays behind
    assert not (state / "syncd.db.lock").exists() and not (state / "daemon.lock").exists()


def _damage(path: Path, table: str) -> None:
    """One leaf page of `table` overwritten with garbage (as tests/test_check_backup.py does)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", [table])]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as handle:
        handle.seek((pages[len(pages) // 2] - 1) * size)
        handle.write(b"\xde\xad\xbe\xef" * (size // 4))


def test_what_cannot_be_used_is_one_line(state: Path, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert migrate(tmp_path / "nowhere", pg_url) == 2
    assert f"no state directory or state file at {tmp_path / 'nowhere'}" in one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert migrate(tmp_path / "empty", pg_url) == 2
    assert f"no state file at {tmp_path / 'empty' / 'syncd.db'}" in one_error_line(capsys)
    assert migrate(state, "mysql://root:hunter2@localhost/db") == 2
    line = one_error_line(capsys)
    assert "--to must be the URL of a PostgreSQL state" in line and "hunter2" not in line
    assert migrate(state, "postgresql://postgres:hunter2@127.0.0.1:1/nothing") == 1
    line = one_error_line(capsys)
    assert "cannot use the PostgreSQL state at postgresql://postgres:***@127.0.0.1:1/nothing" in line and "hunter2" not in line

    (state / "daemon.db").write_bytes(b"not a database at all, but long enough to be read as one" * 4)
    assert migrate(state, pg_url) == 2
    assert f"{state / 'daemon.db'} is not a syncd mirror or backup (not an SQLite database)" in one_error_line(capsys)
    (state / "daemon.db").unlink()
    _damage(state / "syncd.db", "resources")
    assert migrate(state, pg_url) == 2
    assert "it is damaged" in one_error_line(capsys)
    assert pg_counts(pg_url) == {table: 0 for table in (*TABLES, "fleet_runs")}


@pytest.mark.parametrize("damage", ["drop", "alter"])
def test_a_server_that_stores_something_else_fails_the_check_and_keeps_nothing(
    built: Path, pg_url: str, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """A trigger makes the server store other rows than were sent: one `changes` row dropped
    (the row counts differ) or one title changed (the same number of rows, other values)."""
    from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
    from syncd.pg.connect import connect
    from syncd.pg.migrations import migrate as make_tables

    with connect(pg_url) as conn:
        make_tables(conn, FLEET_MIGRATIONS)
        action = "RETURN NULL" if damage == "drop" else "NEW.title := 'changed'; RETURN NEW"
        conn.execute(
            f"CREATE FUNCTION damage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.seq = 2 THEN {action}; END IF; RETURN NEW; END $$;"
            "CREATE TRIGGER damage BEFORE INSERT ON changes FOR EACH ROW EXECUTE FUNCTION damage()"
        )
    assert migrate(built, pg_url) == 1
    line = one_error_line(capsys)
    assert line.startswith("syncd: error: verification failed, nothing was copied: ")
    if damage == "drop":
        assert f"table changes has {count(built / 'syncd.db', 'changes')} rows in syncd.db, {count(built / 'syncd.db', 'changes') - 1} in PostgreSQL" in line
    else:
        assert "the rows of table changes differ between the file and PostgreSQL" in line
    assert pg_counts(pg_url) == {table: 0 for table in (*TABLES, "fleet_runs")}  # one transaction: all of it rolled back


def test_the_current_view_is_compared_through_the_mirrors_reads(
    built: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the table digests blinded, a changed object is still found by reading the view."""
    from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
    from syncd.pg.connect import connect
    from syncd.pg.migrations import migrate as make_tables
    from syncd.state import state_copy

    monkeypatch.setattr(state_copy._Digest, "__eq__", lambda self, other: True)
    with connect(pg_url) as conn:
        make_tables(conn, FLEET_MIGRATIONS)
        conn.execute(
            "CREATE FUNCTION damage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.kind = 'space' AND NEW.deleted_run IS NULL THEN NEW.data := '{\"title\": \"other\"}'; END IF; RETURN NEW; END $$;"
            "CREATE TRIGGER damage BEFORE INSERT ON resources FOR EACH ROW EXECUTE FUNCTION damage()"
        )
    assert migrate(built, pg_url) == 1
    line = one_error_line(capsys)
    assert line.startswith("syncd: error: verification failed, nothing was copied: tenant ") and "the current space " in line
    assert pg_counts(pg_url) == {table: 0 for table in (*TABLES, "fleet_runs")}


def test_the_hashes_of_a_file_older_than_0008_move_in_the_form_the_server_stores(state: Path, pg_url: str) -> None:
    """Such a file is read as it is (hex hashes): its hashes go as its own upgrade would make
    them (22 characters), so a run on the server finds its unchanged objects unchanged."""
    db = state / "syncd.db"
    with contextlib.closing(packing.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        stored_hashes_undone(conn)
        conn.execute("COMMIT")
    objects, changes = "SELECT tenant, kind, id, hash FROM resources ORDER BY 1, 2, 3", "SELECT seq, old_hash, new_hash FROM changes ORDER BY seq"
    held = rows(db, objects), rows(db, changes)
    assert {len(row[-1]) for row in held[0]} == {64}
    assert migrate(state, pg_url) == 0
    assert rows(pg_url, objects) == [(*row[:-1], stored_of_hex(row[-1])) for row in held[0]]
    assert rows(pg_url, changes) == [(seq, stored_of_hex(old), stored_of_hex(new)) for seq, old, new in held[1]]
    assert {len(row[-1]) for row in rows(pg_url, objects)} == {22}


def test_an_older_state_file_given_alone_moves_with_the_servers_defaults(tmp_path: Path, pg_url: str) -> None:
    """A file of migrations 0001-0002 (the id map before organizations, no daemon beside it):
    what the file lacks takes the columns' defaults, as upgrading the file would give them."""
    import sqlite_utils

    from syncd.state.sqlite_schema import MIGRATIONS, migrate as migrate_file

    path = tmp_path / "old.db"
    db = sqlite_utils.Database(sqlite3.connect(path, isolation_level=None))
    migrate_file(db, MIGRATIONS[:2])
    db.execute("INSERT INTO runs (job, tenant, scope_ref, started_at, status) VALUES ('copy', 'dst', 'dst', '2025-01-01T00:00:00.000+00:00', 'complete')")
    db.execute("INSERT INTO idmap VALUES ('src', 'space', 's1', 'dst', 't1', 1)")
    db.execute("INSERT INTO journal (run, seq, target_tenant, method, path, state) VALUES (1, 1, 'dst', 'POST', '/v1/spaces', 'done')")
    db.conn.close()
    assert migrate(path, pg_url) == 0
    assert rows(pg_url, "SELECT source_org, source_id, target_org, target_id, origin, run FROM idmap") == [("", "s1", "", "t1", "created", 1)]
    assert rows(pg_url, "SELECT run, seq, op_key, op FROM journal") == [(1, 1, None, None)]
    assert pg_counts(pg_url) == {table: 0 for table in TABLES} | {"runs": 1, "idmap": 1, "journal": 1, "fleet_runs": 0}
