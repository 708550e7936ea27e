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
