"""A site whose top level alternates sections and section groups is copied whole under both
emulator behaviours: syncd places a section relative to sections only (the spec's reference
for a section's move is a section), so a service that refuses a section's move naming a
group (`divergent`, the section-move-reference row) gets the same layout as one that
accepts it (`default`), and the next copy has nothing to do."""

from __future__ import annotations

from typing import Any

import pytest

from syncd.copy import site_layout, sites
from syncd.emulator.profile import PROFILE
from syncd.ordering import apply_move, mixed_moves
from tests.copy_support import Blank, Org, blank  # noqa: F401 - `blank` is a fixture

# Both behaviours on a SQLite state, and the default one on PostgreSQL (as in test_copy_e2e.py):
# the profile is the service's behaviour, the backend syncd's own; the fourth crossing ran the
# same moves through the same code for 18 s of the suite's time.
pytestmark = pytest.mark.parametrize(
    ("emulator_profile", "state"), [("default", "sqlite"), ("divergent", "sqlite"), ("default", "postgresql")], indirect=["state"]
)

SHAPES: dict[str, list[str]] = {
    "section-group-section": ["Section A", "Group B", "Section C"],
    "group-section-group": ["Group A", "Section B", "Group C"],
    "groups-then-sections": ["Group A", "Group B", "Section C", "Section D"],
    "sections-then-groups": ["Section A", "Section B", "Group C", "Group D"],
    "interleaved": ["Section A", "Group B", "Group C", "Section D", "Group E", "Section F"],
}
"""Sites of the source: their top level, by title (each group holds one section, `<group> 1`)."""


async def top_level(org: Org, site: str) -> list[str]:
    """A site's top level by title, as its listings show it (a group where its first section is)."""
    base = f"/v1/orgs/{org.id}/sites/{site}"
    groups = {g["id"]: g["title"] for g in await org.api.all_items(f"{base}/section-groups")}
    out: list[str] = []
    for section in await org.api.all_items(f"{base}/sections"):
        title = groups.get(section.get("sectionGroup")) or section["title"]
        if title not in out:
            out.append(title)
    return out


async def build_site(org: Org, title: str, shape: list[str]) -> str:
    """A site with `shape` at its top level, arranged with moves any profile accepts: sections
    to the end one by one (no reference), then each group right after its predecessor."""
    site = await org.site(title)
    ids: dict[str, str] = {}
    for name in shape:
        space = await org.space(f"{title} {name}")
        section, _ = await org.section(site, space, f"{name} 1" if name.startswith("Group") else name)
        if name.startswith("Group"):
            ids[name] = await org.group(site, name, [section])
        else:
            ids[name] = section
    for name in shape:
        if name.startswith("Section"):
            await org.move("site-section", ids[name], site=site)
    first_section = next((n for n in shape if n.startswith("Section")), None)
    for index, name in enumerate(shape):
        if not name.startswith("Group"):
            continue
        if index:
            await org.move("site-section-group", ids[name], site=site, after=ids[shape[index - 1]])
        elif first_section is not None:
            await org.move("site-section-group", ids[name], site=site, before=ids[first_section])
    assert await top_level(org, site) == shape
    return site


async def _source(blank: Blank) -> dict[str, str]:
    return {name: await build_site(blank.source, f"Site {n}", shape) for n, (name, shape) in enumerate(SHAPES.items())}


async def _target_sites(blank: Blank) -> dict[str, str]:
    return {s["title"]: s["id"] for s in await blank.api.all_items(f"/v1/orgs/{blank.orgs[1]}/sites")}


async def test_alternating_sections_and_groups_are_copied_whole(blank: Blank) -> None:
    await _source(blank)
    report = await blank.copy()
    assert report.equal, (report.verification.counts(), report.failed)
    assert not report.failed, report.failed
    targets = await _target_sites(blank)
    for n, shape in enumerate(SHAPES.values()):
        assert await top_level(blank.target, targets[f"Site {n}"]) == shape
    again = await blank.copy()
    assert again.equal and not again.rounds and again.writes == 0, [r.ops for r in again.rounds]


