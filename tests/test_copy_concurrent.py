"""Two copies of one pair at once (a replica's job and an operator's `syncd copy`, say): the
second waits for the target's writer (on PostgreSQL) while the first applies, so the plan it
made before waiting is stale. It must read again, not apply that plan (which would make every
object the first copy made a second time)."""

from __future__ import annotations

from typing import Any

import anyio.from_thread
import pytest

from syncd.copy import engine
from syncd.copy.planfile import SavedPlan, StalePlan
from syncd.state import StateStore
from tests.copy_support import Blank, blank, rich_source  # noqa: F401 - `blank` is a fixture

# The guard is syncd's own journal, not how the service names or places what it makes: both
# behaviours of the emulator.
pytestmark = pytest.mark.parametrize("emulator_profile", ["default", "divergent"])


def _titles(items: list[dict[str, Any]]) -> list[str]:
    return sorted(str(item.get("title")) for item in items)


async def test_a_plan_made_before_another_copy_applied_is_made_again(blank: Blank, monkeypatch: Any) -> None:
    await rich_source(blank.source)
    plan = engine._plan
    others: list[Any] = []

    def plan_while_another_copy_runs(*args: Any) -> Any:
        made = plan(*args)  # from what this copy read: nothing of the source is in the target yet
        if not others:  # once: another copy of the same pair runs from start to end meanwhile
            others.append(None)  # before it runs: its own planning must not start a third
            others[0] = anyio.from_thread.run(blank.copy)
        return made

    monkeypatch.setattr(engine, "_plan", plan_while_another_copy_runs)
    report = await blank.copy()
    assert others and others[0].equal

    target = blank.orgs[1]
    collections = await blank.api.all_items(f"/v1/orgs/{target}/collections")
    spaces = await blank.api.all_items(f"/v1/orgs/{target}/spaces")
    assert _titles(collections) == ["Guides", "Inner"] and _titles(spaces) == ["Alpha", "Beta", "Gamma"], "an object was made twice"
    assert report.equal, report.verification.counts()
    assert not any(r.result.stats().get("created") for r in report.rounds), [r.result.stats() for r in report.rounds]
    with StateStore(blank.db) as mirror:
        applies = [run for run in mirror.runs("dst") if run["job"] == "apply"]
    stale = [run for run in applies if run["status"] == "cancelled"]
    assert len(stale) == 1 and "read again" in (stale[0]["reason"] or ""), applies


async def test_a_saved_plan_another_copy_overtook_is_refused_unapplied(blank: Blank, monkeypatch: Any) -> None:
    """A reviewed plan is applied exactly or not at all: when another copy wrote the target
    after the plan's freshness check, the apply refuses (StalePlan), writing nothing."""
    await rich_source(blank.source)
    src, dst = blank.refs()
    reading, plan = await engine.plan_org(blank.settings, src, dst, db=blank.db)
    saved = SavedPlan(reading.pair, str(src), str(dst), "copy", plan, engine.fingerprints(reading))
    begin = engine._begin
    others: list[Any] = []

    async def another_copy_runs_then_begin(*args: Any) -> int:
        if not others:  # once: the other copy writes the target just before this apply takes it
            others.append(None)
            others[0] = await blank.copy()
        return await begin(*args)

    monkeypatch.setattr(engine, "_begin", another_copy_runs_then_begin)
    with pytest.raises(StalePlan, match="another run wrote it"):
        await blank.copy(saved=saved)
    assert others and others[0].equal
    target = blank.orgs[1]
    assert _titles(await blank.api.all_items(f"/v1/orgs/{target}/collections")) == ["Guides", "Inner"]
    assert _titles(await blank.api.all_items(f"/v1/orgs/{target}/spaces")) == ["Alpha", "Beta", "Gamma"]
