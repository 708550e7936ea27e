"""`syncd demo`: the main job on the built-in emulator, no live account needed.

It generates organizations, serves them over loopback with a rate limit and latency, then
does what a user does with syncd: a one-shot backup with file binaries, an export to a
readable folder, a mirror sync, a cheap re-sync of the unchanged tenant, a sync that finds a
rename, and a copy of an organization into an empty one, verified, then applied again to
show that nothing is left to do, and a restore of the backup into another empty organization
(content served by syncd's content source). Its last lines name commands to look around
with: `syncd diff --db .../mirror.db --run N` shows the rename, old title → new. Everything it
writes goes under `--out`
(default `state/demo/`), private (0700/0600) like all syncd writes; what the emulator says
is printed through `syncd.safe_text`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import typer
from rich.console import Console

from syncd.commands.invocation import syncd_command
from syncd.errors import UsageError
from syncd.files import private_dir, write_private
from syncd.safe_text import markup
from syncd.safe_text import console as make_console

DEMO_TOKEN = "demo-token"
DEMO_TENANT = "demo"


def _write_config(out: Path, url: str) -> Path:
    config = out / "syncd.toml"
    write_private(
        config,
        f'state_dir = "{out.as_posix()}"\n\n[tenants.{DEMO_TENANT}]\nbase_url = "{url}"\ntoken = "{DEMO_TOKEN}"\n'
    )
    return config


async def _rename_a_space(url: str, org_id: str) -> str:
    headers = {"Authorization": f"Bearer {DEMO_TOKEN}"}
    async with aiohttp.ClientSession(url, headers=headers) as session:
        async with session.get(f"/v1/orgs/{org_id}/spaces", params={"limit": "1"}) as resp:
            space = (await resp.json())["items"][0]
        async with session.patch(f"/v1/spaces/{space['id']}", json={"title": "Renamed by the demo"}) as resp:
            resp.raise_for_status()
    return str(space["title"])


async def _copy(settings: Any, source_org: str, target_org: str, db: Path, row: Any) -> None:
    """Copy the first organization into the empty one, verify, and apply again (no writes)."""
    from syncd.config import parse_target_ref
    from syncd.copy import copy_org

    src = parse_target_ref(f"{DEMO_TENANT}:{source_org}", settings)
    dst = parse_target_ref(f"{DEMO_TENANT}:{target_org}", settings)
    for step in ("copy into the empty organization", "apply again"):
        clock = time.perf_counter()
        report = await copy_org(settings, src, dst, db=db)
        counts = report.verification.counts()
        rounds = "; ".join(r.line() for r in report.rounds) or "nothing to do"
        note = (
            f"{rounds}; {len(report.skips)} skips (members, history, what the API cannot write); verify: "
            f"{'equal' if report.equal else 'not equal'} ({counts['identical']} identical)"
        )
        row(step, "", "", "", f"{time.perf_counter() - clock:.1f}", note)


async def _restore(settings: Any, backup: Path, target_org: str, db: Path, row: Any) -> None:
    """Restore the backup into the other empty organization: its pages and files travel
    through syncd's content source (the API imports content only from a URL)."""
    from syncd.config import parse_target_ref
    from syncd.copy import BackupSource, copy_org

    clock = time.perf_counter()
    report = await copy_org(settings, BackupSource(backup), parse_target_ref(f"{DEMO_TENANT}:{target_org}", settings), db=db)
    served = sum(1 for op in report.plans[0].ops if op.recipe == "import-served") if report.plans else 0
    rounds = "; ".join(r.line() for r in report.rounds) or "nothing to do"
    note = (
        f"{rounds}; {served} spaces imported from syncd's content source (pages and files from the backup); "
        f"verify: {'equal' if report.equal else 'not equal'} ({report.verification.counts()['identical']} identical)"
    )
    row(f"restore {backup.name} into another empty organization", "", "", "", f"{time.perf_counter() - clock:.1f}", note)


