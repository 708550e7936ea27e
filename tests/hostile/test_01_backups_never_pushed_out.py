"""Issue 11, item 1: a backup that suddenly sees nothing (or far less) never pushes out a good one.

The token's `/v1/orgs` turns empty (its membership is removed in the emulator's store, as an
administrator revoking access would): the crawl reads cleanly and finds nothing, which used to
count as a complete backup, so the daemon's retention pruned the good backups, `syncd backup
--overwrite` replaced a good file, and `syncd export` of that empty backup emptied an earlier
export folder. Real loopback HTTP: the emulator runs in process, syncd talks to it over TCP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.cli import main
from syncd.config import Settings, load_settings
from syncd.daemon.jobs import execute_job
from syncd.daemon.metrics import DaemonMetrics
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.state import StateStore

TOKEN = "item01-token"
SPEC = "orgs=3,collections=3,spaces=5,pages=3,files=1,sites=1,sections=2,members=2,teams=1,comments=1,change_requests=1"


class Tenant:
    """The in-process emulator and the token's membership, which a test takes away and gives back."""

    def __init__(self, running: RunningEmulator, orgs: list[str]) -> None:
        self.running, self.orgs = running, orgs
        self.store = running.store
        self.user = self.store.tokens[TOKEN]
        self._revoked: dict[str, Any] = {}

    def revoke(self, *orgs: str) -> None:
        for org in orgs:
            if org not in self._revoked:
                self._revoked[org] = self.store.members[org].pop(self.user)

    def restore(self) -> None:
        for org, member in self._revoked.items():
            self.store.members[org][self.user] = member
        self._revoked.clear()


@pytest.fixture
async def tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Tenant]:
    store = Store(seed=11)
    generated = generate(store, parse_spec(SPEC), seed=11, all_token=TOKEN)
    async with serve_emulator(store) as running:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", running.url)
        monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", TOKEN)
        monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
        yield Tenant(running, list(generated.org_ids))


async def cli(*argv: str) -> int:
    """The real command line, in a thread: its event loop runs beside the emulator's."""
    return await anyio.to_thread.run_sync(main, list(argv))


def error_line(err: str) -> str:
    """The one line a refusal prints (stderr also carries the progress log lines)."""
    lines = [line for line in err.splitlines() if line.startswith("syncd: ")]
    assert len(lines) == 1, err
    return lines[0]


def objects(path: Path) -> int:
    with StateStore(path, readonly=True) as mirror:
        return sum(sum(mirror.counts(tenant).values()) for tenant in {run["tenant"] for run in mirror.runs()})


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def backup_job(tmp_path: Path, retention: int = 2) -> Settings:
    config = tmp_path / "syncd.toml"
    config.write_text(f'[[jobs]]\nname = "nightly"\nkind = "backup"\nsource = "src"\nretention = {retention}\n')
    return load_settings(config)


async def run_job(settings: Settings) -> Any:
    return await execute_job(settings, settings.jobs[0], DaemonMetrics())


def good_backups(settings: Settings) -> list[Path]:
    return sorted((settings.state_dir / "backups" / "nightly").glob("nightly-*Z.db"))


async def test_item01_daemon_backup_that_sees_no_organization_is_partial_and_prunes_nothing(tenant: Tenant, tmp_path: Path) -> None:
    settings = backup_job(tmp_path, retention=2)
    first, second = await run_job(settings), await run_job(settings)
    assert first.outcome == second.outcome == "succeeded", (first.summary, second.summary)
    good = good_backups(settings)
    assert [str(p) for p in good] == [first.summary["file"], second.summary["file"]]
    held = {path: path.read_bytes() for path in good}
    full = objects(good[-1])
    assert full > 100

    tenant.revoke(*tenant.orgs)  # the token suddenly sees no organization: /v1/orgs is empty
    empty_runs = [await run_job(settings), await run_job(settings)]
    for run in empty_runs:
        assert run.outcome == "partial", run.summary
        assert run.summary.get("pruned", []) == []
        assert "no organization" in run.summary["reason"] and str(full) in run.summary["reason"], run.summary
    assert {path: path.read_bytes() for path in good_backups(settings)} == held  # both good files, as they were
    empty_files = [Path(run.summary["file"]) for run in empty_runs]
    assert all(path.exists() and path not in held for path in empty_files)

    tenant.restore()  # access is back: the next good run makes room for itself only
    third = await run_job(settings)
    assert third.outcome == "succeeded", third.summary
    # The two empty files did not count for retention: the newest two GOOD backups stay.
    assert good_backups(settings) == [good[-1], Path(third.summary["file"])]
    assert third.summary["pruned"] == [good[0].name] and all(path.exists() for path in empty_files)
    # Once `retention` good backups are newer than them, the partial files go too.
    fourth = await run_job(settings)
    assert fourth.summary["pruned"] == [good[1].name, *(path.name for path in empty_files)], fourth.summary
    assert good_backups(settings) == [Path(third.summary["file"]), Path(fourth.summary["file"])]
    assert not any(path.exists() for path in empty_files)


