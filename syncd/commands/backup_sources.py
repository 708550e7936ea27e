"""What `restore` and `mirror verify` take as a backup: a file, a backup in object storage
(`s3://BUCKET/PREFIX/NAME.db`, fetched into a staging folder) or a commit of an export's Git
history (`DIR[@REV]`, rebuilt into a backup file). One reading for both commands, so that the
verify a restore prints finds the same backup."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from syncd.commands.file_args import backup_file
from syncd.config import Settings, parse_target_ref
from syncd.errors import UsageError

if TYPE_CHECKING:
    from syncd.copy.sides import Source


def backup_source(text: str, org: str | None, settings: Settings, command: str, stack: contextlib.ExitStack) -> tuple[Source, str]:
    """The backup `text` names as a source, and how to name it again in a command to paste
    later (a commit by its id: a branch moves on). A fetched backup's staging folder lives as
    long as `stack`."""
    from syncd.config.storage import is_object_url
    from syncd.copy import BackupSource

    if is_object_url(text):
        return _stored_source(text, org, settings, command, stack), text
    path, named = _backup_or_commit(text, settings, command)
    return BackupSource(path, org), named


def verify_source(text: str, org: str | None, settings: Settings, stack: contextlib.ExitStack) -> Source:
    """`mirror verify`'s source: a backup (read as `restore` reads it) when the argument is an
    object URL, cannot be TENANT:ORG (a tenant name has no `.` or `/`), names an existing file
    or a commit of an export's Git history; else a live organization, which --org does not go
    with."""
    from syncd.config import names_postgres
    from syncd.config.storage import is_object_url
    from syncd.config.tenants import parse_ref
    from syncd.read.export.git_history import parse_source

    try:
        parse_ref(text)
        is_ref = not is_object_url(text) and not names_postgres(text) and not Path(text).is_file() and parse_source(text) is None
    except ValueError:
        is_ref = False
    if not is_ref:
        return backup_source(text, org, settings, "mirror verify", stack)[0]
    if org is not None:
        raise UsageError("--org chooses the organization of a backup file: give it with FILE.db only")
    return parse_target_ref(text, settings)


def _backup_or_commit(text: str, settings: Settings, command: str) -> tuple[Path, str]:
    """The backup file a `FILE.db` or `DIR[@REV]` argument names, and its name to paste. A Git
    history of an export (`syncd export --git`) gives the commit as a backup file rebuilt from
    its records (`syncd.read.export.git_history.materialize`), kept in STATE_DIR/git-restores/
    under the repository's name and the commit's id."""
    from syncd.read.export.git_history import materialize, parse_source

    source = parse_source(text)
    if source is None:
        return backup_file(Path(text), command), text
    path, sha = materialize(source, settings.state_dir / "git-restores")
    return path, f"{source.repository}@{sha}"


def _stored_source(text: str, org: str | None, settings: Settings, command: str, stack: contextlib.ExitStack) -> Source:
    """A backup in object storage: fetched (its object, manifest and blobs) into a staging folder
    that `stack` removes, and named by its URL in what is shown."""
    from syncd.copy import BackupSource
    from syncd.storage import fetched_backup
    from syncd.storage.destination import location

    place = location(text)
    assert not isinstance(place, Path)
    fetched = stack.enter_context(fetched_backup(settings, place, what=f"syncd {command} stopped while it fetched {place}"))
    return BackupSource(fetched.path, org, shown=str(place))
