"""Why a run's outcome is not a plain success, in words (`syncd.daemon.reasons`), and where a
running run is (`syncd.daemon.progress`): pure functions of a run's summary and its crawls'
counts. The daemon against the emulator: tests/test_daemon_outcomes.py."""

from __future__ import annotations

from typing import Any

from syncd.api.stats import ClientStats
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.progress import RunProgress, estimate, previous_size
from syncd.daemon.reasons import backup_reason, mirror_reason, sync_reason
from syncd.read.crawl_stats import CrawlStats
from tests.daemon_support import metric_samples

VERIFY = "syncd mirror verify src:S dst:T"


def _counts(**given: int) -> dict[str, int]:
    return {"identical": 44, "missing": 0, "extra": 0, "different": 0, "errors": 0, "excused": 0, "left_on_target": 0, **given}


def test_a_copy_that_left_objects_succeeds_and_says_what_it_left() -> None:
    left = [{"kind": "space", "title": "Old", "path": "Archive/Old"}, {"kind": "site-space", "title": "old", "path": "Docs/old"},
            {"kind": "collection", "title": "Mine", "path": "Mine"}, {"kind": "space", "title": "X", "path": "X"}]  # fmt: skip
    summary = {"verify": _counts(left_on_target=5), "left_on_target": left}
    assert mirror_reason("succeeded", summary, VERIFY) == (
        "5 object(s) the source no longer has were left on the target (copy mode keeps them): "
        "space 'Old' at Archive/Old, site-space 'old' at Docs/old, collection 'Mine' and 2 more"
    )
    assert mirror_reason("succeeded", {"verify": _counts(), "left_on_target": []}, VERIFY) is None  # a plain success


def test_a_partial_mirror_says_the_counts_in_words_with_names_the_failures_and_what_to_do() -> None:
    summary = {
        "verify": _counts(missing=2, different=1), "read_cleanly": True, "residue": 0, "left_on_target": [],
        "differences": ["space 'A' missing on the target", "space 'B' missing on the target", "space 'C' different (pages)"],
        "failures": ["create:space:a: 403 forbidden"],
    }  # fmt: skip
    said = mirror_reason("partial", summary, VERIFY + " --mode mirror")
    assert said == (
        "the target is not equal to the source (2 missing on the target, 1 different: space 'A' missing on the target, "
        "space 'B' missing on the target, space 'C' different (pages)); 1 operation failed (create:space:a: 403 forbidden): "
        "the next run tries again; `syncd mirror verify src:S dst:T --mode mirror` lists every difference"
    )
    assert "{" not in said  # never a dict of counts
    unread = mirror_reason("partial", {"verify": _counts(), "read_cleanly": False}, VERIFY)
    assert unread is not None and unread.startswith("a side could not be read completely, so nothing was deleted this time")
    assert mirror_reason("failed", summary, VERIFY) is None  # the error says it


def test_a_partial_sync_names_what_it_could_not_read_and_that_the_next_run_reads_it() -> None:
    summary: dict[str, Any] = {"errors": ["/v1/orgs/O/spaces: 503 unavailable", "/v1/spaces/s1/content: timed out"]}
    assert sync_reason("partial", summary) == (
        "2 listings could not be read (/v1/orgs/O/spaces: 503 unavailable, /v1/spaces/s1/content: timed out): "
        "the mirror keeps what it had of them, and the next run reads them again"
    )
    assert sync_reason("succeeded", summary) is None


def test_a_partial_backup_says_what_it_lacks_and_to_check_the_last_good_one() -> None:
    said = backup_reason("partial", {"errors": ["/v1/orgs/O/teams: 500"], "files": {"downloaded": 3, "skipped": 0, "failed": 2}})
    assert said is not None and said.startswith("1 listing could not be read (/v1/orgs/O/teams: 500); 2 files could not be downloaded: ")
    assert "nothing was pruned" in said and "syncd check FILE" in said
    emptier = "the backup found 2 objects where the newest complete one has 40: kept as partial, nothing pruned"
    assert backup_reason("partial", {"reason": emptier}) == emptier  # what the runner said stays
    assert backup_reason("succeeded", {}) is None


def _stats(objects: int) -> CrawlStats:
    stats = CrawlStats()
    stats.objects["space"] = objects
    return stats


class _Client:
    stats = ClientStats()


def test_reading_counts_every_crawl_of_the_run_so_it_never_goes_down() -> None:
    """A mirror run reads its source and its target side by side, then both again: each crawl
    has counts of its own. The number shown is the run's, and only grows."""
    seen: list[dict[str, Any]] = []
    progress = RunProgress(seen.append)
    source, target = _stats(0), _stats(0)
    for s, t in ((30, 0), (30, 10), (73, 10), (73, 41), (73, 60)):
        source.objects["space"], target.objects["space"] = s, t
        progress.reading(source, _Client())  # type: ignore[arg-type]
        progress.reading(target, _Client())  # type: ignore[arg-type]
    target.objects["space"] = 20  # a listing started again from its first page took its rows back
    progress.reading(target, _Client())  # type: ignore[arg-type]
    again = _stats(5)  # the read after a round
    progress.reading(again, _Client())  # type: ignore[arg-type]
    shown = [report["done"] for report in seen]
    assert shown == sorted(shown) and shown[-1] == 73 + 60 + 5 == progress.objects_read


def test_progress_gets_a_total_and_an_eta_from_the_previous_run() -> None:
    reading = {"step": "reading", "done": 25, "total": None, "detail": ""}
    assert estimate(reading, 100, 10.0) == {**reading, "total": 100, "estimated": True, "eta_seconds": 30.0}
    assert estimate(reading, None, 10.0)["eta_seconds"] is None and estimate(reading, None, 10.0)["total"] is None
    assert estimate({**reading, "done": 120}, 100, 10.0)["total"] is None  # bigger than last time: no total it has passed
    applying = {"step": "applying", "done": 10, "total": 40, "detail": ""}
    assert estimate(applying, 5, 20.0) == {**applying, "eta_seconds": 60.0}  # a step's own total wins
    assert previous_size({"objects_read": 120}) == 120 and previous_size({"objects": 7}) == 7 and previous_size({"objects": True}) is None


def test_the_last_outcome_metric_is_one_series_per_job_with_its_reason() -> None:
    metrics = DaemonMetrics()
    metrics.run_finished("copy", "partial", 1.0, 1e9, "the target is not equal to the source (1 missing on the target)")
    metrics.run_finished("copy", "succeeded", 1.0, 1e9 + 60, None)
    metrics.run_finished("other", "failed", 1.0, 1e9, "x" * 500)
    text = metrics.render().decode()
    lines = [line for line in text.splitlines() if line.startswith("syncd_job_last_outcome{")]
    assert len(lines) == 2  # replaced at each run: one series per job
    assert metric_samples(text, "syncd_job_last_outcome", job="copy", outcome="succeeded", reason="") == [1.0]
    (other,) = [line for line in lines if 'job="other"' in line]
    assert 'outcome="failed"' in other and "x" * 199 + "…" in other and "x" * 200 not in other
    metrics.forget_job("copy")
    assert "job=\"copy\"" not in metrics.render().decode().split("syncd_job_last_outcome")[-1]
