"""Files the previous release of syncd wrote, and what it said of them (issue 44).

`tests/fixtures/old_release/` keeps a mirror and a backup that an older syncd made of the
emulator's organization seeded here (`tests/fixtures/make_old_files.py` says which commit, and
`golden/made_by.json`), and in `golden/` what that syncd's `check`, `export`, `diff` and
`restore` (with the `mirror verify` after it) gave for them. `tests/test_old_files.py` holds
every later syncd to the same answers, for those files as they are and for files it makes itself
of the same organization.

This module is the one place that says how those answers are obtained and compared, so that the
recording and the tests cannot drift apart. What it normalises, and why (nothing else is):
- the temporary folders the commands ran in: a command's JSON names the files it was given; only
  their names are kept;
- the emulator's origin, `http://127.0.0.1:PORT` (a new port on every start), in what the API
  answered: URLs held in the objects, so in the export's files and in `diff`'s fields. It is
  shown as `http://emulator`. The export orders the rows of links.json by an id hashed from the
  row (`catalog.content_id`), URLs included: those lists are compared as sets;
- the ids the organization restored into gets: the emulator makes them as the restore writes,
  in the order its concurrency gives. Each becomes `<target N>`, N in the order of first sight
  in documents whose own order is stable (the emulator's canonical dump of the target names its
  objects by paths, not ids, already);
- a restore's wall-clock durations and request counts (`seconds`, `reads`, `stats`: they follow
  the machine and the concurrency, not what was restored).
A diff of a mirror made NOW differs from the recorded one in the hashes of the few objects that
hold the origin below their top level (a change request's `mergedBy.urls`, a member's
`user.urls`: `diff_without_hashes`); the recorded mirror's own diff is compared whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncd.cli import main
from syncd.state.rows import stored_of_hex
from tests.thread_emulator import TOKEN, ThreadEmulator, thread_emulator

SPEC = (
    "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=2,files=1,sites=1,sections=2,members=1,teams=1,saml=1,openapi=1,"
    "translations=1,custom_fields=1,comments=1,change_requests=1,integrations=1"
)
"""One organization (a nested collection, three spaces with pages, files, comments and a change
request, a site with sections, members, a team, SSO, an OpenAPI spec...), small enough for files
under 300 KB; and one empty organization to restore into."""
SEED = 40
CLOCK = datetime(2025, 2, 3, 10, 0, 0, tzinfo=UTC)
"""The emulator's frozen time: what the API changes (a rename, an edit) gets this timestamp on
every run, so a change made now is the change the old release recorded."""
TENANT = "SRC"

FIXTURES = Path(__file__).parent / "fixtures" / "old_release"
MIRROR = FIXTURES / "mirror.db"
BACKUP = FIXTURES / "backup.db"
GOLDEN = FIXTURES / "golden"

ORIGIN = re.compile(r"http://127\.0\.0\.1:\d+")
SHOWN_ORIGIN = "http://emulator"
ID = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{20}(?![A-Za-z0-9])")
"""An id the emulator makes (`Store.new_id`), alone or in a key (`create:space:ID`)."""
VARYING = frozenset({"seconds", "reads", "stats"})
"""Fields of a restore's rounds that follow the machine and the concurrency, not what was restored."""


# ----- the emulator and the CLI ----------------------------------------------------------


@contextlib.contextmanager
def seeded_emulator() -> Iterator[ThreadEmulator]:
    """The organization the old files were made of (`org_ids[0]`) and an empty one to restore
    into (`org_ids[1]`), the clock frozen at `CLOCK`."""
    with thread_emulator(SPEC, seed=SEED, clock=CLOCK) as running:
        yield running


def tenant_env(emulator: ThreadEmulator, state: Path) -> dict[str, str]:
    """The environment of a syncd whose tenant `SRC` is `emulator` (every organization)."""
    return {
        f"SYNCD_TENANTS__{TENANT}__BASE_URL": emulator.url,
        f"SYNCD_TENANTS__{TENANT}__TOKEN": TOKEN,
        "SYNCD_STATE_DIR": str(state),
        "NO_COLOR": "1",
    }


