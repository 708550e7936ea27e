"""Where the state lives, and the backend that opens it: the choice made once.

Why: the user's settings say it (`state_dir`, or `state_url`, a PostgreSQL URL checked when the
settings are parsed), and the code that reads them (`syncd.read.sync.default_db`, `syncd state
migrate`'s `--to`) hands the StateStore a `StateLocation` whose type carries the choice: a `Path`
is a SQLite state file, a `str` the URL of a PostgreSQL state. `state_backend` turns it into the
backend, once; the StateStore opens whatever backend it is given and never looks at the text.

Both backends have one interface (`StateBackend`): what names the state (`location`, `where`),
the SQL dialect, and `open`, which gives the database handle and the writer lock. The
PostgreSQL one imports psycopg only when it opens: a SQLite state never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from syncd.state.dialect import POSTGRES, SQLITE, Dialect
from syncd.state.lock import WriterLock
from syncd.state.sqlite_file import open_readonly, open_writable

__all__ = ["OpenedState", "PgState", "SqliteState", "StateBackend", "StateLocation", "state_backend"]

StateLocation = Path | str
"""Where a state lives: a SQLite file's path, or the URL of a PostgreSQL state (`state_url`)."""


@dataclass(frozen=True)
class OpenedState:
    """What a backend's `open` gives the StateStore."""

    db: Any
    """sqlite-utils' `Database`, or the PostgreSQL handle with the same methods (`PgDatabase`)."""
    writer: Any
    """One writer process at a time: the file's `WriterLock`, or the tenants' `TenantWriters`."""
    opened_as: tuple[int, int, int, int] | None = None
    """A file opened read-only as immutable: what identifies it then (`sqlite_file.identity`)."""


class StateBackend(Protocol):
    """One way to keep the state (module docstring)."""

    @property
    def location(self) -> StateLocation:
        """What opens it again (`StateStore.path`)."""
        ...

    @property
    def where(self) -> str:
        """The state as messages name it (never a password)."""
        ...

    @property
    def dialect(self) -> Dialect: ...

    def open(self, *, readonly: bool, create: bool, busy_timeout: float) -> OpenedState: ...


@dataclass(frozen=True)
class SqliteState:
    """A state file (`state_dir/syncd.db`, a backup): the embedded default."""

    path: Path

    @property
    def location(self) -> Path:
        return self.path

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def dialect(self) -> Dialect:
        return SQLITE

    def open(self, *, readonly: bool, create: bool, busy_timeout: float) -> OpenedState:
        """The file, migrated (or, `readonly`, read as it is: `syncd.state.sqlite_file`)."""
        writer = WriterLock(self.path)
        if readonly:
            db, opened_as = open_readonly(self.path, busy_timeout=busy_timeout)
            return OpenedState(db, writer, opened_as)
        return OpenedState(open_writable(self.path, create=create, busy_timeout=busy_timeout), writer)


@dataclass(frozen=True)
class PgState:
    """The PostgreSQL state a fleet shares (`state_url`)."""

    url: str = field(repr=False)

    @property
    def location(self) -> str:
        return self.url

    @property
    def where(self) -> str:
        from syncd.state.pg_database import where

        return where(self.url)

    @property
    def dialect(self) -> Dialect:
        return POSTGRES

    def open(self, *, readonly: bool, create: bool, busy_timeout: float) -> OpenedState:
        """The server, the mirror's tables brought up to date (or, `readonly`, one snapshot:
        `syncd.state.pg_database`); `create` and `busy_timeout` are the file's."""
        from syncd.state.pg_database import open_pg, where
        from syncd.state.pg_writers import TenantWriters

        db = open_pg(self.url, readonly=readonly)
        return OpenedState(db, TenantWriters(db, where(self.url)))


def state_backend(location: StateLocation | StateBackend) -> StateBackend:
    """The backend of `location`: a `Path` is a state file, a `str` a PostgreSQL state's URL;
    a backend is itself."""
    if isinstance(location, Path):
        return SqliteState(location)
    if isinstance(location, str):
        return PgState(location)
    return location
