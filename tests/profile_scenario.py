"""One copy and one restore of an organization that holds a locked space and a site whose root
alternates sections and groups, against an emulator process under a given profile, with faults
on: what issue 21's acceptance asks of every profile (`default`, `divergent`, `mixed:SEED`).
Shared by the property test (`tests/test_profile_property.py`) and `bench/profiles.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncd.emulator.process import emulator_process
from tests.loopback import EmulatorClient
from tests.oracle import copied_view

SPEC = "orgs=2,empty_orgs=2,collections=2,spaces=5,pages=3,files=1,sites=1,sections=2"
FAULTS = {"lost": 0.05, "5xx": 0.02}


@dataclass
class Outcome:
    profile: str
    copy_rounds: int
    copy_writes: int
    second_writes: int
    restore_rounds: int
    restore_writes: int


def _syncd(env: dict[str, str], cwd: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "syncd.cli", *args, "--json"], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert done.returncode == 0, f"syncd {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def _writes(document: dict[str, Any]) -> int:
    return sum((r.get("apply") or {}).get("writes", 0) for r in document.get("rounds", []))


def _shape(emulator: EmulatorClient, org: str) -> None:
    """A locked space; a site root of Section, Group, Section (the group holds a section)."""
    token = "org1-token"
    spaces = emulator.api("GET", f"/v1/orgs/{org}/spaces?limit=1000", token=token)["items"]
    emulator.api("PATCH", f"/v1/spaces/{spaces[0]['id']}", {"editMode": "locked"}, token=token)
    site = emulator.api("GET", f"/v1/orgs/{org}/sites", token=token)["items"][0]["id"]
    base = f"/v1/orgs/{org}/sites/{site}"
    made = [emulator.api("POST", f"{base}/sections", {"spaceId": s["id"], "title": f"Part {i}"}, token=token)["id"] for i, s in enumerate(spaces[1:4])]
    emulator.api("POST", f"{base}/section-groups", {"title": "Group B", "sections": [made[1]]}, token=token)


def run_scenario(profile: str, workdir: Path) -> Outcome:
    """Copy org 1 into an empty organization across two tokens, copy again, restore a backup
    of org 1 into the other empty one; every check of the acceptance, AssertionError else."""
    with emulator_process(token="all", spec=SPEC, seed=21, rate=0, profile=profile) as running:
        emulator = EmulatorClient(running.url, running.report, "all")
        src, dst, other = emulator.orgs[0], emulator.orgs[2], emulator.orgs[3]
        _shape(emulator, src)
        env = {**os.environ, "SYNCD_STATE_DIR": str(workdir / "state"), "NO_COLOR": "1"}
        env.pop("SYNCD_STATE_URL", None)
        for name, token in (("ONE", "org1-token"), ("THREE", "org3-token"), ("FOUR", "org4-token")):
            env[f"SYNCD_TENANTS__{name}__BASE_URL"] = running.url
            env[f"SYNCD_TENANTS__{name}__TOKEN"] = token
        before = json.dumps(emulator.admin("GET", f"/_emulator/orgs/{src}/dump"), sort_keys=True)
        backup = workdir / "backup.db"
        _syncd(env, workdir, "backup", f"one:{src}", "--out", str(backup), "--with-files")

        emulator.admin("PUT", "/_emulator/faults", {"reset": True, **FAULTS})
        copied = _syncd(env, workdir, "mirror", "apply", f"one:{src}", f"three:{dst}")
        restored = _syncd(env, workdir, "restore", str(backup), f"four:{other}")
        emulator.admin("PUT", "/_emulator/faults", {"reset": True})

        assert json.dumps(emulator.admin("GET", f"/_emulator/orgs/{src}/dump"), sort_keys=True) == before, "the source changed"
        want = copied_view(emulator.admin("GET", f"/_emulator/orgs/{src}/dump"))
        for org in (dst, other):
            got = copied_view(emulator.admin("GET", f"/_emulator/orgs/{org}/dump"))
            assert got == want, [k for k in want if got.get(k) != want[k]]
            assert not any("#" in path for rows in got.values() for path, _ in rows), "an object (a page, a file) is there twice"
        verify = _syncd(env, workdir, "mirror", "verify", f"one:{src}", f"three:{dst}")
        assert verify["equal"], verify
        writes = sum(r["count"] for r in emulator.admin("GET", "/_emulator/stats")["routes"] if r["method"] != "GET")
        again = _syncd(env, workdir, "mirror", "apply", f"one:{src}", f"three:{dst}")
        second = sum(r["count"] for r in emulator.admin("GET", "/_emulator/stats")["routes"] if r["method"] != "GET") - writes
        assert second == 0 and _writes(again) == 0, f"a second apply wrote {second}"
        return Outcome(profile, len(copied.get("rounds", [])), _writes(copied), second, len(restored.get("rounds", [])), _writes(restored))