def syncd(*args: str | Path) -> tuple[int, str, str]:
    """`syncd ARGS` in this process (its environment as set by the caller): exit code, stdout,
    stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def ok(*args: str | Path) -> str:
    """`syncd ARGS`'s stdout; any exit but 0 fails with what it printed."""
    code, out, err = syncd(*args)
    assert code == 0, (args, code, out, err)
    return out


# ----- making the files ------------------------------------------------------------------


def change_source(emulator: ThreadEmulator, org: str) -> None:
    """What happens in the organization between the mirror's two runs: its first space (by
    title) renamed, the first page of the second edited, the third deleted (with its pages,
    file, change request and site-spaces)."""
    spaces = sorted(emulator.items(f"/v1/orgs/{org}/spaces"), key=lambda s: s["title"])
    renamed, edited, deleted = spaces[0], spaces[1], spaces[2]
    emulator.api("PATCH", f"/v1/spaces/{renamed['id']}", {"title": "Renamed space"})
    page = sorted(emulator.api("GET", f"/v1/spaces/{edited['id']}/content/pages")["pages"], key=lambda p: p["title"])[0]
    emulator.admin("PATCH", f"/spaces/{edited['id']}/pages/{page['id']}", {"markdown": "Edited between the two runs.\n"})
    emulator.api("DELETE", f"/v1/spaces/{deleted['id']}")


def make_mirror(emulator: ThreadEmulator, db: Path) -> None:
    """A mirror of the seeded organization with two runs, the source changed in between."""
    org = emulator.org_ids[0]
    ok("sync", f"{TENANT}:{org}", "--db", db, "--full")
    change_source(emulator, org)
    ok("sync", f"{TENANT}:{org}", "--db", db, "--full")


def make_backup(emulator: ThreadEmulator, out: Path, *more: str) -> None:
    """A backup of the seeded organization, with its files' binaries (`OUT.blobs/`); `more`:
    further options (`--overwrite`)."""
    ok("backup", f"{TENANT}:{emulator.org_ids[0]}", "--out", out, "--with-files", *more)


def blobs_of(backup: Path) -> Path:
    return backup.with_name(backup.stem + ".blobs")


# ----- the answers -----------------------------------------------------------------------


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digests(*paths: Path) -> dict[str, str]:
    """Every file at or under `paths`, by its path from the first one's folder -> sha256."""
    root = paths[0].parent
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    return {f.relative_to(root).as_posix(): sha256(f.read_bytes()) for f in files}


def seeded_source(emulator: ThreadEmulator) -> dict[str, Any]:
    """What the old files hold of the seeded organization, as the emulator serves it now: its
    canonical dump and the ids of its spaces. A change of the emulator's generator shows here
    first (the fresh comparisons would fail for it, not for syncd)."""
    org = emulator.org_ids[0]
    spaces = sorted(s["id"] for s in emulator.items(f"/v1/orgs/{org}/spaces"))
    dump = json.dumps(emulator.admin("GET", f"/orgs/{org}/dump"), sort_keys=True).encode()
    return {"org": org, "spaces": spaces, "dump_sha256": sha256(dump)}


def check_result(backup: Path) -> dict[str, Any]:
    """`syncd check BACKUP --json`, and its exit code."""
    code, out, err = syncd("check", backup, "--json")
    assert out, (code, err)
    return {"exit": code, "report": json.loads(_named(out, blobs_of(backup), backup))}


def export_result(backup: Path, out_dir: Path) -> dict[str, Any]:
    """`syncd export BACKUP OUT --json`: its report, and every file written (path -> sha256
    of the file normalised: module docstring)."""
    report = json.loads(_named(ok("export", backup, out_dir, "--json"), out_dir, backup))
    files = {p.relative_to(out_dir).as_posix(): sha256(_normalised_export_file(p))
             for p in sorted(out_dir.rglob("*")) if p.is_file()}  # fmt: skip
    return {"report": report, "files": files}


def diff_result(mirror: Path, *runs: int) -> dict[str, Any]:
    """`syncd diff --db MIRROR --json --all` (between `runs`; default the last two)."""
    args = [a for run in runs for a in ("--run", str(run))]
    return json.loads(ORIGIN.sub(SHOWN_ORIGIN, ok("diff", "--db", mirror, "--json", "--all", *args)))


