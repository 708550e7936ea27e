"""The property of issue 21: against `divergent` and any mix of the open points' behaviours
(`mixed:SEED`, SEED drawn by hypothesis), with lost answers and server errors, a first copy
across tokens and a restore from a backup both end equal, the source is unchanged, a second
apply writes nothing and no page or file is there twice (`tests/profile_scenario.py`). One
emulator serves every example (its profile switched, fresh organizations each time). A failing
profile is named in the assertion and replays with `syncd emulator serve --profile mixed:SEED`.
`SYNCD_PROPERTY_EXAMPLES=N` runs N examples (default 24).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.profile_scenario import Pool, pool, run_scenario

EXAMPLES = int(os.environ.get("SYNCD_PROPERTY_EXAMPLES", "24"))
PROFILES = st.one_of(st.just("divergent"), st.integers(min_value=0, max_value=10**9).map(lambda seed: f"mixed:{seed}"))


@pytest.fixture(scope="module")
def organizations() -> Iterator[Pool]:
    with pool(EXAMPLES + 1) as served:  # the explicit example, then the drawn ones
        yield served


@pytest.mark.long(seconds=115, busy=True)  # its CPU all the while (the others mostly wait)
@settings(max_examples=EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.generate], database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(profile="divergent")
@given(profile=PROFILES)
def test_any_mix_of_open_points_converges(organizations: Pool, profile: str) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        run_scenario(organizations, profile, Path(workdir))
