"""A crafted backup (issue 41, item 2): a file is syncd's only when its schema is the one syncd's
migrations made, and a stop request (SIGINT, SIGTERM) interrupts any long query on a file syncd
reads.

The crafted file is a real syncd backup whose `resources` table was replaced by a view over an
endless recursive query: it passes `PRAGMA quick_check`, and every read of `resources` runs
forever. `check`, `status`, `diff` and `export` run on it as processes of their own (forked from
the suite's CLI zygote) and must answer exit 2 in one line; the bounds below are the issue's
acceptance (20 s, 10 s), timeouts rather than speed measurements. A schema syncd made cannot
reach an endless query (only the file's size bounds a query then), so the progress handler is
shown stopping an endless query run through syncd's own read-only connection, in a process of
its own, on the first SIGINT or SIGTERM."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database

from syncd.cli import main
from syncd.state import MIGRATIONS, StateStore, StateError, migrate
from tests import cli_zygote
from tests.hostile.cli_support import Ran, clean_env
from tests.loopback import wait_for
from tests.test_export import _row, write_backup

ENDLESS = "WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever)"
"""A query that never ends (every row it makes leads to the next one)."""
CHECK_BOUND = 20.0
"""The issue's acceptance: `check` (and `status`) exit non-zero within 20 s on the crafted file."""
STOP_BOUND = 10.0
"""The issue's acceptance: `export` stops on SIGINT within 10 s."""


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A backup as syncd writes it: one complete run with an organization and a space."""
    path = tmp_path_factory.mktemp("crafted") / "made.db"
    write_backup(path, [_row("organization", "o1", None, None, title="Org"), _row("space", "s1", ("organization", "o1"), 0, title="Docs")], [])
    return path


def copy_of(made: Path, folder: Path, name: str = "nightly.db") -> Path:
    path = folder / name
    path.write_bytes(made.read_bytes())
    return path


def endless_resources(path: Path) -> None:
    """`resources` replaced by a view of the same columns over an endless recursive query that
    yields no row (each column an expression of the counter, so SQLite cannot tell a filter
    on it is never met)."""
    with closing(sqlite3.connect(path)) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(resources)")]
        conn.execute("DROP TABLE resources")
        shown = ", ".join(f"CASE WHEN n < 0 THEN n END AS {column}" for column in columns)
        conn.execute(f"CREATE VIEW resources AS {ENDLESS} SELECT {shown} FROM forever WHERE n < 0")
        conn.commit()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]  # what SQLite's own check sees


@pytest.fixture
def crafted(made: Path, tmp_path: Path) -> Path:
    path = copy_of(made, tmp_path)
    endless_resources(path)
    return path


def ran(args: list[str], cwd: Path, timeout: float) -> Ran:
    """`syncd ARGS` as a process of its own, killed (a test failure) after `timeout` seconds."""
    try:
        done = cli_zygote.run(args, env=clean_env(), cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"syncd {' '.join(args)} did not end within {timeout:g} s")
    return Ran(tuple(args), done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("command", ["check", "status", "diff", "export"])
def test_the_crafted_backup_is_refused_in_one_line_within_the_bound(crafted: Path, command: str) -> None:
    args = {
        "check": ["check", str(crafted)],
        "status": ["status", "--db", str(crafted)],
        "diff": ["diff", "--db", str(crafted)],
        "export": ["export", str(crafted), str(crafted.parent / "out")],
    }[command]
    line = ran(args, crafted.parent, CHECK_BOUND).one_line_error(2)
    assert line == f"syncd: error: {crafted} is not a syncd mirror or backup: its resources is a view, where syncd makes a table"
    assert not (crafted.parent / "out").exists()


def _holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (it got past its signal handlers' set-up to read it)."""
    folder = Path(f"/proc/{pid}/fd")
    return any(os.path.realpath(folder / fd) == str(path.resolve()) for fd in os.listdir(folder))


