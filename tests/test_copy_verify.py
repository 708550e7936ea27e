"""verify: identical, missing, extra, different fields, order and content, through the id map;
differences the plan announced are excused; what a copy left in the source is an error."""

from __future__ import annotations

from syncd.copy import IdMap, Snapshot, compare, render
from syncd.copy.ops import Skip
from syncd.copy.verify import excuse, leave_extras, residue
from tests.copy_support import Blank, blank, rich_source  # noqa: F401 - `blank` is a fixture


async def copied(blank: Blank) -> dict[str, str]:
    ids = await rich_source(blank.source)
    report = await blank.copy(with_access=True)  # the raw comparisons below: the access settings too
    assert report.equal, report.verification.counts()
    return ids


async def test_a_copy_is_equal_and_renders_so(blank: Blank) -> None:
    await copied(blank)
    _, source, target, idmap = await blank.plan()
    result = compare(source, target, idmap)
    assert result.equal and not (result.missing or result.extra or result.different or result.errors)
    assert {e.kind for e in result.identical} >= {"organization", "collection", "space", "site", "site-section", "site-space", "site-adaptive-schema"}
    lines = render(result)
    assert lines[-1].endswith(": equal") and "0 missing on target" in lines[-1]
    assert any(line.startswith("= space 'Alpha'") for line in render(result, identical=True))


async def test_missing_extra_different_and_order(blank: Blank) -> None:
    ids = await copied(blank)
    new = await blank.source.space("Delta")
    foreign = await blank.target.collection("Foreign")
    _, _, _, idmap = await blank.plan()
    beta = idmap.target("space", ids["Beta"]) or ""
    await blank.target.call("PATCH", f"/v1/spaces/{beta}", {"title": "Beta (renamed)", "emoji": "1f4a1"})
    alpha, guides = idmap.target("space", ids["Alpha"]), idmap.target("collection", ids["guides"])
    other = await blank.target.space("Other", guides)
    await blank.target.move("space", other, before=alpha)
    _, source, target, idmap = await blank.plan()
    result = compare(source, target, idmap)
    assert [(e.kind, e.source_id) for e in result.missing] == [("space", new)]
    assert sorted((e.kind, e.target_id) for e in result.extra) == sorted([("collection", foreign), ("space", other)])
    fields = {e.source_id: e.fields for e in result.different}
    assert fields[ids["Beta"]] == {"title": ("Beta", "Beta (renamed)"), "emoji": ("1f680", "1f4a1")}
    assert ids["Alpha"] not in fields  # an unmapped sibling in front changes no mapped order
    text = "\n".join(render(result))
    assert "+ space 'Delta'" in text and "- collection 'Foreign'" in text and "    title: source 'Beta', target 'Beta (renamed)'" in text
    # Copy mode reads the same comparison with what is only on the target left there: not a difference.
    kept = leave_extras(result)
    assert kept.extra == [] and sorted((e.kind, e.target_id, e.path) for e in kept.left) == sorted([("collection", foreign, "Foreign"), ("space", other, "Guides/Other")])
    assert kept.counts()["left_on_target"] == 2 and kept.missing == result.missing and kept.different == result.different
    assert "- space 'Other' (" in "\n".join(render(kept)) and "2 left on target" in render(kept)[-1]
    assert leave_extras(compare(*(await blank.plan())[1:])).equal is False  # Delta is still missing
    # The plan announces the same two in its own list, with their paths.
    plan = (await blank.plan())[0]
    assert sorted((left.kind, left.target_id, left.path) for left in plan.left) == sorted([("collection", foreign, "Foreign"), ("space", other, "Guides/Other")])
    mirror_plan = (await blank.plan(mode="mirror"))[0]
    assert sorted(left.target_id for left in mirror_plan.left) == sorted([foreign, other])  # syncd did not make them: never deleted


