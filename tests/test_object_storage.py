"""Backups in object storage (issue 43, part 1), against a real S3 on loopback (moto's server,
`tests/s3_support.py`) and the emulator: the commands a user types, in process.

A backup with its files goes to `s3://`, `syncd check` reads it there, `syncd export` writes it
out, `syncd restore` puts it into an empty organization and `syncd mirror verify` finds them
equal; a second backup into the same prefix sends none of the blobs it shares with the first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncd.config import load_settings
from tests.s3_support import FaultProxy, bucket, fault_proxy, moto_server, objects, s3_env  # noqa: F401  (fixtures)
from tests.schema_support import check_output
from tests.test_plan_review import run as syncd
from tests.thread_emulator import ThreadEmulator, thread_emulator, use_tenants

SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=2,files=2"


@pytest.fixture
def emulator() -> Iterator[ThreadEmulator]:
    with thread_emulator(SPEC, seed=43) as running:
        yield running


@pytest.fixture
def env(emulator: ThreadEmulator, s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory and one tenant, `emu`, on the emulator; the AWS variables on moto."""
    monkeypatch.chdir(tmp_path)
    use_tenants(monkeypatch, emulator.url, tmp_path / "state", "EMU")
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
    scoped = f"s3://{bucket}/team/écrits.db"  # a scope's patterns and a key need not be ASCII
    code, out, err = syncd(capsys, "backup", f"emu:{source}", "--out", scoped, "--exclude", "Brouillons é*")
    assert code == 0, out + err
    code, out, err = syncd(capsys, "backup", f"emu:{source}", "--out", scoped, "--exclude", "Brouillons é*", "--overwrite")
    assert code == 0, out + err


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


# ----- the bucket's calls, and the settings ------------------------------------------------------------


