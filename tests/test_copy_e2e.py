"""Copying organizations end to end: the real CLI against an emulator process, under both of
the emulator's behaviour profiles (`default`, and `divergent`, which makes the other choice
wherever the spec is silent: names of duplicates, where new objects land, paths, list order,
page size and expiring page tokens, unknown fields, minimal create answers, what a site's first
section does).

The emulator's canonical dump is the independent oracle: after a copy the target's dump
equals the source's for every kind syncd copies (`tests.oracle.copied_view`), no path carries a
`#2` suffix (the dump adds it when two siblings share a label: an object created twice) nor a
duplicate's "(copy)" name, and the SOURCE's whole dump is as it was before.

Every test runs with syncd's state in a SQLite file under both profiles, and in PostgreSQL
(`SYNCD_STATE_URL`) under the default one: the profile is the service's behaviour, the backend
syncd's own, and the two do not meet; all three would take twice the time for little more.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.cli import main
from syncd.config import load_settings
from syncd.daemon.jobs import execute_job
from syncd.daemon.metrics import DaemonMetrics
from tests import cli_zygote
from tests.loopback import EmulatorClient, SharedEmulators
from tests.oracle import copied_view
from tests.state_support import use_backend

TOKEN = "e2e-token"
SPEC = (
    "orgs=1,empty_orgs=3,collections=4,spaces=10,pages=3,files=1,sites=2,sections=3,members=2,teams=2,saml=1,openapi=2,"
    "translations=1,custom_fields=2,comments=1,change_requests=1,integrations=1"
)
FAULTS = {"lost": 0.05, "5xx": 0.02}
"""5% of write answers lost after the write took effect, 2% of all calls answered 5xx."""

pytestmark = pytest.mark.parametrize(
    ("profile", "backend"), [("default", "sqlite"), ("divergent", "sqlite"), ("default", "postgresql")],
    ids=["default-sqlite", "divergent-sqlite", "default-postgresql"],
)


class Emulator(EmulatorClient):
    def raw_dump(self, org: str) -> Any:
        return self.admin("GET", f"/_emulator/orgs/{org}/dump")

    def faults(self, **values: float) -> None:
        self.admin("PUT", "/_emulator/faults", {"reset": True, **values})

    def lost_answers(self) -> int:
        return int(self.admin("GET", "/_emulator/stats")["by_status"].get("lost-answer", 0))


@pytest.fixture(scope="module")
def emulators() -> Iterator[SharedEmulators]:
    with SharedEmulators(token=TOKEN, spec=SPEC, seed=3, rate=0) as shared:
        yield shared


@pytest.fixture
def emulator(profile: str, emulators: SharedEmulators) -> Emulator:
    """The module's emulator of `profile`, as it was when it started."""
    running = emulators.fresh(profile)
    return Emulator(running.url, running.report, TOKEN)


