"""What a saved plan binds (`syncd.copy.planfile`): pure functions, no emulator.

`check_same`: the file's ops must be exactly those syncd plans again from what it read, and the
one-line refusal names the first difference. `restrict`: a later round of the plan's apply
keeps only what the plan allows (every op it holds; with `binds="deletes"`, anything but a delete
it does not hold) and reports the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncd.catalog import BY_NAME
from syncd.copy.invariants import Bounds
from syncd.copy.journal import Pair
from syncd.copy.model import IdMap, Node, Snapshot
from syncd.copy.ops import Op, Plan, Skip
from syncd.copy.planfile import (
    PlanBreaksRules,
    PlanFileError,
    PlanMismatch,
    FINGERPRINTED_KINDS,
    SavedPlan,
    StalePlan,
    check_fresh,
    check_intent,
    check_same,
    load_plan,
    plan_document,
    restrict,
    save_plan,
    sides_fingerprints,
)

PAIR = Pair("src", "S", "dst", "T")
FP_S, FP_T = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def _op(key: str, action: str = "create", kind: str = "space", **fields: object) -> Op:
    return Op(key=key, action=action, kind=kind, source_id=key.rsplit(":", 1)[-1], **fields)  # type: ignore[arg-type]


def _saved(*ops: Op, binds: str = "all") -> SavedPlan:
    return SavedPlan(PAIR, "src:S", "dst:T", "copy", Plan(list(ops)), {"source": FP_S, "target": FP_T}, binds=binds)  # type: ignore[arg-type]


def test_the_same_ops_pass_in_any_order() -> None:
    a, b = _op("create:space:a", title="A"), _op("patch:space:b", "patch", title="B")
    check_same(_saved(a, b), Plan([b, a]))


def test_an_op_only_in_the_file_is_named() -> None:
    with pytest.raises(PlanMismatch) as caught:
        check_same(_saved(_op("create:space:a"), _op("delete:space:x", "delete")), Plan([_op("create:space:a")]))
    assert "its op 'delete:space:x' (delete space) is not in it; nothing was written" in str(caught.value)


def test_an_op_only_in_the_new_plan_is_named() -> None:
    with pytest.raises(PlanMismatch) as caught:
        check_same(_saved(_op("create:space:a")), Plan([_op("create:space:a"), _op("create:collection:c", kind="collection")]))
    assert "it lacks op 'create:collection:c' (create collection); nothing" in str(caught.value)


def test_an_op_that_differs_names_every_field_either_side_has() -> None:
    saved = _op("create:space:a", title="Old", path="/v1/orgs/T/spaces")
    fresh = _op("create:space:a", title="New", path="/v1/orgs/T/spaces", after=["create:collection:c"])
    with pytest.raises(PlanMismatch) as caught:
        check_same(_saved(saved), Plan([fresh]))
    assert "its op 'create:space:a' differs in after, title; nothing was written" in str(caught.value)


def test_more_differences_are_counted_after_the_first() -> None:
    with pytest.raises(PlanMismatch) as caught:
        check_same(_saved(_op("create:space:a"), _op("create:space:b")), Plan([_op("create:space:c")]))
    message = str(caught.value)
    assert message.count("\n") == 0 and "its op 'create:space:a' (create space) is not in it (and 2 more)" in message
    with pytest.raises(PlanMismatch) as caught:
        check_same(_saved(_op("create:space:a")), Plan([_op("create:space:b")]))
    assert "its op 'create:space:a' (create space) is not in it (and 1 more)" in str(caught.value)
    with pytest.raises(PlanMismatch) as caught:
        check_same(_saved(_op("create:space:a")), Plan([]))
    assert "(and" not in str(caught.value)


def test_a_later_round_keeps_only_the_plans_ops() -> None:
    held, new, gone = _op("create:space:a"), _op("create:space:b"), _op("delete:space:d", "delete")
    later = Plan([held, new, gone], skips=[Skip("member", "m", "Member", "no API")], refused="why not", warnings=["careful"])
    kept, dropped = restrict(later, _saved(held, _op("create:space:z")))
    assert kept.ops == [held] and dropped == [new, gone]
    assert (kept.skips, kept.refused, kept.warnings) == (later.skips, "why not", ["careful"])  # carried over
    assert kept.skips is not later.skips and kept.warnings is not later.warnings


def test_a_plan_whose_deletes_were_confirmed_binds_only_its_deletes() -> None:
    held_delete, new, other_delete = _op("delete:space:a", "delete"), _op("create:space:b"), _op("delete:space:d", "delete")
    patch = _op("patch:space:p", "patch")
    kept, dropped = restrict(Plan([held_delete, new, patch, other_delete]), _saved(held_delete, binds="deletes"))
    assert kept.ops == [held_delete, new, patch] and dropped == [other_delete]


def test_a_stale_plan_says_which_side_changed_and_since_when() -> None:
    saved = _saved(_op("create:space:a"))
    saved.fingerprints = {"source": "sha256:s", "target": "sha256:t"}
    check_fresh(saved, {"source": "sha256:s", "target": "sha256:t"})
    for now, what in (
        ({"source": "sha256:S", "target": "sha256:t"}, "the source changed"),
        ({"source": "sha256:s", "target": "sha256:T"}, "the target changed"),
        ({"source": "sha256:S", "target": "sha256:T"}, "the source and the target changed"),
    ):
        with pytest.raises(StalePlan) as caught:
            check_fresh(saved, now)
        assert str(caught.value) == f"{what} since the plan was made (at an unknown time): make a new plan"
    saved.created_at = "2026-11-27T10:00:00Z"
    with pytest.raises(StalePlan, match=r"since the plan was made \(2026-11-27T10:00:00Z\)"):
        check_fresh(saved, {})


def test_a_plan_file_is_indented_for_review_and_private(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    save_plan(path, {"format": "x", "ops": [{"key": "a", "after": ("b",)}], "kinds": {"space"}})
    assert path.read_text() == '{\n  "format": "x",\n  "ops": [\n    {\n      "key": "a",\n      "after": [\n        "b"\n      ]\n    }\n  ],\n  "kinds": [\n    "space"\n  ]\n}\n'
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_plan_file_that_breaks_the_rules_is_refused_before_anything_is_read() -> None:
    bounds = Bounds(target_org="T", mode="copy", max_delete=0)
    check_intent(_saved(_op("create:space:a", method="POST", path="/v1/orgs/T/spaces")), bounds)
    with pytest.raises(PlanBreaksRules) as caught:
        check_intent(_saved(_op("delete:space:a", "delete", method="DELETE", path="/v1/spaces/a")), bounds)
    assert str(caught.value).startswith("the plan file breaks the run's rules, nothing was written: ")
    assert "mode copy never deletes" in str(caught.value)
    refused = _saved(_op("create:space:a"))
    refused.plan.refused = "deletes beyond --max-delete"
    with pytest.raises(PlanBreaksRules, match=r"^the plan must not be applied: deletes beyond --max-delete$"):
        check_intent(refused, bounds)


def test_a_saved_plan_reads_back_as_it_was_written(tmp_path: Path) -> None:
    ops = [_op("create:space:a", method="POST", path="/v1/orgs/T/spaces", title="Ä guide", body={"title": "Ä guide"}),
           _op("patch:space:b", "patch", method="PATCH", path="/v1/spaces/b", after=["create:space:a"])]
    skips = [Skip("member", "m1", "Ann", "no API writes members", ("missing",)), Skip("comment", None, "", "history")]
    saved = SavedPlan(PAIR, "src:S", "dst:T", "copy", Plan(ops, skips, None, ["careful"]),
                      {"source": FP_S, "target": FP_T}, {"adopt": True}, "2026-11-27T10:00:00+00:00")
    path = tmp_path / "plan.json"
    save_plan(path, plan_document(saved, []))
    read = load_plan(path)
    assert (read.pair, read.source, read.target, read.mode, read.fingerprints, read.options, read.created_at) == (
        PAIR, "src:S", "dst:T", "copy", {"source": FP_S, "target": FP_T}, {"adopt": True}, "2026-11-27T10:00:00+00:00")
    assert read.plan.ops == ops and read.plan.skips == skips and read.plan.warnings == ["careful"] and read.plan.refused is None
    check_same(read, Plan(ops))


def test_an_unreadable_plan_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    with pytest.raises(PlanFileError, match=r"plan.json: no such plan file$"):
        load_plan(path)
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(PlanFileError, match=r"plan.json cannot be read as a plan: "):
        load_plan(path)
    path.write_text('{"format": 1, "format": 2}')
    with pytest.raises(PlanFileError, match=r"plan.json cannot be read as a plan: the name 'format' is given twice in one object$"):
        load_plan(path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PlanFileError, match=r"plan.json cannot be read as a plan: "):
        load_plan(path)


def test_a_plan_of_another_version_or_damaged_is_one_line_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    document = plan_document(_saved(), [])
    save_plan(path, {**document, "version": 99})
    with pytest.raises(PlanFileError, match=r"plan.json is a plan of format version 99; this syncd applies version \d+: make a new plan$"):
        load_plan(path)
    save_plan(path, {**document, "ops": "all of them"})
    with pytest.raises(PlanFileError, match=r"plan.json is a damaged plan: .+: make a new plan$"):
        load_plan(path)


def test_a_skip_without_title_or_reason_reads_as_empty_text(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    document = plan_document(_saved(), [])
    save_plan(path, {**document, "skips": [{"kind": "member", "source_id": "m"}]})
    assert load_plan(path).plan.skips == [Skip("member", "m", "", "")]


def _side(*nodes: Node) -> Snapshot:
    return Snapshot("dst", "T", nodes)


def _space(id: str = "s1", parent: tuple[str, str] | None = ("collection", "c1"), **data: object) -> Node:
    return Node("space", id, parent, 0, {"object": "space", "id": id, "title": "Guide", **data})


def test_a_fingerprint_changes_with_what_an_object_means_and_only_with_that() -> None:
    assert FINGERPRINTED_KINDS <= set(BY_NAME)  # each is hashed by what its catalog entry says it means
    maps = IdMap(), IdMap()
    maps[0].put("space", "a", "s1", "created")
    maps[1].put("space", "a", "s2", "created")
    base = _side(_space())
    same = sides_fingerprints(base, base, maps[0])
    assert same == sides_fingerprints(_side(_space()), _side(_space()), maps[0])
    assert same["source"] != same["target"]  # the target's holds its id map
    # Volatile fields are not what an object means: a plan does not go stale on them.
    assert sides_fingerprints(_side(_space(updatedAt="later")), base, maps[0])["source"] == same["source"]
    for changed in (_space(title="Other"), _space(parent=("collection", "c2")), _space(parent=None), _space(id="s9")):
        assert sides_fingerprints(_side(changed), base, maps[0])["source"] != same["source"], changed
    # The target's fingerprint follows its id map (what syncd made and adopted there).
    assert sides_fingerprints(base, base, maps[1])["target"] != same["target"]
    assert sides_fingerprints(base, base, IdMap())["target"] != same["target"]


def test_a_plan_without_refs_or_a_time_reads_them_as_empty(tmp_path: Path) -> None:
    document = plan_document(_saved(), [])
    for side in ("source", "target"):
        document[side] = {key: value for key, value in document[side].items() if key != "ref"}
    document.pop("created_at", None)
    path = tmp_path / "plan.json"
    save_plan(path, document)
    read = load_plan(path)
    assert (read.source, read.target, read.created_at) == ("", "", "")
    save_plan(path, plan_document(read, []))  # and it is written back as text the loader accepts
    assert (load_plan(path).source, load_plan(path).created_at) == ("", "")
