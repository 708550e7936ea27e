"""The records of an export kept as a Git history (`syncd export --git`): every object of the
exported snapshot as JSON, beside the markdown, so that a commit can be restored.

Why: the Git Sync layout is for people. It rewrites links, folds members, teams and site
layouts into a few files, and keeps no parent, position or listing of an object; a restore
needs all of them. So the export also writes, under `.syncd/`:

    .syncd/export.json              {"format": 1, "tenant": ..., "organizations": [ids], "kinds": [...]}
    .syncd/objects/<kind>.jsonl     one line per object of the kind, sorted by organization and id

Each line is one JSON object: the row's `id`, `org`, `parent_kind`, `parent_id`, `position`,
`listing`, `scope`, `hash` (its content hash, which leaves volatile fields out: what says
"changed" in a commit's summary) and `data`, the object as the API returned it. Two things
are not repeated there, to keep the history's diffs those of the markdown:

- `text`: a page's markdown (or an OpenAPI source's text) is left out of `data`; `{"field",
  "path", "front_matter"}` says which file holds it (a page file after its front matter), and
  `lines` gives, by number from 0, the lines the file does not hold as they were: those whose
  links the export rewrote (`[Install](install)` became `[Install](install.md)`). So a page
  edit changes its file, and its record only by its hash (and the lines with links it
  touched).
- `binary`: a file's bytes are the export's `.gitbook/assets/` file at `path`, with their
  `sha256` and `size` (so a changed binary changes the line).

`rebuild_backup` reads these back, from any reader of a commit's files, into a new backup
file (and its blob folder): a commit is then restored by the engine that restores a backup.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncd.catalog import BY_NAME, content_hash, stored_hash
from syncd.read.blobs import BlobStore
from syncd.state import Row, StateStore
from syncd.state.rows import content_hash as plain_hash
from syncd.state.rows import stored_hash as plain_stored_hash

__all__ = ["FORMAT", "OBJECTS", "RECORDS", "Held", "LinePatch", "RecordsError", "read_records", "rebuild_backup", "write_records"]

RECORDS = ".syncd"
OBJECTS = (RECORDS, "objects")
EXPORT_JSON = (RECORDS, "export.json")
FORMAT = 1
_COLUMNS = ("id", "org", "parent_kind", "parent_id", "position", "listing", "scope")
_SURROGATE = re.compile("[\ud800-\udfff]")
_README = (
    "# .syncd\n\n"
    "Written by `syncd export --git`: every object of the export as JSON, one line each in\n"
    "`objects/<kind>.jsonl`, so that `syncd restore DIR@COMMIT TENANT:ORG` can restore a commit.\n"
    "A page's markdown is not repeated here when its file beside the other pages holds it as is.\n"
)

Key = tuple[str, str]
"""(kind, id) of an object."""


class RecordsError(Exception):
    """A commit's records cannot be read back (not an export with records, or damaged)."""


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def record_line(record: Mapping[str, Any]) -> str:
    """One object's record as one line: key-sorted compact JSON, raw unicode (what a diff reads),
    lone surrogates as escapes (the text must be UTF-8)."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return _SURROGATE.sub(_escape, text) + "\n"


class LinePatch:
    """The lines of a text that its file does not hold as they were, noted as the file is written
    piece by piece, each piece written in place of one piece of the text (a page is never held
    twice). A changed piece must be one line, so that the file's lines number as the text's."""

    def __init__(self) -> None:
        self.lines: dict[str, str] = {}
        self.count = 0
        self.usable = True
        """False when the text cannot be had back from the file and `lines` (keep it whole)."""

    def see(self, original: str, written: str) -> str:
        if self.usable and (written != original or _SURROGATE.search(written) is not None):
            if len(written.splitlines(keepends=True)) != 1:
                self.usable = False
            else:
                self.lines[str(self.count)] = original
        self.count += 1
        return written


@dataclass
class Held:
    """What the export's own files hold of the objects (filled while the export writes them)."""

    texts: dict[Key, dict[str, Any]] = field(default_factory=dict)
    binaries: dict[Key, dict[str, Any]] = field(default_factory=dict)

    def text(self, key: Key, field_name: str, path: str, patch: LinePatch, *, front_matter: bool) -> None:
        if patch.usable:
            self.texts[key] = {"field": field_name, "path": path, "front_matter": front_matter, **({"lines": patch.lines} if patch.lines else {})}

    def binary(self, key: Key, path: str, sha256: str, size: int) -> None:
        self.binaries[key] = {"path": path, "sha256": sha256, "size": size}


# ----- writing ---------------------------------------------------------------------------


def write_records(write: Callable[[tuple[str, ...], Iterable[str]], None], store: StateStore, tenant: str, orgs: list[str], held: Held) -> None:
    """Write the records of the organizations `orgs` of `tenant` with `write(parts, pieces)`
    (the export's tree), one file a kind; the objects are read one at a time."""
    kinds = sorted({kind for org in orgs for kind in store.counts(tenant, org)})
    write((RECORDS, "README.md"), [_README])
    write(EXPORT_JSON, [json.dumps({"format": FORMAT, "tenant": tenant, "organizations": orgs, "kinds": kinds}, indent=2, sort_keys=True) + "\n"])
    for kind in kinds:
        write(OBJECTS + (f"{kind}.jsonl",), _lines(store, tenant, kind, orgs, held))


