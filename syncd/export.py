"""Export a mirror or backup file to a readable directory: each space in GitBook's Git Sync
layout (markdown pages, `SUMMARY.md`, `.gitbook.yaml`, `.gitbook/assets/`), JSON for the rest.

Layout (every directory name is a slug: lower-case ascii letters, digits and `-`; siblings
that would share a slug get `-2`, `-3`, ... in position order, then id order)::

    OUT/.syncd-export                  marker: this directory belongs to `syncd export`
    OUT/<org>/organization.json        the organization's settings
              members.json             members, each with its spaces and teams
              teams.json  saml.json  sso.json  translations.json  custom-fields.json
              integrations.json        integrations, each with its installations
              openapi/<slug>.json      an OpenAPI spec; `<slug>.source.yaml|json` its text
              sites/<site>/site.json   the site; `structure.json` its section groups,
                                       sections and site-spaces in order, each site-space
                                       naming its space's export path (relative to <org>);
                                       the raw `sections.json`, `section-groups.json`,
                                       `site-spaces.json`, `adaptive-schema.json`, `published.json`
              other/<kind>.json        rows of kinds this exporter does not know (none today)
              <collection>/collection.json
              <collection>/<sub-collection>/.../<space>/   a space (or <org>/<space>/)
    <space>/.gitbook.yaml              `root: ./`, `structure:` readme README.md, summary SUMMARY.md
            README.md                  the space's first page
            SUMMARY.md                 `# Table of contents`, then `* [Title](path.md)` nested in
                                       page order; the first page links README.md
            <page>.md                  a page without children
            <page>/README.md           a page with children, which live in <page>/ (the first
                                       page's children live in <page>/ too, beside no README)
            .gitbook/assets/<name>     the space's files' binaries, from the backup's blob folder
                                       (FILE.blobs/), under their names made safe and unique
            space.json  revision.json  custom-fields.json (name -> value)
            pages.json                 every page's file and its other fields, in document order
            files.json  comments.json (each with its replies)  links.json
            change-requests/<number>-<subject>/   change-request.json and the same content
                                       files as a space (.gitbook.yaml, README.md, SUMMARY.md,
                                       pages, .gitbook/assets/, files.json, ...)

A page file is front matter then the page's markdown::

    ---
    id: "<page id>"
    title: "<title>"
    description: "<only when set>"
    emoji: "<only when set>"
    hidden: true                       only when the page is hidden
    ---
    <markdown>

Every front-matter value is a JSON scalar, which is also a YAML scalar (strings are
double-quoted with JSON escapes, and characters YAML does not allow raw are escaped too).

The markdown is the stored markdown with the destinations of its inline links and images
rewritten, nothing else: a link to a page of the same space (by its path from the space's
root, `getting-started/install#anchor`) becomes the relative path of that page's file
(`../getting-started/install.md#anchor`), and a file (`.gitbook/assets/<name>`) the
relative path of its binary under `.gitbook/assets/`, written or not (a backup made without
`--with-files` has none: the report lists what is missing). Links that match neither (another
site, a page that is gone) and anything inside code are left as they are.

Why it is deterministic: JSON is written with sorted keys, 2-space indent and a final
newline; lists follow positions, then ids; nothing about the export itself (time, paths)
is written. Re-exporting writes only files whose bytes changed and removes the files that
are no longer part of the export, so the tree equals a fresh export byte for byte.

The source file is opened read-only (`Mirror(readonly=True)`): an old backup is read as it
is, never migrated, and a backup on read-only media can be exported.

Why it is safe: every path component is a slug, a fixed name or a file name reduced to
`[A-Za-z0-9._-]` (not starting with a dot), checked before use, so no title can reach outside OUT; symlinks met inside OUT are replaced, never followed; a
non-empty directory without the marker is refused rather than cleaned. An export that would
remove all the files a previous export left in OUT, or more than `MAX_REMOVED_RATIO` of them
(a backup that holds no organization, one made by a token that lost access, one organization
exported over all of them), is refused before anything is written unless `force`: a dry run
of the export (`_Plan`) counts what it would remove.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import posixpath
import re
import shutil
import sqlite3
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from syncd.backup import blobs_dir
from syncd.read.blobs import BlobRefused, BlobStore
from syncd.errors import SyncdError
from syncd.files import PRIVATE_FILE, private_dir, storage_error
from syncd.logging import get_logger
from syncd.mirror import FINISHED, Mirror, MirrorError
from syncd.safe_text import one_line
from syncd.scope import EVERYTHING, Scope
from syncd.selection import LINK_KINDS, VALUE_KINDS, Dependency, content_dependencies, item_of_row, select

__all__ = [
    "HANDLED_KINDS",
    "MARKER",
    "ExportError",
    "ExportReport",
    "asset_name",
    "export_mirror",
    "front_matter",
    "json_text",
    "rewrite_links",
    "rewritten_lines",
    "slugify",
    "yaml_scalar",
]

log = get_logger("syncd.export")

MARKER = ".syncd-export"
MAX_REMOVED_RATIO = 0.5
"""An export removing more than this fraction of the files of the previous export in its folder
(or all of them) is refused unless forced: far likelier an emptier backup than a shrunk tenant."""
_MARKER_TEXT = (
    "This directory is written by `syncd export`.\n"
    "The next export into it replaces changed files and removes the files it no longer holds.\n"
)
SLUG_MAX = 60
_WINDOWS_RESERVED = frozenset({"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(1, 10)})
_ORG_RESERVED = _WINDOWS_RESERVED | {"sites", "openapi", "other"}
_PAGE_RESERVED = _WINDOWS_RESERVED | {"readme", "summary", "change-requests"}
_SAFE_PART = re.compile(r"\A[A-Za-z0-9._-]+\Z")  # `\Z`: `$` would let "name\n" through
ASSETS = (".gitbook", "assets")
"""Where a space's (or change request's) file binaries go, below its folder."""
_ASSET_MAX = 100
_GITBOOK_YAML = "root: ./\n\nstructure:\n  readme: README.md\n  summary: SUMMARY.md\n"

# Kinds written by this module (the rest go to `other/<kind>.json`). `collection-space`
# is the order of a collection's spaces, which the `space` rows already carry.
_ORG_KINDS = (
    "organization", "member", "member-space", "member-team", "team", "saml-provider", "sso-provider",
    "openapi-spec", "openapi-spec-source", "translation", "custom-field", "integration",
    "integration-installation", "collection", "collection-space", "space", "site", "site-section-group",
    "site-section", "site-space", "site-adaptive-schema", "site-published",
)  # fmt: skip
_SCOPED_KINDS = (
    "space-custom-field-value", "revision", "page", "page-link", "file", "file-backlink", "space-link",
    "comment", "comment-reply", "change-request", "change-request-revision", "change-request-page",
    "change-request-page-link", "change-request-file", "change-request-file-backlink",
    "change-request-comment", "change-request-comment-reply",
)  # fmt: skip
HANDLED_KINDS = frozenset(_ORG_KINDS + _SCOPED_KINDS)
HELD_TEXT_MAX = 1 << 20
"""A page's markdown or an OpenAPI source longer than this is not held with the other rows of
its space or organization: it is read again when its own file is written, and written as it
is rewritten (see `_Exporter._current`)."""
_DEFERRED_FIELD = {"page": "markdown", "change-request-page": "markdown", "openapi-spec-source": "text"}
_DEFERRED = "deferred"
"""The row key naming the field of `data` left out to be read when it is written."""


class ExportError(SyncdError):
    """The export cannot run as asked (bad source file, tenant, organization or target)."""

    exit_code = 2


@dataclass
class ExportReport:
    """What an export holds and what it changed on disk."""

    organizations: int = 0
    spaces: int = 0
    pages: int = 0
    change_requests: int = 0
    files: int = 0
    """Files the export holds (the marker not counted)."""
    written: int = 0
    """Files created or changed by this export (unchanged files are left untouched)."""
    removed: int = 0
    """Files of a previous export that this one no longer holds."""
    assets: int = 0
    """File binaries the export holds under `.gitbook/assets/` folders."""
    missing_binaries: list[str] = field(default_factory=list)
    """Export paths (relative to OUT) of file binaries the backup does not hold (made without
    `--with-files`, or a download failed): pages link to them all the same."""
    dependencies: list[Dependency] = field(default_factory=list)
    """What the exported objects need outside the scope (`syncd.selection`)."""


# ----- text ------------------------------------------------------------------------------


def slugify(text: Any, fallback: str = "untitled") -> str:
    """A file-system-safe name: ascii lower-case letters, digits and single dashes."""
    value = unicodedata.normalize("NFKD", str(text or ""))
    value = "".join(ch for ch in value if not unicodedata.combining(ch)).lower()
    value = re.sub(r"[^a-z0-9]+", "-", value).strip("-")[:SLUG_MAX].rstrip("-")
    return value or fallback


# YAML forbids these raw (or reads them as line breaks); JSON leaves them raw. Lone
# surrogates cannot be encoded at all; as `\uXXXX` escapes JSON keeps them.
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def yaml_scalar(value: Any) -> str:
    """One YAML flow scalar for `value`: JSON text, with the characters YAML cannot hold
    raw escaped. Strings are always quoted (`2699` or `yes` stay strings)."""
    if isinstance(value, float) and math.isnan(value):
        return ".nan"
    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _NOT_YAML_PRINTABLE.sub(_escape, text)


def front_matter(fields: Iterable[tuple[str, Any]]) -> str:
    """`---` / `key: scalar` lines / `---`, each key a plain identifier."""
    lines = ["---"]
    for key, value in fields:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"front matter key {key!r} is not a plain identifier")
        lines.append(f"{key}: {yaml_scalar(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def json_text(value: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, raw unicode, final newline."""
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=True)
    return _SURROGATE.sub(_escape, text) + "\n"