def _stopped_by(process: Any, signum: int, what: str) -> str:
    """Send `signum` to `process` (a Popen or a zygote's child) once; its stderr once it ended,
    a test failure when it has not ended within `STOP_BOUND` seconds."""
    process.send_signal(signum)
    try:
        return str(process.communicate(timeout=STOP_BOUND)[1])
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not stop within {STOP_BOUND:g} s of {signal.Signals(signum).name}")


def test_export_of_the_crafted_backup_ends_on_the_first_sigint(crafted: Path) -> None:
    """Before the fix, `export` read the view for ever, and SIGINT, SIGINT, SIGTERM, SIGTERM did
    not end it. Now it ends: refused at once (exit 2), or, if the signal comes first, stopped (130)."""
    process = cli_zygote.started(["export", str(crafted), str(crafted.parent / "out")], env=clean_env(), cwd=crafted.parent)
    try:
        wait_for("export to open the file", lambda: process.poll() is not None or _holds_open(process.pid, crafted), timeout=30, interval=0.02)
        err = _stopped_by(process, signal.SIGINT, "export")
    finally:
        process.kill()
    assert process.returncode in (2, 130), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


# ----- what else is not syncd's schema ---------------------------------------------------------


def _alter(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.commit()


_REBUILT = (
    "ALTER TABLE runs RENAME TO old_runs",
    "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL, tenant TEXT NOT NULL, scope_ref TEXT NOT NULL, "
    "started_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL DEFAULT 'running', "
    "stats TEXT, reason TEXT, pid INTEGER, host TEXT AS (job || tenant))",
    "INSERT INTO runs (id, job, tenant, scope_ref, started_at, finished_at, status, stats, reason, pid) "
    "SELECT id, job, tenant, scope_ref, started_at, finished_at, status, stats, reason, pid FROM old_runs",
    "DROP TABLE old_runs",
)
"""`runs` made again with its `host` computed (a generated column: SQLite runs its expression
whenever the column is read)."""

NOT_SYNCDS = {
    "trigger": (
        (f"CREATE TRIGGER slow AFTER INSERT ON runs BEGIN SELECT count(*) FROM ({ENDLESS} SELECT n FROM forever); END",),
        "it has a trigger slow, syncd makes none",
    ),
    "a trigger named as a table": (
        ("CREATE TRIGGER runs AFTER INSERT ON runs BEGIN DELETE FROM scopes; END",),
        "it has a trigger runs, syncd makes none",
    ),
    "extra view": (
        (f"CREATE VIEW endless AS {ENDLESS} SELECT n FROM forever",),
        "it has a view endless, syncd makes none of that name",
    ),
    "syncd's view changed": (
        ("DROP VIEW current_resources", f"CREATE VIEW current_resources AS {ENDLESS} SELECT n FROM forever"),
        "its view current_resources is not the one syncd makes",
    ),
    "a generated column": (_REBUILT, "its table runs has other columns than syncd makes (host)"),
    "a missing column": (
        ("ALTER TABLE changes DROP COLUMN title",),
        "its table changes has other columns than syncd makes (title)",
    ),
    "a virtual table": (
        ("DROP TABLE scopes", "CREATE VIRTUAL TABLE scopes USING fts5(tenant, scope, token, run)"),
        "its scopes is a virtual table, where syncd makes a table",
    ),
    "a missing table": (("DROP TABLE listings",), "it lacks the table listings"),
}


@pytest.mark.parametrize("case", list(NOT_SYNCDS))
def test_a_schema_syncd_did_not_make_is_refused_by_every_reader_and_writer(made: Path, tmp_path: Path, case: str,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path = copy_of(made, tmp_path)
    statements, why = NOT_SYNCDS[case]
    _alter(path, *statements)
    expected = f"syncd: error: {path} is not a syncd mirror or backup: {why}"
    for args in (["check", str(path)], ["status", "--db", str(path)], ["export", str(path), str(tmp_path / "out")]):
        assert main(args) == 2, args
        captured = capsys.readouterr()
        assert captured.err.strip() == expected, (args, captured.err)
    with pytest.raises(StateError, match="is not a syncd mirror or backup: "):  # `sync --db FILE`, a mirror written to
        StateStore(path)


@pytest.mark.parametrize("made_by", range(1, len(MIGRATIONS) + 1))
def test_the_schema_of_every_release_is_read_as_it_is(tmp_path: Path, made_by: int, capsys: pytest.CaptureFixture[str]) -> None:
    """A file written by the release with the first `made_by` migrations (as `test_state_tables`
    makes them), with things syncd lets be: a table and an index of the user's, SQLite's statistics."""
    path = tmp_path / "old.db"
    with Database(path) as db:
        assert migrate(db, MIGRATIONS[:made_by]) == [m.name for m in MIGRATIONS[:made_by]]
        db.execute("INSERT INTO runs (job, tenant, scope_ref, started_at, status) VALUES ('backup', 't', 't', '2024-01-01T00:00:00+00:00', 'complete')")
        db.execute("INSERT INTO resources (tenant, kind, id, org, data, hash, first_seen_run, last_seen_run) "
                   """VALUES ('t', 'organization', 'o1', 'o1', '{"id": "o1", "title": "Org"}', 'h', 1, 1)""")  # fmt: skip
        db.execute("CREATE TABLE my_notes (text TEXT)")
        db.execute("CREATE INDEX my_runs ON runs (finished_at)")
        db.execute("ANALYZE")
    assert main(["status", "--db", str(path)]) == 0, capsys.readouterr().err
    assert main(["check", str(path)]) == 0, capsys.readouterr()
    capsys.readouterr()
    with StateStore(path) as mirror:  # opened to write, it is upgraded as before
        assert [m.name for m in MIGRATIONS] == [row["name"] for row in mirror.db.query("SELECT name FROM migrations ORDER BY rowid")]


def test_migrations_out_of_order_are_refused(made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_of(made, tmp_path)
    _alter(path, "DELETE FROM migrations WHERE name = '0002_replication'")
    assert main(["status", "--db", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"syncd: error: {path} is not a syncd mirror or backup: its migrations are not the ones syncd applies, in their order"
    )


# ----- a stop request interrupts a long query --------------------------------------------------

_READER = """
import signal, sys
from pathlib import Path

import anyio

from syncd import interrupt
from syncd.state import StateStore

path, how = Path(sys.argv[1]), sys.argv[2]

def read() -> None:
    with StateStore(path, readonly=True) as store:
        print("reading", flush=True)
        store.db.execute("{endless} SELECT count(*) FROM forever").fetchall()

try:
    if how == "in-thread":  # an async command's reads run in worker threads
        interrupt.run(lambda: anyio.to_thread.run_sync(read), what="stopped")
    else:
        with interrupt.stoppable("stopped"):
            read()
except interrupt.Interrupted as exc:
    print(exc, file=sys.stderr)
    sys.exit(exc.exit_code)
"""


@pytest.mark.parametrize(("how", "signum"), [("main", signal.SIGINT), ("main", signal.SIGTERM), ("in-thread", signal.SIGINT)])
def test_the_first_signal_interrupts_a_long_query_on_a_file_syncd_reads(made: Path, tmp_path: Path, how: str, signum: int) -> None:
    """Before the fix the Python signal handler could not run inside the one long SQLite call:
    only SIGKILL ended the process."""
    path = copy_of(made, tmp_path)
    script = textwrap.dedent(_READER).replace("{endless}", ENDLESS)
    process = subprocess.Popen([sys.executable, "-c", script, str(path), how], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "reading\n"
        err = _stopped_by(process, signum, "the query")
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 128 + signum, err
    assert err.strip() == f"interrupted by {signal.Signals(signum).name}: stopped", err