def _lines(store: StateStore, tenant: str, kind: str, orgs: list[str], held: Held) -> Iterator[str]:
    keys = sorted((row for org in orgs for row in store.current_keys(tenant, kind=kind, org=org)), key=lambda r: (str(r["org"]), str(r["id"])))
    for row in keys:
        data = store.current_value(tenant, kind, row["id"])
        if data is None:
            continue
        key = (kind, str(row["id"]))
        record: dict[str, Any] = {column: row[column] for column in _COLUMNS}
        record["hash"] = _hash(kind, data)
        text = held.texts.get(key)
        if text is not None and isinstance(data.get(text["field"]), str):
            data = {k: v for k, v in data.items() if k != text["field"]}
            record["text"] = text
        if key in held.binaries:
            record["binary"] = held.binaries[key]
        record["data"] = data
        yield record_line(record)


def _hash(kind: str, data: Mapping[str, Any]) -> str:
    """A record's `hash`: the content hash in hex, as every export wrote it (not the mirror's
    shorter stored form: a history written before would show every record changed)."""
    known = BY_NAME.get(kind)
    return content_hash(known, data) if known is not None else plain_hash(data)


def _stored_hash(kind: str, data: Mapping[str, Any]) -> str:
    """A restored row's hash, as the mirror stores it (`syncd.state.rows`)."""
    known = BY_NAME.get(kind)
    return stored_hash(known, data) if known is not None else plain_stored_hash(data)


# ----- reading ---------------------------------------------------------------------------

Reader = Callable[[str], bytes | None]
"""A commit's file by its path from the export's root (`a/b.md`), None when it has none."""


@dataclass
class Records:
    """A commit's records: the export's tenant, organizations, and each object's record."""

    tenant: str
    organizations: list[str]
    objects: dict[str, list[dict[str, Any]]]
    """kind -> records, as written (`text` and `binary` still pointers)."""


def read_records(read: Reader) -> Records | None:
    """The records of a commit, or None when it has none (a commit of an export without them)."""
    raw = read("/".join(EXPORT_JSON))
    if raw is None:
        return None
    try:
        head = json.loads(raw)
        if head.get("format") != FORMAT:
            raise RecordsError(f"its records are in format {head.get('format')!r}; this syncd reads format {FORMAT}")
        objects: dict[str, list[dict[str, Any]]] = {}
        for kind in head["kinds"]:
            lines = read("/".join(OBJECTS + (f"{kind}.jsonl",)))
            objects[kind] = [json.loads(line) for line in (lines or b"").decode("utf-8").splitlines() if line.strip()]
        return Records(str(head["tenant"]), [str(org) for org in head["organizations"]], objects)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RecordsError(f"its records under {RECORDS}/ cannot be read: {exc}") from None


def _body(content: bytes, front_matter: bool) -> str:
    """A text file's text; a page file's after its front matter (`---` lines: each value in it
    is one JSON scalar on its line, so the first line `---` after the first closes it)."""
    text = content.decode("utf-8")
    if not front_matter:
        return text
    if not text.startswith("---\n"):
        raise RecordsError("a page file has no front matter")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise RecordsError("a page file's front matter does not end")
    return text[end + len("\n---\n") :]


def _patched(body: str, lines: Mapping[str, str]) -> str:
    """The text a file held with `lines` put back (see `LinePatch`)."""
    if not lines:
        return body
    parts = body.splitlines(keepends=True)
    for number, original in lines.items():
        index = int(number)
        if not 0 <= index < len(parts):
            raise RecordsError(f"a page file has no line {index}: it was edited after the export")
        parts[index] = original
    return "".join(parts)


def restored_rows(records: Records, read: Reader, tenant: str) -> Iterator[Row]:
    """The rows the records describe, texts read back from the files they point to."""
    for kind, items in sorted(records.objects.items()):
        for record in items:
            data = dict(record["data"])
            text = record.get("text")
            if isinstance(text, dict):
                content = read(str(text["path"]))
                if content is None:
                    raise RecordsError(f"{kind} {record['id']}: its text file {text['path']} is not in the commit")
                data[str(text["field"])] = _patched(_body(content, bool(text.get("front_matter"))), text.get("lines") or {})
            yield Row(
                tenant, kind, str(record["id"]), record.get("org"), record.get("parent_kind"), record.get("parent_id"),
                record.get("position"), record.get("listing"), record.get("scope"), data, _stored_hash(kind, data),
            )  # fmt: skip


def rebuild_backup(read: Reader, out: Path, blobs: Path, *, scope_ref: str | None = None) -> Records:
    """Write the objects a commit's records hold into a new backup file `out` (one complete run
    of their tenant), and the binaries its assets hold into the blob folder `blobs` (with the
    manifest a backup made `--with-files` has). RecordsError when the commit has no records."""
    records = read_records(read)
    if records is None:
        raise RecordsError(f"it has no {'/'.join(EXPORT_JSON)}: it was not written by `syncd export --git`")
    store_blobs = BlobStore(blobs)
    manifest: dict[str, dict[str, Any]] = {}
    for kind, items in records.objects.items():
        for record in items:
            binary = record.get("binary")
            if isinstance(binary, dict):
                content = read(str(binary["path"]))
                if content is None:
                    continue  # a restore without it, as of a backup made without --with-files
                sha256 = hashlib.sha256(content).hexdigest()
                temporary = store_blobs.open_temporary()
                temporary.write_bytes(content)
                store_blobs.store(temporary, sha256)
                data = record["data"]
                manifest[str(record["id"])] = {"sha256": sha256, "size": len(content), "name": data.get("name"), "contentType": data.get("contentType")}
    if manifest:
        store_blobs.write_manifest(manifest)
    tenant = records.tenant
    with StateStore(out) as store:
        run = store.start_run("backup", tenant, scope_ref or (f"{tenant}:{records.organizations[0]}" if len(records.organizations) == 1 else tenant))
        try:
            store.stage(run, restored_rows(records, read, tenant))
            store.finish_run(run, "complete", {"rebuilt_from": "git"})
        except BaseException:
            store.abandon_run(run, "failed", "the commit could not be read back")
            raise
    return records
