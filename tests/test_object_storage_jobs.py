"""A backup job whose output is in object storage (issue 43, parts 1 and 3), against moto's
server behind a proxy that injects faults (`tests/s3_support.py`).

Retention keeps what the policy says whatever the network does: a 5xx on a blob, an answer lost
after the backup object was written, a 5xx on a delete are retried (one object a key, never
two); an upload that fails after its retries fails the run with the reason in words, writes no
backup object and prunes nothing. Then `syncd serve` itself: the run's page, its JSON and the
metrics say where each backup went (bucket and key); a failed upload says why in the same words
everywhere; a daemon killed in the middle of an upload leaves no object `check` takes for a
backup, and the next run counts only whole backups.
"""

from __future__ import annotations

import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from syncd.cli import main
from syncd.config import Settings, load_settings
from syncd.daemon.jobs import execute_job
from syncd.daemon.metrics import DaemonMetrics
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.storage import ObjectStoreError
from tests.daemon_support import DaemonProcess, daemon_config, metric_samples
from tests.test_daemon_outcomes import _page
from tests.s3_support import REGION, FaultProxy, bucket, clear_aws, fault_proxy, moto_server, objects, wait_held  # noqa: F401  (fixtures)
from tests.thread_emulator import TOKEN, ThreadEmulator, thread_emulator

SPEC = "orgs=1,collections=1,spaces=2,pages=1,files=2"
CONTROL = "control-secret-1234"
KEYS = {"OFFSITE_KEY": "offsite-access-key", "OFFSITE_SECRET": "offsite-secret-key"}


def _storage(bucket_name: str, endpoint: str, attempts: int = 3) -> str:
    """A `[storage.offsite]` table for `bucket_name` at `endpoint`, its keys in variables."""
    return (
        f'[storage.offsite]\nbucket = "{bucket_name}"\nendpoint_url = "{endpoint}"\nregion = "{REGION}"\naddressing_style = "path"\n'
        f'access_key_id_env = "OFFSITE_KEY"\nsecret_access_key_env = "OFFSITE_SECRET"\nmax_attempts = {attempts}\n'
    )


@pytest.fixture
def aws_nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS setting of this machine's: what the storage table names is all there is."""
    clear_aws(monkeypatch, tmp_path, KEYS)


@pytest.fixture
async def tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningEmulator]:
    store = Store(seed=43)
    generate(store, parse_spec(SPEC), seed=43, all_token=TOKEN)
    async with serve_emulator(store) as running:
        monkeypatch.chdir(tmp_path)
        yield running


def _settings(tmp_path: Path, emulator_url: str, bucket_name: str, proxy: FaultProxy) -> Settings:
    config = tmp_path / "syncd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[tenants.src]\nbase_url = "{emulator_url}"\ntoken = "{TOKEN}"\n'
        + _storage(bucket_name, proxy.url)
        + f'[[jobs]]\nname = "nightly"\nkind = "backup"\nsource = "src"\nwith_files = true\nkeep_last = 2\noutput = "s3://{bucket_name}/nightly/"\n'
    )
    return load_settings(config)


def _backups(endpoint: str, bucket_name: str) -> list[str]:
    return sorted(key for key in objects(endpoint, bucket_name, "nightly/") if key.endswith(".db"))


async def test_retention_keeps_what_the_policy_says_under_faults(
    tenant: RunningEmulator, aws_nowhere: None, tmp_path: Path, bucket: str, moto_server: str, fault_proxy: FaultProxy
) -> None:
    settings = _settings(tmp_path, tenant.url, bucket, fault_proxy)
    job, metrics = settings.jobs[0], DaemonMetrics()
    made: list[str] = []

    async def run() -> dict:
        done = await execute_job(settings, job, metrics)
        assert done.outcome == "succeeded", done.summary
        made.append(done.summary["stored"]["key"])
        return done.summary

    fault_proxy.add("PUT", rf"/{bucket}/nightly/blobs/", "503")  # a blob's first PUT: SlowDown, retried
    first = await run()
    assert first["stored"]["blobs_sent"] > 0 and first["stored"]["blobs_present"] == 0
    assert first["file"] == f"s3://{bucket}/{made[0]}" and first["stored"]["bucket"] == bucket

    fault_proxy.add("PUT", rf"/{bucket}/nightly/nightly-[^/]*\.db$", "drop")  # written, its answer lost: retried
    second = await run()
    assert [path for method, path in fault_proxy.seen if method == "PUT" and path.endswith(made[1])] == [f"/{bucket}/{made[1]}"] * 2
    assert second["stored"]["blobs_sent"] == 0 and second["stored"]["blobs_present"] == first["stored"]["blobs_sent"]
    assert _backups(moto_server, bucket) == sorted(made), "one object a backup, the lost answer's retry included"

    fault_proxy.add("DELETE", rf"/{bucket}/nightly/nightly-[^/]*\.db$", "503")
    third = await run()
    assert third["pruned"] == [made[0].rpartition("/")[2]] and list(third["kept"]) == [made[2].rpartition("/")[2], made[1].rpartition("/")[2]]
    assert _backups(moto_server, bucket) == sorted(made[1:])

    fault_proxy.add("PUT", rf"/{bucket}/nightly/nightly-[^/]*\.db$", "503", times=3)  # every attempt: the upload fails
    with pytest.raises(ObjectStoreError) as failed:
        await execute_job(settings, job, metrics)
    words = str(failed.value)
    assert re.fullmatch(
        rf"uploading s3://{bucket}/nightly/nightly-\S+Z\.db failed: the service answered HTTP 503 SlowDown \(Please reduce your request rate\.\), 3 attempts in all",
        words,
    ), words
    assert _backups(moto_server, bucket) == sorted(made[1:]), "no backup object of the failed run, nothing pruned"

    fourth = await run()
    assert fourth["pruned"] == [made[1].rpartition("/")[2]]
    assert _backups(moto_server, bucket) == sorted(made[2:])
    blobs = [key for key in objects(moto_server, bucket, "nightly/blobs/")]
    assert len(blobs) == first["stored"]["blobs_sent"], "the blobs the kept backups share are stored once, and kept"

    for key in made[2:]:
        code = await anyio.to_thread.run_sync(main, ["check", f"s3://{bucket}/{key}", "--config", str(settings.config_file)])
        assert code == 0


