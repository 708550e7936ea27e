"""Backup retention, restic style: the pure choice (`syncd.daemon.retention.choose_kept`), the files a
daemon job prunes (partial backups included), the configuration, and a real backup job's run
against the emulator over loopback."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.cli import main
from syncd.config import load_settings
from syncd.daemon.jobs import backup_files, execute_job, partial_backups, plan_pruning, prune_backups, taken_time
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.retention import RULES, Policy, choose_kept
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.errors import ConfigError

BERLIN = ZoneInfo("Europe/Berlin")


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def kept(backups: list[datetime], policy: Policy, tz: object = UTC) -> dict[datetime, list[str]]:
    return choose_kept([(when, when) for when in backups], policy, tz).kept  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the choice


def test_daily_keeps_the_newest_of_each_of_the_last_n_days_that_have_a_backup() -> None:
    backups = [
        at(2026, 11, 20, 2), at(2026, 11, 20, 14),                      # two on the 20th
        at(2026, 11, 23, 2),                                            # 21st, 22nd: none
        at(2026, 11, 24, 2), at(2026, 11, 24, 9), at(2026, 11, 24, 23),
        at(2026, 11, 25, 2),
    ]  # fmt: skip
    choice = choose_kept([(when, when) for when in backups], Policy(daily=3))
    assert choice.kept == {
        at(2026, 11, 25, 2): ["daily 2026-11-25"],
        at(2026, 11, 24, 23): ["daily 2026-11-24"],
        at(2026, 11, 23, 2): ["daily 2026-11-23"],  # the days without a backup are not counted
    }
    assert choice.doomed == [at(2026, 11, 24, 9), at(2026, 11, 24, 2), at(2026, 11, 20, 14), at(2026, 11, 20, 2)]
    assert choice.full
    # Four days with a backup: a daily rule of 4 reaches back to the 20th, and keeps its newest.
    assert at(2026, 11, 20, 14) in kept(backups, Policy(daily=4))
    assert not choose_kept([(when, when) for when in backups], Policy(daily=5)).full


def test_rules_add_up_and_say_why_each_backup_stays() -> None:
    hourly = [at(2026, 11, 25, 0) + timedelta(hours=h) for h in range(-72, 1)]  # 3 days, every hour
    choice = choose_kept([(when, when) for when in hourly], Policy(last=2, hourly=3, daily=3, weekly=1, monthly=2))
    assert choice.kept == {
        at(2026, 11, 25, 0): ["last", "hourly 2026-11-25 00:00", "daily 2026-11-25", "weekly 2026-W48", "monthly 2026-11"],
        at(2026, 11, 24, 23): ["last", "hourly 2026-11-24 23:00", "daily 2026-11-24"],
        at(2026, 11, 24, 22): ["hourly 2026-11-24 22:00"],
        at(2026, 11, 23, 23): ["daily 2026-11-23"],
    }
    assert len(choice.doomed) == len(hourly) - 4
    assert not choice.full  # no backup in October: the monthly rule found 1 of its 2


def test_weeks_are_iso_weeks_across_the_new_year_and_months_and_years() -> None:
    backups = [at(2026, 12, 28, 1), at(2026, 12, 31, 1), at(2027, 1, 3, 1), at(2027, 1, 4, 1)]
    # 28 Dec 2026 to 3 Jan 2027 are ISO week 2026-W53; 4 Jan 2027 starts 2027-W01.
    assert kept(backups, Policy(weekly=2)) == {at(2027, 1, 4, 1): ["weekly 2027-W01"], at(2027, 1, 3, 1): ["weekly 2026-W53"]}
    assert kept(backups, Policy(monthly=5)) == {at(2027, 1, 4, 1): ["monthly 2027-01"], at(2026, 12, 31, 1): ["monthly 2026-12"]}
    assert kept(backups, Policy(yearly=1)) == {at(2027, 1, 4, 1): ["yearly 2027"]}


def test_periods_are_read_in_the_jobs_time_zone() -> None:
    # 23:30 UTC on the 24th is 00:30 on the 25th in Berlin: in UTC both are on the 24th.
    backups = [at(2026, 11, 24, 12), at(2026, 11, 24, 23, 30)]
    assert list(kept(backups, Policy(daily=2))) == [at(2026, 11, 24, 23, 30)]
    assert list(kept(backups, Policy(daily=2), BERLIN)) == [at(2026, 11, 24, 23, 30), at(2026, 11, 24, 12)]
    assert kept(backups, Policy(daily=2), BERLIN)[at(2026, 11, 24, 23, 30)] == ["daily 2026-11-25"]


def test_no_policy_keeps_everything() -> None:
    choice = choose_kept([("a", at(2026, 1, 1)), ("b", at(2025, 1, 1))], Policy())
    assert choice.kept == {"a": ["no retention policy"], "b": ["no retention policy"]} and choice.doomed == []
    assert not choice.full
    assert str(Policy()) == "keep everything" and str(Policy(last=3, daily=7)) == "keep_last=3 keep_daily=7"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_a_count_is_a_whole_number_of_at_least_one(bad: object) -> None:
    with pytest.raises(ValueError, match="keep_daily must be a whole number of at least 1"):
        Policy(daily=bad)  # type: ignore[arg-type]


def test_times_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        choose_kept([("a", datetime(2026, 1, 1))], Policy(last=1))


# --------------------------------------------------------------------------- properties

times = st.lists(
    st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)),
    max_size=60,
    unique=True,
)
counts = st.one_of(st.none(), st.integers(1, 6))
policies = st.builds(Policy, last=counts, hourly=counts, daily=counts, weekly=counts, monthly=counts, yearly=counts)
zones = st.sampled_from([UTC, BERLIN, ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe")])
PERIOD = {
    "hourly": lambda t: (t.year, t.month, t.day, t.hour),
    "daily": lambda t: (t.year, t.month, t.day),
    "weekly": lambda t: t.isocalendar()[:2],
    "monthly": lambda t: (t.year, t.month),
    "yearly": lambda t: (t.year,),
}


@settings(max_examples=300, deadline=None)
@given(backups=times, policy=policies, tz=zones)
def test_choice_properties(backups: list[datetime], policy: Policy, tz: object) -> None:
    choice = choose_kept([(when, when) for when in backups], policy, tz)  # type: ignore[arg-type]
    newest_first = sorted(backups, reverse=True)
    # Every backup is kept or doomed, never both; kept ones have a reason; both are newest first.
    assert set(choice.kept) | set(choice.doomed) == set(backups)
    assert not set(choice.kept) & set(choice.doomed)
    assert all(choice.kept.values())
    assert list(choice.kept) == [t for t in newest_first if t in choice.kept]
    assert choice.doomed == [t for t in newest_first if t in choice.doomed]
    rules = policy.rules()
    if not rules:
        assert choice.doomed == [] and not choice.full  # no policy never deletes
        return
    # keep_last: the newest N, whatever else.
    assert set(newest_first[: policy.last or 0]) <= set(choice.kept)
    # Each calendar rule, against a model of its own: group by period (local time), take the
    # newest N periods, the newest backup of each.
    full = len(backups) >= (policy.last or 0)
    for rule, period in PERIOD.items():
        count = getattr(policy, rule)
        if count is None:
            continue
        groups = [list(group) for _, group in itertools.groupby(newest_first, key=lambda t: period(t.astimezone(tz)))]  # type: ignore[arg-type]
        expected = {group[0] for group in groups[:count]}
        by_rule = {t for t, reasons in choice.kept.items() if any(r.startswith(rule + " ") for r in reasons)}
        assert by_rule == expected, rule
        full = full and len(groups) >= count
    assert choice.full == full
    # More of any rule never lets go of a backup that was kept.
    for rule in rules:
        more = Policy(**{**{r: getattr(policy, r) for r in RULES}, rule: rules[rule] + 1})
        assert set(choice.kept) <= set(choose_kept([(t, t) for t in backups], more, tz).kept)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the job's files


def make(folder: Path, when: datetime, partial: bool = False) -> Path:
    stamp = f"{when.strftime('%Y%m%dT%H%M%S')}.{when.microsecond // 1000:03d}Z"
    path = folder / f"nightly-{stamp}{'-partial' if partial else ''}.db"
    path.write_bytes(b"backup")
    blobs = path.with_name(path.stem + ".blobs")
    blobs.mkdir()
    (blobs / "ab").write_bytes(b"blob")
    return path


def test_backup_times_come_from_the_names(tmp_path: Path) -> None:
    assert taken_time(tmp_path / "night-ly-20261126T001544.123Z.db") == datetime(2026, 11, 26, 0, 15, 44, 123000, tzinfo=UTC)
    assert taken_time(tmp_path / "a-20261126T001544.123Z-partial.db") == datetime(2026, 11, 26, 0, 15, 44, 123000, tzinfo=UTC)


def test_pruning_a_folder_with_a_policy(tmp_path: Path) -> None:
    folder = tmp_path
    days = [make(folder, at(2026, 11, day, hour)) for day in (20, 21, 22, 23) for hour in (2, 14)]
    pruning = plan_pruning(folder, "nightly", Policy(last=1, daily=3))
    assert pruning.kept == {
        days[7]: ["last", "daily 2026-11-23"],
        days[5]: ["daily 2026-11-22"],
        days[3]: ["daily 2026-11-21"],
    }
    assert pruning.doomed == [days[0], days[1], days[2], days[4], days[6]]  # oldest first
    assert prune_backups(folder, "nightly", Policy(last=1, daily=3)) == pruning.doomed
    assert backup_files(folder, "nightly") == [days[3], days[5], days[7]]
    assert not any(path.exists() or path.with_name(path.stem + ".blobs").exists() for path in pruning.doomed)
    assert prune_backups(folder, "nightly", Policy(last=1, daily=3)) == []  # nothing more to do


def test_partial_backups_never_count_and_go_once_the_policy_is_full(tmp_path: Path) -> None:
    folder = tmp_path
    old_partial = make(folder, at(2026, 11, 19, 2), partial=True)
    good = [make(folder, at(2026, 11, 20, 2)), make(folder, at(2026, 11, 21, 2))]
    new_partials = [make(folder, at(2026, 11, 22, 2), partial=True), make(folder, at(2026, 11, 23, 2), partial=True)]
    # Two days of complete backups and a daily rule of 3: not full, so nothing goes.
    assert prune_backups(folder, "nightly", Policy(daily=3)) == []
    assert partial_backups(folder, "nightly") == [old_partial, *new_partials]
    # The partial days did not count as days: both good backups stay with a daily rule of 2...
    pruning = plan_pruning(folder, "nightly", Policy(daily=2))
    assert list(pruning.kept) == [good[1], good[0]]
    # ... and the policy is full: the partial older than every kept backup goes, newer ones stay.
    assert pruning.doomed == [old_partial]
    assert prune_backups(folder, "nightly", 1) == [old_partial, good[0]]  # an int is keep_last
    assert partial_backups(folder, "nightly") == new_partials
    assert backup_files(folder, "nightly") == [good[1]]


# --------------------------------------------------------------------------- configuration

SRC = '[tenants.src]\nbase_url = "http://127.0.0.1:8787/"\ntoken = "src-token-0123456789"\n'


def job(tmp_path: Path, lines: str, kind: str = "backup") -> Path:
    path = tmp_path / "syncd.toml"
    path.write_text(SRC + f'[[jobs]]\nname = "nightly"\nkind = "{kind}"\nsource = "src"\n{lines}\n', encoding="utf-8")
    return path


def test_config_keep_rules_and_the_retention_alias(tmp_path: Path) -> None:
    loaded = load_settings(job(tmp_path, "keep_daily = 7\nkeep_weekly = 4\ntimezone = 'Europe/Berlin'"), {}).jobs[0]
    assert loaded.retention_policy() == {"keep_daily": 7, "keep_weekly": 4}
    assert Policy.of(loaded.retention_policy()) == Policy(daily=7, weekly=4)
    assert loaded.timezone == "Europe/Berlin"
    alias = load_settings(job(tmp_path, "retention = 3"), {}).jobs[0]
    assert alias.retention_policy() == {"keep_last": 3} and alias.retention is None
    assert load_settings(job(tmp_path, ""), {}).jobs[0].retention_policy() == {}


@pytest.mark.parametrize(
    ("lines", "kind", "expected"),
    [
        ("retention = 3\nkeep_last = 2", "backup", "jobs[0].retention: retention is the old name of keep_last: give keep_last only"),
        ("keep_daily = 7", "sync", "jobs[0].keep_daily: only allowed on backup jobs, not on a sync job"),
        ("keep_daily = 0", "backup", "jobs[0].keep_daily: must be greater than or equal to 1, got 0"),
        ("keep_hourly = 'many'", "backup", "jobs[0].keep_hourly:"),
        ("timezone = 'Europe/Berln'", "backup", "jobs[0].timezone: unknown time zone 'Europe/Berln': give an IANA name"),
        ("schedule = { cron = '@daily', timezone = 'UTC' }\ntimezone = 'Asia/Tokyo'", "backup", "jobs[0].schedule.timezone: differs from the job's timezone"),
        ("schedule = { cron = '0 9 * * MON-FRX' }", "sync", "jobs[0].schedule.cron: cron expression '0 9 * * MON-FRX': bad day-of-week field"),
        ("schedule = { cron = '@reboot' }", "sync", "jobs[0].schedule.cron: unknown cron macro '@reboot'"),
    ],
)
def test_config_errors_are_one_line(tmp_path: Path, lines: str, kind: str, expected: str) -> None:
    path = job(tmp_path, lines, kind)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert "\n" not in str(caught.value)
    assert expected in str(caught.value), str(caught.value)


def test_config_check_shows_the_policy_and_the_schedule_with_its_zone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path = job(tmp_path, "schedule = { cron = '30 2 * * MON-FRI' }\ntimezone = 'Europe/Berlin'\nretention = 7\nkeep_weekly = 4")
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cron 30 2 * * MON-FRI in Europe/Berlin" in out
    assert "keep_last=7 keep_weekly=4" in out
    bad = job(tmp_path, "schedule = { cron = '@daily' }\ntimezone = 'Mars/Olympus'")
    assert main(["config", "check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"syncd: error: {bad}: jobs[0].timezone: unknown time zone 'Mars/Olympus': give an IANA name such as Europe/Berlin, America/New_York or UTC"]


# --------------------------------------------------------------------------- a real job

TOKEN = "retention-token"


@pytest.fixture
async def tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningEmulator]:
    store = Store(seed=5)
    generate(store, parse_spec("orgs=1,collections=1,spaces=2,pages=1"), seed=5, all_token=TOKEN)
    async with serve_emulator(store) as running:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", running.url)
        monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", TOKEN)
        monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
        yield running


async def test_a_backup_job_prunes_by_its_policy_and_lists_what_it_pruned(tenant: RunningEmulator, tmp_path: Path) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text('[[jobs]]\nname = "nightly"\nkind = "backup"\nsource = "src"\nkeep_daily = 1\ntimezone = "Asia/Tokyo"\n')
    settings = load_settings(config)
    folder = settings.state_dir / "backups" / "nightly"
    folder.mkdir(parents=True)
    # Yesterday's backup (Tokyo time) and an older partial one.
    yesterday = make(folder, datetime.now(UTC) - timedelta(days=1))
    stale_partial = make(folder, datetime.now(UTC) - timedelta(days=3), partial=True)
    first = await execute_job(settings, settings.jobs[0], DaemonMetrics())
    assert first.outcome == "succeeded", first.summary
    today = Path(first.summary["file"])
    day = taken_time(today).astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d")
    assert first.summary["kept"] == {today.name: [f"daily {day}"]}
    assert first.summary["pruned"] == [stale_partial.name, yesterday.name]
    second = await execute_job(settings, settings.jobs[0], DaemonMetrics())
    assert second.summary["pruned"] == [today.name]  # one day kept: its newest backup only
    assert backup_files(folder, "nightly") == [Path(second.summary["file"])]
    assert partial_backups(folder, "nightly") == []


class _NoOffset(tzinfo):
    """A zone that gives no offset: its times are as naive as those without a zone."""

    def utcoffset(self, _: datetime | None) -> None:
        return None


def test_ties_in_time_go_to_the_backup_given_later_and_an_offset_less_zone_is_refused() -> None:
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert set(choose_kept([("b", at), ("a", at)], Policy(last=1)).kept) == {"a"}
    assert set(choose_kept([("a", at), ("b", at)], Policy(last=1)).kept) == {"b"}
    with pytest.raises(ValueError, match="timezone-aware"):
        choose_kept([("x", datetime(2026, 3, 1, tzinfo=_NoOffset()))], Policy(last=1))
