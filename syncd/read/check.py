"""`syncd check`: is a backup whole? SQLite's own check, then every file binary beside it.

What is checked, reading only (the file is opened `immutable` when it is a closed WAL file, as
every backup is, `mode=ro` otherwise: the opening `status` and `export` use; nothing is
written into the file or beside it):
- the file is an SQLite file with syncd's tables and at least one finished run (else it is
  no backup: `NotABackup`, exit 2);
- `PRAGMA integrity_check`: every page, index and constraint (each message is a problem);
- every object's stored JSON reads as JSON: unpacked when it is packed (`syncd.state.packing`),
  since a packed value has no `json_valid` CHECK for the integrity check to run (each object
  that does not is an `object-damaged` problem, at most `INTEGRITY_LINES` of them);
- the blob folder beside it (`FILE.blobs/`, `syncd.read.backup.blobs_dir`), when there is one:
  every blob must be a regular file, reached without following a link (a symbolic link, a
  FIFO, a device is named as such: a restore, the content source and export refuse it, see
  `syncd.read.blobs`), and must hash to its name (content addressed: `ab/cdef...` holds the bytes
  whose sha256 is `abcdef...`); every file row of the backup's current snapshot must have a
  manifest entry whose blob is there with the file's size.

A backup made without `--with-files` has no blob folder: its binaries are not checked (a note,
not a problem). Problems are reported, not repaired: a damaged backup is replaced by a new
one, not patched.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from syncd.read.backup import blobs_dir
from syncd.read.blobs import FILE_KINDS, BlobError, BlobRefused, BlobStore, hash_stream, open_regular
from syncd.state import FINISHED, StateError, packing
from syncd.state.packing import PackedDataError
from syncd.state.sqlite_schema import check_readable
from syncd.state.sqlite_file import stopped
from syncd.state.store import _connect_readonly, _sqlite_header, database_failure

__all__ = ["INTEGRITY_LINES", "CheckReport", "NotABackup", "Problem", "check_backup"]

INTEGRITY_LINES = 100
"""At most this many messages from `PRAGMA integrity_check`: one damaged page can give many."""
_REFUSED_KINDS = {"symlink": "blob-symlink", "not-regular": "blob-not-regular"}
"""The problem kind of a blob `open_regular` refuses (anything else: `blob-unreadable`)."""
_UNUSED = "never restored, served or exported"
_HEX = re.compile(r"[0-9a-f]+")


class NotABackup(StateError):
    """The file is no syncd backup, or cannot be read at all (exit 2)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the backup: `kind` for scripts, `subject` what it is about."""

    kind: str
    """`sqlite`, `blob-hash`, `blob-symlink`, `blob-not-regular`, `blob-unreadable`,
    `blob-missing`, `blob-size`, `manifest`, `file-not-stored`, `rows-unreadable` or
    `object-damaged`."""
    subject: str
    message: str

    def line(self) -> str:
        return f"{self.kind}: {self.subject}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "message": self.message}


@dataclass
class CheckReport:
    """What `check_backup` found; `healthy` when no problem."""

    path: Path
    integrity: str = "ok"
    """`ok`, or `damaged` when `PRAGMA integrity_check` found something."""
    runs: int = 0
    tenants: list[str] = field(default_factory=list)
    objects: int | None = None
    """Current objects of the backup (None: they could not be counted)."""
    file_rows: int | None = None
    """Current file rows (`file`, `change-request-file`); None: they could not be read."""
    blobs_folder: Path | None = None
    """The blob folder beside the backup; None when there is none."""
    blobs: int = 0
    """Blob files hashed."""
    blob_bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shown: str | None = None
    """How the backup is named when it is not `path` (`s3://BUCKET/KEY`, fetched into `path`)."""
    shown_blobs: str | None = None
    """How its blob folder is named then (`s3://BUCKET/PREFIX/blobs/`)."""

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def name(self) -> str:
        return self.shown if self.shown is not None else str(self.path)

    def to_json(self) -> dict[str, Any]:
        """The `--json` document (schema `syncd/schemas/check.json`)."""
        return {
            "file": self.name,
            "healthy": self.healthy,
            "problems": [problem.to_json() for problem in self.problems],
            "integrity": self.integrity,
            "runs": self.runs,
            "tenants": self.tenants,
            "objects": self.objects,
            "file_rows": self.file_rows,
            "blobs": {
                "folder": self.shown_blobs or (str(self.blobs_folder) if self.blobs_folder is not None else None),
                "checked": self.blobs,
                "bytes": self.blob_bytes,
            },
            "notes": self.notes,
        }


def _open(path: Path) -> sqlite3.Connection:
    """`path` opened for reading only, as `StateStore(path, readonly=True)` opens it (module
    docstring), without its `quick_check`: damage is what this command reports."""
    header = _sqlite_header(path)  # StateError (exit 2): missing, a folder, not SQLite, truncated
    wal = path.with_name(path.name + "-wal")
    try:
        return _connect_readonly(path, header[18] == 2 and not wal.exists(), busy_timeout=5.0)
    except sqlite3.DatabaseError as exc:
        failure = database_failure(path, exc)
        raise NotABackup(str(failure) if failure is not None else f"{path} cannot be opened: {exc}") from None


def _check(conn: sqlite3.Connection, table: str | None = None) -> list[str]:
    """`PRAGMA integrity_check` of the file or of one table: its messages (`["ok"]`: none)."""
    argument = INTEGRITY_LINES if table is None else '"' + table.replace('"', '""') + '"'
    return [str(row[0]) for row in conn.execute(f"PRAGMA integrity_check({argument})")]


def _integrity(conn: sqlite3.Connection, report: CheckReport) -> None:
    """SQLite's check of every page; when it stops at a page it cannot read (it raises for
    some), each table is checked on its own, so the lines say which tables are damaged."""
    try:
        lines = _check(conn)
    except sqlite3.DatabaseError as exc:
        if stopped(exc):
            raise
        lines = []
        tables = [str(name) for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            try:
                lines += [f"table {table}: {line}" for line in _check(conn, table) if line != "ok"]
            except sqlite3.DatabaseError as exc:
                if stopped(exc):
                    raise
                lines.append(f"table {table}: {exc}")
        lines = lines[:INTEGRITY_LINES] or ["the check stopped: the file is damaged where no table is"]
    if lines != ["ok"]:
        report.integrity = "damaged"
        report.problems.extend(Problem("sqlite", str(report.path), line) for line in lines)


def _rows(conn: sqlite3.Connection, report: CheckReport) -> list[tuple[str, str, dict[str, Any]]] | None:
    """The current file rows (tenant, id, data), counting runs and objects on the way; None
    when the damage keeps them from being read (a problem says so)."""
    try:
        runs = conn.execute("SELECT tenant, status FROM runs").fetchall()
        report.runs = len(runs)
        report.tenants = sorted({str(tenant) for tenant, status in runs if status in FINISHED})
        if not report.tenants and report.integrity == "ok":
            raise NotABackup(f"{report.path} holds no finished run: it is no backup (a mirror whose first sync never finished?)")
        report.objects = conn.execute("SELECT count(*) FROM resources WHERE deleted_run IS NULL").fetchone()[0]
        marks = ", ".join("?" for _ in FILE_KINDS)
        found = conn.execute(
            f"SELECT tenant, id, data FROM resources WHERE deleted_run IS NULL AND kind IN ({marks}) ORDER BY tenant, id",
            sorted(FILE_KINDS),
        ).fetchall()
        rows = []
        packer = packing.of(conn)
        for tenant, row_id, data in found:
            try:
                decoded = json.loads(packer.json_of(data))
            except (ValueError, RecursionError, PackedDataError):
                decoded = None
            rows.append((str(tenant), str(row_id), decoded if isinstance(decoded, dict) else {}))
    except sqlite3.DatabaseError as exc:
        if stopped(exc):
            raise
        why = f"the runs and file rows cannot be read: {exc}"
        if report.integrity == "ok":
            report.problems.append(Problem("rows-unreadable", str(report.path), why))
        else:
            report.notes.append(f"{why} (the damage above)")
        return None
    report.file_rows = len(rows)
    return rows


_NOT_JSON = "SELECT kind, id, data FROM resources WHERE coalesce(json_valid(syncd_json(data)), 0) = 0 ORDER BY tenant, kind, id"
"""The objects whose stored JSON does not read as JSON (SQLite's `json_valid`, on the text
`syncd_json` unpacks: NULL for a packed value that does not unpack)."""


def _objects(conn: sqlite3.Connection, report: CheckReport) -> None:
    """An `object-damaged` problem for each object whose JSON cannot be read (module docstring)."""
    packer = packing.of(conn)
    try:
        found = 0
        for kind, row_id, data in conn.execute(_NOT_JSON):
            found += 1
            if found > INTEGRITY_LINES:
                continue
            try:
                packer.json_of(data)
                why = "its stored text is not JSON"
            except PackedDataError as exc:
                why = f"it is packed but does not unpack: {exc}"
            report.problems.append(Problem("object-damaged", f"{kind} {row_id}", f"{why}: it cannot be exported or restored"))
        if found > INTEGRITY_LINES:
            report.notes.append(f"{found - INTEGRITY_LINES} more objects cannot be read (the first {INTEGRITY_LINES} are listed)")
    except sqlite3.DatabaseError as exc:
        if stopped(exc):
            raise
        report.notes.append(f"the objects' JSON was not checked: {exc}")


def _blob_files(report: CheckReport, root: Path, users: dict[str, list[str]], damaged: set[str]) -> Iterator[Path]:
    """Every entry of the content-addressed layout (`ab/cdef...`), not the manifest nor
    `.tmp/`. A two-letter folder that is a link (or no folder) is a problem of its own, what
    it leads to is not looked at, and the blobs the manifest places in it join `damaged`."""
    for folder in sorted(root.iterdir()):
        if len(folder.name) != 2 or not _HEX.fullmatch(folder.name):
            continue
        if folder.is_symlink() or not folder.is_dir():
            kind = "blob-symlink" if folder.is_symlink() else "blob-not-regular"
            what = "a symbolic link" if folder.is_symlink() else "not a folder"
            inside = [name for name in users if name.startswith(folder.name)]
            damaged.update(inside)
            used = sorted(entry for name in inside for entry in users[name])
            report.problems.append(Problem(kind, _shown(folder, root), f"is {what}, where a folder of blobs should be: the blobs it leads to are {_UNUSED}{_by(used)}"))
            continue
        yield from sorted(path for path in folder.iterdir() if len(path.name) == 62 and _HEX.fullmatch(path.name))


def _by(used: list[str]) -> str:
    """` (the binary of A, B, C ...)`: the file rows a blob holds the bytes of."""
    return f" (the binary of {', '.join(used[:3])}{' ...' if len(used) > 3 else ''})" if used else ""


def _hash(path: Path) -> tuple[str, int]:
    """sha256 and size of a blob opened as every user of blobs opens it (`open_regular`):
    BlobRefused for a link or anything but a regular file."""
    with open_regular(path) as handle:
        return hash_stream(handle)


def _blobs(report: CheckReport, rows: list[tuple[str, str, dict[str, Any]]] | None, on_blob: Callable[[int], None] | None) -> None:
    root = blobs_dir(report.path)
    if not root.is_dir():
        report.notes.append(f"no blob folder ({root.name}): file binaries not checked (a backup made without --with-files)")
        return
    report.blobs_folder = root
    store = BlobStore(root)
    try:
        manifest: dict[str, Any] | None = store.manifest()
        if not store.manifest_path.exists() and rows:
            report.problems.append(Problem("manifest", _shown(store.manifest_path, root), "missing: no file row can be matched with its blob"))
            manifest = None
    except BlobError as exc:
        report.problems.append(Problem("manifest", _shown(store.manifest_path, root), str(exc)))
        manifest = None
    users: dict[str, list[str]] = {}
    for entry_id, entry in (manifest or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
            users.setdefault(entry["sha256"], []).append(str(entry_id))
    present, damaged = _hash_blobs(report, root, users, on_blob)
    if rows is None:
        report.notes.append("file rows not read: their blobs are not matched with the manifest")
    elif manifest is not None:
        for _tenant, row_id, data in rows:
            _file_row(report, store, root, manifest.get(row_id), present, damaged, row_id, data)


def _hash_blobs(
    report: CheckReport, root: Path, users: dict[str, list[str]], on_blob: Callable[[int], None] | None
) -> tuple[dict[str, int], set[str]]:
    """Hash every blob file: (name -> size of those that hash to their name, names of those that do not)."""
    present: dict[str, int] = {}
    damaged: set[str] = set()
    for path in _blob_files(report, root, users, damaged):
        name = path.parent.name + path.name
        by = _by(users.get(name, []))
        try:
            sha256, size = _hash(path)
        except BlobRefused as exc:
            kind = _REFUSED_KINDS.get(exc.kind, "blob-unreadable")
            report.problems.append(Problem(kind, _shown(path, root), f"{exc}: {_UNUSED}{by}" if kind != "blob-unreadable" else f"{exc}{by}"))
            damaged.add(name)
            continue
        except OSError as exc:
            report.problems.append(Problem("blob-unreadable", _shown(path, root), f"{exc.strerror or exc}{by}"))
            damaged.add(name)
            continue
        report.blobs += 1
        report.blob_bytes += size
        if on_blob is not None:
            on_blob(size)
        if sha256 != name:
            report.problems.append(
                Problem("blob-hash", _shown(path, root), f"its bytes hash to {sha256[:16]}..., not to its name: they changed after they were stored{by}")
            )
            damaged.add(name)
            continue
        present[name] = size
    return present, damaged


def _file_row(
    report: CheckReport,
    store: BlobStore,
    root: Path,
    entry: object,
    present: dict[str, int],
    damaged: set[str],
    row_id: str,
    data: dict[str, Any],
) -> None:
    """The blob of one file row: in the manifest, present, of the file's size (a blob whose
    bytes changed was reported when it was hashed)."""
    name = data.get("name")
    subject = f"file {row_id}" + (f" ({name!r})" if isinstance(name, str) else "")
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or not isinstance(entry.get("size"), int):
        report.problems.append(Problem("file-not-stored", subject, "no blob in the manifest: the backup does not hold its binary"))
        return
    sha256, size = entry["sha256"], entry["size"]
    try:
        blob = store.path_for(sha256)
    except ValueError:
        report.problems.append(Problem("manifest", subject, f"its manifest entry names no sha256 ({sha256[:70]!r})"))
        return
    if sha256 in damaged:
        return
    if sha256 not in present:
        report.problems.append(Problem("blob-missing", subject, f"its blob {_shown(blob, root)} is missing"))
        return
    expected = data.get("size") if isinstance(data.get("size"), int) else size
    if present[sha256] != size or expected != size:
        report.problems.append(Problem("blob-size", subject, f"its blob {_shown(blob, root)} holds {present[sha256]} bytes; the file has {expected}"))


def _shown(path: Path, root: Path) -> str:
    """A blob's path as `FILE.blobs/ab/cdef...`: short, and still findable beside the backup."""
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def check_backup(path: Path, *, on_blob: Callable[[int], None] | None = None) -> CheckReport:
    """Check the backup at `path` (module docstring), reading only; `on_blob(size)` after each
    blob hashed. NotABackup or StateError (exit 2) when it is no backup or cannot be read."""
    report = CheckReport(path)
    with closing(_open(path)) as conn:
        try:
            conn.execute("BEGIN")  # one snapshot for every read below
            check_readable(Database(conn, execute_plugins=False), where=str(path))
            _integrity(conn, report)
            rows = _rows(conn, report)
            if rows is not None:
                _objects(conn, report)
        except sqlite3.DatabaseError as exc:  # its list of tables cannot be read
            raise NotABackup(f"{path} cannot be read, it is damaged: {exc}") from None
    _blobs(report, rows, on_blob)
    return report