def _link_text(title: str) -> str:
    """A title as markdown link text: one line, no control characters, brackets escaped."""
    visible = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in title)
    text = " ".join(visible.split()) or "Untitled"
    return re.sub(r"([\\\[\]])", r"\\\1", text)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="replace")


# ----- links -----------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{1,31}:")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_ASSET_PREFIXES = (".gitbook/assets/", "./.gitbook/assets/", "/.gitbook/assets/")


def rewrite_links(markdown: str, resolve: Callable[[str], str | None]) -> str:
    """`markdown` with the destination of each inline link and image (`[text](dest)`,
    `![alt](dest "title")`, `[text](<dest>)`) replaced by `resolve(dest)` when that is not
    None; nothing else changes, and nothing inside fenced code blocks or code spans."""
    return "".join(rewritten_lines(markdown, resolve))


def rewritten_lines(markdown: str, resolve: Callable[[str], str | None]) -> Iterator[str]:
    """`rewrite_links`, line by line as `str.splitlines(keepends=True)` cuts them: a page is
    written as it is rewritten, never held twice."""
    fence = ""
    for line in _lines(markdown):
        opening = _FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence) and not line[opening.end() :].strip():
                fence = ""
            yield line
        elif opening and not (opening.group(1)[0] == "`" and "`" in line[opening.end() :]):
            fence = opening.group(1)
            yield line
        else:
            yield _rewrite_line(line, resolve)


_LINES_BLOCK = 1 << 20


def _lines(text: str) -> Iterator[str]:
    """`text.splitlines(keepends=True)`, made as it is read: pieces of about 1 MiB cut after a
    `\n` (which always ends a line, and never parts a `\r\n`) are split in turn, so the
    lines of a huge page are never all in memory at once."""
    start, end = 0, len(text)
    while start < end:
        cut = text.find("\n", min(start + _LINES_BLOCK, end) - 1)
        stop = end if cut == -1 else cut + 1
        yield from text[start:stop].splitlines(keepends=True)
        start = stop


