"""Configuration: TOML + environment, token sources, one-line errors, `syncd config check`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncd.cli import main
from syncd.config import (
    DEFAULT_CONFIG_PATH,
    Settings,
    TargetRef,
    format_duration,
    load_settings,
    parse_duration,
    parse_target_ref,
    validate_cron,
)
from syncd.errors import ConfigError
from syncd.logging import MASK, redact_text

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "config" / "syncd.example.toml"

SRC = """
[tenants.src]
base_url = "http://127.0.0.1:8787/"
token = "src-token-0123456789"
"""


@pytest.fixture(autouse=True)
def _no_syncd_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The developer's own SYNCD_* variables must not leak into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("SYNCD_"):
            monkeypatch.delenv(name)
    yield


def write(tmp_path: Path, text: str, name: str = "syncd.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, env or {})
    message = str(info.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- loading


def test_defaults_without_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no config/syncd.toml here
    settings = load_settings(None, {})
    assert settings.config_file is None
    assert settings.tenants == {} and settings.jobs == []
    assert settings.state_dir == Path("state")
    assert settings.concurrency == 256
    assert settings.request_timeout == 30
    assert (settings.retry.max_attempts, settings.retry.max_wait) == (8, 60)
    assert (settings.log_format, settings.log_level) == ("console", "info")
    assert (settings.daemon.host, settings.daemon.port, settings.daemon.token) == ("127.0.0.1", 8790, None)
    assert settings.daemon.shutdown_deadline == 30


def test_default_path_is_used_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / DEFAULT_CONFIG_PATH).parent.mkdir(parents=True)
    (tmp_path / DEFAULT_CONFIG_PATH).write_text(SRC)
    settings = load_settings(None, {})
    assert settings.config_file == DEFAULT_CONFIG_PATH
    assert settings.tenant("src").base_url == "http://127.0.0.1:8787"  # slash stripped


def test_env_wins_over_file_per_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        concurrency = 2
        log_level = "debug"
        [tenants.SRC]
        base_url = "http://file.example"
        token = "file-token-0123"
        concurrency = 3
        [retry]
        max_attempts = 3
        """,
    )
    env = {
        "SYNCD_CONCURRENCY": "4",
        "SYNCD_TENANTS__SRC__BASE_URL": "http://127.0.0.1:8787",
        "syncd_tenants__dst__base_url": "https://dst.example/api/",
        "SYNCD_TENANTS__DST__TOKEN": "dst-token-0123",
        "SYNCD_RETRY__MAX_WAIT": "2m",
        "UNRELATED": "x",
    }
    settings = load_settings(path, env)
    src = settings.tenant("SRC")
    assert src.name == "src"
    assert src.base_url == "http://127.0.0.1:8787"  # env
    assert src.concurrency == 3  # file, same tenant
    assert src.resolved_token().get_secret_value() == "file-token-0123"
    assert settings.tenant("dst").base_url == "https://dst.example/api"
    assert settings.concurrency == 4
    assert settings.log_level == "debug"
    assert (settings.retry.max_attempts, settings.retry.max_wait) == (3, 120)


def test_env_token_replaces_the_files_token_source(tmp_path: Path) -> None:
    path = write(tmp_path, '[tenants.src]\nbase_url = "http://x"\ntoken_env = "SRC_TOKEN"\n')
    settings = load_settings(path, {"SYNCD_TENANTS__SRC__TOKEN": "from-env-123456"})
    tenant = settings.tenant("src")
    assert tenant.token_env is None
    assert tenant.token_source == "env:SYNCD_TENANTS__SRC__TOKEN"
    assert tenant.resolved_token().get_secret_value() == "from-env-123456"


def test_token_sources(tmp_path: Path) -> None:
    token_file = tmp_path / "dst.token"
    token_file.write_text("  file-token-abcdef\n")
    path = write(
        tmp_path,
        f"""
        [tenants.a]
        base_url = "http://a"
        token = "inline-token-abcdef"
        [tenants.b]
        base_url = "http://b"
        token_env = "B_TOKEN"
        [tenants.c]
        base_url = "https://c"
        token_file = "{token_file}"
        """,
    )
    settings = load_settings(path, {"B_TOKEN": "env-token-abcdef"})
    assert [settings.tenant(n).token_source for n in "abc"] == ["token", "env:B_TOKEN", f"file:{token_file}"]
    assert settings.tenant("a").resolved_token().get_secret_value() == "inline-token-abcdef"
    assert settings.tenant("b").resolved_token().get_secret_value() == "env-token-abcdef"
    assert settings.tenant("c").resolved_token().get_secret_value() == "file-token-abcdef"
    # Every token syncd learned is now masked in logs, wherever it appears.
    for token in ("inline-token-abcdef", "env-token-abcdef", "file-token-abcdef"):
        assert redact_text(f"GET http://x/?q={token} failed") == f"GET http://x/?q={MASK} failed"
    # SecretStr keeps them out of reprs.
    assert "inline-token-abcdef" not in repr(settings)


