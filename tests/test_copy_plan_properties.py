"""Properties of the write side's planner (`plan_copy`) over organizations drawn as structure
(tests/strategies.py): a failing organization shrinks to the smallest one that still fails.

- Into an empty target: every source object is created exactly once, after what holds it
  (its parent collection, its site, its section, its space), and nothing is deleted.
- Into a target equal to the source (the id map of an earlier copy): nothing to do. Without
  the id map: everything adopted, once, nothing created.
- Into a target that lost some objects (and what went with them): exactly those are created.
- In mirror mode, after the source lost some objects syncd made: exactly those are deleted,
  what is inside an object before the object.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from syncd.copy import ContentStrategy, IdMap, Node, Plan, Snapshot, plan_copy
from syncd.copy.apply import dependencies
from syncd.copy.rules import ref_id
from tests.strategies import COPIED, OrgShape, copied, mapping, organizations, remove, snapshot, twin

SAME_TOKEN = ContentStrategy(same_credentials=True)
BY_URL = ContentStrategy(readable=True)
contents = st.sampled_from((SAME_TOKEN, BY_URL))
modes = st.sampled_from(("copy", "mirror"))
NO_SPACE_REASON = "a section is created with a space, and no space is copied"


def empty_target() -> Snapshot:
    return Snapshot("dst", "TORG", [Node("organization", "TORG", None, None, {"object": "organization", "id": "TORG", "title": "Target"})])


def products(plan: Plan, action: str = "create") -> Counter[tuple[str, str]]:
    """How many ops of `action` make each (kind, source id) (a section also makes its first site-space)."""
    return Counter(made for op in plan.ops if op.action == action for made in op.products)


def deleted(plan: Plan) -> Counter[tuple[str, str]]:
    return Counter((op.kind, str(op.source_id)) for op in plan.ops if op.action == "delete")


def holders(source: Snapshot, kind: str, node_id: str) -> list[tuple[str, str]]:
    """What an object needs on the target before it can be made there."""
    node = source.get(kind, node_id)
    assert node is not None
    if kind in ("collection", "space"):
        parent = ref_id(node.data.get("parent"))
        return [("collection", parent)] if parent else []
    if kind == "site":
        return []
    assert node.parent is not None and node.parent[0] == "site"
    out = [node.parent]
    if kind == "site-space":
        out.append(("space", str(node.data["space"]["id"])))
        if node.data.get("section"):
            out.append(("site-section", str(node.data["section"])))
    return out


def before(deps: Mapping[str, list[str]], key: str) -> set[str]:
    """Every op that must be done before `key` (transitively)."""
    seen: set[str] = set()
    todo = list(deps[key])
    while todo:
        here = todo.pop()
        if here not in seen:
            seen.add(here)
            todo.extend(deps[here])
    return seen


def creatable(source: Snapshot) -> set[tuple[str, str]]:
    """Copied objects a plan can make: a section needs a space to be made with."""
    if source.of_kind("space"):
        return copied(source)
    return {key for key in copied(source) if key[0] != "site-section"}


def assert_made_after_their_holders(plan: Plan, source: Snapshot) -> None:
    deps = dependencies(plan)  # also: no repeated key, no cycle
    makers = {made: op.key for op in plan.ops if op.action == "create" for made in op.products}
    for (kind, node_id), key in makers.items():
        for holder in holders(source, kind, node_id):
            if holder in makers and makers[holder] != key:
                assert makers[holder] in before(deps, key), f"{key} does not wait for {makers[holder]} (its {holder[0]})"


@given(organizations(), modes, contents)
def test_into_an_empty_target_each_object_is_created_once_after_its_holders(shape: OrgShape, mode: str, content: ContentStrategy) -> None:
    source = snapshot(shape)
    plan = plan_copy(source, empty_target(), IdMap(), mode, content=content)  # type: ignore[arg-type]
    made = products(plan)
    assert set(made) == creatable(source) and set(made.values()) <= {1}, made
    assert not [op.key for op in plan.ops if op.action in ("delete", "adopt", "move")]
    assert plan.refused is None
    unmade = copied(source) - creatable(source)
    assert {(s.kind, s.source_id) for s in plan.skips if s.reason.startswith(NO_SPACE_REASON)} == unmade
    assert_made_after_their_holders(plan, source)
    content_ops = {op.source_id: op for op in plan.ops if op.action == "content"}
    if content is SAME_TOKEN:  # a duplicate of the source space brings its content
        assert not content_ops
        assert {op.recipe for op in plan.ops if op.key.startswith("create:space:")} <= {"duplicate-transfer"}
    else:  # imported from the space's URL, into the space once it is made
        assert set(content_ops) == {n.id for n in source.of_kind("space") if source.children("page", ("space", n.id))}
        deps = dependencies(plan)
        assert all(f"create:space:{space}" in deps[op.key] for space, op in content_ops.items())


@given(organizations(), modes)
def test_a_target_equal_to_the_source_plans_nothing(shape: OrgShape, mode: str) -> None:
    source = snapshot(shape)
    target = snapshot(shape, tenant="dst", org="TORG", prefix="T")
    plan = plan_copy(source, target, mapping(source, target, "T"), mode, content=SAME_TOKEN)  # type: ignore[arg-type]
    assert [op.key for op in plan.ops] == [] and plan.refused is None


@given(organizations())
def test_an_equal_target_without_an_id_map_is_adopted_object_for_object(shape: OrgShape) -> None:
    source = snapshot(shape)
    target = snapshot(shape, tenant="dst", org="TORG", prefix="T")
    plan = plan_copy(source, target, IdMap(), "mirror", content=SAME_TOKEN)
    adopted = {(op.kind, op.source_id): op.target_id for op in plan.ops if op.action == "adopt"}
    assert adopted == {key: twin(key[1], "T") for key in copied(source)}
    assert [op.key for op in plan.ops if op.action != "adopt"] == []


@st.composite
def organization_and_some_of_it(draw: st.DrawFn) -> tuple[OrgShape, set[tuple[str, str]]]:
    """An organization and a few of its objects (by source id)."""
    shape = draw(organizations())
    keys = sorted(copied(snapshot(shape)))
    return shape, draw(st.sets(st.sampled_from(keys), max_size=4)) if keys else set()


@given(organization_and_some_of_it(), modes)
def test_what_the_target_lost_is_created_again_and_nothing_else(drawn: tuple[OrgShape, set[tuple[str, str]]], mode: str) -> None:
    shape, lost = drawn
    source = snapshot(shape)
    full = snapshot(shape, tenant="dst", org="TORG", prefix="T")
    target, gone = remove(full, {(kind, twin(node_id, "T")) for kind, node_id in lost})
    plan = plan_copy(source, target, mapping(source, target, "T"), mode, content=SAME_TOKEN)  # type: ignore[arg-type]
    expected = {(kind, twin(node_id, "S")) for kind, node_id in gone if kind in COPIED} & creatable(source)
    made = products(plan)
    assert set(made) == expected and set(made.values()) <= {1}, made
    assert not [op.key for op in plan.ops if op.action in ("delete", "adopt")]
    assert_made_after_their_holders(plan, source)


@given(organization_and_some_of_it())
def test_a_mirror_deletes_what_the_source_lost_inside_out(drawn: tuple[OrgShape, set[tuple[str, str]]]) -> None:
    shape, lost = drawn
    full = snapshot(shape)
    target = snapshot(shape, tenant="dst", org="TORG", prefix="T")
    idmap = mapping(full, target, "T")
    source, gone = remove(full, lost)
    plan = plan_copy(source, target, idmap, "mirror", max_delete=1000, content=SAME_TOKEN)
    if not source.of_kind("collection") and not source.of_kind("space") and (full.of_kind("collection") or full.of_kind("space")):
        assert plan.refused is not None and "looks empty" in plan.refused
        return
    assert deleted(plan) == Counter({key: 1 for key in gone if key[0] in COPIED})
    assert not [op.key for op in plan.ops if op.action in ("create", "adopt")]
    deps = dependencies(plan)
    deleters = {(op.kind, op.source_id): op.key for op in plan.ops if op.action == "delete"}
    for (kind, node_id), key in deleters.items():
        for holder in holders(full, kind, node_id):
            if holder in deleters:
                assert key in before(deps, deleters[holder]), f"{deleters[holder]} does not wait for {key}, which it holds"