def _code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of the code spans of one line: a run of n backticks up to the next run of n."""
    spans: list[tuple[int, int]] = []
    runs = list(_BACKTICKS.finditer(line))
    index = 0
    while index < len(runs):
        run = runs[index]
        closing = next((j for j in range(index + 1, len(runs)) if len(runs[j].group()) == len(run.group())), None)
        if closing is None:
            index += 1
            continue
        spans.append((run.start(), runs[closing].end()))
        index = closing + 1
    return spans


def _destination(line: str, start: int) -> tuple[int, int, int] | None:
    """After `](` at `start`: (start, end) of the destination and the index after the closing
    parenthesis, or None when what follows is not a link destination (CommonMark rules)."""
    i, n = start, len(line)
    while i < n and line[i] in " \t":
        i += 1
    if i < n and line[i] == "<":
        close = i + 1
        while close < n and line[close] not in "<>\n":
            close += 2 if line[close] == "\\" else 1
        if close >= n or line[close] != ">":
            return None
        begin, end, j = i + 1, close, close + 1
    else:
        begin, depth, j = i, 0, i
        while j < n and line[j] not in " \t\r\n" and ord(line[j]) >= 0x20:
            if line[j] == "\\" and j + 1 < n:
                j += 2
                continue
            if line[j] == "(":
                depth += 1
            elif line[j] == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        end = j
        if end == begin:
            return None
    while j < n and line[j] in " \t":
        j += 1
    if j < n and line[j] in "\"'(" and j > end:
        closer = ")" if line[j] == "(" else line[j]
        k = j + 1
        while k < n and line[k] != closer:
            k += 2 if line[k] == "\\" else 1
        if k >= n:
            return None
        j = k + 1
        while j < n and line[j] in " \t":
            j += 1
    if j >= n or line[j] != ")":
        return None
    return begin, end, j + 1


def _rewrite_line(line: str, resolve: Callable[[str], str | None]) -> str:
    if "](" not in line:
        return line
    code = _code_spans(line)
    pieces: list[str] = []
    done = 0
    at = line.find("](")
    while at != -1:
        inside = next((end for begin, end in code if begin <= at < end), None)
        if inside is not None:
            at = line.find("](", inside)
            continue
        found = _destination(line, at + 2)
        if found is None:
            at = line.find("](", at + 2)
            continue
        begin, end, after = found
        target = resolve(line[begin:end])
        if target is not None:
            pieces += [line[done:begin], target]
            done = end
        at = line.find("](", after)
    return "".join(pieces) + line[done:]


def _resolver(page_file: str, page_files: Mapping[str, str], assets: Mapping[str, str]) -> Callable[[str], str | None]:
    """The new destination of a link in the page written at `page_file` (from the content's
    root): the relative path of the linked page's file or of the file's binary, the anchor
    kept; None for anything else (left as it is)."""
    folder = posixpath.dirname(page_file) or "."

    def resolve(destination: str) -> str | None:
        target = _ESCAPED.sub(r"\1", destination)
        if not target or target.startswith(("#", "//", "?")) or _SCHEME.match(target):
            return None
        path, hashmark, anchor = target.partition("#")
        if "?" in path:
            return None
        path = unquote(path)
        found: str | None = None
        for prefix in _ASSET_PREFIXES:
            if path.startswith(prefix):
                found = assets.get(path[len(prefix) :])
                break
        else:
            while path.startswith("./"):
                path = path[2:]
            found = page_files.get(path[:-1] if path.endswith("/") else path)
        if found is None:
            return None
        return posixpath.relpath(found, folder) + hashmark + anchor

    return resolve


def asset_name(name: str) -> str:
    """A file's name for `.gitbook/assets/`: ascii letters, digits, `.`, `_` and `-` only,
    not starting with a dot, at most 100 characters with its extension kept."""
    value = unicodedata.normalize("NFKD", name)
    value = "".join(ch for ch in value if not unicodedata.combining(ch))
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip(".-")
    value = re.sub(r"\.{2,}", ".", value)
    stem, dot, extension = value.rpartition(".")
    if not dot or not stem or len(extension) > 16:
        stem, dot, extension = value, "", ""
    stem = stem[: _ASSET_MAX - len(dot + extension)].rstrip(".-") or "file"
    if stem.lower() in _WINDOWS_RESERVED:
        stem += "-file"
    return stem + dot + extension


def _claim_file(taken: set[str], name: str) -> str:
    """`name`, or `stem-2.ext`, `stem-3.ext`, ...: the first not in `taken` whatever its case."""
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    candidate, number = name, 1
    while candidate.lower() in taken:
        number += 1
        candidate = f"{stem[: _ASSET_MAX - 8 - len(extension)]}-{number}{dot}{extension}"
    taken.add(candidate.lower())
    return candidate


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 16):
            digest.update(chunk)
    return digest.hexdigest()


# ----- the output directory --------------------------------------------------------------

_BLOCK = 1 << 16
_JSON = json.JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False, allow_nan=True)


def _json_pieces(value: Any) -> Iterator[str]:
    """`json_text(value)` in pieces, as the encoder makes them (the same text: `json.dumps`
    with an indent is this encoder joined)."""
    for piece in _JSON.iterencode(value):
        yield _SURROGATE.sub(_escape, piece)
    yield "\n"


Content = str | bytes | Iterable[str | bytes]
"""What a file of the export holds: text, bytes, or pieces of either, written as they come."""


def _blocks(content: Content) -> Iterator[bytes]:
    """`content` as UTF-8 (`_encode`) in blocks of about 64 KiB: small pieces are joined, big
    ones cut (a `str` is cut between characters, and a lone surrogate is replaced alike
    whatever the cut), so what is written is never a second copy of a big text."""
    pieces: Iterable[str | bytes] = (content,) if isinstance(content, (str, bytes)) else content
    pending: list[str] = []
    size = 0
    for piece in pieces:
        if isinstance(piece, bytes) or len(piece) >= _BLOCK:
            if pending:
                yield _encode("".join(pending))
                pending, size = [], 0
            for at in range(0, len(piece), _BLOCK):
                part = piece[at : at + _BLOCK]
                yield part if isinstance(part, bytes) else _encode(part)
            continue
        pending.append(piece)
        size += len(piece)
        if size >= _BLOCK:
            yield _encode("".join(pending))
            pending, size = [], 0
    if pending:
        yield _encode("".join(pending))


class _Rewrite:
    """Replaces the file at `path` with the bytes given, block by block, only if they differ
    from what it holds: they are compared with it as they come, and a temporary file is begun
    at the first difference (the equal part copied from the file), renamed over it at the
    end. So an unchanged file is never touched, and nothing is held whole in memory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.old: BinaryIO | None = open(path, "rb") if path.is_file() and not path.is_symlink() else None  # noqa: SIM115
        self.equal = 0
        """Bytes given so far, all equal to the file's first bytes (while `out` is None)."""
        self.temporary: Path | None = None
        self.out: BinaryIO | None = None

    def write(self, block: bytes) -> None:
        if self.out is None:
            if self.old is not None and self.old.read(len(block)) == block:
                self.equal += len(block)
                return
            self._begin()
        assert self.out is not None
        self.out.write(block)

    def _begin(self) -> None:
        """The temporary file, holding the equal part read so far."""
        self.temporary, fd = _Tree._temporary(self.path)
        self.out = os.fdopen(fd, "wb")
        if self.old is not None:
            self.old.seek(0)
            left = self.equal
            while left > 0 and (chunk := self.old.read(min(left, 1 << 20))):
                self.out.write(chunk)
                left -= len(chunk)

    def finish(self) -> bool:
        """True when the file was replaced (its bytes differed, or there was none)."""
        if self.out is None:
            if self.old is not None and self.old.read(1) == b"":
                return False
            self._begin()
        assert self.out is not None and self.temporary is not None
        self.out.close()
        os.replace(self.temporary, self.path)
        self.temporary = None
        return True

    def close(self) -> None:
        """Files closed, and the temporary file gone if it was not renamed."""
        for stream in (self.old, self.out):
            if stream is not None:
                stream.close()
        if self.temporary is not None:
            self.temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def _writing(temporary: Path, path: Path) -> Iterator[None]:
    """A full or read-only disk while writing `path` is a one-line StorageError naming it,
    and the temporary file is removed: nothing half-written stays behind."""
    try:
        yield
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise (storage_error(exc, path, doing="write") or exc) from None