def test_token_resolution_errors_are_clear(tmp_path: Path) -> None:
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    path = write(
        tmp_path,
        f"""
        [tenants.a]
        base_url = "http://a"
        token_env = "MISSING_TOKEN"
        [tenants.b]
        base_url = "http://b"
        token_file = "{tmp_path / 'nope.token'}"
        [tenants.c]
        base_url = "http://c"
        token_file = "{empty}"
        """,
    )
    settings = load_settings(path, {})  # lazy: loading does not need the secrets
    with pytest.raises(ConfigError, match=r"tenants\.a\.token_env: environment variable MISSING_TOKEN is not set"):
        settings.tenant("a").resolved_token()
    with pytest.raises(ConfigError, match=r"tenants\.b\.token_file: .*nope\.token does not exist"):
        settings.tenant("b").resolved_token()
    with pytest.raises(ConfigError, match=r"tenants\.c\.token_file: .*empty\.token is empty"):
        settings.tenant("c").resolved_token()


BAD_INPUTS = [
    pytest.param(
        '[tenants.src]\nbase_url = "ftp://x"\ntoken = "t0123"\n',
        "tenants.src.base_url: must be an http(s) URL, got 'ftp://x'",
        id="bad-url",
    ),
    pytest.param(
        '[tenants.src]\nbase_url = "https://user:hunter22@x"\ntoken = "t0123"\n',
        "tenants.src.base_url: must not contain credentials",
        id="credentials-in-url",
    ),
    pytest.param(
        '[tenants.src]\nbase_url = "http://x"\ntoken = "t0123"\ntoken_env = "T"\n',
        "tenants.src: give exactly one of token, token_env, token_file (got token, token_env)",
        id="two-token-sources",
    ),
    pytest.param(
        '[tenants.src]\nbase_url = "http://x"\n',
        "tenants.src: give exactly one of token, token_env, token_file (none given)",
        id="no-token",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "copy"\nsource = "src"\n',
        "jobs[0].kind: must be 'sync', 'backup', 'mirror' or 'export', got 'copy'",
        id="unknown-job-kind",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "mirror"\nsource = "src:o1"\n',
        "jobs[0].target: required for a mirror job",
        id="mirror-without-target",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\ntarget = "src:o2"\n',
        "jobs[0].target: only allowed on mirror jobs, not on a sync job",
        id="target-on-sync-job",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\nretention = 3\n',
        "jobs[0].retention: only allowed on backup jobs",
        id="retention-on-sync-job",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "backup"\nsource = "src"\nfull_every = "1d"\n',
        "jobs[0].full_every: not allowed on backup jobs",
        id="full-every-on-backup-job",
    ),
    pytest.param(
        SRC
        + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\nschedule = { every = "1h" }\n'
        + '[[jobs]]\nname = "b"\nkind = "sync"\nsource = "src"\nschedule = { cron = "*/5 25 * * *" }\n',
        "jobs[1].schedule.cron: cron expression '*/5 25 * * *': bad hour field '25' (0-23;",
        id="bad-cron",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\nschedule = { cron = "* * * *" }\n',
        "jobs[0].schedule.cron: cron expression must have 5 fields",
        id="cron-field-count",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\nschedule = { every = "15 minutes" }\n',
        "jobs[0].schedule.every: invalid duration '15 minutes'",
        id="bad-duration",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\nschedule = { every = "1h", cron = "0 * * * *" }\n',
        "jobs[0].schedule: give exactly one of every, cron (got both)",
        id="every-and-cron",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "backup"\nsource = "dst:org1"\n',
        "jobs[0].source: unknown tenant 'dst' (configured: src)",
        id="unknown-tenant",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src:"\n',
        "jobs[0].source: organization id is empty in 'src:'",
        id="empty-org",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\n[[jobs]]\nname = "a"\nkind = "backup"\nsource = "src"\n',
        "jobs[1].name: duplicate job name 'a' (also jobs[0])",
        id="duplicate-job-names",
    ),
    pytest.param(
        SRC + '[[jobs]]\nname = "Nightly Backup"\nkind = "backup"\nsource = "src"\n',
        "jobs[0].name: must match ^[a-z0-9][a-z0-9_-]*$",
        id="bad-job-name",
    ),
    pytest.param(
        SRC + '[daemon]\nhost = "0.0.0.0"\n',
        "daemon.host: '0.0.0.0' is not a loopback address: set daemon.token",
        id="non-loopback-daemon-without-token",
    ),
    pytest.param(
        'concurrency = 0\n' + SRC,
        "concurrency: must be greater than or equal to 1, got 0",
        id="zero-concurrency",
    ),
    pytest.param(
        'log_format = "xml"\n' + SRC,
        "log_format: must be 'console' or 'json', got 'xml'",
        id="bad-log-format",
    ),
    pytest.param(
        "colour = true\n" + SRC,
        "colour: unknown key",
        id="typo-top-level",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_INPUTS)
def test_errors_name_the_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    message = load_error(path)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message
    assert "hunter22" not in message


def test_error_from_env_names_the_variable(tmp_path: Path) -> None:
    path = write(tmp_path, SRC)
    message = load_error(path, {"SYNCD_TENANTS__SRC__BASE_URL": "localhost:8787"})
    assert message == (
        "SYNCD_TENANTS__SRC__BASE_URL: tenants.src.base_url: must be an http(s) URL, got 'localhost:8787'"
    )


def test_daemon_off_loopback_with_token_is_fine(tmp_path: Path) -> None:
    path = write(tmp_path, SRC + '[daemon]\nhost = "0.0.0.0"\ntoken = "daemon-token-123"\n')
    settings = load_settings(path, {})
    assert settings.daemon.token is not None
    assert redact_text("daemon-token-123") == MASK


def test_bad_token_value_is_never_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, '[tenants.src]\nbase_url = "http://x"\ntoken = 987654321\n')
    message = load_error(path)
    assert "tenants.src.token" in message
    assert "987654321" not in message


