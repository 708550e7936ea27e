"""The shared PostgreSQL state's foundation: connections fail in one line, migrations run once."""

from __future__ import annotations

import threading

import psycopg
import pytest

from syncd.pg.connect import PgError, connect, display_url
from syncd.pg.migrations import LEDGER, PgMigration, applied_migrations, migrate

STEPS = (
    PgMigration("0001-a", "CREATE TABLE a (id bigint PRIMARY KEY)"),
    PgMigration("0002-b", "CREATE TABLE b (id bigint PRIMARY KEY, a bigint REFERENCES a (id))"),
)
KNOWN = ("0001-a", "0002-b", "0003-broken")
"""The ledger of these tests' migrations."""


def test_display_url_hides_the_password_only() -> None:
    assert display_url("postgresql://syncd:s3cret@db:5432/state") == "postgresql://syncd:***@db:5432/state"
    assert display_url("postgresql://syncd@db/state") == "postgresql://syncd@db/state"


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(PgError) as caught:
        connect("postgresql://syncd:s3cret-pw@127.0.0.1:1/state?connect_timeout=2")
    message = str(caught.value)
    assert message.startswith("cannot use the PostgreSQL state at postgresql://syncd:***@127.0.0.1:1/state")
    assert "s3cret-pw" not in message and "\n" not in message


def test_a_missing_database_is_named(pg_server: str) -> None:
    url = pg_server.rsplit("/", 1)[0] + "/syncd_no_such_database"
    with pytest.raises(PgError, match='database "syncd_no_such_database" does not exist'):
        connect(url)


def test_migrations_run_once_and_record_themselves(pg_url: str) -> None:
    with connect(pg_url) as conn:
        assert migrate(conn, STEPS, known=KNOWN) == ["0001-a", "0002-b"]
        assert migrate(conn, STEPS, known=KNOWN) == []
        assert applied_migrations(conn) == ["0001-a", "0002-b"]
        conn.execute("INSERT INTO a VALUES (1)")
        conn.execute("INSERT INTO b VALUES (1, 1)")


def test_replicas_starting_together_upgrade_once(pg_url: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def replica() -> None:
        try:
            with connect(pg_url) as conn:
                start.wait()
                results.append(migrate(conn, STEPS, known=KNOWN))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert sorted(results, key=len) == [[], [], [], ["0001-a", "0002-b"]]


def test_a_failing_migration_leaves_nothing_and_says_which(pg_url: str) -> None:
    broken = (*STEPS, PgMigration("0003-broken", "CREATE TABLE c (id bigint REFERENCES nowhere (id))"))
    with connect(pg_url) as conn:
        with pytest.raises(PgError, match="migration '0003-broken'"):
            migrate(conn, broken, known=KNOWN)
        assert applied_migrations(conn) == []  # one transaction: the good steps are undone too
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT 1 FROM a")


def test_a_state_upgraded_by_a_newer_syncd_is_refused(pg_url: str) -> None:
    with connect(pg_url) as conn:
        migrate(conn, STEPS, known=KNOWN)
        with pytest.raises(PgError, match="upgraded by a newer syncd .*'0002-b'"):
            migrate(conn, STEPS[:1], known=KNOWN[:1])


def test_a_state_made_before_run_backends_gains_the_table_and_keeps_its_runs(pg_url: str) -> None:
    """Issue 22: `0004-run-backends` comes to a running fleet's state like any migration (and
    issue 39's `0005-pause-cancel` after it)."""
    from syncd.daemon.fleet_tables import FLEET_MIGRATIONS

    older = tuple(m for m in FLEET_MIGRATIONS if m.name not in ("0004-run-backends", "0005-pause-cancel"))
    with connect(pg_url) as conn:
        migrate(conn, older)
        conn.execute("INSERT INTO fleet_runs (job, kind, reason, queued_at) VALUES ('a', 'sync', 'trigger', now())")
        assert migrate(conn, FLEET_MIGRATIONS) == ["0004-run-backends", "0005-pause-cancel"]
        assert conn.execute("SELECT count(*), count(cancel_requested) FROM fleet_runs").fetchone() == (1, 0)
        assert conn.execute("SELECT count(*) FROM fleet_run_backends").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM fleet_job_pauses").fetchone() == (0,)


def test_the_ledger_names_each_owners_migrations_once_in_release_order() -> None:
    """The store, the budget and the daemon hand their own migrations; together they are the
    ledger, and a replica (`FLEET_MIGRATIONS`) makes all of them in its order."""
    from syncd.daemon.fleet_tables import FLEET_MIGRATIONS, RUN_MIGRATIONS
    from syncd.pg.budget import BUDGET_MIGRATIONS
    from syncd.state.pg_schema import MIRROR_MIGRATIONS

    owned = [m.name for m in (*MIRROR_MIGRATIONS, *BUDGET_MIGRATIONS, *RUN_MIGRATIONS)]
    assert sorted(owned) == sorted(LEDGER) and len(set(owned)) == len(owned)
    assert [m.name for m in FLEET_MIGRATIONS] == list(LEDGER)


def test_owners_handing_their_own_tables_share_one_server(pg_url: str) -> None:
    """Each owner makes its tables when it first uses the server; one owner does not take the
    others' names for a newer syncd's, and lists handed together go in release order."""
    from syncd.daemon.fleet_tables import RUN_MIGRATIONS
    from syncd.pg.budget import BUDGET_MIGRATIONS
    from syncd.state.pg_schema import MIRROR_MIGRATIONS

    with connect(pg_url) as conn:
        assert migrate(conn, BUDGET_MIGRATIONS) == ["0002-token-budgets", "0003-budget-key-secret"]
        ours = ["0001-runs", "mirror-0001", "0004-run-backends", "0005-pause-cancel", "mirror-0002", "mirror-0003"]
        assert migrate(conn, (*RUN_MIGRATIONS, *MIRROR_MIGRATIONS, *MIRROR_MIGRATIONS)) == ours
        assert migrate(conn, MIRROR_MIGRATIONS) == []
        assert applied_migrations(conn) == ["0002-token-budgets", "0003-budget-key-secret", *ours]


def test_every_owner_refuses_a_state_a_newer_syncd_upgraded(pg_url: str) -> None:
    from syncd.daemon.fleet_tables import RUN_MIGRATIONS
    from syncd.pg.budget import BUDGET_MIGRATIONS
    from syncd.state.pg_schema import MIRROR_MIGRATIONS

    with connect(pg_url) as conn:
        migrate(conn, MIRROR_MIGRATIONS)
        conn.execute("INSERT INTO fleet_migrations (name) VALUES ('0005-from-the-future')")
        for owned in (MIRROR_MIGRATIONS, BUDGET_MIGRATIONS, RUN_MIGRATIONS):
            with pytest.raises(PgError, match="upgraded by a newer syncd .*'0005-from-the-future'"):
                migrate(conn, owned)
        assert applied_migrations(conn) == ["mirror-0001", "mirror-0002", "mirror-0003", "0005-from-the-future"]


def test_a_migration_missing_from_the_ledger_is_a_programming_error(pg_url: str) -> None:
    with connect(pg_url) as conn, pytest.raises(ValueError, match="'0005-unlisted' is missing from the ledger"):
        migrate(conn, (PgMigration("0005-unlisted", "SELECT 1"),))
