"""`syncd mirror plan|apply|verify` and `syncd restore`: the write side on the command line.

Exit codes, like the tools people trust: `mirror plan` exits 2 when changes are pending and
0 when none (Terraform's -detailed-exitcode); `apply` and `verify` exit 0 only when the
target equals the source afterwards, 1 when differences remain; 2 for bad arguments or a
refused plan (deletes beyond --max-delete, a source that looks empty); 3 when a side could
not be read completely.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from syncd.commands.read_cmds import ConfigOption, DbOption, settings_and_ref
from syncd.config import Settings, TargetRef, load_settings, parse_target_ref
from syncd.errors import SyncdError
from syncd.progress import CrawlProgress
from syncd.replay.ops import ACTIONS, Plan, op_to_json

if TYPE_CHECKING:
    from syncd.replay.verify import Verification

app = typer.Typer(help="Copy or mirror an organization into another (same tenant or another).", no_args_is_help=True)
console = Console()

EXIT_DIFFERENT = 1
EXIT_PENDING = 2
EXIT_REFUSED = 2


class PlanRefused(SyncdError):
    exit_code = EXIT_REFUSED


ModeOption = typer.Option("copy", "--mode", help="copy (create and update) or mirror (also delete what syncd created and the source lost).")
MaxDeleteOption = typer.Option(10, "--max-delete", help="Refuse to apply a plan with more deletes than this.")


def _refs(config: Path | None, source: str, target: str) -> tuple[Settings, TargetRef, TargetRef]:
    settings, src = settings_and_ref(config, source)
    return settings, src, parse_target_ref(target, settings)


def _db(settings: Settings, db: Path | None) -> Path:
    from syncd.sync import default_db

    return db or default_db(settings)


def _check_mode(mode: str) -> str:
    if mode not in ("copy", "mirror"):
        raise typer.BadParameter("--mode must be copy or mirror")
    return mode


def _read(label: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    with CrawlProgress(label) as progress:
        return anyio.run(work, progress.update)


def print_plan(the_plan: Plan, warnings: list[str]) -> None:
    counts = the_plan.counts()
    if counts:
        table = Table(title="planned operations")
        table.add_column("kind")
        for action in ACTIONS:
            table.add_column(action, justify="right")
        for kind in sorted(counts):
            table.add_row(kind, *(str(counts[kind].get(action, "")) or "" for action in ACTIONS))
        totals = {action: sum(c.get(action, 0) for c in counts.values()) for action in ACTIONS}
        table.add_row("[bold]total[/bold]", *(f"[bold]{totals[a]}[/bold]" for a in ACTIONS))
        console.print(table)
    else:
        console.print("no operations: the target is up to date")
    for skip in the_plan.skips[:30]:
        console.print(f"  [yellow]skip[/yellow] {skip.kind} {skip.title!r}: {skip.reason}")
    if len(the_plan.skips) > 30:
        console.print(f"  ... and {len(the_plan.skips) - 30} more skips (use --json for all)")
    for warning in warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if the_plan.refused:
        console.print(f"[red]refused:[/red] {the_plan.refused}")


def print_verification(result: Verification) -> None:
    from syncd.replay.verify import render

    for line in render(result, limit=50):
        console.print(line, markup=False, highlight=False)


@app.command("plan")
def plan_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG"),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    mode: str = ModeOption,
    max_delete: int = MaxDeleteOption,
    no_adopt: bool = typer.Option(False, "--no-adopt", help="Create everything instead of adopting equivalent objects."),
    as_json: bool = typer.Option(False, "--json", help="Print the operations as JSON."),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Read both organizations and print the operations that would make the target match."""
    from syncd.mirroring import plan_between, prepare

    settings, src, dst = _refs(config, source, target)
    prepared = _read(f"read {src} and {dst}", lambda progress: prepare(settings, src, dst, _db(settings, db), progress))
    the_plan = plan_between(prepared, _check_mode(mode), max_delete, adopt=not no_adopt)  # type: ignore[arg-type]
    if as_json:
        print(json.dumps({
            "ops": [op_to_json(op) for op in the_plan.ops],
            "skips": [skip.__dict__ for skip in the_plan.skips],
            "refused": the_plan.refused,
            "warnings": prepared.warnings,
        }, indent=2))
    else:
        print_plan(the_plan, prepared.warnings)
    if the_plan.refused:
        raise typer.Exit(EXIT_REFUSED)
    raise typer.Exit(EXIT_PENDING if the_plan.ops else 0)


