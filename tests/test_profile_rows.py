"""Every open point of the spec (a row of `syncd.emulator.profile.ROWS`) is played both ways.

Each row has a probe (`PROBES` of the four `tests/test_profile_rows_*.py` modules): a real HTTP
observation of a freshly generated emulator. Here each probe runs under `default` and under
`divergent`, and the two observations must differ (a row declared but not played fails); under
`mixed:SEED` each row's observation must be `default`'s or `divergent`'s, the one
`divergent_rows` names for that seed (and under seeds that draw the website importer's rows
apart, for those rows). The site's table (docs/concepts/open-points.md) lists the rows, one
each, in `ROWS` order: tests/test_docs_open_points.py.

A probe module that is missing or does not import is a failure naming it (not a skip, and the
other rows still run).
"""

from __future__ import annotations

import asyncio
import copy
import importlib
from typing import Any

import aiohttp
import pytest

from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.profile import DEFAULT, DIVERGENT, ROWS, divergent_rows, mixed
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store

PROBE_MODULES = (
    "tests.test_profile_rows_base",
    "tests.test_profile_rows_tree",
    "tests.test_profile_rows_sites",
    "tests.test_profile_rows_content",
)
SPEC = "orgs=1,collections=2,spaces=4,pages=2,sites=1,empty_orgs=1"
SEED = 1
TOKEN = "rows-token"
MIXED_SEEDS = (1299, 3535)
"""Two seeds whose draws are complementary: every row plays `default` under one of them and
`divergent` under the other (checked below)."""
IMPORTER_ROWS = ("import-style", "import-reads-markdown-alternate", "import-first-heading")
"""The rows a website import plays together: each probe must see its own row alone."""
SPLIT_SEEDS = (2, 14)
"""Two seeds that draw the importer's rows apart (the first reads only the HTML but keeps the
style and drops the title's heading; the second reads alternates but restyles and keeps the
heading), so that each row is seen to play as drawn whatever the others play (checked below)."""
PROBE_TIMEOUT = 30.0


def _load(name: str) -> tuple[dict[str, Any], str | None]:
    """The module's PROBES, or why there are none (a failure of `test_probe_module_loads`)."""
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # missing, or broken: either way its rows have no probe
        return {}, f"{type(exc).__name__}: {exc}"
    probes = getattr(module, "PROBES", None)
    if not isinstance(probes, dict):
        return {}, "has no PROBES dict"
    return probes, None


LOADED = {name: _load(name) for name in PROBE_MODULES}
PROBES: dict[str, Any] = {row: probe for probes, _ in LOADED.values() for row, probe in probes.items()}


def _file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _probe_of(row: str) -> Any:
    if row not in PROBES:
        broken = [f"{_file(m)} ({why})" for m, (_, why) in LOADED.items() if why]
        pytest.fail(f"row {row!r} has no probe in {', '.join(map(_file, PROBE_MODULES))}" + (f"; not loaded: {'; '.join(broken)}" if broken else ""))
    return PROBES[row]


_TEMPLATE: list[Store] = []


def _fresh_store() -> Store:
    """A copy of one generated store: each probe may write, so each run gets its own, and
    copying is a hundred times faster than generating."""
    if not _TEMPLATE:
        store = Store(seed=SEED)
        generate(store, parse_spec(SPEC), seed=SEED, all_token=TOKEN)
        _TEMPLATE.append(store)
    return copy.deepcopy(_TEMPLATE[0])


async def _observe(row: str, profile: str) -> Any:
    probe = _probe_of(row)
    async with serve_emulator(_fresh_store(), profile=profile) as running, aiohttp.ClientSession() as session:
        return await asyncio.wait_for(probe(session, running.url, TOKEN), PROBE_TIMEOUT)


_REFERENCE: dict[tuple[str, str], Any] = {}


async def _reference(row: str, profile: str) -> Any:
    """`default`'s or `divergent`'s observation of `row` (run once, then remembered)."""
    if (row, profile) not in _REFERENCE:
        _REFERENCE[row, profile] = await _observe(row, profile)
    return _REFERENCE[row, profile]


# ----- the probes ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", PROBE_MODULES)
def test_probe_module_loads(module: str) -> None:
    _, why = LOADED[module]
    assert why is None, f"{_file(module)}: {why}"


def test_probes_cover_exactly_the_rows() -> None:
    owners: dict[str, list[str]] = {}
    for module, (probes, _) in LOADED.items():
        for row in probes:
            owners.setdefault(row, []).append(_file(module))
    twice = {row: files for row, files in owners.items() if len(files) > 1}
    assert not twice, f"rows probed in more than one module: {twice}"
    broken = [_file(m) for m, (_, why) in LOADED.items() if why]
    missing, unknown = [r for r in ROWS if r not in owners], sorted(set(owners) - set(ROWS))
    assert not missing and not unknown, f"rows without a probe: {missing}; probes of no row: {unknown}; not loaded: {broken}"


@pytest.mark.parametrize("row", list(ROWS))
async def test_row_is_played_both_ways(row: str) -> None:
    default = await _reference(row, DEFAULT.name)
    divergent = await _reference(row, DIVERGENT.name)
    assert default != divergent, f"{row}: default and divergent answer the same: {default!r}"


def test_mixed_seeds_play_every_row_both_ways() -> None:
    first, second = (set(divergent_rows(mixed(seed))) for seed in MIXED_SEEDS)
    assert not first & second and first | second == set(ROWS), (first, second)


def test_split_seeds_draw_the_importer_rows_apart() -> None:
    drawn = [sorted(set(divergent_rows(mixed(seed))) & set(IMPORTER_ROWS)) for seed in SPLIT_SEEDS]
    assert drawn == [["import-reads-markdown-alternate"], ["import-first-heading", "import-style"]], drawn


@pytest.mark.parametrize("row", list(ROWS))
@pytest.mark.parametrize("seed", MIXED_SEEDS)
async def test_mixed_row_plays_what_the_seed_drew(seed: int, row: str) -> None:
    await _plays_what_the_seed_drew(seed, row)


@pytest.mark.parametrize("row", IMPORTER_ROWS)
@pytest.mark.parametrize("seed", SPLIT_SEEDS)
async def test_importer_rows_play_what_the_seed_drew_apart(seed: int, row: str) -> None:
    await _plays_what_the_seed_drew(seed, row)


async def _plays_what_the_seed_drew(seed: int, row: str) -> None:
    profile = mixed(seed)
    played = DIVERGENT.name if row in divergent_rows(profile) else DEFAULT.name
    expected = await _reference(row, played)
    got = await _observe(row, profile.name)
    assert got == expected, f"{profile.name} {row}: expected {played}'s {expected!r}, got {got!r}"
