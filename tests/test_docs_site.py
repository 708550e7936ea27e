"""The documentation site builds strictly (issue 42): `mkdocs build --strict`, as `.ci/run` runs
it, with no warning at all: a broken link or anchor, a page the nav misses or names wrongly, a
reference page the code cannot make, each fails the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly_without_a_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    said = built.stdout + built.stderr
    assert built.returncode == 0, said[-4000:]
    warnings = [line for line in said.splitlines() if "WARNING" in line or line.startswith("WARN")]
    assert not warnings, "\n".join(warnings)
    for page in ("reference/cli", "reference/configuration", "reference/json-output", "reference/control-api", "reference/metrics"):
        assert (site / page / "index.html").is_file(), page
    assert not (site / "hooks").exists()  # the hook is no page of the site
