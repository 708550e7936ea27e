"""The web page's pure parts (`syncd.daemon.ui`): sessions and CSRF tokens, the history chart, saved
plans read as untrusted files, and the templates' escaping. The page itself, in a browser
against a real daemon: tests/test_ui_browser.py."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from syncd.copy.journal import Pair
from syncd.copy.ops import Leftover, Op, Plan, Skip
from syncd.copy.planfile import PlanFileError, SavedPlan, plan_document, save_plan
from syncd.copy.review import FieldChange, Item
from syncd.daemon.run_history import RunRecord
from syncd.daemon.ui import plan_stream, plans
from syncd.daemon.ui.chart import MIN_BAR, history_chart, runs_label
from syncd.daemon.ui.plans import PlanQuery, grouped, plan_files, plan_name, read_plan
from syncd.daemon.ui.render import ago, duration, render, when
from syncd.daemon.ui.session import (
    SESSION_SECONDS,
    csrf_token,
    make_session,
    session_valid,
)

TOKEN = "control-token-1"
NOW = 1_800_000_000.0


# ----- sessions -----------------------------------------------------------------------------------


def test_a_session_is_valid_under_its_token_until_it_expires() -> None:
    cookie = make_session(TOKEN, NOW)
    assert session_valid(cookie, TOKEN, NOW)
    assert session_valid(cookie, TOKEN, NOW + SESSION_SECONDS)
    assert not session_valid(cookie, TOKEN, NOW + SESSION_SECONDS + 1)  # expired
    assert not session_valid(cookie, TOKEN, NOW - 3600)  # made in the future
    assert not session_valid(cookie, "another-token", NOW)  # the token changed: every session ends
    issued, signature = cookie.split(".")
    assert not session_valid(f"{int(issued) + 3600}.{signature}", TOKEN, NOW + 3600)  # a later time, the old signature
    assert not session_valid(cookie[:-1] + ("A" if cookie[-1] != "A" else "B"), TOKEN, NOW)
    for junk in (None, "", "x", cookie + ".x", TOKEN, "1." + "a" * 43):
        assert not session_valid(junk, TOKEN, NOW)
    assert TOKEN not in cookie


def test_a_csrf_token_belongs_to_one_session_and_one_token() -> None:
    first, second = make_session(TOKEN, NOW), make_session(TOKEN, NOW + 1)
    assert csrf_token(first, TOKEN) == csrf_token(first, TOKEN)
    assert csrf_token(first, TOKEN) != csrf_token(second, TOKEN)
    assert csrf_token(first, TOKEN) != csrf_token(first, "another-token")
    assert csrf_token(first, TOKEN) not in (first, TOKEN)


# ----- the chart ----------------------------------------------------------------------------------


def _run(run_id: int, outcome: str, started: int, seconds: float | None) -> RunRecord:
    start = datetime(2026, 11, 28, 12, tzinfo=UTC) + timedelta(minutes=started)
    end = None if seconds is None else start + timedelta(seconds=seconds)
    return RunRecord(run_id, "job", "sync", "schedule", start, start, end, outcome)  # type: ignore[arg-type]


def test_the_chart_shows_finished_runs_oldest_first_scaled_to_the_longest() -> None:
    runs = [_run(3, "failed", 30, 0.0), _run(1, "succeeded", 10, 20.0), _run(4, "running", 40, None), _run(2, "partial", 20, 10.0)]
    chart = history_chart(runs, width=300, height=100)
    assert [bar.run for bar in chart.bars] == [1, 2, 3]  # the running one is not drawn
    assert chart.longest == 20.0
    tall, half, instant = chart.bars
    assert tall.height == pytest.approx(99) and tall.y == pytest.approx(1)
    assert half.height == pytest.approx(49.5)
    assert instant.height == 6.0 and instant.outcome == "failed"  # a failure is never invisible
    assert [bar.x for bar in chart.bars] == [0, 15, 30] and all(bar.width == 13 for bar in chart.bars)  # a twentieth each
    many = history_chart([_run(i, "succeeded", i, 1.0) for i in range(1, 41)], width=400)
    assert [bar.x for bar in many.bars[:3]] == [0, 10, 20] and many.bars[-1].x == 390  # forty share the width
    assert "run 3: failed, 0.0 s, started 2026-11-28 12:30:00 UTC" in instant.label
    assert history_chart([]).bars == []


def test_a_short_run_beside_a_long_one_is_a_visible_bar() -> None:
    chart = history_chart([_run(1, "succeeded", 0, 600.0), _run(2, "succeeded", 20, 0.2)], height=120)
    long, short = chart.bars
    assert long.height == pytest.approx(119)
    assert short.height == MIN_BAR and MIN_BAR >= 120 / 20  # a twentieth of the chart, not a sliver
    assert short.y + short.height == 120  # standing on the axis


def test_the_chart_counts_its_runs_in_words() -> None:
    assert (runs_label(1), runs_label(2), runs_label(12)) == ("Last run", "Last 2 runs", "Last 12 runs")
    assert history_chart([_run(1, "succeeded", 0, 1.0)]).caption == "Last run"
    assert history_chart([_run(i, "succeeded", i, 1.0) for i in range(1, 13)]).caption == "Last 12 runs"


def test_the_time_axis_marks_the_first_middle_and_last_runs_where_their_bars_are() -> None:
    many = history_chart([_run(i, "succeeded", 10 * i, 1.0) for i in range(40)], width=400)
    first, middle, last = many.ticks
    assert first.label == "2026-11-28 12:00:00 UTC" and first.anchor == "start" and first.percent == pytest.approx(1.0)
    assert middle.label == "2026-11-28 15:20:00 UTC" and middle.anchor == "middle" and middle.percent == pytest.approx(51.0)
    assert last.label == "2026-11-28 18:30:00 UTC" and last.anchor == "end" and last.percent == pytest.approx(98.5)
    # Bars crowded on the left (fewer runs than slots): marks never overlap, the latest run's wins.
    few = history_chart([_run(1, "succeeded", 0, 1.0), _run(2, "failed", 5, 1.0), _run(3, "succeeded", 9, 1.0)])
    assert [tick.label for tick in few.ticks] == ["2026-11-28 12:09:00 UTC"]
    assert history_chart([]).ticks == ()
    zoned = history_chart([_run(1, "succeeded", 0, 1.0)], zone="Asia/Tokyo")
    assert zoned.bars[0].label.endswith("started 2026-11-28 12:00:00 UTC (2026-11-28 21:00:00 Asia/Tokyo)")


# ----- saved plans --------------------------------------------------------------------------------


def _plan_file(folder: Path, name: str = "p.json", title: str = "Guide") -> Path:
    op = Op(key="create:space:a", action="create", kind="space", source_id="a", method="POST", path="/v1/orgs/T/spaces", title=title, body={"title": title})
    left = [Leftover("space", "t9", "Old <notes>", "Archive/Old <notes>")]
    saved = SavedPlan(Pair("src", "S", "dst", "T"), "src:S", "dst:T", "copy", Plan([op], [Skip("comment", None, "c", "history")], None, ["careful"], left),
                      {"source": "sha256:" + "a" * 64, "target": "sha256:" + "b" * 64}, {}, "2026-11-28T10:00:00+00:00")  # fmt: skip
    items = [
        Item("create", "space", title, "Docs/" + title, "create:space:a"),
        Item("update", "collection", "Docs", "Docs", "patch:collection:c", (FieldChange("title", "Old", "Docs"),)),
        Item("move", "space", "Other", "Docs/Other", "move:space:o", to_path="Else/Other"),
    ]
    folder.mkdir(parents=True, exist_ok=True)
    save_plan(folder / name, plan_document(saved, items))
    return folder / name


def test_a_plan_name_is_a_plain_json_file_name() -> None:
    for good in ("plan.json", "mirror-20261128T101010Z.json", "a.b_c-d.json"):
        assert plan_name(good), good
    for bad in ("../plan.json", "a/b.json", ".hidden.json", "plan.txt", "plan.json/", "", "..json", "p\n.json", "x" * 200 + ".json"):
        assert not plan_name(bad), bad


def test_plans_are_listed_newest_first_without_links_or_other_files(tmp_path: Path) -> None:
    folder = tmp_path / "plans"
    old, new = _plan_file(folder, "old.json"), _plan_file(folder, "new.json")
    os.utime(old, (NOW - 60, NOW - 60))
    os.utime(new, (NOW, NOW))
    (folder / "notes.txt").write_text("x")
    (folder / "link.json").symlink_to(new)
    (folder / "dir.json").mkdir()
    assert [plan.name for plan in plan_files(folder)] == ["new.json", "old.json"]
    assert plan_files(tmp_path / "missing") == []
    with pytest.raises(FileNotFoundError):
        read_plan(folder, "link.json")  # a link could lead out of the folder
    with pytest.raises(FileNotFoundError):
        read_plan(folder, "../plans/new.json")
    os.mkfifo(folder / "pipe.json")  # opened without waiting for a writer, then refused
    with pytest.raises(FileNotFoundError):
        read_plan(folder, "pipe.json")
    with pytest.raises(FileNotFoundError):
        read_plan(folder, "dir.json")
    assert "pipe.json" not in [plan.name for plan in plan_files(folder)]


def test_a_plan_reads_as_its_listing_and_filters_by_kind_and_action(tmp_path: Path) -> None:
    view = read_plan(tmp_path, _plan_file(tmp_path).name)
    assert (view.source, view.target, view.mode, view.warnings) == ("src:S", "dst:T", "copy", ["careful"])
    assert [(c.symbol, c.action, c.kind, c.path, c.to_path) for c in view.changes] == [
        ("+", "create", "space", "Docs/Guide", None), ("~", "update", "collection", "Docs", None), ("→", "move", "space", "Docs/Other", "Else/Other"),
    ]
    assert view.changes[1].fields == (("title", "Old", "Docs"),)
    assert view.counts == {"create": 1, "update": 1, "move": 1} and view.kinds == ["collection", "space"]
    def shown(kind: str, action: str) -> list[tuple[str, str]]:
        return [(c.kind, c.action) for c in read_plan(tmp_path, "p.json", PlanQuery(kind, action)).changes]

    assert shown("space", "") == [("space", "create"), ("space", "move")] and shown("", "update") == [("collection", "update")]
    assert shown("space", "update") == [] and len(shown("", "")) == 3
    assert view.skips == [{"kind": "comment", "title": "c", "reason": "history"}]
    assert view.left == [{"kind": "space", "title": "Old <notes>", "path": "Archive/Old <notes>"}]


def test_the_plan_page_shows_what_the_plan_leaves_and_when_it_was_made_in_the_one_format(tmp_path: Path) -> None:
    view = read_plan(tmp_path, _plan_file(tmp_path).name)
    html = render(
        "plan.html", title="Plan p.json", plan=view, groups=grouped(view.changes[:1]), shown=1, kind="", action="", actions=["create"],
        session=None, fleet=False, now=datetime(2026, 11, 28, 12, tzinfo=UTC), page_name="plans",
    )  # fmt: skip
    assert '<section class="group" id="plan-left">' in html and "Left on the target <small>(1)</small>" in html
    assert "<code>Archive/Old &lt;notes&gt;</code>" in html  # escaped like everything from a file
    assert ">2026-11-28 10:00:00 UTC</time>" in html and "+00:00</dd>" not in html


def test_a_file_that_is_not_a_plan_or_too_big_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(PlanFileError, match="junk.json cannot be read as a plan"):
        read_plan(tmp_path, "junk.json")
    path = _plan_file(tmp_path)
    monkeypatch.setattr(plans, "MAX_PLAN_BYTES", path.stat().st_size - 1)
    with pytest.raises(PlanFileError, match="more than the page reads"):
        read_plan(tmp_path, path.name)


def test_lines_of_a_listing_that_are_not_changes_are_counted_not_shown(tmp_path: Path) -> None:
    import json

    path = _plan_file(tmp_path)
    document = json.loads(path.read_text())
    document["changes"] += [42, {"action": "explode", "kind": "space"}, {"action": "create", "kind": 7}, {"action": "delete", "kind": "space", "title": ["x"]}]
    path.write_text(json.dumps(document))
    view = read_plan(tmp_path, path.name)
    assert view.unreadable == 3 and [c.action for c in view.changes] == ["create", "update", "move", "delete"]
    assert view.changes[-1].title == '["x"]'  # shown as text, whatever it was


def test_a_plan_streamed_a_few_bytes_at_a_time_reads_as_it_does_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = read_plan(tmp_path, _plan_file(tmp_path).name)
    monkeypatch.setattr(plan_stream, "CHUNK", 7)  # every value, number and name cut by a chunk's end
    assert read_plan(tmp_path, "p.json") == whole
    assert whole.total == 3 and whole.by_kind == {"collection": {"update": 1}, "space": {"create": 1, "move": 1}}
    assert whole.left_total == 1 and whole.skips_total == 1


def test_a_plan_is_shown_a_page_at_a_time_with_the_counts_of_the_whole_listing(tmp_path: Path) -> None:
    import json

    path = _plan_file(tmp_path)
    document = json.loads(path.read_text())
    document["changes"] = [{"action": "create", "kind": "page", "title": f"P{n}", "path": f"D/P{n}"} for n in range(5)] + document["changes"]
    document["changes"].append({"action": "update", "kind": "organization", "title": "O", "path": "O", "section": "access"})
    path.write_text(json.dumps(document))
    second = read_plan(tmp_path, path.name, PlanQuery(page=2, size=2))
    assert [c.title for c in second.changes] == ["P2", "P3"] and (second.total, second.matched, second.pages) == (9, 9, 5)
    assert second.sections == {"Access settings": (1, 5)}  # its heading's count, and the page it starts on
    last = read_plan(tmp_path, path.name, PlanQuery(kind="page", page=3, size=2))
    assert [c.title for c in last.changes] == ["P4"] and (last.matched, last.pages) == (5, 3)
    assert last.counts == {"create": 6, "update": 2, "move": 1} and last.by_kind["page"] == {"create": 5} and last.sections == {}
    assert read_plan(tmp_path, path.name, PlanQuery(page=99, size=2)).changes == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('"ops": null', "ops must be a list"),
        ('"ops": [{"key": 7}]', "damaged plan: ops.0..key 7 is not a key"),
        ('"ops": [], "skips": [5]', r"damaged plan: skips\[0\] must be an object"),
        ('"ops": [], "ops": []', "given twice"),
        ('"ops": [], "changes": [{"a": 1, "a": 2}]', "given twice"),
        ('"ops": []} {', "text after"),
        ('"ops": [', "cannot be read"),
    ],
)
def test_a_damaged_plan_is_one_line_when_streamed(tmp_path: Path, text: str, why: str) -> None:
    import json

    document = json.loads(_plan_file(tmp_path).read_text())
    head = json.dumps({k: v for k, v in document.items() if k not in ("ops", "changes", "skips")})
    (tmp_path / "bad.json").write_text(head[:-1] + ", " + text + ("" if text.endswith(("{", "[")) or "} {" in text else "}"))
    with pytest.raises(PlanFileError, match=why):
        read_plan(tmp_path, "bad.json")


def test_a_plan_value_longer_than_the_bound_is_refused_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _plan_file(tmp_path)
    monkeypatch.setattr(plan_stream, "CHUNK", 64)
    monkeypatch.setattr(plan_stream, "MAX_VALUE", 100)
    path.write_text(path.read_text().replace('"mode"', '"long": "' + "x" * 1000 + '",\n  "mode"', 1))
    with pytest.raises(PlanFileError, match="a value is longer than 100 characters"):
        read_plan(tmp_path, path.name)


# ----- a run's page -------------------------------------------------------------------------------


def _part(run: RunRecord, expected: int | None = None) -> str:
    from syncd.daemon.ui.pages import _run_view

    return render("parts/run.html", run=_run_view(run, expected), zone="Europe/Berlin", now=datetime.now(UTC), session={"csrf": "c"})


def test_a_running_run_shows_a_total_and_the_time_left_once_an_earlier_run_gives_a_size() -> None:
    run = RunRecord(7, "copy", "mirror", "schedule", datetime.now(UTC) - timedelta(seconds=30), datetime.now(UTC) - timedelta(seconds=20), outcome="running")
    run.progress = {"step": "reading", "done": 40, "total": None, "detail": "40 objects, 12 requests"}
    shown = _part(run, expected=120)
    assert '<span id="progress-done">40</span> of about <span id="progress-total">120</span>' in shown
    assert '<span id="progress-eta">about 40.' in shown or '<span id="progress-eta">about 39.' in shown  # 20 s for a third: 40 s left
    first = _part(run)
    assert "progress-total" not in first and "progress-eta" not in first  # nothing to compare with yet


def test_a_finished_run_says_why_what_it_changed_and_what_it_left() -> None:
    started = datetime(2026, 12, 7, 3, 5, 36, tzinfo=UTC)
    sync = RunRecord(8, "sync", "sync", "schedule", started, started, started + timedelta(seconds=3), "succeeded")
    sync.summary = {"mirror_run": 12, "db": "/srv/state dir/syncd.db", "changed": {"created": 2, "updated": 1, "moved": 0, "deleted": 1}}
    shown = _part(sync)
    assert '<p id="run-changes">2 created, 1 updated, 0 moved, 1 deleted' in shown
    assert "<code id=\"run-diff\">syncd diff --db &#39;/srv/state dir/syncd.db&#39; --run 12</code>" in shown
    assert "2026-12-07 03:05:36 UTC (2026-12-07 04:05:36 Europe/Berlin)" in shown  # the one format, with the job's zone
    copy = RunRecord(9, "copy", "mirror", "schedule", started, started, started + timedelta(seconds=3), "succeeded")
    left = [{"kind": "space", "title": "<Old>", "path": "Guides/<Old>"}]
    copy.summary = {"reason": "1 object(s) the source no longer has were left on the target (copy mode keeps them): space '<Old>'",
                    "left_on_target": left, "verify": {"left_on_target": 1}}  # fmt: skip
    shown = _part(copy)
    assert '<p id="run-reason" class="reason reason-succeeded">1 object(s) the source no longer has were left' in shown
    assert "<td data-label=\"Title\">&lt;Old&gt;</td>" in shown and "<code>Guides/&lt;Old&gt;</code>" in shown
    failed = RunRecord(10, "copy", "mirror", "schedule", started, started, started, "failed", error="tenant unreachable")
    assert "run-reason" not in _part(failed) and 'id="run-error"' in _part(failed)  # its error says it, once


# ----- templates ----------------------------------------------------------------------------------


def test_what_a_template_shows_is_escaped() -> None:
    html = render("error.html", title="<b>t</b>", message="<script>alert(1)</script>", session=None, page_name="")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;t&lt;/b&gt;" in html
    assert "<script src=\"/ui/static/ui.js\" defer></script>" in html  # the page's only script, from its own file


def test_times_and_durations_read_as_a_person_says_them() -> None:
    now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert ago("2026-11-28T11:57:00.000Z", now) == "3 min ago"
    assert ago(now + timedelta(hours=2, minutes=5), now) == "in 2 h"
    assert ago(now - timedelta(seconds=4), now) == "4 s ago" and ago(None, now) == "" and ago("garbage", now) == ""
    # One format everywhere: UTC, and the job's own time zone beside it where it has one.
    assert when("2026-11-28T12:00:00Z", "Europe/Berlin") == "2026-11-28 12:00:00 UTC (2026-11-28 13:00:00 Europe/Berlin)"
    assert when("2026-11-28T12:00:00Z", "Not/AZone") == "2026-11-28 12:00:00 UTC"
    assert when("2026-12-07T03:05:36+00:00") == when(datetime(2026, 12, 7, 3, 5, 36, tzinfo=UTC), "UTC") == "2026-12-07 03:05:36 UTC"
    assert when("2026-12-07T04:05:36+01:00", None) == "2026-12-07 03:05:36 UTC" and when(None) == when("garbage") == ""
    assert (duration(None), duration(2.25), duration(125), duration(7300)) == ("", "2.2 s", "2 min 05 s", "2 h 01 min")