def test_toml_syntax_error_has_line_number(tmp_path: Path) -> None:
    path = write(tmp_path, '[tenants.src]\nbase_url = "http://x"\ntoken = \n')
    message = load_error(path)
    assert message.startswith(f"{path}: invalid TOML: ")
    assert "line 3" in message


def test_missing_explicit_file(tmp_path: Path) -> None:
    assert load_error(tmp_path / "nope.toml") == f"{tmp_path / 'nope.toml'}: config file does not exist"


def test_unreadable_file(tmp_path: Path) -> None:
    assert "is a directory" in load_error(tmp_path)


def test_tenant_names_clash_case_insensitively(tmp_path: Path) -> None:
    path = write(tmp_path, SRC + '[tenants.SRC]\nbase_url = "http://y"\ntoken = "t0123"\n')
    assert "case-insensitive" in load_error(path)


def test_mirror_job_defaults_and_example_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        SRC
        + '[tenants.dst]\nbase_url = "http://d"\ntoken = "t0123"\n'
        + '[[jobs]]\nname = "m"\nkind = "mirror"\nsource = "SRC:o1"\ntarget = "dst:o2"\n'
        + 'schedule = { every = "1h30m", jitter = "1m" }\n',
    )
    job = load_settings(path, {}).job("m")
    assert (job.source, job.target) == (TargetRef("src", "o1"), TargetRef("dst", "o2"))
    assert (job.mode, job.max_delete) == ("copy", 100)
    assert job.schedule is not None and (job.schedule.every, job.schedule.jitter) == (5400, 60)


def test_example_file_loads() -> None:
    settings = load_settings(EXAMPLE, {})
    assert set(settings.tenants) == {"src", "dst"}
    assert settings.tenant("dst").token_source == "env:DST_API_TOKEN"
    assert [(j.name, j.kind) for j in settings.jobs] == [
        ("src-sync", "sync"),
        ("src-nightly-backup", "backup"),
        ("src-to-dst", "mirror"),
    ]
    assert settings.job("src-to-dst").target == TargetRef("dst", "org-9")


# --------------------------------------------------------------------------- helpers


def test_parse_target_ref() -> None:
    assert parse_target_ref("src") == TargetRef("src", None)
    assert parse_target_ref(" SRC:Org-AbC ") == TargetRef("src", "Org-AbC")
    assert str(TargetRef("src", "o1")) == "src:o1"
    for bad, expected in [
        ("", "empty string"),
        (":org", "tenant name is empty"),
        ("src:", "organization id is empty"),
        ("a:b:c", "too many ':'"),
    ]:
        with pytest.raises(ConfigError, match=expected):
            parse_target_ref(bad)


