"""Arguments that name a backup file: a PostgreSQL state is no file, and a path typer made of
its URL (`postgresql:/host/db`, one slash gone) would only say "no such file"."""

from __future__ import annotations

from pathlib import Path

from syncd.config import names_postgres
from syncd.errors import UsageError


def backup_file(path: Path, command: str) -> Path:
    """`path`, or a one-line UsageError when it is a PostgreSQL URL."""
    if names_postgres(str(path)):
        raise UsageError(
            f"syncd {command} reads a backup file (FILE.db), not a PostgreSQL state: "
            "write one first with `syncd backup TENANT[:ORG] --out FILE.db`"
        )
    return path
