"""Arguments that name a backup file: a PostgreSQL state is no file, and a path typer made of
its URL (`postgresql:/host/db`, one slash gone) would only say "no such file"; a FIFO or a
device is no backup either, said before anything else is done (a server asked, a file made)."""

from __future__ import annotations

from pathlib import Path

from syncd.config import names_postgres
from syncd.errors import UsageError
from syncd.safe_read import FileRefused, check_regular


def backup_file(path: Path, command: str) -> Path:
    """`path`, or a one-line UsageError when it is a PostgreSQL URL or not a regular file."""
    if names_postgres(str(path)):
        raise UsageError(
            f"syncd {command} reads a backup file (FILE.db), not a PostgreSQL state: "
            "write one first with `syncd backup TENANT[:ORG] --out FILE.db`"
        )
    try:
        check_regular(path, "backup")
    except FileRefused as exc:
        raise UsageError(f"{path} is not a syncd mirror or backup ({exc.kind})") from None
    except OSError:
        pass  # missing or unreadable: said where it is opened, in the words of that command
    return path
