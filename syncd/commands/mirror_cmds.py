"""`syncd mirror plan|apply|verify` and `syncd restore`: the write side on the command line.

Exit codes, like the tools people trust: `mirror plan` exits 2 when changes are pending and
0 when none (Terraform's -detailed-exitcode); `apply`, `restore` and `verify` exit 0 only when
the target equals the source afterwards apart from what the plan announced as skips (and a
copy left nothing in the source), 1 when differences remain; 2 for bad arguments, a refused
plan (deletes beyond --max-delete, a source that looks empty), a saved plan that is stale,
deletes nobody confirmed, or a `verify FILE.db` of a backup no restore into that
organization recorded in the state. `restore` ends with that verify command, to paste later.

Plans are reviewed like Terraform's: `mirror plan` lists every operation (`syncd.copy.review`)
and `--out` saves it (`syncd.copy.planfile`); `apply --plan` applies exactly that, or refuses
when a side changed since, when the file is malformed or an op breaks the run's rules, or when
the plan made again from what was read is not the file's (exit 2, nothing written). Deletes
are confirmed: on a terminal `apply --mode mirror` shows the plan and asks; elsewhere it needs
`--yes`. A saved plan was reviewed when it was made, so applying it asks nothing (as
`terraform apply PLANFILE`), but its deletes stay bounded by `--max-delete` (default 10), and
one that writes the target's access settings needs `--with-access` again.

The target's access settings (who may join or sign in: emailDomains, inviteLinks,
defaultRole, sso, SAML providers) are its own: only `--with-access` copies them.

With `--json`, stdout carries exactly one JSON document (`syncd.copy.documents`, schemas in
`syncd/schemas/`); progress, warnings and questions go to stderr. Titles, reasons and
messages come from the organizations: they are printed through `syncd.safe_text` (never read
as markup, no control characters).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from syncd import interrupt
from syncd.commands.backup_sources import backup_source, verify_source
from syncd.commands.file_args import backup_file
from syncd.commands.progress import CopyDisplay, CrawlProgress
from syncd.commands.read_cmds import ConfigOption, DbOption
from syncd.commands.scope_options import ExcludeOption, IncludeOption, scope_from
from syncd.config import Settings, TargetRef, load_settings, parse_target_ref
from syncd.errors import SyncdError, UsageError
from syncd.safe_text import clean, markup
from syncd.safe_text import console as make_console
from syncd.scope import EVERYTHING, Scope

if TYPE_CHECKING:
    from syncd.copy import CopyReport, Plan, Reading, Verification
    from syncd.copy.planfile import SavedPlan
    from syncd.copy.review import Item
    from syncd.copy.sides import Source
    from syncd.read.sync import StateLocation

app = typer.Typer(help="Copy or mirror an organization into another (same tenant or another).", no_args_is_help=True)

EXIT_DIFFERENT = 1
EXIT_PENDING = 2
SHOWN_SKIPS = 30

ModeOption = typer.Option(None, "--mode", help="copy (create and update; the default) or mirror (also delete what syncd created and the source lost).")
DEFAULT_MAX_DELETE = 10
MaxDeleteOption = typer.Option(
    None, "--max-delete", help="Refuse to apply a plan with more deletes than this (default 10; with --plan too: a plan file's own limit is not used)."
)
NoAdoptOption = typer.Option(False, "--no-adopt", help="Create everything instead of adopting equivalent objects.")
RoundsOption = typer.Option(3, "--max-rounds", min=1, max=10, help="Plan-apply-verify rounds at most.")
JsonOption = typer.Option(False, "--json", help="Print one JSON document on stdout (progress and warnings go to stderr).")
WithAccessOption = typer.Option(
    False, "--with-access",
    help="Also copy who may join or sign in (emailDomains, inviteLinks, defaultRole, sso, SAML providers); by default the target keeps its own.",
)  # fmt: skip


class NotConfirmed(SyncdError):
    """Deletes nobody confirmed: nothing was written."""

    exit_code = 2


def _console(as_json: bool) -> Console:
    """Human text: stdout, or stderr when stdout carries the JSON document."""
    return make_console(stderr=as_json, soft_wrap=True)


def _say(out: Console, text: str) -> None:
    """Print text that quotes the organizations as it is: no markup, no control characters."""
    out.print(clean(text, newlines=True), markup=False, highlight=False)


def _emit(document: Any) -> None:
    """The one JSON document of a `--json` run (ASCII: no character of a title can act on a terminal)."""
    from syncd.commands.machine_output import emit

    emit(document)


def _emit_plan(document: dict[str, Any]) -> None:
    """A plan document (`plan_fields`) as the run's one JSON document, written as it is made
    (the same text `--out` saves; ASCII, as `_emit`)."""
    from syncd.copy.planfile import write_plan

    write_plan(sys.stdout, document)
    sys.stdout.flush()


def _refs(config: Path | None, source: str, target: str) -> tuple[Settings, TargetRef, TargetRef]:
    settings = load_settings(config)
    return settings, parse_target_ref(source, settings), parse_target_ref(target, settings)


def _db(settings: Settings, db: Path | None) -> StateLocation:
    from syncd.read.sync import default_db

    return db or default_db(settings)


def _check_mode(mode: str | None) -> Any:
    if mode is None:
        return "copy"
    if mode not in ("copy", "mirror"):
        raise typer.BadParameter("--mode must be copy or mirror")
    return mode


def _with_progress(label: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    with CrawlProgress(label) as progress:  # SIGINT/SIGTERM: its read runs are cancelled, exit 130/143
        return interrupt.run(work, progress.update)


# ----- printing ----------------------------------------------------------------------------------


def summary_table(items: list[Item]) -> Table:
    """Lines of the listing per kind and action (the plan's totals): only the actions the
    plan has, so that it fits 80 columns."""
    from syncd.copy.review import ACTIONS, counts

    by_kind = counts(items)
    totals = {action: sum(n.get(action, 0) for n in by_kind.values()) for action in ACTIONS}
    shown = [action for action in ACTIONS if totals[action]]
    table = Table(title="planned operations", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)
    table.add_column("kind")
    for action in shown:
        table.add_column(action, justify="right")
    for kind, numbers in by_kind.items():
        table.add_row(markup(kind), *(str(numbers.get(action, "")) for action in shown))
    table.add_row("[bold]total[/bold]", *(f"[bold]{totals[a]}[/bold]" for a in shown))
    return table


def print_plan(items: list[Item], the_plan: Plan, out: Console, *, listing: bool = True) -> None:
    """Every operation (`listing`), the totals, the skips, warnings and a refusal."""
    from syncd.copy.review import render

    if not the_plan.ops:
        out.print("no operations: the target is up to date")
    else:
        if listing:
            for line in render(items):
                _say(out, line)
        out.print(summary_table(items))
    for skip in the_plan.skips[:SHOWN_SKIPS]:
        _say(out, f"  skip {skip.kind} {skip.title!r}: {skip.reason}")
    if len(the_plan.skips) > SHOWN_SKIPS:
        out.print(f"  ... and {len(the_plan.skips) - SHOWN_SKIPS} more skips (`mirror plan --json` lists them all)")
    print_left(the_plan, out)
    for warning in the_plan.warnings:
        _say(out, f"warning: {warning}")
    if the_plan.refused:
        _say(out, f"refused: {the_plan.refused}")


def print_left(the_plan: Plan, out: Console) -> None:
    """The plan's own section for what it leaves on the target (the source has nothing for it)."""
    if not the_plan.left:
        return
    out.print(f"left on the target: {len(the_plan.left)} object(s) the source does not have (kept: the plan neither adopts nor deletes them)")
    for left in the_plan.left[:SHOWN_SKIPS]:
        _say(out, f"  - {left.kind} {left.title!r}" + (f" at {left.path}" if left.path != left.title else ""))
    if len(the_plan.left) > SHOWN_SKIPS:
        out.print(f"  ... and {len(the_plan.left) - SHOWN_SKIPS} more (`mirror plan --json` lists them all)")


def print_verification(result: Verification, residue: list[Any], out: Console) -> None:
    from syncd.copy.verify import render

    for line in render(result, limit=50):
        _say(out, line)
    for entry in residue:
        _say(out, f"! {entry.kind} {entry.title!r} ({entry.source_id}): {entry.note}")


def print_report(report: CopyReport, out: Console) -> None:
    for line in report.settled:
        _say(out, f"settled: {line}")
    if report.plans:
        print_plan(report.listing, report.plans[0], out, listing=False)
    for round_ in report.rounds:
        _say(out, round_.line())
        if round_.apply is not None and (round_.apply.failed or round_.apply.skipped or round_.apply.notes):
            _say(out, round_.apply.summary(limit=15))
    for warning in report.warnings:
        _say(out, f"warning: {warning}")
    print_verification(report.verification, report.residue, out)


# ----- plans -------------------------------------------------------------------------------------


def _plan(
    settings: Settings, source: Source, target: TargetRef, db: Path, mode: Any, max_delete: int, adopt: bool, scope: Scope = EVERYTHING,
    with_access: bool = False,
) -> tuple[Reading, Plan, list[Item]]:
    from syncd.copy import plan_org
    from syncd.copy.review import review

    reading, the_plan = _with_progress(f"read {source} and {target}", lambda progress: plan_org(
        settings, source, target, mode=mode, max_delete=max_delete, adopt=adopt, db=db, on_read=progress, scope=scope, with_access=with_access,
    ))
    return reading, the_plan, review(the_plan, reading.source.snapshot, reading.target.snapshot, reading.idmap)


def _plan_refs(settings: Settings, saved: SavedPlan, source: str | None, target: str | None) -> tuple[TargetRef, TargetRef]:
    """The plan's organizations; SRC and DST, when given, must name the same ones."""
    pair = saved.pair
    if pair.source_tenant.startswith("backup:"):
        raise UsageError(f"this plan restores a backup ({saved.source}): it is shown by `restore --dry-run`, and a restore is run by `syncd restore`")
    planned = (TargetRef(pair.source_tenant, pair.source_org), TargetRef(pair.target_tenant, pair.target_org))
    for given, ref, side in ((source, planned[0], "source"), (target, planned[1], "target")):
        if given is None:
            continue
        parsed = parse_target_ref(given, settings)
        if (settings.tenant(parsed.tenant).name, parsed.org) != (ref.tenant, ref.org):
            raise UsageError(f"{given} is not the plan's {side} ({ref}): give the plan's organizations, or none")
    for ref in planned:
        settings.tenant(ref.tenant)  # configured here too
    return planned


def confirm_deletes(items: list[Item], the_plan: Plan, target: TargetRef, yes: bool, out: Console) -> None:
    """Deletes go ahead with --yes, or when a person types `yes` on a terminal; else
    NotConfirmed, before anything is written."""
    deletes = [item for item in items if item.action == "delete"]
    if not deletes or yes:
        return
    names = ", ".join(f"{item.kind} {item.path or item.title!r}" for item in deletes[:3]) + (", ..." if len(deletes) > 3 else "")
    if not sys.stdin.isatty():
        raise NotConfirmed(
            f"the plan deletes {len(deletes)} object(s) from {target} ({clean(names)}): add --yes to apply it without a terminal, "
            "or review it with `syncd mirror plan --out PLAN.json` and apply that; nothing was written"
        )
    print_plan(items, the_plan, out)
    ask = make_console(stderr=True)
    ask.print(f"Delete {len(deletes)} object(s) from {markup(str(target))}? Only 'yes' deletes: ", end="")
    if sys.stdin.readline().strip() != "yes":
        raise NotConfirmed("apply cancelled: nothing was written")


# ----- running -----------------------------------------------------------------------------------


def run_copy(
    settings: Settings, source: Source, target: TargetRef, db: Path, *, mode: Any = "copy", max_delete: int = 10, adopt: bool = True,
    max_rounds: int = 3, saved: SavedPlan | None = None, as_json: bool = False, plan_file: str | None = None, scope: Scope = EVERYTHING,
    with_access: bool = False,
) -> int:
    """`copy_org` with progress on the terminal; the exit status."""
    from syncd.copy import copy_org

    with CopyDisplay(f"copy {source} -> {target}") as display:  # SIGINT/SIGTERM: runs cancelled, exit 130/143
        report = interrupt.run(lambda: copy_org(
            settings, source, target, mode=mode, max_delete=max_delete, adopt=adopt, db=db, max_rounds=max_rounds,
            on_read=display.reading, on_apply=display.applying, saved=saved, scope=scope, with_access=with_access,
        ))
    if as_json:
        from syncd.copy.documents import copy_document

        for warning in report.warnings:
            _say(_console(True), f"warning: {warning}")
        _emit(copy_document(report, plan_file=plan_file))
    else:
        print_report(report, _console(False))
    return 0 if report.equal else EXIT_DIFFERENT


def run_dry(
    settings: Settings, source: Source, target: TargetRef, db: Path, *, mode: Any, max_delete: int, adopt: bool, as_json: bool = False,
    scope: Scope = EVERYTHING, with_access: bool = False,
) -> int:
    from syncd.copy import PlanRefused, dry_run_lines
    from syncd.copy.engine import saved_plan
    from syncd.copy.planfile import plan_fields, plan_options

    reading, the_plan, items = _plan(settings, source, target, db, mode, max_delete, adopt, scope, with_access)
    out = _console(as_json)
    lines = dry_run_lines(the_plan, reading.idmap)
    if as_json:
        document = plan_fields(saved_plan(reading, the_plan, source, target, mode, plan_options(max_delete, adopt, with_access, scope)), items)
        _emit_plan({**document, "calls": lines})
    else:
        print_plan(items, the_plan, out, listing=False)
    if the_plan.refused:
        raise PlanRefused(the_plan.refused)
    if not as_json:
        out.print(f"dry run: {len(lines)} steps would be sent, nothing was written", markup=False)
        for line in lines:
            _say(out, f"  {line}")
    return EXIT_PENDING if the_plan.ops else 0


def dry_run_saved(saved: SavedPlan, plan_file: Path, db: StateLocation, as_json: bool) -> int:
    """The calls of a saved plan, resolved through the id map as it is now (nothing is read)."""
    from syncd.copy import dry_run_lines
    from syncd.copy.journal import load_idmap
    from syncd.copy.model import IdMap
    from syncd.state import StateStore

    idmap = IdMap()
    if not isinstance(db, Path) or db.exists():  # no state file made by a dry run; a state_url's state is the server's
        with StateStore(db) as store:
            idmap = load_idmap(store, saved.pair)
    lines = dry_run_lines(saved.plan, idmap)
    if as_json:
        from syncd.copy.planfile import plan_text

        _emit({**json.loads(plan_text(plan_file)), "calls": lines})
    else:
        out = _console(False)
        out.print(f"dry run of a saved plan: {len(lines)} steps would be sent, nothing was written", markup=False)
        for line in lines:
            _say(out, f"  {line}")
    return EXIT_PENDING if saved.plan.ops else 0


# ----- commands ----------------------------------------------------------------------------------


@app.command("plan")
def plan_cmd(
    source: str = typer.Argument(..., metavar="SRC_TENANT:ORG", help="The organization to copy from."),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG", help="The organization to make match it."),
    mode: str | None = ModeOption,
    max_delete: int | None = MaxDeleteOption,
    no_adopt: bool = NoAdoptOption,
    out_file: Path | None = typer.Option(None, "--out", metavar="PLAN.json", help="Save the plan, to apply exactly it with `mirror apply --plan`."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as one JSON document (the same as --out writes)."),
    with_access: bool = WithAccessOption,
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
) -> None:
    """Read both organizations and list every operation that would make the target match."""
    from syncd.copy.engine import saved_plan
    from syncd.copy.planfile import plan_fields, plan_options, save_plan

    scope = scope_from(include, exclude)
    settings, src, dst = _refs(config, source, target)
    mode, limit, adopt = _check_mode(mode), DEFAULT_MAX_DELETE if max_delete is None else max_delete, not no_adopt
    reading, the_plan, items = _plan(settings, src, dst, _db(settings, db), mode, limit, adopt, scope, with_access)
    out = _console(as_json)
    saved = saved_plan(reading, the_plan, src, dst, mode, plan_options(limit, adopt, with_access, scope))
    if as_json:
        _emit_plan(plan_fields(saved, items))
        for warning in the_plan.warnings:
            _say(out, f"warning: {warning}")
    else:
        print_plan(items, the_plan, out)
    if the_plan.refused:
        if out_file is not None:
            _say(out, f"{out_file} was not written: a refused plan cannot be applied")
        raise typer.Exit(EXIT_PENDING)
    if out_file is not None:
        save_plan(out_file, plan_fields(saved, items))
        _say(out, f"plan saved to {out_file}: apply exactly it with `syncd mirror apply --plan {out_file}`")
    raise typer.Exit(EXIT_PENDING if the_plan.ops else 0)


@app.command("apply")
def apply_cmd(
    source: str | None = typer.Argument(None, metavar="SRC_TENANT:ORG", help="The source (optional with --plan: the plan names it)."),
    target: str | None = typer.Argument(None, metavar="DST_TENANT:ORG", help="The target (optional with --plan)."),
    mode: str | None = ModeOption,
    max_delete: int | None = MaxDeleteOption,
    no_adopt: bool = NoAdoptOption,
    plan_file: Path | None = typer.Option(None, "--plan", metavar="PLAN.json", help="Apply exactly this saved plan; refused when a side changed since it was made."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply deletes without asking (needed for deletes when stdin is not a terminal)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, send none."),
    max_rounds: int = RoundsOption,
    as_json: bool = JsonOption,
    with_access: bool = WithAccessOption,
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
) -> None:
    """Apply the plan (journaled, resumable), read again and verify; plan again from what was
    read while something is left that a plan can fix (at most --max-rounds)."""
    scope = scope_from(include, exclude)
    settings = load_settings(config)
    state = _db(settings, db)
    if plan_file is not None:
        from syncd.copy.invariants import Bounds
        from syncd.copy.planfile import check_intent, load_plan

        if mode is not None or no_adopt or not scope.everything:
            raise UsageError("--mode, --no-adopt, --include and --exclude were fixed when the plan was made: give none of them with --plan")
        saved = load_plan(plan_file)
        src, dst = _plan_refs(settings, saved, source, target)
        limit = DEFAULT_MAX_DELETE if max_delete is None else max_delete  # never the file's: it may have been edited
        _check_access(saved, plan_file, with_access)  # the command line's, as the limit
        check_intent(saved, Bounds(target_org=saved.pair.target_org, mode=saved.mode, max_delete=limit, with_access=with_access))
        saved_scope = scope_from(saved.options.get("include"), saved.options.get("exclude"))
        if dry_run:
            raise typer.Exit(dry_run_saved(saved, plan_file, state, as_json))
        raise typer.Exit(run_copy(
            settings, src, dst, state, mode=saved.mode, max_delete=limit, adopt=bool(saved.options.get("adopt", True)),
            max_rounds=max_rounds, saved=saved, as_json=as_json, plan_file=str(plan_file), scope=saved_scope, with_access=with_access,
        ))
    if source is None or target is None:
        raise UsageError("mirror apply needs SRC_TENANT:ORG and DST_TENANT:ORG, or --plan PLAN.json")
    src, dst = parse_target_ref(source, settings), parse_target_ref(target, settings)
    options = {
        "mode": _check_mode(mode), "max_delete": DEFAULT_MAX_DELETE if max_delete is None else max_delete, "adopt": not no_adopt, "scope": scope,
        "with_access": with_access,
    }  # fmt: skip
    if dry_run:
        raise typer.Exit(run_dry(settings, src, dst, state, as_json=as_json, **options))
    saved = None
    if options["mode"] == "mirror" and not yes:
        saved = _reviewed(settings, src, dst, state, options, as_json)
    raise typer.Exit(run_copy(settings, src, dst, state, max_rounds=max_rounds, saved=saved, as_json=as_json, **options))


def _check_access(saved: SavedPlan, plan_file: Path, with_access: bool) -> None:
    """A saved plan writes the target's access settings only when `--with-access` is given
    again (a file may have been edited); UsageError (nothing written) when the two differ."""
    if bool(saved.options.get("with_access", False)) == with_access:
        return
    if with_access:
        raise UsageError(f"{plan_file} was made without --with-access (it keeps the target's access settings): make a new plan with --with-access")
    raise UsageError(
        f"{plan_file} was made with --with-access (it writes the target's access settings): give --with-access to apply it, or make a plan without it"
    )


def _reviewed(settings: Settings, source: TargetRef, target: TargetRef, db: Path, options: dict[str, Any], as_json: bool) -> SavedPlan:
    """A mirror apply without --yes: plan first, have its deletes confirmed, then apply
    exactly that plan (later rounds add no delete that was not confirmed)."""
    from syncd.copy import PlanRefused
    from syncd.copy.engine import saved_plan
    from syncd.copy.planfile import plan_options

    mode, limit, adopt, scope, with_access = (options[name] for name in ("mode", "max_delete", "adopt", "scope", "with_access"))
    reading, the_plan, items = _plan(settings, source, target, db, mode, limit, adopt, scope, with_access)
    if the_plan.refused:
        raise PlanRefused(f"the plan must not be applied: {the_plan.refused}")
    confirm_deletes(items, the_plan, target, False, _console(as_json))
    saved = saved_plan(reading, the_plan, source, target, mode, plan_options(limit, adopt, with_access, scope))
    saved.binds = "deletes"
    return saved


@app.command("verify")
def verify_cmd(
    source: str = typer.Argument(
        ..., metavar="SRC_TENANT:ORG|FILE.db|DIR@REV",
        help="The source organization, or a backup restored into the target by `syncd restore` (a file, s3://BUCKET/PREFIX/NAME.db, or a commit of an export's Git history).",
    ),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG", help="The organization compared with the source."),
    org: str | None = typer.Option(None, "--org", help="With FILE.db: the backed-up organization (when the file holds several), as given to restore."),
    mode: str | None = typer.Option(
        None, "--mode", help="copy (the default: objects only on the target are left there, not a difference) or mirror (they are extra)."
    ),
    as_json: bool = JsonOption,
    with_access: bool = typer.Option(False, "--with-access", help="Compare the access settings too (a copy made --with-access); else the target's own."),
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
) -> None:
    """Re-read both organizations and compare them (ids mapped, order included); a backup
    file is compared with the organization it was restored into, through the ids the restore
    recorded (give the same --db / --config as the restore)."""
    settings = load_settings(config)
    with contextlib.ExitStack() as stack:
        _verify(source, target, org, mode, as_json, with_access, db, config, include, exclude, settings, stack)


def _verify(
    source: str, target: str, org: str | None, mode: str | None, as_json: bool, with_access: bool, db: Path | None, config: Path | None,
    include: list[str], exclude: list[str], settings: Settings, stack: contextlib.ExitStack,
) -> None:  # fmt: skip
    from syncd.copy import NotRestored, verify_org

    scope, checked = scope_from(include, exclude), _check_mode(mode)
    src, dst = verify_source(source, org, settings, stack), parse_target_ref(target, settings)
    try:
        verification, residue = _with_progress(
            f"read {src} and {dst}",
            lambda progress: verify_org(
                settings, src, dst, db=_db(settings, db), on_read=progress, scope=scope, with_access=with_access, mode=checked
            ),
        )
    except NotRestored as exc:
        again = backup_command("restore", source, target, org=org, db=db, config=config, include=include, exclude=exclude, with_access=with_access)
        raise NotRestored(f"{exc}: restore it with `{again}` first, or give the --db and --config that restore used") from None
    if as_json:
        from syncd.copy.documents import verify_document

        _emit(verify_document(str(src), str(dst), verification, residue))
    else:
        print_verification(verification, residue, _console(False))
    raise typer.Exit(0 if verification.equal and not residue else EXIT_DIFFERENT)


def backup_command(
    command: str, backup: str, target: str, *, org: str | None, db: Path | None, config: Path | None, include: list[str], exclude: list[str],
    with_access: bool = False,
) -> str:
    """`syncd COMMAND BACKUP TARGET` (`restore`, `mirror verify`) with the options that find the
    same organizations and recorded ids, all as the user gave them, quoted for a POSIX shell
    where needed: a line to paste (syncd named as this shell reaches it: `syncd_command`)."""
    from syncd.commands.invocation import syncd_command

    words = [*command.split(), backup, target]
    for option, values in (("--org", [org]), ("--db", [db]), ("--config", [config]), ("--include", include), ("--exclude", exclude)):
        words += [part for value in values if value is not None for part in (option, str(value))]
    return " ".join([syncd_command(), shlex.join(words + (["--with-access"] if with_access else []))])


def restore(
    backup: str = typer.Argument(
        ..., metavar="FILE.db|DIR[@REV]",
        help="A backup written by `syncd backup` (a file, or s3://BUCKET/PREFIX/NAME.db), or a commit of an export's Git history (`syncd export --git`): DIR is HEAD.",
    ),
    target: str = typer.Argument(..., metavar="DST_TENANT:ORG", help="The organization to restore the backup into."),
    org: str | None = typer.Option(None, "--org", help="The backed-up organization to restore (when the file holds several)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the calls, send none."),
    max_rounds: int = RoundsOption,
    as_json: bool = JsonOption,
    with_access: bool = WithAccessOption,
    db: Path | None = DbOption,
    config: Path | None = ConfigOption,
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
) -> None:
    """Restore a backup, or a commit of an export's Git history, into an organization with the same
    engine as `mirror apply` (copy mode); the organization keeps its own access settings unless --with-access."""
    from syncd.config.storage import is_object_url
    from syncd.read.export.git_history import parse_source

    scope = scope_from(include, exclude)
    if not is_object_url(backup) and parse_source(backup) is None:
        backup_file(Path(backup), "restore")  # before the configuration: a mistyped path is said first
    settings = load_settings(config)
    dst = parse_target_ref(target, settings)
    with contextlib.ExitStack() as stack:
        source, named = backup_source(backup, org, settings, "restore", stack)
        _restore(settings, source, dst, named, target, org, dry_run, max_rounds, as_json, with_access, db, config, scope, include, exclude)


def _restore(
    settings: Settings, source: Source, dst: TargetRef, named: str, target: str, org: str | None, dry_run: bool, max_rounds: int, as_json: bool,
    with_access: bool, db: Path | None, config: Path | None, scope: Scope, include: list[str], exclude: list[str],
) -> None:  # fmt: skip
    """The restore of `source`, named `named` in the verify command to paste later."""
    if dry_run:
        raise typer.Exit(run_dry(
            settings, source, dst, _db(settings, db), mode="copy", max_delete=0, adopt=True, as_json=as_json, scope=scope, with_access=with_access,
        ))
    code = run_copy(settings, source, dst, _db(settings, db), max_rounds=max_rounds, as_json=as_json, scope=scope, with_access=with_access)
    check = backup_command("mirror verify", named, target, org=org, db=db, config=config, include=include, exclude=exclude, with_access=with_access)
    _say(_console(as_json), f"verify this restore again later (the organization against the backup): {check}")
    raise typer.Exit(code)