async def test_item01_daemon_backup_that_sees_less_than_half_is_partial(tenant: Tenant, tmp_path: Path) -> None:
    settings = backup_job(tmp_path, retention=2)
    for _ in range(2):
        assert (await run_job(settings)).outcome == "succeeded"
    good = good_backups(settings)
    held = {path: path.read_bytes() for path in good}

    tenant.revoke(*tenant.orgs[1:])  # one organization of three: about a third of the objects
    shrunk = await run_job(settings)
    assert shrunk.outcome == "partial", shrunk.summary
    assert shrunk.summary.get("pruned", []) == [] and "fewer than half" in shrunk.summary["reason"], shrunk.summary
    assert {path: path.read_bytes() for path in good_backups(settings)} == held

    tenant.restore()
    tenant.revoke(tenant.orgs[2])  # two of three: a real, smaller tenant, not a lost token
    smaller = await run_job(settings)
    assert smaller.outcome == "succeeded", smaller.summary
    assert good_backups(settings) == [good[-1], Path(smaller.summary["file"])]


async def test_item01_backup_overwrite_never_replaces_a_backup_with_an_emptier_one(
    tenant: Tenant, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "backups" / "acme.db"
    assert await cli("backup", "src", "--out", str(out)) == 0
    before, full = out.read_bytes(), objects(out)
    capsys.readouterr()

    tenant.revoke(*tenant.orgs)
    assert await cli("backup", "src", "--out", str(out), "--overwrite") == 3
    err = error_line(capsys.readouterr().err)
    assert "no object" in err and str(full) in err and "--force" in err, err
    assert out.read_bytes() == before  # byte-identical, and nothing left beside it
    assert sorted(p.name for p in out.parent.iterdir()) == ["acme.db"]

    tenant.restore()
    tenant.revoke(*tenant.orgs[1:])  # fewer than half is refused too
    assert await cli("backup", "src", "--out", str(out), "--overwrite") == 3
    err = error_line(capsys.readouterr().err)
    assert "fewer than half" in err and str(full) in err, err
    assert out.read_bytes() == before

    tenant.revoke(*tenant.orgs)
    assert await cli("backup", "src", "--out", str(out), "--overwrite", "--force") == 0
    assert objects(out) == 0 and out.read_bytes() != before  # asked for: replaced
    assert sorted(p.name for p in out.parent.iterdir()) == ["acme.db"]


async def test_item01_export_of_an_empty_backup_never_empties_an_earlier_export(
    tenant: Tenant, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, empty, folder = tmp_path / "good.db", tmp_path / "empty.db", tmp_path / "export"
    assert await cli("backup", "src", "--out", str(good)) == 0
    assert await cli("export", str(good), str(folder)) == 0
    exported = tree(folder)
    assert len(exported) > 50
    tenant.revoke(*tenant.orgs)
    assert await cli("backup", "src", "--out", str(empty)) == 3  # written, but it found nothing: partial
    assert objects(empty) == 0
    capsys.readouterr()

    code = await cli("export", str(empty), str(folder))
    assert code != 0, capsys.readouterr()
    assert "--force" in error_line(capsys.readouterr().err)
    assert tree(folder) == exported  # nothing removed, nothing rewritten

    # One organization of three would remove more than half of the files: refused as well.
    one = tenant.orgs[0]
    code = await cli("export", str(good), str(folder), "--org", one)
    assert code != 0, capsys.readouterr()
    assert "--force" in error_line(capsys.readouterr().err)
    assert tree(folder) == exported

    assert await cli("export", str(empty), str(folder), "--force") == 0
    assert set(tree(folder)) == {".syncd-export"}  # asked for: replaced by the empty export
