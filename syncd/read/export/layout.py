"""Where an export's files go on disk, and how they get there: names (slugs, unique among
siblings in a stable order), front matter and JSON text, the tree that writes only the files
whose bytes changed and prunes the rest, its dry run (`_Plan`), and the checks on the target
folder (not ours, or about to be emptied by an emptier export). The layout itself is described
in `syncd.read.export`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from syncd.errors import SyncdError
from syncd.files import PRIVATE_FILE, private_dir, storage_error
from syncd.read.blobs import BlobRefused, BlobStore
from syncd.read.sibling_names import SiblingNames

MARKER = ".syncd-export"
GIT_DIR = ".git"
"""A Git repository's own folder at the export's root (`syncd export --git`): never part of the
export, never pruned, and no reason to call the folder someone else's."""
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


class ExportError(SyncdError):
    """The export cannot run as asked (bad source file, tenant, organization or target)."""

    exit_code = 2


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


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="replace")


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


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 16):
            digest.update(chunk)
    return digest.hexdigest()


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
                if child == GIT_DIR:
                    empty = False
                elif entry.is_dir(follow_symlinks=False):
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
            if child == GIT_DIR:
                continue
            if entry.is_dir(follow_symlinks=False):
                yield from _files_below(Path(entry.path), child)
            elif child != MARKER:
                yield child


class _Organizations(Protocol):
    """What `_refuse_emptier` asks of an exporter (`_Exporter` over a `_Plan`): the tree it
    records into, and the writing of one organization there."""

    tree: _Tree

    def organization(self, row: dict[str, Any], base: tuple[str, ...]) -> None: ...


def _refuse_emptier(
    out: Path, exporter: _Organizations, orgs: list[tuple[dict[str, Any], str]], then: Callable[[], None] | None = None
) -> None:
    """ExportError, before anything is written, when the export would remove all the files of
    the previous export in `out`, or more than `MAX_REMOVED_RATIO` of them (`then`: what the
    export writes after the organizations)."""
    before = set(_files_below(out))
    if not before:
        return
    for row, name in orgs:
        exporter.organization(row, (name,))
    if then is not None:
        then()
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
    if out.is_dir() and any(p.name != GIT_DIR for p in out.iterdir()) and not (out / MARKER).is_file():
        raise ExportError(
            f"{out} is not empty and was not made by `syncd export` (no {MARKER} file): "
            "choose a new or empty directory"
        )
    private_dir(out)


# ----- names and order -------------------------------------------------------------------


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


def _claim(names: SiblingNames, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... : the first name not taken (which it joins). A
    numbered name is cut to `SLUG_MAX` with its suffix, so its stem depends on the number's
    digits: the numbering is (stem, digits), shared by the bases cut alike."""
    if names.free(base):
        return base
    digits = 1
    while True:
        stem = base[: SLUG_MAX - 1 - digits].rstrip("-")
        first = 2 if digits == 1 else 10 ** (digits - 1)
        if (found := names.numbered((stem, digits), lambda n: f"{stem}-{n}", first, 10**digits)) is not None:
            return found
        digits += 1


def _claim_file(names: SiblingNames, name: str) -> str:
    """`name`, or `stem-2.ext`, `stem-3.ext`, ...: the first not taken whatever its case
    (`names` holds lower-case names)."""
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    if names.free(name, fold=str.lower):
        return name
    head, tail = stem[: _ASSET_MAX - 8 - len(extension)], dot + extension
    # Names that differ only in case share their numbering; lower() is per character only
    # in ASCII (a Greek final sigma depends on what follows), which asset names are.
    key = (head.lower(), tail.lower()) if name.isascii() else (head, tail)
    found = names.numbered(key, lambda n: f"{head}-{n}{tail}", 2, fold=str.lower)
    assert found is not None  # no end: some number is free
    return found


def _assign(items: Iterable[tuple[Any, str]], reserved: Iterable[str] = ()) -> list[tuple[Any, str]]:
    """(item, unique slug) in the given order: the first keeps its slug, later ones get -2, -3, ..."""
    names = SiblingNames(reserved)
    return [(item, _claim(names, base)) for item, base in items]


def _children(rows: Iterable[dict[str, Any]]) -> dict[tuple[str | None, str | None], list[dict[str, Any]]]:
    grouped: dict[tuple[str | None, str | None], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["parent_kind"], row["parent_id"])].append(row)
    for siblings in grouped.values():
        siblings.sort(key=_order)
    return grouped