def test_unknown_tenant_lists_configured(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, SRC + '[tenants.b]\nbase_url = "http://b"\ntoken = "t0123"\n'), {})
    with pytest.raises(ConfigError, match=r"^unknown tenant 'zzz' \(configured: b, src\)$"):
        settings.tenant("zzz")
    with pytest.raises(ConfigError, match="unknown tenant 'zzz'"):
        parse_target_ref("zzz:o1", settings)
    assert parse_target_ref("b:o1", settings) == TargetRef("b", "o1")
    with pytest.raises(ConfigError, match="no tenants configured"):
        Settings.model_validate({}).tenant("x")


def test_durations() -> None:
    assert [parse_duration(v) for v in ("30s", "15m", "2h", "1d", "1h30m", 45, "2.5")] == [
        30,
        900,
        7200,
        86400,
        5400,
        45,
        2.5,
    ]
    for bad in ("", "15x", "m", "1m1h", "-5"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert [format_duration(s) for s in (0, 30, 5400, 90061, 0.5)] == ["0s", "30s", "1h30m", "1d1h1m1s", "0.5s"]


def test_cron_syntax() -> None:
    for good in ("*/5 * * * *", "0 2 * * 1-5", "0,30 8-18/2 1 1,6,12 0,7", "  59 23 31 12 7 "):
        validate_cron(good)
    for bad in ("* * * *", "60 * * * *", "* * 0 * *", "*/0 * * * *", "5-1 * * * *", "a * * * *", "* * * 13 *"):
        with pytest.raises(ValueError):
            validate_cron(bad)


# --------------------------------------------------------------------------- CLI


def test_cli_check_prints_masked_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    token_file = tmp_path / "b.token"
    token_file.write_text("file-secret-zyxwvu")
    path = write(
        tmp_path,
        SRC
        + f'[tenants.b]\nbase_url = "http://b"\ntoken_file = "{token_file}"\n'
        + '[tenants.c]\nbase_url = "http://c"\ntoken_env = "C_TOKEN"\n'
        + '[[jobs]]\nname = "s"\nkind = "sync"\nsource = "src"\nschedule = { every = "15m" }\n',
    )
    monkeypatch.setenv("C_TOKEN", "env-secret-qwerty")
    monkeypatch.setenv("COLUMNS", "200")  # rich folds long paths at the default 80
    monkeypatch.setenv("SYNCD_DAEMON__TOKEN", "daemon-secret-asdf")
    secrets = ("src-token-0123456789", "file-secret-zyxwvu", "env-secret-qwerty", "daemon-secret-asdf")

    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    for secret in secrets:
        assert secret not in out
    assert MASK in out
    assert "env:C_TOKEN" in out and f"file:{token_file}" in out
    assert "configuration OK" in out

    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    for secret in secrets:
        assert secret not in out
    data = json.loads(out)
    assert data["config_file"] == str(path)
    assert data["environment"] == ["SYNCD_DAEMON__TOKEN"]
    assert {name: t["token_source"] for name, t in data["tenants"].items()} == {
        "src": "token",
        "b": f"file:{token_file}",
        "c": "env:C_TOKEN",
    }
    assert all(t["token"] == MASK for t in data["tenants"].values())
    assert data["daemon"]["token"] == MASK
    assert data["jobs"][0]["schedule"]["every"] == 900


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[tenants.src]\nbase_url = "ftp://x"\ntoken = "t0123"\n', "tenants.src.base_url: must be an http(s) URL"),
        ("[tenants.src\n", "invalid TOML"),
        ('[tenants.src]\nbase_url = "http://x"\ntoken_env = "UNSET_TOKEN_VAR_XYZ"\n', "UNSET_TOKEN_VAR_XYZ is not set"),
    ],
)
def test_cli_check_invalid_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = write(tmp_path, text)
    assert main(["config", "check", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("syncd: error: ")
    assert expected in lines[0]
    assert "Traceback" not in captured.err


def test_cli_check_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "--config", str(tmp_path / "absent.toml")]) == 2
    assert capsys.readouterr().err.strip() == f"syncd: error: {tmp_path / 'absent.toml'}: config file does not exist"


