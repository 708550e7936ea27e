"""Backups in object storage (issue 43, part 1), against a real S3 on loopback (moto's server,
`tests/s3_support.py`) and the emulator: the commands a user types, in process.

A backup with its files goes to `s3://`, `syncd check` reads it there, `syncd export` writes it
out, `syncd restore` puts it into an empty organization and `syncd mirror verify` finds them
equal; a second backup into the same prefix sends none of the blobs it shares with the first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.s3_support import bucket, make_bucket, moto_server, objects, s3_env  # noqa: F401  (fixtures)
from tests.schema_support import check_output
from tests.test_plan_review import run as syncd
from tests.thread_emulator import ThreadEmulator, thread_emulator

SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=2,files=2"


@pytest.fixture
def emulator() -> Iterator[ThreadEmulator]:
    with thread_emulator(SPEC, seed=43) as running:
        yield running


@pytest.fixture
def env(emulator: ThreadEmulator, s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory and one tenant, `emu`, on the emulator; the AWS variables on moto."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_TENANTS__EMU__BASE_URL", emulator.url)
    monkeypatch.setenv("SYNCD_TENANTS__EMU__TOKEN", "thread-token")
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def test_a_backup_in_s3_is_checked_exported_restored_and_verified_there(
    emulator: ThreadEmulator, env: Path, bucket: str, s3_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, empty = emulator.org_ids
    url = f"s3://{bucket}/nightly/acme.db"
    code, out, err = syncd(capsys, "backup", f"emu:{source}", "--out", url, "--with-files", "--json")
    assert code == 0, out + err
    report = check_output("backup", out)
    stored = report["stored"]
    assert report["file"] == url and (stored["bucket"], stored["key"]) == (bucket, "nightly/acme.db")
    assert report["files"]["downloaded"] > 0 and stored["blobs_sent"] > 0 and stored["blobs_present"] == 0
    held = objects(s3_env, bucket)
    blobs = sorted(key for key in held if key.startswith("nightly/blobs/"))
    manifests = [key for key in held if key.startswith("nightly/manifests/")]
    assert sorted(held) == sorted(["nightly/acme.db", *manifests, *blobs]) and len(manifests) == 1
    assert len(blobs) == stored["blobs_sent"]
    assert not (env / "state" / "tmp").exists() or not any((env / "state" / "tmp").iterdir()), "the staging folder is left"

    code, out, err = syncd(capsys, "check", url)
    assert code == 0, out + err
    assert out.strip().splitlines()[-1].startswith(f"{url}: healthy (SQLite integrity ok;"), out
    assert f"{len(blobs)} blobs hashed" in out

    code, out, err = syncd(capsys, "export", url, str(env / "exported"))
    assert code == 0, out + err
    said = " ".join(out.split())
    assert "file binaries to" in said and "not in the backup" not in said, out
    assert list((env / "exported").rglob(".gitbook/assets/*")), "the export has the files' binaries"

    code, out, err = syncd(capsys, "restore", url, f"emu:{empty}")
    assert code == 0, out + err
    hint = out.strip().splitlines()[-1]
    assert hint.endswith(f"syncd mirror verify {url} emu:{empty}"), hint
    code, out, err = syncd(capsys, "mirror", "verify", url, f"emu:{empty}")
    assert code == 0, out + err
    assert out.strip().splitlines()[-1].endswith(": equal"), out
    assert objects(s3_env, bucket) == held, "reading a backup changes nothing in the bucket"


def test_two_backups_share_their_unchanged_blobs(env: Path, emulator: ThreadEmulator, bucket: str, s3_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = emulator.org_ids[0]
    first = f"s3://{bucket}/team/monday.db"
    code, out, err = syncd(capsys, "backup", f"emu:{source}", "--out", first, "--with-files", "--json")
    assert code == 0, out + err
    sent = check_output("backup", out)["stored"]["blobs_sent"]
    before = objects(s3_env, bucket, "team/blobs/")

    code, out, err = syncd(capsys, "backup", f"emu:{source}", "--out", f"s3://{bucket}/team/tuesday.db", "--with-files", "--json")
    assert code == 0, out + err
    stored = check_output("backup", out)["stored"]
    assert (stored["blobs_sent"], stored["blobs_present"]) == (0, sent), stored
    assert objects(s3_env, bucket, "team/blobs/") == before, "each blob is stored once"
    for name in ("monday", "tuesday"):
        code, out, err = syncd(capsys, "check", f"s3://{bucket}/team/{name}.db")
        assert code == 0, out + err

    code, _, err = syncd(capsys, "backup", f"emu:{source}", "--out", first)
    assert code == 2 and f"{first} exists: choose another --out, or --overwrite to replace it" in err, err


def test_check_says_what_is_wrong_with_a_backup_in_s3(env: Path, emulator: ThreadEmulator, bucket: str, s3_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    import boto3

    url = f"s3://{bucket}/b/acme.db"
    code, out, err = syncd(capsys, "backup", f"emu:{emulator.org_ids[0]}", "--out", url, "--with-files")
    assert code == 0, out + err
    client = boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1")
    blobs = sorted(key for key in objects(s3_env, bucket, "b/blobs/"))
    client.delete_object(Bucket=bucket, Key=blobs[0])
    client.put_object(Bucket=bucket, Key=blobs[1], Body=b"changed in the bucket")

    code, out, err = syncd(capsys, "check", url, "--json")
    assert code == 1, out + err
    report = check_output("check", out)
    kinds = {problem["kind"] for problem in report["problems"]}
    assert kinds == {"blob-missing", "blob-hash"}, report["problems"]
    assert all(problem["subject"].startswith(("file ", f"s3://{bucket}/b/blobs/")) for problem in report["problems"]), report["problems"]
    assert report["file"] == url and report["blobs"]["folder"] == f"s3://{bucket}/b/blobs/"

    code, _, err = syncd(capsys, "check", f"s3://{bucket}/b/nothing.db")
    assert code == 2 and f"s3://{bucket}/b/nothing.db: no such backup" in err, err
    code, _, err = syncd(capsys, "check", f"s3://{bucket}/b/")
    assert code == 2 and "a backup in object storage is an object named NAME.db" in err, err
    assert json.loads(client.get_object(Bucket=bucket, Key="b/acme.db")["Metadata"].get("syncd-objects", "null")) > 0
