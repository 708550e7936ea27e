"""A plan file written as it is made (issue 46): `save_plan(path, plan_fields(...))` writes the
JSON of one entry of the plan's lists at a time, never the whole document or its whole text.

The file holds the same bytes the whole document dumped at once (`json.dumps(plan_document(...),
indent=2, default=list)`) held, reads back with `load_plan` and matches the schema; it appears
under its name only once whole (an interrupted write leaves the old file, or none, and no
temporary file), 0600 (a file there keeps its mode). Pure functions on a plan made here; the
end-to-end `mirror plan --out` then `mirror apply --plan` is tests/test_plan_review.py's.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.copy.journal import Pair
from syncd.copy.ops import Leftover, Op, Plan, Ref, Skip, op_to_json
from syncd.copy.planfile import SavedPlan, check_same, load_plan, plan_document, plan_fields, save_plan, write_plan
from syncd.copy.review import FieldChange, Item
from tests.schema_support import assert_valid

FP_S, FP_T = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def _plan(ops: list[Op] | None = None) -> tuple[SavedPlan, list[Item]]:
    """A plan with every part the document has, and text that JSON escapes (quotes, a newline,
    non-ASCII, a control character)."""
    if ops is None:
        ops = [
            Op(key=f"create:space:s{n}", action="create", kind="space", source_id=f"s{n}", method="POST", path="/v1/orgs/T/spaces",
               title=f'Guide "{n}" ÄÖ', body={"title": f"Guide {n}\nsecond line\x01", "parent": Ref("collection", "c1"), "tags": ("a", "b")},
               after=[f"create:space:s{n - 1}"] if n else [], preview=["line"], makes=[("page", f"p{n}")])
            for n in range(5)
        ]  # fmt: skip
    skips = [Skip("member", "m1", "Ann", "no API writes members", ("missing",)), Skip("comment", None, "", "history")]
    left = [Leftover("space", "t9", "Old <notes>", "Archive/Old <notes>")]
    saved = SavedPlan(Pair("src", "S", "dst", "T"), "src:S", "dst:T", "mirror", Plan(ops, skips, None, ["careful", "ünïcode"], left),
                      {"source": FP_S, "target": FP_T}, {"max_delete": 10, "adopt": True}, "2026-12-07T06:00:00+00:00")  # fmt: skip
    items = [
        Item("create", "space", "Guide 0", "Docs/Guide 0", "create:space:s0"),
        Item("update", "collection", "Docs", "Docs", "patch:collection:c", (FieldChange("title", "'Old'", "'Docs'", "Old", "Docs"),)),
        Item("move", "space", "Other", "Docs/Other", "move:space:o", to_path="Else/Other", detail="below 'Else'"),
    ]
    return saved, items


def _whole(saved: SavedPlan, items: list[Item]) -> str:
    """The text of the plan as it was written before: the whole document, dumped at once."""
    return json.dumps(plan_document(saved, items), indent=2, default=list) + "\n"


def test_the_streamed_file_is_the_whole_document_byte_for_byte_and_reads_back(tmp_path: Path) -> None:
    saved, items = _plan()
    path = tmp_path / "plan.json"
    save_plan(path, plan_fields(saved, items))
    assert path.read_text(encoding="utf-8") == _whole(saved, items)
    assert_valid("mirror-plan", json.loads(path.read_text()))
    read = load_plan(path)
    assert (read.pair, read.mode, read.fingerprints, read.options, read.created_at) == (
        saved.pair, "mirror", saved.fingerprints, saved.options, saved.created_at)
    assert read.plan.skips == saved.plan.skips and read.plan.warnings == saved.plan.warnings
    assert [op_to_json(op) for op in read.plan.ops] == json.loads(json.dumps([op_to_json(op) for op in saved.plan.ops]))
    check_same(read, saved.plan)
    assert os.listdir(tmp_path) == ["plan.json"]


def test_an_empty_plan_and_any_document_are_written_as_json_dumps_writes_them() -> None:
    saved, _ = _plan([])
    saved.plan.skips.clear()
    saved.plan.left.clear()
    for document in (plan_fields(saved, []), {}, {"format": "x", "ops": [{"key": "a", "after": ("b",)}], "kinds": {"space"}, "n": None}):
        whole = json.dumps({k: list(v) if isinstance(v, Iterator) else v for k, v in document.items()}, indent=2, default=list) + "\n"
        handle = io.StringIO()
        write_plan(handle, document)
        assert handle.getvalue() == whole


def test_each_op_is_written_before_the_next_one_is_made() -> None:
    saved, items = _plan()
    handle = io.StringIO()
    made: list[int] = []

    def ops() -> Iterator[dict[str, Any]]:
        for n, op in enumerate(saved.plan.ops):
            written = handle.getvalue()  # ops 0 .. n-1 are in it, whole; nothing of this one
            assert written.count('"recipe": ') == n and (n == 0 or written.endswith("\n    }"))
            made.append(n)
            yield op_to_json(op)

    write_plan(handle, {**plan_fields(saved, items), "ops": ops()})
    assert made == list(range(5)) and handle.getvalue() == _whole(saved, items)


class Unwritable:
    """A value JSON cannot write: `default=list` fails on it (TypeError)."""


@pytest.mark.parametrize("failure", [TypeError, KeyboardInterrupt])
def test_an_interrupted_write_leaves_the_old_file_or_none_and_no_temporary_file(tmp_path: Path, failure: type[BaseException]) -> None:
    saved, items = _plan()
    broken = Op(key="create:space:bad", action="create", kind="space", source_id="bad", body={"title": Unwritable()})
    bad_plan = SavedPlan(saved.pair, saved.source, saved.target, saved.mode, Plan([*saved.plan.ops[:3], broken, *saved.plan.ops[3:]]), saved.fingerprints)

    def interrupted() -> Iterator[dict[str, Any]]:
        yield op_to_json(saved.plan.ops[0])
        raise KeyboardInterrupt

    document = plan_fields(bad_plan, items) if failure is TypeError else {**plan_fields(saved, items), "ops": interrupted()}
    path = tmp_path / "plan.json"
    with pytest.raises(failure):
        save_plan(path, document)
    assert os.listdir(tmp_path) == []  # no half plan under its name, no temporary file
    save_plan(path, plan_fields(saved, items))
    document = plan_fields(bad_plan, items) if failure is TypeError else {**plan_fields(saved, items), "ops": interrupted()}
    with pytest.raises(failure):
        save_plan(path, document)
    assert os.listdir(tmp_path) == ["plan.json"] and path.read_text() == _whole(saved, items)  # the old plan, whole


def test_a_plan_file_is_private_and_a_file_there_keeps_its_mode(tmp_path: Path) -> None:
    saved, items = _plan()
    path = tmp_path / "plan.json"
    umask = os.umask(0o022)
    try:
        save_plan(path, plan_fields(saved, items))
        assert path.stat().st_mode & 0o777 == 0o600  # it names objects of both organizations
        path.chmod(0o640)  # an operator's choice
        save_plan(path, plan_fields(saved, items))
        assert path.stat().st_mode & 0o777 == 0o640 and path.read_text() == _whole(saved, items)
    finally:
        os.umask(umask)


def test_missing_folders_of_a_plan_file_are_made_private(tmp_path: Path) -> None:
    """`mirror plan --out state/plans/NAME.json` on a fresh checkout: the folders are made (0700),
    as `backup --out` makes them, instead of a FileNotFoundError."""
    saved, items = _plan()
    path = tmp_path / "state" / "plans" / "plan.json"
    save_plan(path, plan_fields(saved, items))
    assert path.read_text() == _whole(saved, items)
    assert (path.parent.stat().st_mode & 0o777, path.parent.parent.stat().st_mode & 0o777) == (0o700, 0o700)