async def _run(generate: str, seed: int, out: Path, console: Console) -> None:
    from syncd.config import load_settings, parse_target_ref
    from syncd.emulator.generate import generate as run_generate
    from syncd.emulator.generate import parse_spec
    from syncd.emulator.server import serve_emulator
    from syncd.emulator.store import Store
    from syncd.read.backup import backup, blobs_dir
    from syncd.read.export import export_mirror
    from syncd.read.sync import SYNC_LISTS_EVERY, sync_into

    try:
        params = parse_spec(generate)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    started = time.perf_counter()
    store = Store(seed=seed)
    generated = run_generate(store, params, seed=seed, all_token=DEMO_TOKEN)
    org_id = generated.org_ids[0]
    console.print(f"1. generated {len(generated.org_ids)} organization(s) in {time.perf_counter() - started:.2f}s (seed {seed})")
    async with serve_emulator(store, rate_limit=300, burst=30, faults={"latency": 5}) as running:
        console.print(f"2. emulator serving {running.url}/v1 (300 requests/s per token, 5 ms latency)")
        # Self-contained: a fleet's SYNCD_STATE_URL in the environment is not the demo's state.
        environment = {key: value for key, value in os.environ.items() if key != "SYNCD_STATE_URL"}
        settings = load_settings(_write_config(out, running.url), env=environment)
        whole, one_org = parse_target_ref(DEMO_TENANT, settings), parse_target_ref(f"{DEMO_TENANT}:{org_id}", settings)
        steps = iter(range(3, 20))

        def row(step: str, requests: str, objects: str, changes: str, seconds: str, note: str) -> None:
            figures = ", ".join(
                f"{value} {label}" for value, label in ((requests, "requests"), (objects, "objects"), (changes, "changes")) if value
            )
            console.print(f"{next(steps)}. {markup(step)}{': ' + figures if figures else ''} in {seconds}s\n   {markup(note)}")

        clock = time.perf_counter()
        bk = await backup(settings, one_org, out / "backup.db", with_files=True, overwrite=True)
        files = bk.files
        row(
            f"backup {one_org}", str(bk.requests), str(sum(bk.crawl.stats.objects.values())), "",
            f"{time.perf_counter() - clock:.1f}",
            f"{out / 'backup.db'}; {files.downloaded if files else 0} files in {blobs_dir(out / 'backup.db')}",
        )
        clock = time.perf_counter()
        report = await anyio.to_thread.run_sync(lambda: export_mirror(out / "backup.db", out / "export"))
        row("export", "", "", "", f"{time.perf_counter() - clock:.1f}", f"{report.pages} pages as markdown, {report.files} files in {out / 'export'}")
        db = out / "mirror.db"
        full_requests = 0
        rename_run = None
        for step, action in (("sync (first)", None), ("re-sync, nothing changed", None), ("sync after a rename", "rename")):
            renamed = await _rename_a_space(running.url, org_id) if action else None
            clock = time.perf_counter()
            result, client = await sync_into(settings, whole, db, lists_every=SYNC_LISTS_EVERY)
            full_requests = full_requests or client.stats.requests
            note = f"{result.status}"
            if step.startswith("re-sync"):
                note += f"; {client.stats.requests / full_requests:.1%} of the first sync's requests"
            if renamed:
                rename_run = result.run
                found = [f"{k} {', '.join(f'{n} {op}' for op, n in ops.items())}" for k, ops in result.summary.to_dict().items()]
                note += f"; after renaming space '{renamed}': {'; '.join(found)}"
            row(
                step, str(client.stats.requests), str(sum(result.stats.objects.values())), str(result.summary.total),
                f"{time.perf_counter() - clock:.1f}", note,
            )
        if params["empty_orgs"]:
            await _copy(settings, org_id, generated.org_ids[-1], db, row)
        if params["empty_orgs"] >= 2:
            await _restore(settings, out / "backup.db", generated.org_ids[-2], db, row)
    console.print(f"done in {time.perf_counter() - started:.1f}s. Look around:")
    syncd, shown_db = markup(syncd_command()), markup(shlex.quote(str(db)))  # as pasted into this shell
    console.print(f"   {syncd} status --db {shown_db}", highlight=False, soft_wrap=True)
    if rename_run is not None:  # the sync that found the rename, against the re-sync before it
        console.print(f"   {syncd} diff --db {shown_db} --run {rename_run}      (the rename, old title → new)", highlight=False, soft_wrap=True)
    console.print(f"   ls {markup(shlex.quote(str(out / 'export')))}", highlight=False, soft_wrap=True)


def demo(
    generate: str = typer.Option(
        "orgs=2,empty_orgs=2,collections=8,spaces=40,pages=10,sites=3",
        help="What to generate (empty organizations are the targets of the copy and of the restore).",
    ),
    seed: int = typer.Option(0, help="Seed of the generator."),
    out: Path = typer.Option(Path("state/demo"), help="Where the demo writes its files (replaced on each run)."),
) -> None:
    """Run the main job on the built-in emulator and print a report."""
    if out.exists():
        if not (out / "syncd.toml").exists():
            raise UsageError(f"{out} exists and was not made by `syncd demo`: choose another --out")
        shutil.rmtree(out)
    private_dir(out)
    from syncd.logging import LOG_OPTIONS, configure_logging

    if "level" not in LOG_OPTIONS:  # the report is the demo's output: log lines only for warnings (--log-level to see more)
        configure_logging(LOG_OPTIONS.get("format", "console"), "warning")  # type: ignore[arg-type]
    anyio.run(_run, generate, seed, out, make_console())
