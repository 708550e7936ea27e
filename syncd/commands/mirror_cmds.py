"""`syncd mirror plan|apply|verify` and `syncd restore`: the write side on the command line.

Exit codes, like the tools people trust: `mirror plan` exits 2 when changes are pending and
0 when none (Terraform's -detailed-exitcode); `apply`, `restore` and `verify` exit 0 only when
the target equals the source afterwards apart from what the plan announced as skips (and a
copy left nothing in the source), 1 when differences remain; 2 for bad arguments or a refused
plan (deletes beyond --max-delete, a source that looks empty).

Titles, reasons and messages come from the organizations: they are printed through
`syncd.safe_text` (never read as markup, no control characters).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer
from rich.table import Table

from syncd.commands.read_cmds import ConfigOption, DbOption, settings_and_ref
from syncd.config import Settings, TargetRef, load_settings, parse_target_ref
from syncd.progress import CopyDisplay, CrawlProgress
from syncd.safe_text import clean, markup
from syncd.safe_text import console as make_console

if TYPE_CHECKING:
    from syncd.copy import CopyReport, Plan, Verification
    from syncd.copy.sides import Source

app = typer.Typer(help="Copy or mirror an organization into another (same tenant or another).", no_args_is_help=True)
console = make_console(soft_wrap=True)

EXIT_DIFFERENT = 1
EXIT_PENDING = 2

ModeOption = typer.Option("copy", "--mode", help="copy (create and update) or mirror (also delete what syncd created and the source lost).")
MaxDeleteOption = typer.Option(10, "--max-delete", help="Refuse to apply a plan with more deletes than this.")
NoAdoptOption = typer.Option(False, "--no-adopt", help="Create everything instead of adopting equivalent objects.")
RoundsOption = typer.Option(3, "--max-rounds", min=1, max=10, help="Plan-apply-verify rounds at most.")


def _refs(config: Path | None, source: str, target: str) -> tuple[Settings, TargetRef, TargetRef]:
    settings, src = settings_and_ref(config, source)
    return settings, src, parse_target_ref(target, settings)


def _db(settings: Settings, db: Path | None) -> Path:
    from syncd.sync import default_db

    return db or default_db(settings)


def _check_mode(mode: str) -> Any:
    if mode not in ("copy", "mirror"):
        raise typer.BadParameter("--mode must be copy or mirror")
    return mode


def _with_progress(label: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    with CrawlProgress(label) as progress:
        return anyio.run(work, progress.update)


def print_plan(the_plan: Plan) -> None:
    from syncd.copy.ops import ACTIONS

    counts = the_plan.counts()
    if counts:
        table = Table(title="planned operations")
        table.add_column("kind")
        for action in ACTIONS:
            table.add_column(action, justify="right")
        for kind in sorted(counts):
            table.add_row(markup(kind), *(str(counts[kind].get(action, "")) or "" for action in ACTIONS))
        totals = {action: sum(c.get(action, 0) for c in counts.values()) for action in ACTIONS}
        table.add_row("[bold]total[/bold]", *(f"[bold]{totals[a]}[/bold]" for a in ACTIONS))
        console.print(table)
    else:
        console.print("no operations: the target is up to date")
    for op in the_plan.ops:
        if op.action == "settle":
            console.print(f"  settle {markup(op.kind)} {markup(repr(op.title))}: " + markup("; ".join(op.preview[:6]) + (" ..." if len(op.preview) > 6 else "")))
    for skip in the_plan.skips[:30]:
        console.print(f"  [yellow]skip[/yellow] {markup(skip.kind)} {markup(repr(skip.title))}: {markup(skip.reason)}")
    if len(the_plan.skips) > 30:
        console.print(f"  ... and {len(the_plan.skips) - 30} more skips (`mirror plan --json` lists them all)")
    for warning in the_plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {markup(warning)}")
    if the_plan.refused:
        console.print(f"[red]refused:[/red] {markup(the_plan.refused)}")


def _say(text: str) -> None:
    """Print text that quotes the organizations as it is: no markup, no control characters."""
    console.print(clean(text, newlines=True), markup=False, highlight=False)


def print_verification(result: Verification, residue: list[Any]) -> None:
    from syncd.copy.verify import render

    for line in render(result, limit=50):
        _say(line)
    for entry in residue:
        _say(f"! {entry.kind} {entry.title!r} ({entry.source_id}): {entry.note}")


def print_report(report: CopyReport) -> None:
    for line in report.settled:
        _say(f"settled: {line}")
    if report.plans:
        print_plan(report.plans[0])
    for round_ in report.rounds:
        _say(round_.line())
        if round_.apply is not None and (round_.apply.failed or round_.apply.skipped or round_.apply.notes):
            _say(round_.apply.summary(limit=15))
    for warning in report.warnings:
        _say(f"warning: {warning}")
    print_verification(report.verification, report.residue)


def run_copy(settings: Settings, source: Source, target: TargetRef, db: Path, *, mode: Any = "copy", max_delete: int = 10, adopt: bool = True, max_rounds: int = 3) -> int:
    """`copy_org` with progress on the terminal; the exit status."""
    from syncd.copy import copy_org

    with CopyDisplay(f"copy {source} -> {target}") as display:
        report = anyio.run(lambda: copy_org(
            settings, source, target, mode=mode, max_delete=max_delete, adopt=adopt, db=db, max_rounds=max_rounds,
            on_read=display.reading, on_apply=display.applying,
        ))
    print_report(report)
    return 0 if report.equal else EXIT_DIFFERENT


def run_dry(settings: Settings, source: Source, target: TargetRef, db: Path, *, mode: Any, max_delete: int, adopt: bool) -> int:
    from syncd.copy import PlanRefused, dry_run_lines, plan_org

    reading, the_plan = _with_progress(f"read {source} and {target}", lambda progress: plan_org(
        settings, source, target, mode=mode, max_delete=max_delete, adopt=adopt, db=db, on_read=progress,
    ))
    print_plan(the_plan)
    if the_plan.refused:
        raise PlanRefused(the_plan.refused)
    lines = dry_run_lines(the_plan, reading.idmap)
    console.print(f"dry run: {len(lines)} steps would be sent, nothing was written", markup=False)
    for line in lines:
        _say(f"  {line}")
    return EXIT_PENDING if the_plan.ops else 0


@app.command("plan")
def plan_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG"),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    mode: str = ModeOption,
    max_delete: int = MaxDeleteOption,
    no_adopt: bool = NoAdoptOption,
    as_json: bool = typer.Option(False, "--json", help="Print the operations as JSON."),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Read both organizations and print the operations that would make the target match."""
    from syncd.copy import plan_org
    from syncd.copy.ops import op_to_json

    settings, src, dst = _refs(config, source, target)
    _, the_plan = _with_progress(f"read {src} and {dst}", lambda progress: plan_org(
        settings, src, dst, mode=_check_mode(mode), max_delete=max_delete, adopt=not no_adopt, db=_db(settings, db), on_read=progress,
    ))
    if as_json:
        print(json.dumps({
            "ops": [op_to_json(op) for op in the_plan.ops],
            "skips": [skip.__dict__ for skip in the_plan.skips],
            "refused": the_plan.refused,
            "warnings": the_plan.warnings,
        }, indent=2, default=list))
    else:
        print_plan(the_plan)
    if the_plan.refused:
        raise typer.Exit(EXIT_PENDING)
    raise typer.Exit(EXIT_PENDING if the_plan.ops else 0)


