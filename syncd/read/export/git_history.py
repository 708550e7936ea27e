"""An export kept as a Git history (`syncd export FILE.db DIR --git`, the daemon's export jobs):
DIR is a Git repository whose work tree is the export, and each export that changed something
is one commit; `git log -p` then shows each page's edits as diffs of its markdown.

Why dulwich: it is Git in Python (objects, index, packs, the smart protocol over HTTP(S), SSH
and local paths), so syncd needs no `git` binary, which its image does not have. SSH remotes
run the `ssh` client (`GIT_SSH_COMMAND` is honoured); HTTPS and local paths need nothing else.

A commit is made when an object of the records (`syncd.read.export.records`) was added,
removed, or changed in content, parent or position (`syncd.read.export.commit_message`); an
export that only rewrote volatile fields is left uncommitted in the work tree until the next
commit carries it. What is staged is found as Git finds it: every file whose size, inode or
modification time differs from the index, and every index entry whose file is gone; so a run
that died between its export and its commit is committed by the next one.

A push sends the branch to the remote (a URL or a path), fast-forward only; a remote that cannot
be reached, refuses, or has other commits fails with the reason in one line (`GitError`), and
the commits stay in DIR, pushed by the next run. Credentials: an HTTPS remote's password or
token comes from an environment variable (`token_env`), never from a file; the URL shown
anywhere has none (`shown_remote`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncd.errors import SyncdError
from syncd.read.export.commit_message import commit_message, compare
from syncd.read.export.layout import GIT_DIR
from syncd.read.export.records import Reader, Records, RecordsError, read_records, rebuild_backup

__all__ = [
    "BRANCH", "GitError", "GitExport", "GitSource", "commit_export", "materialize", "parse_source", "push_export", "shown_remote",
]  # fmt: skip

BRANCH = "main"
IDENTITY = b"syncd <syncd@localhost>"
"""Author and committer of a commit, unless the repository's own configuration names a user."""


class GitError(SyncdError):
    """The Git repository cannot be used as asked, or a push failed (one line, the reason)."""

    exit_code = 1


@dataclass
class GitExport:
    """What `commit_export` (and `push_export`) did."""

    repository: Path
    commit: str | None = None
    """The branch's newest commit after the run (None: nothing ever committed)."""
    committed: bool = False
    """Whether this run made `commit`."""
    subject: str | None = None
    """The first line of the message of the commit this run made."""
    message: str | None = None
    remote: str | None = None
    """Where it was pushed, as shown (no credentials)."""
    pushed: bool | None = None
    """None: no remote; True: the remote has `commit`; False: the push failed (`push_error`)."""
    push_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "repository": str(self.repository), "commit": self.commit, "committed": self.committed, "subject": self.subject,
            "remote": self.remote, "pushed": self.pushed, "push_error": self.push_error,
        }  # fmt: skip