async def test_a_large_file_goes_up_in_parts_and_a_lost_completion_is_no_failure(
    bucket: str, moto_server: str, fault_proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from syncd.storage import bucket as bucket_module
    from syncd.storage.bucket import open_bucket

    monkeypatch.setattr(bucket_module, "PART_SIZE", 5 * 1024 * 1024)  # S3's smallest part: three parts for 11 MiB
    data = os.urandom(11 * 1024 * 1024)
    path = tmp_path / "big.db"
    path.write_bytes(data)
    config = tmp_path / "syncd.toml"
    config.write_text(
        f'[storage.big]\nbucket = "{bucket}"\nendpoint_url = "{fault_proxy.url}"\nregion = "us-east-1"\naddressing_style = "path"\n'
        'access_key_id_env = "BIG_KEY"\nsecret_access_key_env = "BIG_SECRET"\n'
    )
    settings = load_settings(config, {"BIG_KEY": "k", "BIG_SECRET": "s"})
    fault_proxy.add("POST", rf"/{bucket}/big\.db$", "drop")  # the completion is done, its answer lost: botocore asks again
    async with open_bucket(settings, bucket) as opened:
        assert await opened.put_file("big.db", path, {"syncd-sha256": "x"}) == len(data)
        assert (await opened.head("big.db")).size == len(data)  # type: ignore[union-attr]
    assert [path for method, path in fault_proxy.seen if method == "PUT"] == [f"/{bucket}/big.db"] * 3
    assert [path for method, path in fault_proxy.seen if method == "POST"].count(f"/{bucket}/big.db") == 3  # create, complete, complete again
    assert objects(moto_server, bucket) == {"big.db": data}


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('[storage.a]\nbucket = "one-bucket"\n[storage.b]\nbucket = "one-bucket"\n', "storage.b.bucket: bucket 'one-bucket' is also storage.a's: one entry a bucket"),
        ('[storage.a]\nbucket = "one-bucket"\naccess_key_id_env = "K"\n', "give secret_access_key_env with access_key_id_env"),
        ('[storage.a]\nbucket = "one-bucket"\nprofile = "p"\naccess_key_id_env = "K"\nsecret_access_key_env = "S"\n', "either profile or access_key_id_env"),
        ('[storage.a]\nbucket = "One_Bucket"\n', "is no bucket name"),
        ('[storage.a]\nbucket = "one-bucket"\nendpoint_url = "https://key:secret@r2.example"\n', "must not contain credentials"),
        ('[[jobs]]\nname = "n"\nkind = "backup"\nsource = "src"\noutput = "s3://x/"\n', "'s3://x/': 'x' is no bucket name"),
        ('[[jobs]]\nname = "n"\nkind = "backup"\nsource = "src"\noutput = "s3://one-bucket/a"\n[[jobs]]\nname = "m"\nkind = "backup"\nsource = "src"\noutput = "s3://one-bucket/a/"\n',
         "jobs[1].output: also the output of job 'n': each backup job keeps its own place"),
        ('[[jobs]]\nname = "n"\nkind = "sync"\nsource = "src"\noutput = "s3://one-bucket/a/"\n', "only allowed on backup jobs"),
    ],
)
def test_storage_settings_say_what_is_wrong(table: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text('[tenants.src]\nbase_url = "http://127.0.0.1:9"\ntoken = "t"\n' + table)
    code, out, err = syncd(capsys, "config", "check", "--config", str(config))
    assert code == 2 and expected in err, err


def test_a_key_variable_that_is_not_set_and_an_unknown_profile_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MISSING_KEY", raising=False)
    config = tmp_path / "syncd.toml"
    config.write_text('[storage.a]\nbucket = "one-bucket"\naccess_key_id_env = "MISSING_KEY"\nsecret_access_key_env = "MISSING_SECRET"\n'
                      '[storage.b]\nbucket = "two-bucket"\nprofile = "nobody"\n')  # fmt: skip
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    code, _, err = syncd(capsys, "check", "s3://one-bucket/a.db", "--config", str(config))
    assert (code, err.strip()) == (2, "syncd: error: storage.a.access_key_id_env: environment variable MISSING_KEY is not set or empty"), err
    code, _, err = syncd(capsys, "check", "s3://two-bucket/a.db", "--config", str(config))
    assert code == 2 and err.count("\n") == 1 and "storage.b: The config profile (nobody) could not be found" in err, err


async def test_what_no_backup_names_is_collected_once_abandoned_and_what_one_names_stays(
    env: Path, emulator: ThreadEmulator, bucket: str, s3_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    import anyio
    import boto3

    from syncd.config import load_settings as settings_now
    from syncd.storage.bucket import open_bucket
    from syncd.storage.pruning import ABANDONED_AFTER, collect_garbage

    for name in ("kept", "gone"):
        code, out, err = await anyio.to_thread.run_sync(
            syncd, capsys, "backup", f"emu:{emulator.org_ids[0]}", "--out", f"s3://{bucket}/p/{name}.db", "--with-files"
        )
        assert code == 0, out + err
    client = boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1")
    client.delete_object(Bucket=bucket, Key="p/gone.db")  # retention's part: the backup object
    orphan_blob, orphan_manifest = "p/blobs/00/" + "0" * 62, "p/manifests/" + "1" * 64 + ".json"
    client.put_object(Bucket=bucket, Key=orphan_blob, Body=b"left by an upload that never finished")
    client.put_object(Bucket=bucket, Key=orphan_manifest, Body=json.dumps({"s/f": {"sha256": "2" * 64, "size": 1}}).encode())
    before = objects(s3_env, bucket, "p/")

    async with open_bucket(settings_now(None), bucket) as opened:
        young = await collect_garbage(opened, "p/", time.time())
        assert (young.manifests, young.blobs) == ([], []), "nothing a day younger than the pruning goes"
        old = await collect_garbage(opened, "p/", time.time() + ABANDONED_AFTER + 60)
    assert (old.manifests, old.blobs) == ([orphan_manifest], [orphan_blob])
    after = objects(s3_env, bucket, "p/")
    assert sorted(after) == sorted(key for key in before if key not in (orphan_blob, orphan_manifest))
    code, out, err = await anyio.to_thread.run_sync(syncd, capsys, "check", f"s3://{bucket}/p/kept.db")
    assert code == 0, out + err


def test_a_failed_upload_is_one_line_and_leaves_no_backup(
    env: Path, emulator: ThreadEmulator, bucket: str, s3_env: str, fault_proxy: FaultProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    config = env / "syncd.toml"
    config.write_text(f'[storage.flaky]\nbucket = "{bucket}"\nendpoint_url = "{fault_proxy.url}"\naddressing_style = "path"\nmax_attempts = 2\n')
    fault_proxy.add("PUT", rf"/{bucket}/b/acme\.db$", "503", times=2)
    url = f"s3://{bucket}/b/acme.db"
    code, out, err = syncd(capsys, "backup", f"emu:{emulator.org_ids[0]}", "--out", url, "--with-files", "--config", str(config))
    assert code == 1, out + err
    assert err.strip() == (
        f"syncd: error: uploading {url} failed: the service answered HTTP 503 SlowDown (Please reduce your request rate.), 2 attempts in all"
    ), err
    assert "b/acme.db" not in objects(s3_env, bucket), "no backup object after a failed upload"
    code, _, err = syncd(capsys, "check", url, "--config", str(config))
    assert code == 2 and "no such backup" in err, err
