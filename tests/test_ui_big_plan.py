"""A big saved plan on the web page does not freeze the daemon (issue 41, item 1): `syncd serve`
as a process, a ~40 MB plan in its plans folder, the plan page requested while another thread
polls `/healthz`. The page is a bounded page of changes with the counts of the whole plan."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

from syncd.copy.journal import Pair
from syncd.copy.ops import Op, Plan
from syncd.copy.planfile import SavedPlan, plan_document
from syncd.copy.review import FieldChange, Item
from syncd.daemon.ui.plans import PAGE_SIZE
from syncd.daemon.ui.session import make_session
from tests.daemon_support import DaemonProcess, daemon_config

CONTROL_TOKEN = "control-secret-big-plan"
KINDS = ("space", "collection", "page")
ACTIONS = ("create", "update", "delete")
CHANGES = 100_000
PEAK_MEMORY = 200 * 2**20
"""The daemon's peak memory while it shows the plan twice: it starts near 80 MB; reading the
40 MB plan whole took it to 350 MB."""


def _write_big_plan(path: Path) -> dict[tuple[str, str], int]:
    """A plan file as `save_plan` writes it (indent 2), its listing written line by line so a
    40 MB plan takes a second to make; the counts per (kind, action) it holds."""
    saved = SavedPlan(Pair("src", "S", "dst", "T"), "src:S", "dst:T", "mirror", Plan([Op(key="create:space:a", action="create", kind="space",
                      source_id="a", method="POST", path="/v1/orgs/T/spaces", title="a", body={"title": "a"})], [], None, []),
                      {"source": "sha256:" + "a" * 64, "target": "sha256:" + "b" * 64}, {}, "2026-12-07T06:00:00+00:00")  # fmt: skip
    head = plan_document(saved, [])
    tally: dict[tuple[str, str], int] = {}
    padding = "x" * 40
    with path.open("w") as out:
        out.write(json.dumps({k: v for k, v in head.items() if k not in ("changes", "ops", "skips", "left_on_target")}, indent=2)[:-2])
        out.write(',\n  "changes": [\n')
        for n in range(CHANGES):
            action = ACTIONS[(n * len(ACTIONS)) // CHANGES]  # the listing's order: by action
            kind = KINDS[n % len(KINDS)]
            tally[kind, action] = tally.get((kind, action), 0) + 1
            item = Item(action, kind, f"Title {n} {padding}", f"Docs/Title {n}", f"{action}:{kind}:{n}", (FieldChange("title", "Old", f"New {n}"),))
            out.write(("    " if n == 0 else ",\n    ") + json.dumps(item.to_json(), indent=2).replace("\n", "\n    "))
        out.write('\n  ],\n  "ops": ' + json.dumps(head["ops"]) + ',\n  "skips": [],\n  "left_on_target": [')
        out.write(",".join(json.dumps({"kind": "space", "title": f"Left {n}", "path": f"Old/Left {n}"}) for n in range(3000)))
        out.write("]\n}\n")
    return tally


def _peak_memory(pid: int) -> int:
    """The process's peak resident memory in bytes (Linux: VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _get(url: str, cookie: str, timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Cookie": f"syncd_ui={cookie}"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return answer.status, answer.read()


def test_a_40_mb_plan_page_leaves_healthz_answering_and_is_a_bounded_page(tmp_path: Path) -> None:
    config = daemon_config(tmp_path, "http://127.0.0.1:9", "unused-token", retry={}, daemon={"port": 0, "token": CONTROL_TOKEN}, jobs=[])
    plans_dir = tmp_path / "state" / "plans"
    plans_dir.mkdir(parents=True)
    tally = _write_big_plan(plans_dir / "big.json")
    assert (plans_dir / "big.json").stat().st_size > 38 * 1024 * 1024
    daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL_TOKEN)
    cookie = make_session(CONTROL_TOKEN, time.time())
    worst, done = [0.0], threading.Event()

    def poll_health() -> None:
        while not done.is_set():
            started = time.monotonic()
            with urllib.request.urlopen(daemon.url + "/healthz", timeout=30) as answer:
                answer.read()
            worst[0] = max(worst[0], time.monotonic() - started)
            time.sleep(0.02)

    try:
        poller = threading.Thread(target=poll_health, daemon=True)
        poller.start()
        time.sleep(0.2)
        pages = [_get(daemon.url + "/ui/plans/big.json", cookie, 120), _get(daemon.url + "/ui/plans/big.json?kind=page&action=delete&page=3", cookie, 120)]
        done.set()
        poller.join(timeout=30)
        peak = _peak_memory(daemon.process.pid)
        assert peak < PEAK_MEMORY, f"the daemon's memory rose to {peak // 2**20} MB"
        assert worst[0] < 1.0, f"/healthz waited {worst[0]:.2f} s while the plan page rendered"
        for status, body in pages:
            assert status == 200 and len(body) < 5 * 1024 * 1024, len(body)
        first, third = (body.decode() for _, body in pages)
        assert first.count('<tr class="change"') == PAGE_SIZE
        total = {action: sum(n for (_, a), n in tally.items() if a == action) for action in ACTIONS}
        assert f'<dd id="plan-counts">{total["create"]} create, {total["update"]} update, {total["delete"]} delete</dd>' in first
        for (kind, action), n in tally.items():
            assert f'data-count-kind="{kind}" data-count-action="{action}">{n}<' in first
        assert f"{PAGE_SIZE} of {CHANGES} changes shown: 1–{PAGE_SIZE} of the {CHANGES}, page 1 of {-(-CHANGES // PAGE_SIZE)}." in first
        assert 'href="/ui/plans/big.json?page=2"' in first and "Left on the target <small>(3000)</small>" in first
        # The third page of one kind and action: its rows only, links that keep the filter.
        matched = tally["page", "delete"]
        rows = third.count('<tr class="change" data-kind="page" data-action="delete"')
        assert rows == third.count('<tr class="change"') == min(PAGE_SIZE, matched - 2 * PAGE_SIZE)
        assert f"{rows} of {CHANGES} changes shown: {2 * PAGE_SIZE + 1}–{2 * PAGE_SIZE + rows} of the {matched} that match, page 3 of" in third
        assert 'href="/ui/plans/big.json?kind=page&amp;action=delete&amp;page=2"' in third
        assert 'href="/ui/plans/big.json?kind=page&amp;action=delete&amp;page=4"' in third
    finally:
        done.set()
        daemon.stop()