def test_jobs_from_env_json_and_bad_json(tmp_path: Path) -> None:
    path = write(tmp_path, SRC)
    jobs = '[{"name": "a", "kind": "sync", "source": "SRC", "schedule": {"cron": "*/5 * * * *"}}]'
    settings = load_settings(path, {"SYNCD_JOBS": jobs})
    assert settings.job("a").source == TargetRef("src")
    assert load_error(path, {"SYNCD_JOBS": "[{oops"}).startswith("SYNCD_JOBS: not valid JSON")
    message = load_error(path, {"SYNCD_JOBS": '[{"name": "a", "kind": "sync", "source": "nope"}]'})
    assert message == "SYNCD_JOBS: jobs[0].source: unknown tenant 'nope' (configured: src)"


def test_full_every_defaults_to_a_day_and_zero_means_never(tmp_path: Path) -> None:
    path = tmp_path / "syncd.toml"
    path.write_text(
        '[tenants.src]\nbase_url = "http://x"\ntoken = "t"\n'
        '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\n'
        '[[jobs]]\nname = "b"\nkind = "sync"\nsource = "src"\nfull_every = "0s"\n'
        '[[jobs]]\nname = "c"\nkind = "backup"\nsource = "src"\n'
    )
    a, b, c = load_settings(path, env={}).jobs
    assert (a.full_every, b.full_every, c.full_every) == (86400.0, 0.0, None)


def test_the_container_example_needs_its_tokens_from_the_environment() -> None:
    path = REPO / "config" / "syncd.container.toml"
    env = {"SYNCD_DAEMON__TOKEN": "container-control-token", "SRC_TOKEN": "s", "DST_TOKEN": "d"}
    settings = load_settings(path, env=env)
    assert settings.daemon.host == "0.0.0.0" and [job.kind for job in settings.jobs] == ["sync", "backup", "mirror"]
    assert all(settings.tenant(name).resolved_token() for name in settings.tenants)
    with pytest.raises(ConfigError, match="daemon.host: '0.0.0.0' is not a loopback address"):
        load_settings(path, env={"SRC_TOKEN": "s", "DST_TOKEN": "d"})