def with_stored_hashes(diff: dict[str, Any]) -> dict[str, Any]:
    """A recorded diff as a syncd since migration 0008 gives it of the same file once it wrote
    into it: each hash in the form the migration stores (`syncd.state.rows.stored_of_hex`),
    nothing else changed."""
    hashes = ("old_hash", "new_hash")
    return diff | {"changes": [{k: stored_of_hex(v) if k in hashes else v for k, v in c.items()} for c in diff["changes"]]}


def stored_hash_lengths(mirror: Path) -> set[int]:
    """The lengths of every hash `mirror` holds (its objects', its changes' before and after)."""
    with contextlib.closing(sqlite3.connect(f"file:{mirror}?mode=ro", uri=True)) as db:
        query = "SELECT length(hash) FROM resources UNION SELECT length(old_hash) FROM changes UNION SELECT length(new_hash) FROM changes"
        return {length for (length,) in db.execute(query) if length is not None}


def diff_without_hashes(diff: dict[str, Any]) -> dict[str, Any]:
    """A diff of a mirror made now, as comparable with the recorded one (module docstring)."""
    return diff | {"changes": [{k: v for k, v in c.items() if k not in ("old_hash", "new_hash")} for c in diff["changes"]]}


def restore_result(emulator: ThreadEmulator, backup: Path, state: Path) -> dict[str, Any]:
    """`syncd restore BACKUP SRC:TARGET --json` into the emulator's empty organization, then
    `syncd mirror verify` of it, then the emulator's canonical dump of the target; normalised
    (module docstring)."""
    target = emulator.org_ids[1]
    ids = TargetIds(source_ids(backup) | {emulator.org_ids[0]}, {target: "<target org>"})
    code, out, err = syncd("restore", backup, f"{TENANT}:{target}", "--db", state, "--json")
    assert out, (code, err)
    vcode, vout, verr = syncd("mirror", "verify", backup, f"{TENANT}:{target}", "--db", state, "--json")
    assert vout, (vcode, verr)
    restored = _without(json.loads(ORIGIN.sub(SHOWN_ORIGIN, _named(out, backup))), VARYING)
    verified = json.loads(ORIGIN.sub(SHOWN_ORIGIN, _named(vout, backup)))
    return {
        "restore": {"exit": code, "document": ids.of(restored)},
        "verify": {"exit": vcode, "document": ids.of(verified)},
        "target_dump": ids.of(emulator.admin("GET", f"/orgs/{target}/dump")),
    }


def source_ids(backup: Path) -> set[str]:
    """Every id the backup holds, and each part of a composite one (`org/user`): the
    source's, kept as they are."""
    with contextlib.closing(sqlite3.connect(f"file:{backup}?mode=ro&immutable=1", uri=True)) as db:
        return {part for (row_id,) in db.execute("SELECT id FROM resources") for part in str(row_id).split("/")}


class TargetIds:
    """Ids not in `known`, each shown as `<target N>` (N: order of first sight)."""

    def __init__(self, known: set[str], names: dict[str, str]) -> None:
        self.known, self.names, self.count = known, dict(names), 0

    def of(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.of(k): self.of(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.of(v) for v in value]
        if isinstance(value, str):
            return ID.sub(self._name, value)
        return value

    def _name(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if found in self.known:
            return found
        if found not in self.names:
            self.count += 1
            self.names[found] = f"<target {self.count}>"
        return self.names[found]


def _named(text: str, *paths: Path) -> str:
    """`text` with each of `paths` shown by its name only (the longest first)."""
    for path in sorted(paths, key=lambda p: -len(str(p))):
        text = text.replace(json.dumps(str(path))[1:-1], path.name)
    return text


def _normalised_export_file(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.suffix not in (".json", ".md", ".yaml", ".yml"):
        return raw
    text = ORIGIN.sub(SHOWN_ORIGIN, raw.decode())
    if path.name == "links.json":
        text = json.dumps(_sorted_lists(json.loads(text)), indent=2, sort_keys=True)
    return text.encode()


def _sorted_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_lists(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_sorted_lists(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def _without(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


# ----- the goldens -----------------------------------------------------------------------


def golden(name: str) -> Any:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def write_golden(name: str, value: Any) -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / f"{name}.json").write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
