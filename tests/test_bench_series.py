"""The latency series' pure parts (bench/series.py and the series' argument parsing and
reports): what a benchmark run relies on before it measures anything. No timing here: the
benchmarks print figures, these check the arithmetic and the text around them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import crawl  # noqa: E402
import fleet  # noqa: E402
import fleet_share  # noqa: E402
import mirror_latency  # noqa: E402
import mirror_sizes  # noqa: E402
import series  # noqa: E402
from syncd_child import ChildRun  # noqa: E402


def test_a_series_of_latencies_is_parsed_and_a_bad_one_refused() -> None:
    assert series.parse_latencies("20,80,150,300") == [20.0, 80.0, 150.0, 300.0]
    assert series.parse_latencies(" 150 ") == [150.0]
    for bad in ("", "20,,80", "fast", "20,-5"):
        with pytest.raises(ValueError):
            series.parse_latencies(bad)


def test_the_ratio_is_wall_over_requests_at_the_rate() -> None:
    assert series.bound_seconds(1500, 100) == 15.0
    assert series.ratio(31.5, 1500, 100) == pytest.approx(2.1)
    assert series.ratio(10.0, 0, 100) is None
    assert series.ratio(10.0, 1500, 0) is None
    assert series.share(5, 1000) == 0.005 and series.share(1, 0) == 0.0
    assert series.checked(1.1, 1.1) == "ok" and series.checked(1.11, 1.1) == "MISSED" and series.checked(None, 1.1) == "-"


def test_a_client_without_the_controller_reports_its_figures_as_absent() -> None:
    before = SimpleNamespace(requests=3)
    after = SimpleNamespace(inflight_limit=12, inflight_limit_peak=40, rtt_seconds=0.151)
    assert series.client_figures(before) == {"inflight_limit": None, "inflight_limit_peak": None, "rtt_seconds": None}
    assert series.client_figures(after)["inflight_limit_peak"] == 40
    assert series.peak_of([None, 3, 7, None]) == 7 and series.peak_of([None]) is None


def test_the_table_aligns_its_columns_and_prints_a_dash_for_what_is_missing() -> None:
    columns = (series.Column("latency ms", "latency", "{:g}"), series.Column("ratio", "ratio", "{:.2f}"), series.Column("limit", "peak"))
    text = series.table(columns, [{"latency": 20.0, "ratio": 0.964, "peak": None}, {"latency": 300.0, "ratio": 4.1}])
    head, rule, first, second = text.splitlines()
    assert head.split() == ["latency", "ms", "ratio", "limit"]
    assert len(rule) == len(head) == len(first) == len(second)
    assert first.split() == ["20", "0.96", "-"] and second.split() == ["300", "4.10", "-"]


def test_a_metric_is_read_from_a_metrics_body_by_its_exact_name() -> None:
    body = (
        "# HELP syncd_inflight_limit requests in flight allowed\n"
        'syncd_inflight_limit{tenant="one"} 24.0\n'
        'syncd_inflight_limit{tenant="two"} 8.0\n'
        'syncd_inflight_limit_peak{tenant="one"} 40.0\n'
        "syncd_api_requests_total 7\n"
    )
    assert series.metric_series(body, "syncd_inflight_limit") == {'{tenant="one"}': 24.0, '{tenant="two"}': 8.0}
    assert series.metric_series(body, "syncd_api_requests_total") == {"": 7.0}
    assert series.metric_series(body, "syncd_absent") == {}


def test_crawl_takes_a_latency_series_and_keeps_its_other_runs() -> None:
    plain = crawl.parse_args([])
    assert (plain.series, plain.rate, plain.latency_ms, plain.spec) == (False, 200.0, 20.0, crawl.DEFAULT_SPEC)
    run = crawl.parse_args(["--latency-ms", "20,80,150,300"])
    assert run.series and run.rate == 100.0 and run.latencies == [20.0, 80.0, 150.0, 300.0]
    assert "spaces=60," in run.spec
    one = crawl.parse_args(["--latency-ms", "150", "--series", "--rate", "50", "--spaces", "10"])
    assert one.series and one.rate == 50.0 and one.latencies == [150.0] and "spaces=10," in one.spec
    assert crawl.parse_args(["--objects", "1000"]).workers == 8
    with pytest.raises(SystemExit):
        crawl.parse_args(["--latency-ms", "20,x"])


def test_the_mirror_series_reads_round_one_and_checks_its_targets_at_150_ms() -> None:
    args = mirror_latency.parse_args(["--latency-ms", "150,300", "--spaces", "5"])
    assert args.latencies == [150.0, 300.0] and args.rate == 100.0 and args.spaces == 5
    document = {"rounds": [{"apply": {"writes": 122, "reads": 18, "seconds": 5.9}}, {"apply": None}]}
    assert mirror_latency.first_round(document) == {"writes": 122, "reads": 18, "seconds": 5.9}
    assert mirror_latency.first_round(None) is None and mirror_latency.first_round({"rounds": []}) is None
    row = {"latency": 150.0, "ratio": 2.5, "round_ratio": 1.4, "verify": "equal", "second_writes": 0}
    assert mirror_latency.verdict(row) == "copy MISSED, round ok, equal, 0 writes"
    assert mirror_latency.verdict(row | {"latency": 20.0, "second_writes": 3}) == "equal, WRITES"


def test_the_in_flight_limits_of_a_copy_are_shown_per_tenant() -> None:
    without = ChildRun(0, 1.0, None, [{"name": "src", "requests": 5}, {"name": "dst", "requests": 7}])
    assert mirror_latency.limits(without, ("src", "dst")) is None
    assert without.total("requests") == 12 and without.by_tenant("requests") == {"src": 5, "dst": 7}
    both = ChildRun(0, 1.0, None, [{"name": "src", "inflight_limit_peak": 30}, {"name": "src", "inflight_limit_peak": 40},
                                   {"name": "dst", "inflight_limit_peak": None}])
    assert mirror_latency.limits(both, ("src", "dst")) == "40/-"


def test_the_fleet_share_report_says_the_429s_and_each_replicas_limit() -> None:
    args = argparse.Namespace(share_rate=100.0, share_latency_ms=150.0)
    one, two = fleet_share.Samples(), fleet_share.Samples()
    for limit, requests in ((20, 0), (14, 700), (12, 1400)):
        one.take(f'syncd_inflight_limit{{tenant="one"}} {limit}\nsyncd_api_requests_total{{tenant="one"}} {requests}\n')
    two.take("syncd_api_requests_total 0\n")
    two.take("syncd_api_requests_total 1500\n")
    lines = fleet_share.report(args, {"total": 2900, "by_status": {"429": 40, "200": 2860}}, 30.0, {"r1": one, "r2": two})
    assert "429s 40 = 1.38% of requests (target <= 1%: MISSED)" in lines[1]
    assert "window / bound (requests / R = 29.0 s): 1.03" in lines[2]
    assert "replica r1: 1,400 requests" in lines[3] and "20 -> 12 (lowest 12, median 14, highest 20)" in lines[3]
    assert lines[4].endswith("in-flight limit -")
    assert "share" in fleet.parse_args(["--series", "share"]).series


def test_the_size_series_is_parsed_and_a_bad_size_refused() -> None:
    assert mirror_sizes.parse_sizes("100x10,800x1") == [mirror_sizes.Size(100, 10), mirror_sizes.Size(800, 1)]
    assert mirror_sizes.parse_sizes(" 3200X10 ") == [mirror_sizes.Size(3200, 10)]
    assert str(mirror_sizes.Size(800, 1)) == "800x1"
    for bad in ("", "100", "100x", "x10", "100x10,,800x1", "0x10", "-5x10", "ax10"):
        with pytest.raises(ValueError):
            mirror_sizes.parse_sizes(bad)
    args = mirror_sizes.parse_args([])
    assert args.sizes == [mirror_sizes.Size(100, 10), mirror_sizes.Size(800, 10), mirror_sizes.Size(3200, 10)]
    assert (args.rate, args.latency_ms, args.restore, args.sync) == (0.0, 0.0, False, True)
    assert mirror_sizes.parse_args(["--restore", "--no-sync"]).restore and not mirror_sizes.parse_args(["--no-sync"]).sync
    with pytest.raises(SystemExit):
        mirror_sizes.parse_args(["--sizes", "800"])


def _size_row(spaces: int, pages: int, wall: float, peak: float, **more: object) -> dict[str, object]:
    return {"size": f"{spaces}x{pages}", "spaces": spaces, "pages": pages, "wall": wall, "peak_rss_mb": peak,
            "verify": "equal", "second_writes": 0} | more


def test_the_size_series_checks_the_issues_acceptance() -> None:
    rows = [_size_row(100, 10, 6.0, 141.0), _size_row(800, 10, 34.5, 589.0), _size_row(800, 1, 25.6, 235.0),
            _size_row(3200, 10, 140.0, 200.0, verify="exit 1", second_writes=3, restore_peak_mb=240.0, restore_verify="equal")]
    assert mirror_sizes.growth(rows, 10) == pytest.approx(589.0 / 141.0)
    assert mirror_sizes.growth(rows, 1) is None  # no 100x1 to compare with
    spread = mirror_sizes.wall_spread(rows)
    assert spread["800x1"] is None  # alone with its pages
    median = 140.0 / 3200  # the middle one of 100x10, 800x10, 3200x10 a space
    assert spread["100x10"] == pytest.approx((6.0 / 100) / median - 1) and spread["3200x10"] == 0.0
    lines = mirror_sizes.checks(rows)
    assert lines[0] == "100x10: peak 141 MB ok, verify equal, second apply 0 writes"
    assert lines[1].startswith("800x10: peak 589 MB MISSED")
    assert lines[3] == ("3200x10: peak 200 MB ok, verify exit 1: MISSED, second apply 3 writes: MISSED, "
                        "restore peak 240 MB ok, restore verify equal")
    assert "peak at 800x10 / at 100x10: 4.18 (<= 1.3) MISSED" in lines
    assert any(line.startswith("100x10: wall per space +37% of the median") and line.endswith("MISSED") for line in lines)
    assert not any(line.startswith("800x1: wall") for line in lines)


def test_the_size_series_table_prints_a_dash_for_what_was_not_run() -> None:
    row = _size_row(100, 10, 6.04, 141.2, objects=12345, requests=2411, writes=460, ms_per_space=60.4, second_peak_mb=120.0)
    head, rule, line = mirror_sizes.table(mirror_sizes.COLUMNS, [row]).splitlines()
    assert head.split()[:3] == ["size", "objects", "requests"] and len(rule) == len(head) == len(line)
    assert line.split() == ["100x10", "12,345", "2,411", "460", "6.0", "60", "141", "equal", "0", "120", "-", "-", "-", "-"]