# ----- the daemon ---------------------------------------------------------------------------------


@pytest.fixture
def source() -> ThreadEmulator:
    with thread_emulator(SPEC, seed=44) as running:
        yield running


def test_the_daemon_shows_where_backups_went_and_why_an_upload_failed_and_survives_a_kill(
    source: ThreadEmulator, aws_nowhere: None, tmp_path: Path, bucket: str, moto_server: str, fault_proxy: FaultProxy
) -> None:
    config = daemon_config(
        tmp_path, source.url, TOKEN, retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "1s"},
        daemon={"port": 0, "token": CONTROL, "shutdown_deadline": "5s", "failure_backoff": "1h"},
        jobs=[{"name": "nightly", "kind": "backup", "source": "src", "with_files": True, "keep_last": 1, "output": f"s3://{bucket}/nightly/"}],
    )  # fmt: skip
    config.write_text(config.read_text() + _storage(bucket, fault_proxy.url, attempts=2))
    state = tmp_path / "state"
    daemon = DaemonProcess.start(config, state, token=CONTROL)
    try:
        status, answer = daemon.post("/jobs/nightly/run")
        assert status == 202, answer
        run = daemon.wait_run(answer["run"]["id"])
        assert run["outcome"] == "succeeded", run
        key = run["summary"]["stored"]["key"]
        url = f"s3://{bucket}/{key}"
        assert run["summary"]["file"] == url and _backups(moto_server, bucket) == [key]
        shown = _page(daemon, f"/ui/runs/{run['id']}")
        assert f'<code id="run-bucket">{bucket}</code>' in shown and f'<code id="run-key">{key}</code>' in shown, shown[-3000:]
        samples = metric_samples(daemon.metrics(), "syncd_job_last_backup_timestamp_seconds", job="nightly", location=url)
        assert len(samples) == 1 and samples[0] > 0

        # -- an upload that fails: the run fails, the same words in its error, the log, the page, the metrics
        fault_proxy.add("PUT", rf"/{bucket}/nightly/nightly-[^/]*\.db$", "503", times=2)
        status, answer = daemon.post("/jobs/nightly/run")
        failed = daemon.wait_run(answer["run"]["id"])
        assert failed["outcome"] == "failed", failed
        words = failed["error"]
        assert re.fullmatch(rf"uploading s3://{bucket}/nightly/nightly-\S+Z\.db failed: the service answered HTTP 503 SlowDown .*, 2 attempts in all", words), words
        assert words in daemon.log()
        assert words in _page(daemon, f"/ui/runs/{failed['id']}")
        reasons = [line for line in daemon.metrics().splitlines() if line.startswith("syncd_job_last_outcome{") and 'outcome="failed"' in line]
        assert len(reasons) == 1 and f'reason="{words[:199]}' in reasons[0], reasons
        assert _backups(moto_server, bucket) == [key], (daemon.job("nightly")["runs"], fault_proxy.seen)

        # -- killed in the middle of an upload: no object that check takes for a backup
        fault_proxy.add("PUT", rf"/{bucket}/nightly/nightly-[^/]*\.db$", "hold")
        status, answer = daemon.post("/jobs/nightly/run")
        wait_held(fault_proxy)
        daemon.stop(signum=signal.SIGKILL)
        held = next(path for method, path in reversed(fault_proxy.seen) if method == "PUT" and path.endswith(".db"))
        fault_proxy.release()
    finally:
        daemon.stop()
    assert _backups(moto_server, bucket) == [key]
    left = objects(moto_server, bucket, "nightly/")
    assert any(k.startswith("nightly/manifests/") for k in left) and not any(k.endswith(".db") and k != key for k in left)
    killed = "s3://" + held.lstrip("/")
    code, out = _check(killed, config)
    assert code == 2 and f"{killed}: no such backup" in out, out
    claim = next(k for k in left if k.startswith("nightly/manifests/"))  # what the killed upload left: no backup
    code, out = _check(f"s3://{bucket}/{claim}", config)
    assert code == 2 and "a backup in object storage is an object named NAME.db" in out, out

    daemon = DaemonProcess.start(config, state, token=CONTROL)
    try:
        status, answer = daemon.post("/jobs/nightly/run")
        again = daemon.wait_run(answer["run"]["id"])
        assert again["outcome"] == "succeeded", again
        assert again["summary"]["pruned"] == [key.rpartition("/")[2]], again["summary"]
    finally:
        daemon.stop()
    assert _backups(moto_server, bucket) == [again["summary"]["stored"]["key"]]
    code, out = _check(again["summary"]["file"], config)
    assert code == 0, out


def _check(url: str, config: Path) -> tuple[int, str]:
    from tests import cli_zygote

    import os

    done = cli_zygote.run(["check", url, "--config", str(config)], cwd=config.parent, timeout=120, env=dict(os.environ), text=True)
    return done.returncode, done.stdout + done.stderr
