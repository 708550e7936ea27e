"""One copy and one restore of an organization that holds a locked space and a site whose root
alternates sections and groups, under a given profile, with faults on: what issue 21's
acceptance asks of every profile (`default`, `divergent`, `mixed:SEED`). Shared by the
property test (`tests/test_profile_property.py`) and `bench/profiles.py`.

One emulator process serves every scenario (`Pool`): it generates a source organization and
two empty ones per scenario, and each scenario switches the emulator's profile
(`PUT /_emulator/profile`), takes the next organizations and a state directory of its own (what
syncd learns of a tenant belongs to the service it saw), and runs syncd in-process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from syncd.cli import main
from syncd.emulator.process import EmulatorProcess
from tests.cli_zygote import emulator_process
from tests.loopback import EmulatorClient
from tests.oracle import copied_view

PER_SOURCE = "collections=2,spaces=5,pages=3,files=1,sites=1,sections=2"
FAULTS = {"lost": 0.05, "5xx": 0.02}


@dataclass
class Outcome:
    profile: str
    copy_rounds: int
    copy_writes: int
    second_writes: int
    restore_rounds: int
    restore_writes: int


class Pool:
    """An emulator with `size` source organizations (org1..orgN) and two empty ones for each
    (orgN+1..org3N), every organization with its owner's token `orgK-token`."""

    def __init__(self, running: EmulatorProcess, size: int) -> None:
        self.running, self.size, self.used = running, size, 0
        self.emulator = EmulatorClient(running.url, running.report, "all")

    def take(self) -> tuple[int, int, int]:
        """Numbers (1-based) of the next scenario's source, copy target and restore target."""
        if self.used >= self.size:
            raise RuntimeError(f"the pool's {self.size} source organizations are used up")
        self.used += 1
        return self.used, self.size + 2 * self.used - 1, self.size + 2 * self.used


@contextmanager
def pool(size: int) -> Iterator[Pool]:
    with emulator_process(token="all", spec=f"orgs={size},empty_orgs={2 * size},{PER_SOURCE}", seed=21, rate=0) as running:
        yield Pool(running, size)


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in [*values, "SYNCD_STATE_URL"]}
    os.environ.pop("SYNCD_STATE_URL", None)  # the scenario's state is a file of its own
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _syncd(*args: str) -> dict[str, Any]:
    out = StringIO()
    with redirect_stdout(out):
        code = main([*args, "--json"])
    assert code == 0, f"syncd {' '.join(args)} exited {code}:\n{out.getvalue()[-3000:]}"
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def _view(emulator: EmulatorClient, org: str) -> dict[str, Any]:
    """What a copy must make equal: the copied kinds, and every file with its bytes' digest
    (the dump numbers a second sibling of one name `#2`: a file or page there twice)."""
    dump = emulator.admin("GET", f"/_emulator/orgs/{org}/dump")
    return copied_view(dump, html_only=emulator.reads_html_only()) | {"file": [(row["path"], row["data"]) for row in dump["kinds"]["file"]]}


def shape(emulator: EmulatorClient, org: str, token: str) -> None:
    """A locked space; a site root of Section, Group, Section (the group holds a section)."""
    spaces = emulator.api("GET", f"/v1/orgs/{org}/spaces?limit=1000", token=token)["items"]
    emulator.api("PATCH", f"/v1/spaces/{spaces[0]['id']}", {"editMode": "locked"}, token=token)
    site = emulator.api("GET", f"/v1/orgs/{org}/sites", token=token)["items"][0]["id"]
    base = f"/v1/orgs/{org}/sites/{site}"
    made = [emulator.api("POST", f"{base}/sections", {"spaceId": s["id"], "title": f"Part {i}"}, token=token)["id"] for i, s in enumerate(spaces[1:4])]
    emulator.api("POST", f"{base}/section-groups", {"title": "Group B", "sections": [made[1]]}, token=token)


def run_scenario(pool: Pool, profile: str, workdir: Path) -> Outcome:
    """Copy a fresh source organization into an empty one across two tokens, copy again,
    restore a backup of it into another empty one; every check of the acceptance, an
    AssertionError naming the profile otherwise."""
    emulator = pool.emulator
    emulator.admin("PUT", "/_emulator/profile", {"name": profile})
    numbers = pool.take()
    src, dst, other = (emulator.orgs[n - 1] for n in numbers)
    shape(emulator, src, f"org{numbers[0]}-token")
    # Faults are retried after short waits: the same calls and answers, less time asleep.
    env = {"SYNCD_STATE_DIR": str(workdir / "state"), "NO_COLOR": "1", "SYNCD_RETRY__INITIAL_WAIT": "0.02", "SYNCD_RETRY__MAX_WAIT": "0.1"}
    for name, number in zip(("ONE", "THREE", "FOUR"), numbers, strict=True):
        env[f"SYNCD_TENANTS__{name}__BASE_URL"] = pool.running.url
        env[f"SYNCD_TENANTS__{name}__TOKEN"] = f"org{number}-token"
    with _environment(env):
        before = json.dumps(emulator.admin("GET", f"/_emulator/orgs/{src}/dump"), sort_keys=True)
        backup = workdir / "backup.db"
        _syncd("backup", f"one:{src}", "--out", str(backup), "--with-files")
        emulator.admin("PUT", "/_emulator/faults", {"reset": True, **FAULTS})
        try:
            copied = _syncd("mirror", "apply", f"one:{src}", f"three:{dst}")
            restored = _syncd("restore", str(backup), f"four:{other}")
        finally:
            emulator.admin("PUT", "/_emulator/faults", {"reset": True})
        assert json.dumps(emulator.admin("GET", f"/_emulator/orgs/{src}/dump"), sort_keys=True) == before, f"{profile}: the source changed"
        want = _view(emulator, src)
        assert want["file"] and want["page"], "the scenario's source holds pages and files"
        for org in (dst, other):
            got = _view(emulator, org)
            assert got == want, (profile, [k for k in want if got.get(k) != want[k]])
            assert not any("#" in path for rows in got.values() for path, _ in rows), f"{profile}: an object (a page, a file) is there twice"
        assert copied["equal"] and restored["equal"], (profile, copied["verification"]["counts"], restored["verification"]["counts"])
        assert _syncd("mirror", "verify", f"one:{src}", f"three:{dst}")["equal"], profile
        writes = emulator.writes()
        again = _syncd("mirror", "apply", f"one:{src}", f"three:{dst}")
        second = emulator.writes() - writes
    assert second == 0 and again["writes"] == 0, f"{profile}: a second apply wrote {second}"
    return Outcome(profile, len(copied["rounds"]), copied["writes"], second, len(restored["rounds"]), restored["writes"])