def shown_remote(remote: str) -> str:
    """A remote as it may be shown: an URL without its user's password (`https://user@host/x`)."""
    parts = urllib.parse.urlsplit(remote)
    if parts.scheme and parts.password is not None:
        host = parts.hostname or ""
        netloc = (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return remote


def _dulwich() -> Any:
    from dulwich import porcelain

    return porcelain


def _open(path: Path, *, create: bool) -> Any:
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        return Repo(str(path))
    except NotGitRepository:
        if not create:
            raise GitError(f"{path} is not a Git repository (write one with `syncd export FILE.db {path} --git`)") from None
        return Repo.init(str(path), default_branch=BRANCH.encode())


def _head(repo: Any) -> bytes | None:
    try:
        return bytes(repo.refs[b"HEAD"])
    except KeyError:
        return None


def _reader(repo: Any, tree: bytes) -> Reader:
    from dulwich.object_store import tree_lookup_path

    def read(path: str) -> bytes | None:
        try:
            _, sha = tree_lookup_path(repo.object_store.__getitem__, tree, path.encode())
        except KeyError:
            return None
        blob = repo.object_store[sha]
        return bytes(blob.as_raw_string()) if blob.type_name == b"blob" else None

    return read


def _work_files(root: Path, rel: str = "") -> Iterator[tuple[str, os.stat_result]]:
    with os.scandir(root / rel if rel else root) as entries:
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            if child == GIT_DIR:
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                yield from _work_files(root, child)
            elif stat.S_ISREG(info.st_mode):
                yield child, info


def _stage(repo: Any, root: Path) -> None:
    """Stage what differs from the index, as Git finds it (module docstring)."""
    index = repo.open_index()
    dirty: list[str] = []
    present: set[bytes] = set()
    for path, info in _work_files(root):
        key = path.encode()
        present.add(key)
        entry = index[key] if key in index else None
        if entry is None or (entry.size, entry.ino, tuple(entry.mtime)) != (info.st_size, info.st_ino, (int(info.st_mtime), info.st_mtime_ns % 1_000_000_000)):
            dirty.append(path)
    dirty += [key.decode() for key in list(index) if key not in present]
    if dirty:
        repo.get_worktree().stage(dirty)


def _identity(repo: Any) -> bytes:
    config = repo.get_config()
    try:
        return config.get((b"user",), b"name") + b" <" + config.get((b"user",), b"email") + b">"
    except KeyError:
        return IDENTITY


def _source(records: Records) -> str:
    titles = {str(r["id"]): str((r.get("data") or {}).get("title") or r["id"]) for r in records.objects.get("organization", [])}
    return f"tenant {records.tenant}, " + ", ".join(titles.get(org, org) for org in records.organizations)


def commit_export(root: Path, *, now: datetime | None = None) -> GitExport:
    """Commit the export in `root` (made a Git repository when it is not one) when its records
    changed (module docstring); the commit's message says what changed."""
    repo = _open(root, create=True)
    try:
        _stage(repo, root)
        tree = repo.open_index().commit(repo.object_store)
        head = _head(repo)
        result = GitExport(root, commit=head.decode() if head else None)
        old_tree = repo[head].tree if head else None
        if tree == old_tree:
            return result
        try:
            new = read_records(_reader(repo, tree))
            old = read_records(_reader(repo, old_tree)) if old_tree is not None else None
        except RecordsError as exc:
            raise GitError(f"{root}: {exc}") from None
        if new is None:
            raise GitError(f"{root}: the export has no records (.syncd/): it was not written for a Git history")
        changes = compare(old, new)
        if changes.empty:
            return result
        message = commit_message(changes, old, new, _source(new))
        who = _identity(repo)
        when = (now or datetime.now(UTC)).timestamp()
        sha = repo.get_worktree().commit(
            message=message.encode(), committer=who, author=who, commit_timestamp=when, tree=tree, no_verify=True, sign=False
        )
        return GitExport(root, commit=sha.decode(), committed=True, subject=message.splitlines()[0], message=message)
    finally:
        repo.close()


def push_export(result: GitExport, remote: str, *, token_env: str | None = None) -> GitExport:
    """Push the branch of `result.repository` to `remote`, fast-forward only; records the
    outcome in `result` (`pushed`, `push_error`) and returns it. Never raises for the push
    itself: the caller decides what a failed push means (the daemon fails the run)."""
    result.remote = shown_remote(remote)
    if result.commit is None:
        result.pushed, result.push_error = False, "nothing to push: no commit yet"
        return result
    options: dict[str, Any] = {}
    if token_env:
        token = os.environ.get(token_env)
        if not token:
            result.pushed, result.push_error = False, f"the environment variable {token_env} (the remote's token) is not set"
            return result
        username = urllib.parse.urlsplit(remote).username
        options = {"username": username or "git", "password": token}
    errors = io.BytesIO()
    ref = f"refs/heads/{BRANCH}".encode()
    try:
        with _quiet_ssh():
            outcome = _dulwich().push(str(result.repository), remote, refspecs=[ref + b":" + ref], outstream=io.BytesIO(), errstream=errors, **options)
        failed = {name: why for name, why in (getattr(outcome, "ref_status", None) or {}).items() if why is not None}
        if failed:
            raise GitError("; ".join(f"{name.decode(errors='replace')}: {why}" for name, why in failed.items()))
    except Exception as exc:  # noqa: BLE001 - dulwich raises many kinds, all of them a failed push
        result.pushed, result.push_error = False, _reason(exc, remote, errors.getvalue())
        return result
    result.pushed = True
    return result


@contextlib.contextmanager
def _quiet_ssh() -> Iterator[None]:
    """No prompt on a terminal an SSH client might open (a daemon has nobody to answer it)."""
    before = os.environ.get("GIT_TERMINAL_PROMPT")
    os.environ["GIT_TERMINAL_PROMPT"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GIT_TERMINAL_PROMPT", None)
        else:
            os.environ["GIT_TERMINAL_PROMPT"] = before


def _reason(exc: BaseException, remote: str, said: bytes) -> str:
    """Why a push failed, in one line, without the remote's credentials."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (ConnectionError, OSError)) and not isinstance(exc, GitError):
        text = f"cannot reach it ({text})"
    extra = " ".join(said.decode(errors="replace").split())
    password = urllib.parse.urlsplit(remote).password
    line = f"the push to {shown_remote(remote)} failed: {text}" + (f" ({extra})" if extra and extra not in text else "")
    return line.replace(password, "***") if password else line


# ----- reading a commit back -------------------------------------------------------------


@dataclass(frozen=True)
class GitSource:
    """`DIR[@REV]`: a commit of an export's Git history (REV: a commit, branch or `HEAD~2`)."""

    repository: Path
    rev: str = "HEAD"


def parse_source(text: str) -> GitSource | None:
    """`DIR` or `DIR@REV` when DIR is a Git repository, else None (a backup file, say)."""
    candidates = [(text, "HEAD")]
    if "@" in text:
        head, _, rev = text.rpartition("@")
        candidates.insert(0, (head, rev or "HEAD"))
    for path, rev in candidates:
        folder = Path(path)
        if folder.is_dir() and (folder / GIT_DIR).exists():
            return GitSource(folder, rev)
    return None


_REV = re.compile(r"(?P<base>.*?)(?P<steps>(?:~\d*|\^\d*)*)")
_STEP = re.compile(r"[~^]\d*")


def resolve_rev(repo: Any, rev: str) -> Any | None:
    """The commit `rev` names: an id (or its start), a branch, a tag or HEAD, then any `~N`,
    `^` and `^N` steps (parents, as Git counts them); None when there is none."""
    from dulwich.objectspec import AmbiguousShortId, parse_commit

    parts = _REV.fullmatch(rev)
    assert parts is not None  # the pattern matches any text
    base, steps = parts["base"] or "HEAD", _STEP.findall(parts["steps"])
    try:
        commit = parse_commit(repo, base.encode())
        for step in steps:
            count = int(step[1:] or 1)
            if step[0] == "~":
                for _ in range(count):
                    commit = repo[commit.parents[0]]
            else:
                commit = repo[commit.parents[count - 1]] if count else commit
    except (KeyError, ValueError, IndexError, AmbiguousShortId):
        return None
    return commit


def materialize(source: GitSource, folder: Path) -> tuple[Path, str]:
    """The commit `source` names as a backup file in `folder` (with its blob folder), and the
    commit's id. The file is named after the repository and the commit, so a second restore or
    a verify of the same commit finds it (and the ids that restore recorded) again; it is
    written once, under a temporary name, then renamed."""
    from syncd.files import private_dir
    from syncd.read.backup import blobs_dir

    repo = _open(source.repository, create=False)
    try:
        commit = resolve_rev(repo, source.rev)
        if commit is None:
            raise GitError(f"{source.repository} has no commit {source.rev!r}")
        sha = commit.id.decode()
        name = f"{source.repository.resolve().name or 'export'}@{sha[:12]}"
        out = folder / f"{name}.db"
        if out.is_file():
            return out, sha
        private_dir(folder)
        partial = folder / f".{name}.partial-{os.getpid()}.db"
        for leftover in (partial, blobs_dir(partial)):
            _remove(leftover)
        try:
            rebuild_backup(_reader(repo, commit.tree), partial, blobs_dir(partial))
        except BaseException as exc:
            for leftover in (partial, blobs_dir(partial)):
                _remove(leftover)
            if not isinstance(exc, Exception) or isinstance(exc, OSError):
                raise  # Ctrl-C, a full disk: told as such
            # A commit is input like any file: records a hand or a tool damaged (a line that is no
            # object, a field of the wrong type, nesting too deep, a path that is no file) end
            # the command in one line, not a traceback.
            said = str(exc) if isinstance(exc, RecordsError) else f"its records are damaged ({type(exc).__name__}: {exc})"
            raise GitError(f"commit {sha[:12]} of {source.repository} cannot be restored: {said}") from None
        if blobs_dir(partial).exists():
            os.replace(blobs_dir(partial), blobs_dir(out))
        os.replace(partial, out)
        return out, sha
    finally:
        repo.close()


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