@pytest.fixture
def env(emulator: Emulator, backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory of a syncd with five tenants on the emulator, its state on `backend`."""
    monkeypatch.chdir(tmp_path)
    for name, token in (("SRC", TOKEN), ("DST", TOKEN), ("ONE", "org1-token"), ("TWO", "org2-token"), ("FOUR", "org4-token")):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", emulator.url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", token)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SYNCD_RETRY__INITIAL_WAIT", "0.02")  # faults are retried after short waits: the same calls, less sleep
    monkeypatch.setenv("SYNCD_RETRY__MAX_WAIT", "0.1")
    use_backend(backend, request, monkeypatch, tmp_path / "state")
    return tmp_path


def nothing_twice(view: dict[str, list[tuple[str, Any]]]) -> bool:
    """No two siblings share a label: the dump numbers them `#2`."""
    return not any("#" in path for rows in view.values() for path, _ in rows)


def no_duplicates(view: dict[str, list[tuple[str, Any]]]) -> bool:
    """Nothing twice, and no name the service gave a duplicate ("(copy)") left standing."""
    return nothing_twice(view) and not any("(copy)" in path for rows in view.values() for path, _ in rows)


def assert_copied(emulator: Emulator, src: str, dst: str, source_before: Any) -> None:
    """The target equals the source, nothing is there twice, the source is untouched."""
    target = emulator.dump(dst)
    assert target == emulator.dump(src), [k for k in target if target[k] != emulator.dump(src)[k]]
    assert no_duplicates(target)
    assert emulator.raw_dump(src) == source_before


def assert_nothing_left(emulator: Emulator, src: str, dst: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = emulator.writes()
    capsys.readouterr()
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}"]) == 0
    assert "no operations" in capsys.readouterr().out
    assert emulator.writes() == before  # a second apply makes zero write calls
    assert main(["mirror", "plan", f"src:{src}", f"dst:{dst}"]) == 0


def test_the_first_apply_with_lost_answers_and_server_errors_is_equal(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    before = emulator.raw_dump(src)
    assert main(["mirror", "plan", f"src:{src}", f"dst:{dst}"]) == 2  # changes pending
    emulator.faults(**FAULTS)
    code = main(["mirror", "apply", f"src:{src}", f"dst:{dst}"])
    lost = emulator.lost_answers()
    emulator.faults()
    out = capsys.readouterr().out
    assert code == 0, out
    assert lost > 0  # answers really were lost, and every lost create was found, not repeated
    assert "round 1:" in out and "skip organization 'title'" in out and ": equal" in out
    assert_copied(emulator, src, dst, before)
    assert main(["mirror", "verify", f"src:{src}", f"dst:{dst}"]) == 0
    assert_nothing_left(emulator, src, dst, capsys)


def test_ten_percent_lost_answers_make_nothing_twice(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[2]
    before = emulator.raw_dump(src)
    emulator.faults(lost=0.1)
    code = main(["mirror", "apply", f"src:{src}", f"dst:{dst}"])
    lost = emulator.lost_answers()
    emulator.faults()
    assert code == 0, capsys.readouterr().out
    assert lost > 0
    assert_copied(emulator, src, dst, before)


def kill_apply_after(emulator: Emulator, env: Path, src: str, dst: str, writes: int, tenants: tuple[str, str] = ("src", "dst")) -> None:
    """Start `mirror apply` (of the tenants named) with lost answers and server errors, and
    kill -9 it once the emulator received `writes` more writes."""
    emulator.faults(latency=15, **FAULTS)
    start = emulator.writes()
    proc = cli_zygote.spawn(["mirror", "apply", f"{tenants[0]}:{src}", f"{tenants[1]}:{dst}"], cwd=env)
    try:
        deadline = time.monotonic() + 60
        while emulator.writes() - start < writes and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        emulator.faults()


def test_applies_killed_at_three_moments_are_finished_by_the_next_one(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    before = emulator.raw_dump(src)
    for writes in (3, 15, 40):
        kill_apply_after(emulator, env, src, dst, writes)
        assert nothing_twice(emulator.dump(dst))  # a killed run may leave a "(copy)" name for the next to fix
    emulator.faults(**FAULTS)
    code = main(["mirror", "apply", f"src:{src}", f"dst:{dst}"])
    emulator.faults()
    assert code == 0, capsys.readouterr().out
    assert_copied(emulator, src, dst, before)
    assert_nothing_left(emulator, src, dst, capsys)


def test_source_changes_plan_exactly_those_operations(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    doomed = emulator.api("POST", f"/v1/orgs/{src}/collections", {"title": "Doomed"})
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}"]) == 0, capsys.readouterr().out
    spaces = emulator.api("GET", f"/v1/orgs/{src}/spaces?limit=1000")["items"]
    renamed, moved = next((a, b) for a in spaces for b in spaces if a is not b and a.get("parent") == b.get("parent") and spaces.index(a) < spaces.index(b))
    emulator.api("PATCH", f"/v1/spaces/{renamed['id']}", {"title": "Renamed in source"})
    emulator.api("POST", f"/v1/spaces/{moved['id']}/move", {"position": {"before": {"type": "space", "space": renamed["id"]}}})
    new = emulator.api("POST", f"/v1/orgs/{src}/collections", {"title": "Brand new collection"})
    emulator.api("DELETE", f"/v1/collections/{doomed['id']}")
    capsys.readouterr()
    assert main(["mirror", "plan", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--json"]) == 2
    ops = json.loads(capsys.readouterr().out)["ops"]
    assert sorted((op["action"], op["kind"], op["source_id"]) for op in ops) == sorted([
        ("patch", "space", renamed["id"]),
        ("create", "collection", new["id"]),
        ("settle", "tree", None),  # where the new collection lands is the service's choice: read, then moved
        ("delete", "collection", doomed["id"]),
    ])
    settle = next(op for op in ops if op["action"] == "settle")
    assert any(line.startswith("move space 'Renamed in source'") or line.startswith(f"move space '{moved['title']}'") for line in settle["preview"])
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--max-delete", "0"]) == 2
    assert "max-delete" in capsys.readouterr().err
    before = emulator.raw_dump(src)
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror"]) == 2  # deletes need a terminal or --yes
    assert "add --yes" in capsys.readouterr().err and emulator.raw_dump(src) == before
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--yes"]) == 0
    assert_copied(emulator, src, dst, before)


def test_restore_a_backup_into_an_empty_organization(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[3]
    backup = env / "b.db"
    assert main(["backup", f"src:{src}", "--out", str(backup)]) == 0
    before = emulator.raw_dump(src)
    backup_bytes, backup_mtime = backup.read_bytes(), backup.stat().st_mtime_ns
    emulator.faults(**FAULTS)
    code = main(["restore", str(backup), f"dst:{dst}"])
    emulator.faults()
    assert code == 0, capsys.readouterr().out
    assert_copied(emulator, src, dst, before)
    # The backup was only read: not a byte, not its time, and nothing beside it.
    assert backup.read_bytes() == backup_bytes and backup.stat().st_mtime_ns == backup_mtime
    assert sorted(p.name for p in env.iterdir() if p.name.startswith("b.")) == ["b.db"]


def test_a_copy_across_tenants_with_two_tokens(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    before = emulator.raw_dump(src)
    spaces = emulator.api("GET", f"/v1/orgs/{src}/spaces?limit=1000", token="org1-token")["items"]
    assert [s for s in spaces if s["visibility"] not in ("public", "unlisted", "share-link")]  # private content must travel
    # org1-token sees only the source, org2-token only the target: no organization visible to both.
    emulator.faults(**FAULTS)
    code = main(["mirror", "apply", f"one:{src}", f"two:{dst}"])
    emulator.faults()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "content cannot be copied" not in out and "created empty" not in out  # 0 content skips
    target = emulator.dump(dst)
    assert target == emulator.dump(src) and no_duplicates(target)  # page markdown included
    files = lambda org: [(row["path"], row["data"]) for row in emulator.raw_dump(org)["kinds"]["file"]]  # noqa: E731
    assert files(dst) == files(src)
    assert emulator.raw_dump(src) == before
    before_writes = emulator.writes()
    assert main(["mirror", "apply", f"one:{src}", f"two:{dst}"]) == 0
    assert emulator.writes() == before_writes  # nothing more a plan could do


def test_a_backup_restores_what_the_source_no_longer_has_into_another_token(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[3]
    backup = env / "b.db"
    assert main(["backup", f"one:{src}", "--out", str(backup), "--with-files"]) == 0
    original = emulator.raw_dump(src)
    for space in emulator.api("GET", f"/v1/orgs/{src}/spaces?limit=1000", token="org1-token")["items"]:
        emulator.api("DELETE", f"/v1/spaces/{space['id']}", token="org1-token")
    assert not emulator.raw_dump(src)["kinds"]["space"]
    capsys.readouterr()
    emulator.faults(**FAULTS)
    code = main(["restore", str(backup), f"four:{dst}"])  # org4-token cannot read the source at all
    emulator.faults()
    assert code == 0, capsys.readouterr().out
    restored = emulator.raw_dump(dst)
    html_only = emulator.reads_html_only()
    view = lambda dump: copied_view(dump, html_only=html_only) | {"file": [(r["path"], r["data"]) for r in dump["kinds"]["file"]]}  # noqa: E731
    assert view(restored) == view(original)  # page markdown and files included
    assert no_duplicates(copied_view(restored))


def test_a_daemon_mirror_job_copies_and_then_has_nothing_to_do(emulator: Emulator, env: Path) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[2]
    config = env / "daemon.toml"
    config.write_text(f'[[jobs]]\nname = "copy"\nkind = "mirror"\nsource = "src:{src}"\ntarget = "dst:{dst}"\nmode = "mirror"\n')
    settings = load_settings(config)
    before = emulator.raw_dump(src)
    emulator.faults(**FAULTS)
    import anyio

    first = anyio.run(lambda: execute_job(settings, settings.jobs[0], DaemonMetrics()))
    emulator.faults()
    assert first.outcome == "succeeded", first.summary
    assert first.summary["rounds"] and first.summary["verify"]["missing"] == 0 and first.summary["residue"] == 0
    assert_copied(emulator, src, dst, before)
    writes = emulator.writes()
    second = anyio.run(lambda: execute_job(settings, settings.jobs[0], DaemonMetrics()))
    assert second.outcome == "succeeded" and second.summary["rounds"] == [] and emulator.writes() == writes


def test_dry_run_and_clear_errors(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    before = emulator.writes()
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}", "--dry-run"]) == 2
    out = capsys.readouterr().out
    assert "dry run" in out and "POST" in out
    assert emulator.writes() == before
    assert main(["mirror", "plan", "src", f"dst:{dst}"]) == 2
    assert "must name an organization" in capsys.readouterr().err
    assert main(["mirror", "plan", f"src:{src}", f"src:{src}"]) == 2
    assert "same organization" in capsys.readouterr().err
    assert main(["mirror", "plan", f"src:{src}", "dst:nope"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["restore", str(env / "missing.db"), f"dst:{dst}"]) == 2
    assert "no such backup" in capsys.readouterr().err


def test_a_write_that_leaves_the_space_token_alone_is_still_verified(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Setting a custom field value does not move the space's change token: the target's
    re-read must still read that space again, because syncd wrote into it."""
    src, dst = emulator.orgs[0], emulator.orgs[3]
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}"]) == 0, capsys.readouterr()
    field = emulator.api("GET", f"/v1/orgs/{src}/custom-fields")["items"][0]
    space = emulator.api("GET", f"/v1/orgs/{src}/spaces?limit=1000")["items"][0]
    options = field.get("options") or ["x"]
    value = {"number": 7, "boolean": True, "text": "x", "single-select": options[-1], "multi-select": options[-1:]}[field["type"]]
    emulator.api("PATCH", f"/v1/spaces/{space['id']}/custom-fields", {"values": {field["name"]: {"value": value}}})
    # A comment moves the source space's token (comments are counted) but is not copied.
    emulator.api("POST", f"/v1/spaces/{space['id']}/comments", {"body": {"markdown": "a note"}})
    capsys.readouterr()
    assert main(["mirror", "apply", f"src:{src}", f"dst:{dst}"]) == 0, capsys.readouterr().out
    assert emulator.dump(dst) == emulator.dump(src)


def test_a_restore_into_its_own_organization_undeletes_what_was_deleted(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = emulator.orgs[0]
    backup = env / "b.db"
    assert main(["backup", f"src:{src}", "--out", str(backup), "--with-files"]) == 0
    original = emulator.raw_dump(src)
    spaces = emulator.api("GET", f"/v1/orgs/{src}/spaces?limit=1000")["items"][:2]
    for space in spaces:
        emulator.api("POST", f"/v1/spaces/{space['id']}/comments", {"body": {"markdown": "history to keep"}})
        emulator.api("DELETE", f"/v1/spaces/{space['id']}")
    capsys.readouterr()
    assert main(["restore", str(backup), f"src:{src}"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for space in spaces:  # the same spaces, back with their history: not copies
        back = emulator.api("GET", f"/v1/spaces/{space['id']}")
        assert "deletedAt" not in back and back["comments"] >= 1
        assert "history to keep" in json.dumps(emulator.api("GET", f"/v1/spaces/{space['id']}/comments"))
    assert "POST" not in out or "content/import" not in out
    after = emulator.raw_dump(src)
    html_only = emulator.reads_html_only()
    assert copied_view(after, html_only=html_only) == copied_view(original, html_only=html_only) and no_duplicates(copied_view(after))