class _Tree:
    """Writes files under `root` and removes, at the end, the files it did not write.

    Only changed files are rewritten (atomically, through a temporary file), so a
    re-export of unchanged data touches nothing. Every path part is checked: only slugs and
    fixed names, never `..` or a separator; a symlink or file in place of a directory is
    replaced, never followed.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: set[str] = set()
        self._dirs: set[tuple[str, ...]] = set()
        self.written = 0
        self.removed = 0

    def _directory(self, parts: tuple[str, ...]) -> Path:
        path = self.root
        for depth in range(1, len(parts) + 1):
            path = path / parts[depth - 1]
            if parts[:depth] in self._dirs:
                continue
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                path.unlink()
            if not path.exists():
                private_dir(path)
            self._dirs.add(parts[:depth])
        return path

    def _record(self, parts: tuple[str, ...]) -> None:
        """Check `parts` and record them as part of the export."""
        for part in parts:
            if not _SAFE_PART.match(part) or part in (".", ".."):
                raise ExportError(f"export bug: unsafe path part {part!r} in {'/'.join(parts)}")
        rel = "/".join(parts)
        if rel in self.paths:
            raise ExportError(f"export bug: {rel} written twice")
        self.paths.add(rel)

    def _claim_path(self, parts: tuple[str, ...]) -> Path:
        """Check and record `parts`; the path to write, with whatever stood there cleared
        unless it is a regular file (which may already hold the right bytes)."""
        self._record(parts)
        path = self._directory(parts[:-1]) / parts[-1]
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        return path

    @staticmethod
    def _temporary(path: Path) -> tuple[Path, int]:
        temporary = path.with_name(f".{path.name}.syncd-tmp")
        temporary.unlink(missing_ok=True)
        # O_EXCL: never write through a symlink someone left at the temporary name.
        return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), PRIVATE_FILE)

    def write(self, parts: tuple[str, ...], content: Content) -> None:
        """Write `content` at `parts` (streamed: see `_Rewrite`); a file that already holds
        these bytes is left untouched."""
        path = self._claim_path(parts)
        rewrite = _Rewrite(path)
        try:
            for block in _blocks(content):
                rewrite.write(block)
            changed = rewrite.finish()
        except OSError as exc:
            raise (storage_error(exc, path, doing="write") or exc) from None
        finally:
            rewrite.close()
        self.written += changed

    def copy(self, parts: tuple[str, ...], blobs: BlobStore, sha256: str, size: int) -> BlobRefused | None:
        """Write the bytes of the blob `sha256`, which must be `size` bytes hashing to it;
        None when written, else why not (nothing is then written or kept at `parts`). The blob
        is opened as `BlobStore.open` opens it (no link followed, a regular file only) and
        streamed: large binaries are never held in memory; a file already holding them is
        left alone."""
        path = self._claim_path(parts)
        if path.is_file() and not path.is_symlink() and path.stat().st_size == size and _sha256_of(path) == sha256:
            return None
        try:
            source = blobs.open(sha256, size)
        except (BlobRefused, ValueError) as exc:
            self.paths.discard("/".join(parts))  # pruned if an older export left one there
            return exc if isinstance(exc, BlobRefused) else BlobRefused("missing", "is named by no sha256 in the manifest")
        temporary, fd = self._temporary(path)
        digest, count = hashlib.sha256(), 0
        with source, _writing(temporary, path):  # a failed write is an error, not a skipped file
            with os.fdopen(fd, "wb") as handle:
                while count <= size:
                    try:
                        chunk = source.read(1 << 16)
                    except OSError:
                        count = -1
                        break
                    if not chunk:
                        break
                    digest.update(chunk)
                    count += len(chunk)
                    handle.write(chunk)
        if count != size or digest.hexdigest() != sha256:
            temporary.unlink(missing_ok=True)
            self.paths.discard("/".join(parts))
            if count < 0:
                return BlobRefused("unreadable", "cannot be read")
            return BlobRefused("hash", "holds other bytes than its name says: they changed after they were stored")
        with _writing(temporary, path):
            os.replace(temporary, path)
        self.written += 1
        return None

    def json(self, parts: tuple[str, ...], value: Any) -> None:
        self.write(parts, _json_pieces(value))

    def prune(self, directory: Path | None = None, rel: str = "") -> bool:
        """Remove what this export did not write; True when `directory` ends up empty."""
        directory = directory or self.root
        empty = True
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if self.prune(Path(entry.path), child):
                        os.rmdir(entry.path)
                    else:
                        empty = False
                elif child in self.paths or child == MARKER:
                    empty = False
                else:
                    os.unlink(entry.path)
                    self.removed += 1
        return empty


class _Plan(_Tree):
    """A dry run: the paths the export would write, with nothing read from or written to disk
    (a binary whose blob is there, a regular file of its size, counts as written)."""

    def write(self, parts: tuple[str, ...], content: Content) -> None:
        self._record(parts)

    def json(self, parts: tuple[str, ...], value: Any) -> None:
        self._record(parts)

    def copy(self, parts: tuple[str, ...], blobs: BlobStore, sha256: str, size: int) -> BlobRefused | None:
        self._record(parts)
        return None if blobs.present(sha256, size) else BlobRefused("missing", "is missing")


def _files_below(directory: Path, rel: str = "") -> Iterator[str]:
    """Paths (relative to the export's root) of what a prune would remove if not written:
    everything but directories, the marker aside."""
    with os.scandir(directory) as entries:
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir(follow_symlinks=False):
                yield from _files_below(Path(entry.path), child)
            elif child != MARKER:
                yield child


def _refuse_emptier(out: Path, exporter: _Exporter, orgs: list[tuple[dict[str, Any], str]]) -> None:
    """ExportError, before anything is written, when the export would remove all the files of
    the previous export in `out`, or more than `MAX_REMOVED_RATIO` of them."""
    before = set(_files_below(out))
    if not before:
        return
    for row, name in orgs:
        exporter.organization(row, (name,))
    removed = len(before - exporter.tree.paths)
    if removed == len(before) or removed > len(before) * MAX_REMOVED_RATIO:
        what = "the backup holds no organization" if not orgs else f"it holds {len(exporter.tree.paths)} files"
        raise ExportError(
            f"{out} left as it is: this export would remove {removed} of the {len(before)} files the previous export "
            f"made there ({what}); --force replaces them anyway"
        )


def _prepare_target(out: Path, db_path: Path) -> None:
    """Refuse targets that are not ours: a file, or a non-empty directory without marker."""
    if out.is_symlink() and not out.exists():
        raise ExportError(f"{out} is a broken symbolic link")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    resolved = out.resolve()
    source = db_path.resolve()
    if resolved in source.parents:
        raise ExportError(f"{out} holds the file being exported ({db_path}): choose another directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ExportError(
            f"{out} is not empty and was not made by `syncd export` (no {MARKER} file): "
            "choose a new or empty directory"
        )
    private_dir(out)


# ----- the source file -------------------------------------------------------------------


def _open_source(db_path: Path) -> Mirror:
    """The mirror, opened read-only: nothing is written into the file or beside it (no
    migration, no WAL switch), so an old backup stays as it is and read-only media work."""
    if not db_path.exists():
        raise ExportError(f"{db_path}: no such file")
    try:
        return Mirror(db_path, readonly=True)
    except MirrorError as exc:
        raise ExportError(str(exc)) from None


def _choose_tenant(mirror: Mirror, db_path: Path, tenant: str | None) -> str:
    runs = mirror.runs()
    finished = sorted({run["tenant"] for run in runs if run["status"] in FINISHED})
    if tenant is not None:
        if tenant not in {run["tenant"] for run in runs}:
            known = ", ".join(finished) or "none"
            raise ExportError(f"{db_path} holds no tenant {tenant!r} (tenants with a complete run: {known})")
        if tenant not in finished:
            raise ExportError(f"{db_path} holds no complete run of tenant {tenant!r}: nothing to export")
        return tenant
    if not finished:
        raise ExportError(f"{db_path} holds no complete run: nothing to export")
    if len(finished) > 1:
        raise ExportError(f"{db_path} holds several tenants ({', '.join(finished)}): choose one with --tenant")
    return finished[0]


def _order(row: Mapping[str, Any]) -> tuple[bool, int, str]:
    """Positions first (rows without one after), then ids: the stable sibling order."""
    position = row.get("position")
    return (position is None, position if isinstance(position, int) else 0, str(row["id"]))


def _title(row: Mapping[str, Any]) -> str:
    value = row["data"].get("title")
    return "" if value is None else str(value)


def _raw_id(row: Mapping[str, Any]) -> str:
    """The API id of a row whose mirror id is qualified by its container (`SPACE/PAGE`)."""
    return str(row["id"]).rsplit("/", 1)[-1]


def _claim(taken: set[str], base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... : the first name not in `taken` (which it joins)."""
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        suffix = f"-{number}"
        candidate = base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix
    taken.add(candidate)
    return candidate


def _assign(items: Iterable[tuple[Any, str]], reserved: Iterable[str] = ()) -> list[tuple[Any, str]]:
    """(item, unique slug) in the given order: the first keeps its slug, later ones get -2, -3, ..."""
    taken = set(reserved)
    return [(item, _claim(taken, base)) for item, base in items]


def _children(rows: Iterable[dict[str, Any]]) -> dict[tuple[str | None, str | None], list[dict[str, Any]]]:
    grouped: dict[tuple[str | None, str | None], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["parent_kind"], row["parent_id"])].append(row)
    for siblings in grouped.values():
        siblings.sort(key=_order)
    return grouped