async def _turn_around(blank: Blank, site: str) -> list[str]:
    """The interleaved site's top level turned around in the source (A, B, C, D, E, F becomes
    F, E, D, C, B, A), with moves any profile accepts; the new top level."""
    source = blank.source
    base = f"/v1/orgs/{source.id}/sites/{site}"
    ids = {s["title"]: s["id"] for s in await source.api.all_items(f"{base}/sections")}
    ids |= {g["title"]: g["id"] for g in await source.api.all_items(f"{base}/section-groups")}
    await source.move("site-section", ids["Section F"], site=site, before=ids["Section A"])
    await source.move("site-section", ids["Section D"], site=site, before=ids["Section A"])
    await source.move("site-section-group", ids["Group E"], site=site, after=ids["Section F"])
    await source.move("site-section-group", ids["Group C"], site=site, after=ids["Section D"])
    await source.move("site-section-group", ids["Group B"], site=site, after=ids["Group C"])
    wanted = ["Section F", "Group E", "Section D", "Group C", "Group B", "Section A"]
    assert await top_level(source, site) == wanted
    return wanted


async def test_a_reordered_source_is_settled_into_an_existing_copy(blank: Blank) -> None:
    """The source's top level turned around after a first copy: the settle step moves the
    target's sections among sections and its groups after their predecessors (the old plan,
    one list of sections and groups, named a group in a section's move here)."""
    built = await _source(blank)
    assert (await blank.copy()).equal
    wanted = await _turn_around(blank, built["interleaved"])
    report = await blank.copy()
    assert report.equal and not report.failed, (report.verification.counts(), report.failed)
    assert await top_level(blank.target, (await _target_sites(blank))["Site 4"]) == wanted
    assert not (await blank.copy()).rounds


def _naming_groups(desired: list[Any], current: list[Any], narrow: Any) -> list[tuple[Any, Any]]:
    """syncd's moves, but a section's move names the group on the other side of its place
    where there is one (the same place: what a planner relying on the lenient reading sends)."""
    order, out = list(current), []
    for item, anchor in mixed_moves(desired, current, narrow):
        apply_move(order, item, anchor)
        at = order.index(item)
        if narrow(item) and anchor is not None:
            if anchor[0] == "after" and at + 1 < len(order) and not narrow(order[at + 1]):
                anchor = ("before", order[at + 1])
            elif anchor[0] == "before" and at > 0 and not narrow(order[at - 1]):
                anchor = ("after", order[at - 1])
        out.append((item, anchor))
    return out


async def test_a_refused_reference_is_tried_the_other_way_once(blank: Blank, monkeypatch: Any) -> None:
    """A section's move that names a group, refused 400 (`divergent`), is sent once more
    naming the same place the other way (a section), and the copy ends equal; `default`
    accepts the first, so nothing is sent twice there."""
    await _source(blank)
    assert (await blank.copy()).equal
    site = (await _target_sites(blank))["Site 0"]
    base = f"/v1/orgs/{blank.target.id}/sites/{site}"
    first = (await blank.api.all_items(f"{base}/sections"))[0]
    await blank.target.move("site-section", first["id"], site=site)  # Section A to the end: Group B, Section C, Section A
    assert await top_level(blank.target, site) == ["Group B", "Section C", "Section A"]
    monkeypatch.setattr(site_layout, "mixed_moves", _naming_groups)
    sent: list[tuple[str, str, Any, str]] = []
    send = sites._send

    async def recording(writer: Any, op: Any, org: str, site: str, change: Any, key_suffix: str = "") -> None:
        try:
            await send(writer, op, org, site, change, key_suffix)
            sent.append((key_suffix, change.item, change.anchor, "ok"))
        except Exception:
            sent.append((key_suffix, change.item, change.anchor, "refused"))
            raise

    monkeypatch.setattr(sites, "_send", recording)
    report = await blank.copy()
    assert report.equal and not report.failed, (report.failed, sent)
    assert await top_level(blank.target, site) == SHAPES["section-group-section"]
    refused = [item for suffix, item, _, result in sent if not suffix and result == "refused"]
    retried = [(item, result) for suffix, item, _, result in sent if suffix == ":other-way"]
    if blank.running.app[PROFILE].profile.strict_section_refs:
        assert refused and sorted(refused) == sorted(item for item, _ in retried), sent
        assert all(result == "ok" for _, result in retried), sent
    else:
        assert not refused and not retried, sent
