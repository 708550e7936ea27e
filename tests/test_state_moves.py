"""A reorder among siblings logs only what moved; derived kinds log no changes."""

from __future__ import annotations

from pathlib import Path

from syncd.state import StateStore, Row, content_hash


def _row(kind: str, item: str, position: int, parent: str = "p") -> Row:
    data = {"id": item, "title": item.upper()}
    return Row("t", kind, item, "o", "collection", parent, position, "/list", None, data, content_hash(data))


def _run(mirror: StateStore, order: list[str], quiet: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    run = mirror.start_run("sync", "t", "t")
    mirror.stage(run, [_row("space", item, pos) for pos, item in enumerate(order)])
    mirror.stage(run, [_row("view", item, pos) for pos, item in enumerate(order)])
    mirror.record_listing(run, "t", "/list", True)
    mirror.finish_run(run, "complete", quiet_kinds=quiet)
    return sorted((c["op"], c["id"]) for c in mirror.changes(run) if c["op"] != "created")


def test_moving_one_space_logs_one_move(state: Path | str) -> None:
    with StateStore(state) as mirror:
        _run(mirror, ["a", "b", "c", "d", "e"], quiet=("view",))
        assert _run(mirror, ["b", "c", "d", "e", "a"], quiet=("view",)) == [("moved", "a")]
        assert _run(mirror, ["b", "c", "e", "a"], quiet=("view",)) == [("deleted", "d")]
        current = [r["id"] for r in mirror.current("t", kind="space")]
        assert current == ["b", "c", "e", "a"]
        changes = _run(mirror, ["e", "b", "c", "a"])
        assert changes == [("moved", "e"), ("moved", "e")]  # the space and its (now loud) view