# ----- the export ------------------------------------------------------------------------


class _Exporter:
    def __init__(self, mirror: Mirror, tenant: str, tree: _Tree, report: ExportReport, blobs: BlobStore, scope: Scope = EVERYTHING) -> None:
        self.scope = scope
        self.mirror = mirror
        self.tenant = tenant
        self.tree = tree
        self.report = report
        self.blobs = blobs
        self.manifest = blobs.manifest() if blobs.root.is_dir() else {}
        self.on_space: Callable[[], None] | None = None
        """Called after each space is written (progress, and a safe point to stop at)."""

    def rows(self, kind: str, org: str) -> list[dict[str, Any]]:
        return sorted(self._current(kind=kind, org=org), key=_order)

    def _current(self, **where: str) -> Iterator[dict[str, Any]]:
        """The current rows (`Mirror.current`'s filters), one object read at a time: the file
        sorts their keys only (`current_keys`), and a text field longer than `HELD_TEXT_MAX`
        (`_DEFERRED_FIELD`) is left out of `data`, named by the row's `deferred`, and read
        again when its file is written (`_text`). So the memory a row takes is that of its
        own file while it is written, whatever the size of its space."""
        for row in self.mirror.current_keys(self.tenant, **where):
            data = self.mirror.current_value(self.tenant, row["kind"], row["id"])
            if data is None:  # not within one snapshot of the file: cannot happen
                continue
            field = _DEFERRED_FIELD.get(row["kind"])
            value = data.get(field) if field else None
            if field and isinstance(value, str) and len(value) > HELD_TEXT_MAX:
                del data[field]
                row[_DEFERRED] = field
            del value  # nor held by this frame while the caller works on the row
            row["data"] = data
            yield row

    def _text(self, row: dict[str, Any], field: str) -> Any:
        """The row's `field`, read again from the file when it was deferred (`_current`)."""
        if row.get(_DEFERRED) != field:
            return row["data"].get(field)
        data = self.mirror.current_value(self.tenant, row["kind"], row["id"])
        return data.get(field) if isinstance(data, dict) else None

    def _has_text(self, row: dict[str, Any], field: str) -> bool:
        return row.get(_DEFERRED) == field or isinstance(row["data"].get(field), str)

    def _text_pieces(self, row: dict[str, Any], field: str) -> Iterator[str]:
        """The text of the row's `field`, read when the first piece is asked for (a dry run
        asks for none)."""
        text = self._text(row, field)
        if isinstance(text, str):
            yield text

    # ----- organization ---------------------------------------------------------------

    def organization(self, row: dict[str, Any], base: tuple[str, ...]) -> None:
        org = row["id"]
        self.report.organizations += 1
        self.tree.json(base + ("organization.json",), row["data"])
        rows = self._in_scope(row, {kind: self.rows(kind, org) for kind in _ORG_KINDS if kind != "organization"})
        self._people(rows, base)
        for kind, name in (("saml-provider", "saml.json"), ("sso-provider", "sso.json"),
                           ("translation", "translations.json"), ("custom-field", "custom-fields.json")):  # fmt: skip
            if rows[kind]:
                self.tree.json(base + (name,), [r["data"] for r in rows[kind]])
        self._integrations(rows, base)
        self._openapi(rows, base)
        space_paths = self._content(rows, base)
        self._sites(rows, base, space_paths)
        self._other(org, base)

    def _in_scope(self, org_row: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        """The organization's rows in the export's scope (content follows its space); what
        they need outside it goes to the report."""
        if self.scope.everything:
            return rows
        chosen = select(self.scope, [item_of_row(org_row)] + [item_of_row(r) for kind_rows in rows.values() for r in kind_rows])
        content = [r for kind in sorted(VALUE_KINDS | LINK_KINDS) for r in self.mirror.current(self.tenant, kind=kind, org=org_row["id"])]
        space_of = {(r["kind"], r["id"]): str(r["scope"]).removeprefix("space:") for r in content if str(r["scope"]).startswith("space:")}
        self.report.dependencies += chosen.dependencies + content_dependencies(chosen, map(item_of_row, content), space_of)
        return {kind: [r for r in kind_rows if (r["kind"], r["id"]) in chosen] for kind, kind_rows in rows.items()}

    def _people(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> None:
        spaces = _children(rows["member-space"])
        teams = _children(rows["member-team"])
        members = [
            {
                "member": r["data"],
                "spaces": [s["data"] for s in spaces.get(("member", r["id"]), [])],
                "teams": [t["data"] for t in teams.get(("member", r["id"]), [])],
            }
            for r in rows["member"]
        ]
        if members:
            self.tree.json(base + ("members.json",), members)
        if rows["team"]:
            self.tree.json(base + ("teams.json",), [r["data"] for r in rows["team"]])

    def _integrations(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> None:
        installations = _children(rows["integration-installation"])
        items = [
            {"integration": r["data"], "installations": [i["data"] for i in installations.get(("integration", r["id"]), [])]}
            for r in rows["integration"]
        ]
        if items:
            self.tree.json(base + ("integrations.json",), items)

    def _openapi(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> None:
        sources = _children(rows["openapi-spec-source"])
        specs = sorted(rows["openapi-spec"], key=lambda r: (str(r["data"].get("slug", "")), r["id"]))
        for spec, slug in _assign(((r, slugify(r["data"].get("slug"), "spec")) for r in specs), _WINDOWS_RESERVED):
            self.tree.json(base + ("openapi", f"{slug}.json"), spec["data"])
            for source in sources.get(("openapi-spec", spec["id"]), [])[:1]:
                fmt = source["data"].get("format")
                if self._has_text(source, "text"):
                    extension = fmt if fmt in ("yaml", "json") else "txt"
                    self.tree.write(base + ("openapi", f"{slug}.source.{extension}"), self._text_pieces(source, "text"))

    def _other(self, org: str, base: tuple[str, ...]) -> None:
        """Rows of kinds this module does not know, so nothing in the file is left out."""
        for kind in sorted(set(self.mirror.counts(self.tenant, org)) - HANDLED_KINDS):
            rows = [
                {k: r[k] for k in ("id", "parent_kind", "parent_id", "position", "data")}
                for r in self._current(kind=kind, org=org)
            ]
            self.tree.json(base + ("other", f"{slugify(kind, 'kind')}.json"), rows)

    # ----- collections and spaces -----------------------------------------------------

    def _content(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...]) -> dict[str, str]:
        """Write collections and spaces; returns space id -> its path relative to the org."""
        collections = {r["id"]: r for r in rows["collection"]}

        def parent_of(row: dict[str, Any]) -> str | None:
            if row["parent_kind"] == "collection" and row["parent_id"] in collections:
                return str(row["parent_id"])
            return None

        kids: dict[str | None, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        for kind in ("collection", "space"):
            for row in rows[kind]:
                kids[parent_of(row)].append((kind, row))
        space_paths: dict[str, str] = {}
        placed: set[str] = set()
        top_taken = set(_ORG_RESERVED)

        def place(items: list[tuple[str, dict[str, Any]]], where: tuple[str, ...], taken: set[str]) -> None:
            for kind, row in items:
                if row["id"] in placed:
                    continue
                placed.add(row["id"])
                path = where + (_claim(taken, slugify(_title(row), kind)),)
                if kind == "collection":
                    self.tree.json(path + ("collection.json",), row["data"])
                    place(kids.get(row["id"], []), path, set(_WINDOWS_RESERVED))
                else:
                    space_paths[row["id"]] = "/".join(path[len(base) :])
                    self.space(row, path)

        place(kids.get(None, []), base, top_taken)
        # Collections in a parent cycle are reachable from no root: they go to the top.
        place([("collection", r) for r in rows["collection"]], base, top_taken)
        return space_paths

    def space(self, row: dict[str, Any], where: tuple[str, ...]) -> None:
        self.report.spaces += 1
        self.tree.json(where + ("space.json",), row["data"])
        scoped = self._scoped(f"space:{row['id']}")
        values = {_raw_id(r): r["data"].get("value") for r in scoped["space-custom-field-value"]}
        if values:
            self.tree.json(where + ("custom-fields.json",), values)
        self.report.pages += self._content_of(scoped, where, "")
        crs = sorted(scoped["change-request"], key=lambda r: (_number(r), r["id"]))
        named = ((r, _cr_slug(r)) for r in crs)
        for cr, slug in _assign(named, _WINDOWS_RESERVED):
            self.report.change_requests += 1
            path = where + ("change-requests", slug)
            self.tree.json(path + ("change-request.json",), cr["data"])
            self._content_of(self._scoped(f"change-request:{cr['id']}"), path, "change-request-")
        if self.on_space is not None:
            self.on_space()

    def _scoped(self, scope: str) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self._current(scope=scope):
            grouped[row["kind"]].append(row)
        for rows in grouped.values():
            rows.sort(key=_order)
        return grouped

    def _content_of(self, scoped: dict[str, list[dict[str, Any]]], where: tuple[str, ...], prefix: str) -> int:
        """Revision, pages (Git Sync layout), files, comments and links of a space or change request."""
        for revision in scoped[prefix + "revision"][:1]:
            self.tree.json(where + ("revision.json",), revision["data"])
        files = sorted(scoped[prefix + "file"], key=lambda r: (str(r["data"].get("name", "")), r["id"]))
        assets = self._assets(files, where)
        count = self._pages(scoped[prefix + "page"], where, prefix + "page", assets)
        if files:
            self.tree.json(where + ("files.json",), [r["data"] for r in files])
        replies = _children(scoped[prefix + "comment-reply"])
        comments = sorted(scoped[prefix + "comment"], key=_posted)
        if comments:
            self.tree.json(
                where + ("comments.json",),
                [{"comment": c["data"], "replies": [r["data"] for r in sorted(replies.get((prefix + "comment", c["id"]), []), key=_posted)]} for c in comments],
            )
        links: dict[str, Any] = {}
        if scoped["space-link"] and not prefix:
            links["space"] = [r["data"] for r in sorted(scoped["space-link"], key=lambda r: r["id"])]
        for kind, key in ((prefix + "page-link", "pages"), (prefix + "file-backlink", "files")):
            by_owner: dict[str, list[Any]] = defaultdict(list)
            for r in sorted(scoped[kind], key=lambda r: r["id"]):
                by_owner[str(r["parent_id"]).rsplit("/", 1)[-1]].append(r["data"])
            if by_owner:
                links[key] = dict(by_owner)
        if links:
            self.tree.json(where + ("links.json",), links)
        return count

    def _assets(self, files: list[dict[str, Any]], where: tuple[str, ...]) -> dict[str, str]:
        """Write the binaries of `files` (in name order) under `.gitbook/assets/`; returns each
        file name -> the path of its binary from the content's root (the first of a name wins),
        whether the binary could be written or is missing from the backup."""
        taken: set[str] = set()
        by_name: dict[str, str] = {}
        for row in files:
            name = row["data"].get("name")
            asset = _claim_file(taken, asset_name(name if isinstance(name, str) else _raw_id(row)))
            if isinstance(name, str):
                by_name.setdefault(name, "/".join(ASSETS + (asset,)))
            parts = where + ASSETS + (asset,)
            entry = self.manifest.get(str(row["id"]))
            why: BlobRefused | None = BlobRefused("missing", "is not in the manifest")
            if isinstance(entry, dict):
                sha256, size = entry.get("sha256"), entry.get("size")
                if isinstance(sha256, str) and isinstance(size, int) and not isinstance(size, bool):
                    why = self.tree.copy(parts, self.blobs, sha256, size)
            if why is None:
                self.report.assets += 1
                continue
            self.report.missing_binaries.append("/".join(parts))
            if why.kind != "missing" and not isinstance(self.tree, _Plan):
                log.warning("export.binary_refused", file=one_line(row["id"])[:200], path="/".join(parts), reason=f"its blob {why}")
        return by_name

    def _pages(self, rows: list[dict[str, Any]], where: tuple[str, ...], kind: str, assets: Mapping[str, str]) -> int:
        """Page files in tree order (the first page as README.md), SUMMARY.md, .gitbook.yaml
        and pages.json; returns the page count."""
        kids = _children(rows)
        ids = {r["id"] for r in rows}
        placed: list[tuple[dict[str, Any], str, int]] = []  # (page, its file from the root, depth)
        page_files: dict[str, str] = {}  # page path (from the API, else from the slugs) -> its file
        done: set[str] = set()

        def walk(siblings: list[dict[str, Any]], folder: tuple[str, ...], taken: set[str], depth: int, under: str) -> None:
            for row in siblings:
                if row["id"] in done:
                    continue
                done.add(row["id"])
                slug = _claim(taken, slugify(row["data"].get("slug") or _title(row), "page"))
                children = [c for c in kids.get((kind, row["id"]), []) if c["id"] not in done]
                if not placed:
                    parts: tuple[str, ...] = ("README.md",)
                else:
                    parts = folder + ((slug, "README.md") if children else (f"{slug}.md",))
                rel = "/".join(parts)
                placed.append((row, rel, depth))
                api_path = row["data"].get("path")
                own_slug = row["data"].get("slug")
                path = api_path if isinstance(api_path, str) and api_path else under + str(own_slug or slug)
                page_files.setdefault(path.strip("/"), rel)
                if children:
                    walk(children, folder + (slug,), set(_PAGE_RESERVED), depth + 1, path.strip("/") + "/")

        top_taken = set(_PAGE_RESERVED)
        walk([r for r in rows if r["parent_kind"] != kind], (), top_taken, 0, "")
        # Pages whose parent page is missing go to the top, after the others; so do pages
        # caught in a parent cycle.
        walk([r for r in rows if r["parent_kind"] == kind and r["parent_id"] not in ids], (), top_taken, 0, "")
        walk(rows, (), top_taken, 0, "")

        summary = ["# Table of contents", ""]
        entries: list[dict[str, Any]] = []
        for row, rel, depth in placed:
            resolve = _resolver(rel, page_files, assets)
            self._page(row, where + tuple(rel.split("/")), resolve)
            summary.append(f"{'  ' * depth}* [{_link_text(_title(row))}]({rel})")
            entries.append({"file": rel, "page": {k: v for k, v in row["data"].items() if k != "markdown"}})
        self.tree.write(where + (".gitbook.yaml",), _GITBOOK_YAML)
        self.tree.write(where + ("SUMMARY.md",), "\n".join(summary) + "\n")
        if entries:
            self.tree.json(where + ("pages.json",), entries)
        return len(entries)

    def _page(self, row: dict[str, Any], parts: tuple[str, ...], resolve: Callable[[str], str | None]) -> None:
        data = row["data"]
        fields: list[tuple[str, Any]] = [("id", _raw_id(row)), ("title", data.get("title", ""))]
        fields += [(name, data[name]) for name in ("description", "emoji") if data.get(name) not in (None, "")]
        if data.get("hidden") is True:
            fields.append(("hidden", True))
        self.tree.write(parts, self._page_pieces(row, front_matter(fields), resolve))

    def _page_pieces(self, row: dict[str, Any], head: str, resolve: Callable[[str], str | None]) -> Iterator[str]:
        """A page file as it is written: its front matter, then its markdown rewritten line
        by line (read only now when it was deferred)."""
        yield head
        markdown = self._text(row, "markdown")
        if isinstance(markdown, str):
            yield from rewritten_lines(markdown, resolve)

    # ----- sites ----------------------------------------------------------------------

    def _sites(self, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...], space_paths: dict[str, str]) -> None:
        children = {kind: _children(rows[kind]) for kind in ("site-section-group", "site-section", "site-space", "site-adaptive-schema", "site-published")}
        named = ((r, slugify(_title(r), "site")) for r in rows["site"])
        for site, slug in _assign(named, _WINDOWS_RESERVED):
            path = base + ("sites", slug)
            own = {kind: grouped.get(("site", site["id"]), []) for kind, grouped in children.items()}
            self.tree.json(path + ("site.json",), site["data"])
            for kind, name in (("site-section-group", "section-groups.json"), ("site-section", "sections.json"), ("site-space", "site-spaces.json")):
                if own[kind]:
                    self.tree.json(path + (name,), [r["data"] for r in own[kind]])
            for kind, name in (("site-adaptive-schema", "adaptive-schema.json"), ("site-published", "published.json")):
                for r in own[kind][:1]:
                    self.tree.json(path + (name,), r["data"])
            self.tree.json(path + ("structure.json",), _structure(site, own, space_paths))


def _structure(site: dict[str, Any], own: dict[str, list[dict[str, Any]]], space_paths: dict[str, str]) -> dict[str, Any]:
    """The site's tree in order: section groups (their sections' ids), sections (their
    site-spaces) and the site-spaces outside any section; each site-space names its space
    and the space's export path, relative to the organization's directory."""

    def ident(row: dict[str, Any]) -> Any:
        return row["data"].get("id", row["id"])

    def site_space(row: dict[str, Any]) -> dict[str, Any]:
        data = row["data"]
        space = data.get("space") if isinstance(data.get("space"), dict) else {}
        space_id = space.get("id", data.get("spaceId"))
        return {
            "id": ident(row),
            "title": data.get("title"),
            "path": data.get("path"),
            "default": data.get("default"),
            "condition": data.get("condition"),
            "space": space_id,
            "exportPath": space_paths.get(space_id) if isinstance(space_id, str) else None,
        }

    entries = [(row["data"].get("section"), site_space(row)) for row in own["site-space"]]
    sections = [
        {
            "id": ident(row),
            "title": row["data"].get("title"),
            "path": row["data"].get("path"),
            "default": row["data"].get("default"),
            "sectionGroup": row["data"].get("sectionGroup"),
            "siteSpaces": [entry for section, entry in entries if section == ident(row)],
        }
        for row in own["site-section"]
    ]
    groups = [
        {
            "id": ident(row),
            "title": row["data"].get("title"),
            "sections": [s["id"] for s in sections if s["sectionGroup"] == ident(row)],
        }
        for row in own["site-section-group"]
    ]
    section_ids = {s["id"] for s in sections}
    loose = [entry for section, entry in entries if section not in section_ids]
    return {
        "site": {"id": site["id"], "title": site["data"].get("title")},
        "sectionGroups": groups,
        "sections": sections,
        "siteSpaces": loose,
    }


def _number(row: Mapping[str, Any]) -> int:
    number = row["data"].get("number")
    return number if isinstance(number, int) and not isinstance(number, bool) else 1 << 62


def _cr_slug(row: Mapping[str, Any]) -> str:
    subject = slugify(row["data"].get("subject"), "change-request")
    number = row["data"].get("number")
    if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
        return f"{number}-{subject}"[:SLUG_MAX].rstrip("-")
    return subject


def _posted(row: Mapping[str, Any]) -> tuple[str, str]:
    return (str(row["data"].get("postedAt") or ""), str(row["id"]))


def _choose_orgs(mirror: Mirror, tenant: str, org: str | None) -> list[tuple[dict[str, Any], str]]:
    """(organization row, directory name) of the organizations to export; names are
    assigned over ALL organizations so a one-organization export uses the same name."""
    rows = sorted(mirror.current(tenant, kind="organization"), key=lambda r: (_title(r), r["id"]))
    named = _assign(((r, slugify(_title(r), "organization")) for r in rows), _WINDOWS_RESERVED)
    if org is None:
        return named
    chosen = [item for item in named if item[0]["id"] == org] or [item for item in named if _title(item[0]) == org]
    if len(chosen) != 1:
        known = ", ".join(f"{r['id']} ({_title(r)})" for r, _ in named) or "none"
        what = "several organizations are titled" if chosen else "no organization"
        raise ExportError(f"{what} {org!r} in tenant {tenant!r} (organizations: {known})")
    return chosen


def export_mirror(
    db_path: Path, out_dir: Path, tenant: str | None = None, org: str | None = None, *, force: bool = False, scope: Scope = EVERYTHING,
    on_progress: Callable[[int, int | None, int], None] | None = None,
) -> ExportReport:
    """Export the current snapshot of one tenant (optionally one organization) to `out_dir`.

    The file is only read (see `_open_source`); the binaries of its files come from its blob
    folder (`FILE.blobs/`, see `syncd.blobs`), and those it lacks are listed in the report's
    `missing_binaries` without failing the export. `scope`: only these collections, spaces and
    sites (`syncd.selection`; what they need outside it is in the report's `dependencies`).
    `on_progress(spaces done, spaces in all or None with a scope, files so far)` is called
    after each space: the place where a display updates and a stop request (SIGTERM) is met,
    between files, never inside one.

    Raises `ExportError` (exit 2) for a file that is not a syncd mirror or backup, a damaged
    one, one written while it was read, one without a complete run, an unknown tenant or
    organization, several tenants and none chosen, a target directory that is not empty
    and not a previous export, and (unless `force`) an export that would remove all the files
    of the previous export in it, or more than `MAX_REMOVED_RATIO` of them.
    """
    db_path, out = Path(db_path), Path(out_dir)
    try:
        with _open_source(db_path) as mirror:
            try:
                chosen_tenant = _choose_tenant(mirror, db_path, tenant)
                orgs = _choose_orgs(mirror, chosen_tenant, org)
                _prepare_target(out, db_path)
                blobs = BlobStore(blobs_dir(db_path))
                if not force:
                    _refuse_emptier(out, _Exporter(mirror, chosen_tenant, _Plan(out), ExportReport(), blobs, scope), orgs)
                report = ExportReport()
                tree = _Tree(out)
                tree.write((MARKER,), _MARKER_TEXT)
                exporter = _Exporter(mirror, chosen_tenant, tree, report, blobs, scope)
                if on_progress is not None:
                    spaces = sum(mirror.counts(chosen_tenant, row["id"]).get("space", 0) for row, _ in orgs) if scope.everything else None
                    exporter.on_space = lambda: on_progress(report.spaces, spaces, len(tree.paths) - 1)
                    exporter.on_space()
                for row, name in orgs:
                    exporter.organization(row, (name,))
                tree.prune()
            except sqlite3.DatabaseError as exc:  # a page past the schema is damaged
                mirror.check_unchanged()  # or it changed under an immutable read
                raise ExportError(f"{db_path} cannot be read, it is damaged: {exc}") from None
    except MirrorError as exc:  # written while it was read (see Mirror.check_unchanged)
        raise ExportError(str(exc)) from None
    report.files = len(tree.paths) - 1
    report.written, report.removed = tree.written, tree.removed
    return report