async def test_order_counts(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    epsilon = await blank.source.space("Epsilon", ids["guides"])
    assert (await blank.copy(with_access=True)).equal
    _, _, _, idmap = await blank.plan()
    alpha = idmap.target("space", ids["Alpha"])
    await blank.target.move("space", idmap.target("space", epsilon) or "", before=alpha)  # now Epsilon stands before Alpha
    _, source, target, idmap = await blank.plan()
    moved = {e.source_id: e.fields for e in compare(source, target, idmap).different}
    assert len(moved) == 1 and set(moved) <= {epsilon, ids["Alpha"]} and set(next(iter(moved.values()))) == {"position"}  # the fewest moves


async def test_announced_differences_are_excused_and_the_rest_is_not(blank: Blank) -> None:
    ids = await copied(blank)
    new = await blank.source.space("Delta")
    _, source, target, idmap = await blank.plan()
    result = compare(source, target, idmap)
    assert not result.equal
    excused = excuse(result, [Skip("space", new, "Delta", "not copied on purpose", ("missing",))])
    assert excused.equal and [e.source_id for e in excused.excused] == [new]
    assert excused.counts()["excused"] == 1 and "1 announced by the plan" in render(excused)[-1]
    unrelated = excuse(result, [Skip("space", ids["Alpha"], "Alpha", "not copied on purpose", ("missing",))])
    assert not unrelated.equal


async def test_what_a_copy_made_in_the_source_and_left_there_is_residue(blank: Blank) -> None:
    await copied(blank)
    _, source, _, _ = await blank.plan()
    space = source.of_kind("space")[0]
    assert [e.source_id for e in residue(source, [space.id, "gone-already"])] == [space.id]
    assert residue(source, []) == []


def _row(kind: str, row_id: str, data: dict[str, object], parent: tuple[str, str] | None = None, position: int | None = None) -> dict[str, object]:
    return {"kind": kind, "id": row_id, "parent_kind": parent[0] if parent else None, "parent_id": parent[1] if parent else None, "position": position, "data": data}


def test_content_differences_name_the_pages_and_files() -> None:
    def org(tenant: str, org_id: str, space: str, markdown: str, files: list[str]) -> Snapshot:
        rows = [
            _row("organization", org_id, {}),
            _row("space", space, {"title": "Guide"}, ("organization", org_id), 0),
            _row("page", f"{space}/p1", {"title": "Intro", "markdown": "# Intro"}, ("space", space), 0),
            _row("page", f"{space}/p2", {"title": "Child", "markdown": markdown}, ("page", f"{space}/p1"), 0),
        ]
        rows += [_row("file", f"{space}/{name}", {"name": name, "contentType": "image/png", "size": 3}, ("space", space)) for name in files]
        return Snapshot.from_rows(tenant, org_id, rows)

    idmap = IdMap()
    idmap.put("space", "S", "T", "created")
    assert compare(org("src", "A", "S", "text", ["a.png"]), org("dst", "B", "T", "text", ["a.png"]), idmap).equal
    (entry,) = compare(org("src", "A", "S", "text", ["a.png"]), org("dst", "B", "T", "changed", ["a.png", "b.png"]), idmap).different
    assert entry.fields["pages"][0] == "1 pages differ (markdown): Intro/Child"
    assert entry.fields["files"] == (["a.png"], ["a.png", "b.png"])


async def test_what_the_source_dropped_is_left_by_a_copy_and_deleted_by_a_mirror(blank: Blank) -> None:
    ids = await copied(blank)
    await blank.source.call("DELETE", f"/v1/spaces/{ids['Gamma']}")
    plan, _, _, idmap = await blank.plan()
    gamma = idmap.target("space", ids["Gamma"])
    assert [(left.kind, left.target_id, left.title) for left in plan.left] == [("space", gamma, "Gamma")]
    report = await blank.copy()
    assert report.equal and [(left.kind, left.title, left.path) for left in report.left_on_target] == [("space", "Gamma", "Gamma")]
    assert report.summary()["left_on_target"] == [{"kind": "space", "title": "Gamma", "path": "Gamma"}]
    mirror = (await blank.plan(mode="mirror"))[0]
    assert [op.target_id for op in mirror.ops if op.action == "delete"] == [gamma] and mirror.left == []  # syncd made it: deleted, not left
