"""verify.compare: identical, missing, extra, different fields, order and content, through
the id map; and the text it prints."""

from __future__ import annotations

from syncd.replay.snapshot import IdMap
from syncd.replay.verify import compare, render
from tests.replay_support import OrgMaker, copy_once, empty_target


def copied_pair() -> tuple[OrgMaker, dict[str, str], OrgMaker, IdMap]:
    source = OrgMaker()
    ids = {"guides": source.collection("Guides")}
    for name in ("One", "Two", "Three"):
        ids[name] = source.space(name, ids["guides"])
        page = source.page(ids[name], f"{name} intro", f"# {name}\n")
        source.page(ids[name], "Child", "child text", page)
    ids["site"] = source.site("Docs")
    ids["section"], _ = source.section(ids["site"], ids["One"], "Guides")
    _, target, idmap = copy_once(source.snapshot(), empty_target())
    return source, ids, OrgMaker.of(target, "x"), idmap


def test_a_copy_is_equal() -> None:
    source, _, target, idmap = copied_pair()
    result = compare(source.snapshot(), target.snapshot(), idmap)
    assert result.equal and not (result.missing or result.extra or result.different or result.errors)
    assert {e.kind for e in result.identical} >= {"organization", "collection", "space", "site", "site-section", "site-space", "site-adaptive-schema"}
    lines = render(result)
    assert lines[-1].endswith(": equal") and "0 missing on target" in lines[-1]
    assert any(line.startswith("= space 'One'") for line in render(result, identical=True))


def test_missing_and_extra() -> None:
    source, _, target, idmap = copied_pair()
    new = source.space("Four")
    foreign = target.collection("Foreign")
    result = compare(source.snapshot(), target.snapshot(), idmap)
    assert [(e.kind, e.source_id) for e in result.missing] == [("space", new)]
    assert [(e.kind, e.target_id) for e in result.extra] == [("collection", foreign)]
    assert not result.equal
    text = "\n".join(render(result))
    assert "+ space 'Four'" in text and "missing on the target" in text and "- collection 'Foreign'" in text


def test_a_source_object_that_is_gone_leaves_an_extra() -> None:
    source, ids, target, idmap = copied_pair()
    source.call("space.delete", {"id": ids["Three"]})
    result = compare(source.snapshot(), target.snapshot(), idmap)
    assert [(e.kind, e.target_id, e.note) for e in result.extra] == [("space", idmap.target("space", ids["Three"]), f"its source {ids['Three']} is gone")]


def test_different_fields_with_references_mapped() -> None:
    source, ids, target, idmap = copied_pair()
    target.call("space.patch", {"id": idmap.target("space", ids["Two"]) or ""}, title="Deux", emoji="1f680")
    other = target.collection("Elsewhere")
    target.move("space", idmap.target("space", ids["One"]) or "", parent=other)
    result = compare(source.snapshot(), target.snapshot(), idmap)
    fields = {e.source_id: e.fields for e in result.different}
    assert fields[ids["Two"]] == {"title": ("Two", "Deux"), "emoji": ("", "1f680")}
    assert fields[ids["One"]]["parent"] == (ids["guides"], f"<target collection {other}>")
    assert "    title: source 'Two', target 'Deux'" in render(result)


def test_different_order() -> None:
    source, ids, target, idmap = copied_pair()
    target.move("space", idmap.target("space", ids["Three"]) or "", before=idmap.target("space", ids["One"]))
    result = compare(source.snapshot(), target.snapshot(), idmap)
    assert [(e.source_id, e.fields) for e in result.different] == [(ids["Three"], {"position": (2, 0)})]


def test_different_page_markdown_and_files() -> None:
    source, ids, target, idmap = copied_pair()
    space = idmap.target("space", ids["One"]) or ""
    first_page = target.model.pages[("space", space)][0]
    child = target.model.pages[("page", first_page)][0]
    target.model.set_data("page", child, markdown="changed")
    target.file(space, "extra.png")
    result = compare(source.snapshot(), target.snapshot(), idmap)
    (entry,) = result.different
    assert entry.source_id == ids["One"]
    assert entry.fields["pages"][0] == "1 pages differ (markdown): One intro/Child"
    assert entry.fields["files"] == ([], ["extra.png"])


def test_page_order_counts() -> None:
    source, ids, target, idmap = copied_pair()
    space = idmap.target("space", ids["Two"]) or ""
    target.page(space, "Late page")
    source.page(ids["Two"], "Late page")
    assert compare(source.snapshot(), target.snapshot(), idmap).equal
    pages = target.model.pages[("space", space)]
    pages.insert(0, pages.pop())
    result = compare(source.snapshot(), target.snapshot(), idmap)
    assert [e.source_id for e in result.different] == [ids["Two"]] and "pages" in result.different[0].fields


def test_an_id_map_giving_one_target_object_to_two_sources_is_an_error() -> None:
    source, ids, target, idmap = copied_pair()
    idmap.put("space", "phantom", idmap.target("space", ids["One"]) or "", "adopted")
    result = compare(source.snapshot(), target.snapshot(), idmap)
    assert result.errors and "too" in result.errors[0].note and not result.equal
    assert any(line.startswith("! space") for line in render(result))