def _apply_and_verify(settings: Settings, prepared: Any, the_plan: Plan, db: Path, src: TargetRef | None, dst: TargetRef, dry_run: bool, reread: Callable[[], Any]) -> int:
    from syncd.mirroring import apply_between

    print_plan(the_plan, prepared.warnings)
    if the_plan.refused:
        raise PlanRefused(the_plan.refused)
    if not the_plan.ops:
        return 0
    from syncd.progress import ApplyDisplay

    with ApplyDisplay(f"apply to {dst}") as display:
        result = anyio.run(
            lambda: apply_between(settings, prepared, the_plan, db, source_ref=src, target_ref=dst, dry_run=dry_run, on_progress=display.update)
        )
    console.print(result.summary())
    if dry_run:
        return EXIT_PENDING
    verification = reread()
    print_verification(verification)
    return 0 if verification.equal and not result.failed else EXIT_DIFFERENT


@app.command("apply")
def apply_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG"),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    mode: str = ModeOption,
    max_delete: int = MaxDeleteOption,
    no_adopt: bool = typer.Option(False, "--no-adopt", help="Create everything instead of adopting equivalent objects."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, send none."),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Apply the plan (journaled, resumable), then re-read the target and verify."""
    from syncd.mirroring import plan_between, prepare, verify_prepared

    settings, src, dst = _refs(config, source, target)
    path = _db(settings, db)
    prepared = _read(f"read {src} and {dst}", lambda progress: prepare(settings, src, dst, path, progress))
    the_plan = plan_between(prepared, _check_mode(mode), max_delete, adopt=not no_adopt)  # type: ignore[arg-type]

    def reread() -> Verification:
        after = _read(f"verify {dst}", lambda progress: prepare(settings, src, dst, path, progress))
        return verify_prepared(after)

    raise typer.Exit(_apply_and_verify(settings, prepared, the_plan, path, src, dst, dry_run, reread))


@app.command("verify")
def verify_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG"),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Re-read both organizations and compare them (ids mapped, order included)."""
    from syncd.mirroring import prepare, verify_prepared

    settings, src, dst = _refs(config, source, target)
    prepared = _read(f"read {src} and {dst}", lambda progress: prepare(settings, src, dst, _db(settings, db), progress))
    verification = verify_prepared(prepared)
    print_verification(verification)
    raise typer.Exit(0 if verification.equal else EXIT_DIFFERENT)


def restore(
    backup: Path = typer.Argument(..., metavar="FILE.db", help="A backup written by `syncd backup`."),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG"),
    org: str | None = typer.Option(None, "--org", help="The backed-up organization to restore (when the file holds several)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, send none."),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Restore a backup into an organization with the same engine as `mirror apply` (copy mode)."""
    from syncd.mirroring import plan_between, prepare_restore, verify_prepared

    settings = load_settings(config)
    dst = parse_target_ref(target, settings)
    path = _db(settings, db)
    prepared = _read(f"read {dst}", lambda progress: prepare_restore(settings, backup, org, dst, path, progress))
    the_plan = plan_between(prepared, "copy", 0)

    def reread() -> Verification:
        after = _read(f"verify {dst}", lambda progress: prepare_restore(settings, backup, org, dst, path, progress))
        return verify_prepared(after)

    raise typer.Exit(_apply_and_verify(settings, prepared, the_plan, path, None, dst, dry_run, reread))
