"""`syncd config ...`: look at the effective configuration before trusting a daemon with it.

Values come from a file and the environment: they are shown through `syncd.safe_text`
(never read as markup, no control characters), secrets masked."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from syncd.commands.tables import whole_values
from syncd.config import (
    DEFAULT_CONFIG_PATH,
    ENV_PREFIX,
    TOKEN_MASK,
    Settings,
    format_duration,
    load_settings,
    shown_url,
)
from syncd.errors import ConfigError, ConfigProblem
from syncd.logging import redact, redact_text
from syncd.read.whoami import TokenCheck, check_tokens
from syncd.safe_text import cell, markup

app = typer.Typer(
    help="Inspect and validate syncd's configuration.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _group() -> None:
    """Inspect and validate syncd's configuration."""


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="TOML file to read (default: config/syncd.toml when present).",
    ),
]


def _env_names(env: Mapping[str, str]) -> list[str]:
    """Names (never values) of the SYNCD_* variables that took part."""
    return sorted(name for name, value in env.items() if name.upper().startswith(ENV_PREFIX) and value)


def effective_config(settings: Settings, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings as plain data, every secret replaced by the mask; safe to print.

    Each tenant says where its token comes from (`token`, `env:NAME`, `file:PATH`) but
    never shows any part of it.
    """
    data = settings.model_dump(mode="json")
    for name, tenant in settings.tenants.items():
        entry = data["tenants"][name]
        entry["token"] = TOKEN_MASK
        entry["token_source"] = tenant.token_source
    data["daemon"]["token"] = TOKEN_MASK if settings.daemon.token is not None else None
    data["state_url"] = _shown_state_url(settings)
    if settings.content_source.public_url:
        data["content_source"]["public_url"] = shown_url(settings.content_source.public_url)
    out: dict[str, Any] = {
        "config_file": str(settings.config_file) if settings.config_file else None,
        "environment": _env_names(os.environ if env is None else env),
        **data,
    }
    return redact(out)  # type: ignore[no-any-return]


def _kv_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 2))
    table.add_column("setting", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, cell(redact_text(value)))
    return table


def _shown_state_url(settings: Settings) -> str | None:
    """`state_url` with its host and database, never its password (`user:***@`); None when unset."""
    if settings.state_url is None:
        return None
    from syncd.read.sync import shown_state  # (the crawler and psycopg: only when a state_url is shown)

    return shown_state(settings.state_url.get_secret_value())


def _state_rows(settings: Settings) -> list[tuple[str, str]]:
    """Where the mirror and run history live; with a `state_url`, how this replica joins the fleet."""
    url = _shown_state_url(settings)
    if url is None:
        return [("state", f"SQLite file {settings.state_dir / 'syncd.db'} (no state_url)")]
    fleet = settings.fleet
    return [
        ("state_url", url),
        ("fleet.replica", fleet.replica or "(HOST-PID of each process)"),
        ("fleet.lease", format_duration(fleet.lease)),
        ("fleet.poll", format_duration(fleet.poll)),
        ("fleet.max_runs", str(fleet.max_runs) if fleet.max_runs is not None else "(no limit)"),
    ]


def _print_pretty(settings: Settings, env: Mapping[str, str] | None) -> None:
    """Tables for people: general, state, tenants, jobs, daemon."""
    console = Console(highlight=False, soft_wrap=False, emoji=False)
    source = str(settings.config_file) if settings.config_file else "no file"
    names = _env_names(os.environ if env is None else env)
    console.print(f"[bold]configuration[/bold]: {markup(source)}", soft_wrap=True)
    console.print(
        f"[bold]environment[/bold]: {markup(', '.join(names)) if names else 'no SYNCD_* variables'}", soft_wrap=True
    )
    console.print()
    retry = settings.retry
    console.print(
        _kv_table(
            "general",
            [
                ("state_dir", str(settings.state_dir)),
                ("temp_dir", str(settings.temp_path)),
                ("concurrency", str(settings.concurrency)),
                ("request_timeout", format_duration(settings.request_timeout)),
                (
                    "retry",
                    f"max_attempts={retry.max_attempts} initial_wait={format_duration(retry.initial_wait)} "
                    f"max_wait={format_duration(retry.max_wait)}",
                ),
                ("log_format", settings.log_format),
                ("log_level", settings.log_level),
            ],
        )
    )
    console.print()
    console.print(_kv_table("state", _state_rows(settings)))
    console.print()

    tenants = Table(title="tenants", title_justify="left")
    for column in ("name", "base_url", "token", "token source", "concurrency"):
        tenants.add_column(column, overflow="fold")
    for name, tenant in sorted(settings.tenants.items()):
        tenants.add_row(
            cell(name), cell(redact_text(tenant.base_url)), TOKEN_MASK, cell(redact_text(tenant.token_source)), str(tenant.concurrency)
        )
    if not settings.tenants:
        tenants.add_row("(none)", "", "", "", "")
    console.print(whole_values(console, tenants), crop=False)  # names and URLs whole when piped
    console.print()

    jobs = Table(title="jobs", title_justify="left")
    for column in ("name", "kind", "source", "target", "schedule", "options"):
        jobs.add_column(column, overflow="fold")
    for job in settings.jobs:
        options = []
        options.extend(f"{rule}={count}" for rule, count in job.retention_policy().items())
        if job.mode is not None:
            options.append(f"mode={job.mode}")
        if job.max_delete is not None:
            options.append(f"max_delete={job.max_delete}")
        if job.with_files:
            options.append("with_files")
        if job.with_access:
            options.append("with_access")
        if job.full_every is not None:
            options.append(f"full_every={format_duration(job.full_every) if job.full_every else 'never'}")
        jobs.add_row(
            cell(job.name),
            cell(job.kind),
            cell(str(job.source)),
            cell(str(job.target) if job.target else ""),
            cell(job.schedule.describe() if job.schedule else "on trigger only"),
            cell(" ".join(options)),
        )
    if not settings.jobs:
        jobs.add_row("(none)", "", "", "", "", "")
    console.print(whole_values(console, jobs), crop=False)
    console.print()

    daemon = settings.daemon
    console.print(
        _kv_table(
            "daemon",
            [
                ("listen", f"{daemon.host}:{daemon.port}"),
                ("token", TOKEN_MASK if daemon.token is not None else "(none: one is made at each start, in STATE_DIR/daemon.json)"),
                ("allowed_hosts", ", ".join(daemon.allowed_hosts) or "(loopback names and the address listened on)"),
                ("public_url", daemon.public_url or "(none: the page is the address it is opened by)"),
                ("ui", (f"on, at {daemon.public_url}/ui/" if daemon.public_url else "on, at /ui/") if daemon.ui else "off"),
                ("shutdown_deadline", format_duration(daemon.shutdown_deadline)),
                ("failure_backoff", format_duration(daemon.failure_backoff)),
            ],
        )
    )
    console.print()
    content = settings.content_source
    console.print(
        _kv_table(
            "content_source",
            [
                ("listen", f"{content.host}:{content.port or '(a free port)'}"),
                ("public_url", shown_url(content.public_url) if content.public_url else "(the address listened on)"),
                ("concurrency", str(content.concurrency)),
                ("max_connections", str(content.max_connections)),
                ("timeouts", f"header {format_duration(content.header_timeout)}, idle {format_duration(content.idle_timeout)}"),
            ],
        )
    )
    console.print()
    console.print("[green]configuration OK[/green]")


@app.command("check")
def check(
    config: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print plain JSON instead of tables (schemas/config-check.json).")] = False,
    online: Annotated[
        bool, typer.Option("--online", help="Also try each tenant's token on its server and say whose it is (GET /v1/user).")
    ] = False,
) -> None:
    """Validate the configuration, resolve every token, and print it with secrets masked.

    Exit 0 when everything is usable; 2 otherwise, with a line per problem naming the field
    (--json: the document lists them); with --online, 1 when a tenant's token was refused or
    its server could not be reached.
    """
    try:
        settings = load_settings(config)
        _resolve_tokens(settings)
    except ConfigError as exc:
        if as_json:
            typer.echo(json.dumps(_problems_document(config, exc), indent=2))
        raise
    checks = anyio.run(check_tokens, settings) if online else None
    if as_json:
        document = {**effective_config(settings), "problems": []}
        if checks is not None:
            document["online"] = {found.tenant: found.as_json() for found in checks}
        typer.echo(json.dumps(document, indent=2))
    else:
        _print_pretty(settings, None)
        if checks is not None:
            _print_online(checks)
    if checks is not None and not all(found.ok for found in checks):
        raise typer.Exit(1)


def _resolve_tokens(settings: Settings) -> None:
    """A check that passes must mean the tokens can be read: every one is read now, and
    every one that cannot be is a problem (all of them in one ConfigError)."""
    problems: list[ConfigProblem] = []
    for name in sorted(settings.tenants):
        try:
            settings.tenants[name].resolved_token()
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems=problems)


def _problems_document(config: Path | None, error: ConfigError) -> dict[str, Any]:
    """`config check --json` of a configuration that cannot be used: its problems, no settings."""
    if config is None and DEFAULT_CONFIG_PATH.exists():
        config = DEFAULT_CONFIG_PATH
    document = {
        "config_file": str(config) if config is not None else None,
        "environment": _env_names(os.environ),
        "problems": [problem.as_json() for problem in error.problems],
    }
    return redact(document)  # type: ignore[no-any-return]


def _print_online(checks: list[TokenCheck]) -> None:
    """One line per tenant: whose token it is, or why it could not be told."""
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    console.print()
    console.print("[bold]tokens[/bold] (GET /v1/user on each tenant's server)")
    for found in checks:
        if found.ok:
            console.print(f"  {markup(found.tenant)}: [green]ok[/green], the token of {markup(found.who())} at {markup(found.base_url)}")
        else:
            console.print(f"  {markup(found.tenant)}: [red]failed[/red]: {markup(found.error)}")
    if not checks:
        console.print("  (no tenants configured)")
    failed = sum(1 for found in checks if not found.ok)
    console.print(f"[red]{failed} of {len(checks)} tokens failed[/red]" if failed else "[green]every token works[/green]")