@app.command("apply")
def apply_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG"),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    mode: str = ModeOption,
    max_delete: int = MaxDeleteOption,
    no_adopt: bool = NoAdoptOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, send none."),
    max_rounds: int = RoundsOption,
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Apply the plan (journaled, resumable), read again and verify; plan again from what was
    read while something is left that a plan can fix (at most --max-rounds)."""
    settings, src, dst = _refs(config, source, target)
    options = {"mode": _check_mode(mode), "max_delete": max_delete, "adopt": not no_adopt}
    if dry_run:
        raise typer.Exit(run_dry(settings, src, dst, _db(settings, db), **options))
    raise typer.Exit(run_copy(settings, src, dst, _db(settings, db), max_rounds=max_rounds, **options))


@app.command("verify")
def verify_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG"),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Re-read both organizations and compare them (ids mapped, order included)."""
    from syncd.copy import verify_org

    settings, src, dst = _refs(config, source, target)
    verification, residue = _with_progress(f"read {src} and {dst}", lambda progress: verify_org(settings, src, dst, db=_db(settings, db), on_read=progress))
    print_verification(verification, residue)
    raise typer.Exit(0 if verification.equal and not residue else EXIT_DIFFERENT)


def restore(
    backup: Path = typer.Argument(..., metavar="FILE.db", help="A backup written by `syncd backup`."),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    org: str | None = typer.Option(None, "--org", help="The backed-up organization to restore (when the file holds several)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, send none."),
    max_rounds: int = RoundsOption,
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Restore a backup into an organization with the same engine as `mirror apply` (copy mode)."""
    from syncd.copy import BackupSource

    settings = load_settings(config)
    dst = parse_target_ref(target, settings)
    source = BackupSource(backup, org)
    if dry_run:
        raise typer.Exit(run_dry(settings, source, dst, _db(settings, db), mode="copy", max_delete=0, adopt=True))
    raise typer.Exit(run_copy(settings, source, dst, _db(settings, db), max_rounds=max_rounds))