def test_cli_check_says_where_the_state_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The SQLite file by default; a state_url with its host and database but never its
    password, and the [fleet] settings this replica joins with."""
    from tests.schema_support import assert_valid

    monkeypatch.setenv("COLUMNS", "200")
    plain = write(tmp_path, SRC, "plain.toml")
    assert main(["config", "check", "--config", str(plain)]) == 0
    assert "SQLite file state/syncd.db (no state_url)" in capsys.readouterr().out
    assert main(["config", "check", "--config", str(plain), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert_valid("config-check", document)
    assert document["state_url"] is None

    path = write(tmp_path, 'state_url = "postgresql://syncd:pg-secret-4711@db.example:5433/syncd"\n' + SRC
                 + '[fleet]\nreplica = "syncd-1"\nlease = "45s"\nmax_runs = 3\n')  # fmt: skip
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pg-secret-4711" not in out
    state = {line.split()[0]: line.split(maxsplit=1)[1].strip() for line in out.split("\nstate")[1].split("\n\n")[0].splitlines() if line.strip()}
    assert state == {"state_url": "postgresql://syncd:***@db.example:5433/syncd", "fleet.replica": "syncd-1", "fleet.lease": "45s",
                     "fleet.poll": "1s", "fleet.max_runs": "3"}  # fmt: skip
    monkeypatch.setenv("SYNCD_STATE_URL", "postgresql://other@db2.example/fleet")  # the environment wins, as for any field
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    document = json.loads(out)
    assert_valid("config-check", document)
    assert document["state_url"] == "postgresql://other@db2.example/fleet" and "SYNCD_STATE_URL" in document["environment"]
    assert document["fleet"] == {"replica": "syncd-1", "lease": 45.0, "poll": 1.0, "max_runs": 3}
    assert "pg-secret-4711" not in out


# --------------------------------------------------------------------------- every problem at once


def test_config_check_lists_two_typos_each_with_its_suggestion(tmp_path: Path) -> None:
    """The installed `syncd`, as a newcomer runs it: both typos, a line each, each with the key
    meant; the key the typo stands for is not said to be missing as well."""
    from tests.console_script import run_installed
    from tests.hostile.cli_support import clean_env
    from tests.schema_support import assert_valid

    path = write(tmp_path, '[tenants.emu]\nbase_ulr = "http://127.0.0.1:8787"\ntoken = "t0123"\n\n[daemon]\nprot = 8790\n')
    ran = run_installed("config", "check", "--config", path.name, env=clean_env(), cwd=tmp_path)
    ran.assert_clean()
    assert ran.code == 2 and ran.stdout == "", ran.show()
    assert ran.stderr.splitlines() == [
        "syncd: error: syncd.toml: tenants.emu.base_ulr: unknown key; did you mean base_url?",
        "syncd: error: syncd.toml: daemon.prot: unknown key; did you mean port?",
    ], ran.show()

    ran = run_installed("config", "check", "--config", path.name, "--json", env=clean_env(), cwd=tmp_path)
    assert ran.code == 2, ran.show()
    document = json.loads(ran.stdout)
    assert_valid("config-check", document)
    assert document == {
        "config_file": "syncd.toml",
        "environment": [],
        "problems": [
            {"source": "syncd.toml", "field": "tenants.emu.base_ulr", "message": "unknown key; did you mean base_url?"},
            {"source": "syncd.toml", "field": "daemon.prot", "message": "unknown key; did you mean port?"},
        ],
    }
    assert len(ran.stderr.splitlines()) == 2  # said on stderr too


def test_every_problem_is_said_at_once_where_it_was_given(tmp_path: Path) -> None:
    """Typos anywhere (a top-level key, a job's key of its kind, a variable), another kind's
    options, and what a job's own settings get wrong: all in one error, one problem each."""
    path = write(
        tmp_path,
        "concurency = 4\n" + SRC
        + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "src"\ntarget = "src:o2"\nretention = 3\nschedule = { every = "15 minutes" }\n'
        + '[[jobs]]\nname = "b"\nkind = "backup"\nsource = "src"\nkeep_dayly = 7\n'
        + '[[jobs]]\nname = "c"\nkind = "copy"\nsource = "src"\nretension = 3\n',
    )  # fmt: skip
    with pytest.raises(ConfigError) as info:
        load_settings(path, {"SYNCD_TENANTS__SRC__TOKN": "t0123"})
    assert sorted(info.value.lines()) == sorted([
        f"{path}: concurency: unknown key; did you mean concurrency?",
        "SYNCD_TENANTS__SRC__TOKN: tenants.src.tokn: unknown key; did you mean token?",
        f"{path}: jobs[0].schedule.every: invalid duration '15 minutes' (use e.g. 0.5s, 30s, 15m, 2h, 1d or 1h30m)",
        f"{path}: jobs[0].target: only allowed on mirror jobs, not on a sync job",
        f"{path}: jobs[0].retention: only allowed on backup jobs, not on a sync job",
        f"{path}: jobs[1].keep_dayly: unknown key; did you mean keep_daily?",
        f"{path}: jobs[2].kind: must be 'sync', 'backup', 'mirror' or 'export', got 'copy'",
        f"{path}: jobs[2].retension: unknown key; did you mean retention?",  # a job of no known kind: any kind's key
    ])  # fmt: skip
    assert "\n" not in str(info.value) and "did you mean keep_daily?" in str(info.value)  # a log event: one line

    checks = write(tmp_path, SRC + '[[jobs]]\nname = "a"\nkind = "sync"\nsource = "nope"\n'
                   '[[jobs]]\nname = "a"\nkind = "mirror"\nsource = "src:o1"\ntarget = "other:o2"\n', "checks.toml")  # fmt: skip
    with pytest.raises(ConfigError) as info:
        load_settings(checks, {})
    assert info.value.lines() == [
        f"{checks}: jobs[0].source: unknown tenant 'nope' (configured: src)",
        f"{checks}: jobs[1].name: duplicate job name 'a' (also jobs[0])",
        f"{checks}: jobs[1].target: unknown tenant 'other' (configured: src)",
    ]


def test_an_unknown_key_without_a_close_one_is_said_plainly(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, SRC + "[fleet]\nxyz = 1\n"))
    assert message == f"{tmp_path / 'syncd.toml'}: fleet.xyz: unknown key"


def test_cli_lists_every_token_that_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        '[tenants.a]\nbase_url = "http://a"\ntoken_env = "UNSET_TOKEN_A_XYZ"\n'
        f'[tenants.b]\nbase_url = "http://b"\ntoken_file = "{tmp_path / "absent.token"}"\n',
    )
    assert main(["config", "check", "--config", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "syncd: error: tenants.a.token_env: environment variable UNSET_TOKEN_A_XYZ is not set or empty",
        f"syncd: error: tenants.b.token_file: {tmp_path / 'absent.token'} does not exist",
    ]
