"""Issue 22, item 1: a backup's blobs are used only as regular files holding the bytes they are
named after, never as whatever a link points to.

In a copy of a backup, a blob under `FILE.blobs/` replaced by a symbolic link to a readable
file (a config holding a token), the manifest's size set to that file's size, made `syncd
restore` publish the linked file to the target organization: `held_blobs` checked the size
only and the content source followed the link. A blob replaced by other bytes of the same
size went the same way. Now a blob is opened without following links, must be a regular file
of the manifest's size and hash to its name; anything else is a file the backup does not
hold: left out, said in a warning, reported as not restored. `check` names a link or a FIFO
as such, and `export` refuses them with a warning.

Real loopback HTTP: the emulator runs in process (its stored file bytes are looked at), syncd
is the real command line, its content source a real server the emulator imports from.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.cli import main
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from tests.hostile.cli_support import clean_env, run_cli
from tests.loopback import http

TOKEN = "item22-blobs-token"
SPEC = (
    "orgs=1,empty_orgs=1,collections=0,spaces=2,pages=1,files=1,sites=0,sections=0,members=0,teams=0,saml=0,"
    "openapi=0,translations=0,custom_fields=0,comments=0,change_requests=0,integrations=0"
)
SECRET = b"[tenants.prod]\ntoken = 'gb_api_SECRET-TOKEN-0123456789abcdef'\n" * 4
"""What a config file on the machine running the restore holds."""


class Tenant:
    def __init__(self, url: str, source: str, target: str) -> None:
        self.url, self.source, self.target = url, source, target

    def get(self, path: str) -> Any:
        status, answer = http("GET", self.url + path, TOKEN)
        assert status == 200, (path, status, answer)
        return answer

    def file_bytes(self, org: str) -> dict[str, bytes]:
        """Name -> bytes of every file of the organization's spaces, downloaded as a reader
        would (blocking: call it in a thread, the emulator shares the test's event loop)."""
        out = {}
        for space in self.get(f"/v1/orgs/{org}/spaces?limit=1000")["items"]:
            for item in self.get(f"/v1/spaces/{space['id']}/content/files?limit=1000")["items"]:
                with urllib.request.urlopen(item["downloadURL"], timeout=10) as answer:
                    out[item["name"]] = answer.read()
        return out


@pytest.fixture
async def tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Tenant]:
    store = Store(seed=22)
    generated = generate(store, parse_spec(SPEC), seed=22, all_token=TOKEN)
    async with serve_emulator(store) as running:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", running.url)
        monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", TOKEN)
        monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
        source, target = generated.org_ids
        yield Tenant(running.url, source, target)


async def cli(*argv: str) -> int:
    """The real command line, in a thread: its event loop runs beside the emulator's."""
    return await anyio.to_thread.run_sync(main, list(argv))


def blob_of(blobs: Path, entry: dict[str, Any]) -> Path:
    return blobs / entry["sha256"][:2] / entry["sha256"][2:]


async def hostile_backup(tenant: Tenant, tmp_path: Path) -> tuple[Path, dict[str, Any], list[str]]:
    """A backup with files whose first blob is a link to the secret (the manifest's size made
    to match) and whose second holds other bytes of its size; (file, manifest, file names)."""
    backup = tmp_path / "evil.db"
    assert await cli("backup", f"src:{tenant.source}", "--out", str(backup), "--with-files") == 0
    blobs = tmp_path / "evil.blobs"
    manifest = json.loads((blobs / "manifest.json").read_text())
    linked, tampered = sorted(manifest.values(), key=lambda e: e["name"])[:2]
    secret = tmp_path / "syncd.toml"
    secret.write_bytes(SECRET)
    blob_of(blobs, linked).unlink()
    blob_of(blobs, linked).symlink_to(secret)
    linked["size"] = len(SECRET)
    other = blob_of(blobs, tampered)
    other.write_bytes(b"X" * other.stat().st_size)
    (blobs / "manifest.json").write_text(json.dumps(manifest))
    return backup, manifest, [linked["name"], tampered["name"]]


async def test_item22_a_restore_never_publishes_what_a_blob_links_to(tenant: Tenant, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    backup, _, names = await hostile_backup(tenant, tmp_path)
    capsys.readouterr()

    code = await cli("restore", str(backup), f"src:{tenant.target}")
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    restored = await anyio.to_thread.run_sync(tenant.file_bytes, tenant.target)
    assert not any(SECRET[:40] in body for body in restored.values()), "the linked file reached the target"
    assert not any(body and set(body) == {ord("X")} for body in restored.values()), "bytes that are not the backup's reached the target"
    assert not set(names) & set(restored), restored.keys()  # both files left out, not served
    # Said, as a file the backup does not hold is: a warning naming why, the skip, the note.
    warnings = [line for line in err.splitlines() if "content.file_not_served" in line]
    assert len(warnings) == 2, err
    assert any("symbolic link" in line for line in warnings) and any("hash" in line for line in warnings), warnings
    for name in names:
        assert f"are not in the backup ({name})" in out, out
        assert f"1 file(s) not held, not imported: {name}" in out, out
    assert code == 0, out  # what is left out is announced by the plan, as for a backup without the file
    assert "announced by the plan: equal" in out, out


async def test_item22_check_names_links_and_fifos_and_export_refuses_them(
    tenant: Tenant, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup, manifest, _ = await hostile_backup(tenant, tmp_path)
    blobs = tmp_path / "evil.blobs"
    # A third blob: a FIFO. Opened as a file, a FIFO waits for a writer forever.
    fifo_sha = hashlib.sha256(b"fifo").hexdigest()
    (blobs / fifo_sha[:2]).mkdir(exist_ok=True)
    os.mkfifo(blobs / fifo_sha[:2] / fifo_sha[2:])
    # And a two-letter folder that is a link to a folder elsewhere.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (blobs / "ff").symlink_to(elsewhere, target_is_directory=True)
    capsys.readouterr()

    # A process of its own, with a deadline: opened as a file, the FIFO would hang `check`.
    ran = await anyio.to_thread.run_sync(lambda: run_cli("check", backup, env=clean_env(), cwd=tmp_path, timeout=60))
    ran.assert_clean()
    assert ran.code == 1, ran.show()
    lines = (ran.stdout + ran.stderr).splitlines()
    out, err = ran.stdout, ran.stderr
    linked = next(e for e in manifest.values() if e["size"] == len(SECRET))
    shown = f"evil.blobs/{linked['sha256'][:2]}/{linked['sha256'][2:]}"
    assert any(line.startswith(f"blob-symlink: {shown}: is a symbolic link") for line in lines), out + err
    assert any(line.startswith(f"blob-not-regular: evil.blobs/{fifo_sha[:2]}/{fifo_sha[2:]}: is not a regular file (a FIFO)") for line in lines), out + err
    assert any(line.startswith("blob-symlink: evil.blobs/ff: is a symbolic link") for line in lines), out + err
    assert any(line.startswith("blob-hash: ") for line in lines), out + err  # the tampered one, as before

    assert await cli("export", str(backup), str(tmp_path / "out")) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert any("export.binary_refused" in line and "symbolic link" in line for line in err.splitlines()), err
    exported = [p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert not any(SECRET[:40] in body for body in exported)
    assert "2 file binaries are not in the backup" in out.replace("\n", " "), out
