"""`syncd orgs TENANT`: the organizations a tenant's token sees, with their ids and spaces.

What the other commands take as `TENANT:ORG_ID` (or `TENANT:TITLE`), listed through the same
client and paging as a crawl. Exit codes: 0 done; 1 the listing failed (a bad token, the
server down); 2 bad configuration; 3 some organization's spaces could not be listed (it is
shown with `?`)."""

from __future__ import annotations

from pathlib import Path

import anyio
import typer

from syncd.commands.machine_output import emit, human_console
from syncd.commands.read_cmds import EXIT_PARTIAL, ConfigOption
from syncd.commands.tables import Col, fitted_table
from syncd.config import Settings, load_settings, parse_target_ref
from syncd.errors import UsageError
from syncd.read.orgs import OrgSummary, org_summaries
from syncd.safe_text import cell, markup
from syncd.safe_text import console as make_console

console = make_console()
ORG_COLUMNS = (Col("id", no_wrap=True), Col("title"), Col("spaces", justify="right", no_wrap=True))


async def _summaries(settings: Settings, tenant: str) -> list[OrgSummary]:
    from syncd.api import TenantClient, make_global_limiter

    async with TenantClient.from_settings(settings, tenant, make_global_limiter(settings)) as client:
        return await org_summaries(client)


def orgs(
    tenant: str = typer.Argument(..., metavar="TENANT", help="A configured tenant."),
    config: Path | None = ConfigOption,
    as_json: bool = typer.Option(False, "--json", help="Print the organizations as JSON (schemas/orgs.json)."),
) -> None:
    """List the organizations the tenant's token sees: id, title and number of spaces."""
    settings = load_settings(config)
    ref = parse_target_ref(tenant, settings)
    if ref.org is not None:
        raise UsageError(f"give a tenant alone, not {tenant!r}: syncd orgs TENANT")
    name = settings.tenant(ref.tenant).name
    found = anyio.run(_summaries, settings, name)
    shown = human_console(as_json, console)
    if as_json:
        emit({"tenant": name, "organizations": [summary.as_json() for summary in found]})
    else:
        rows = [(cell(s.id), cell(s.title), "?" if s.spaces is None else str(s.spaces)) for s in found]
        shown.print(fitted_table(shown, cell(f"organizations the token of {name} sees"), ORG_COLUMNS, rows), crop=False)
        shown.print(f"{len(found)} organization(s); address one as {markup(name)}:ORG_ID, or by its exact title", highlight=False)
    failed = [s for s in found if s.error is not None]
    for summary in failed:
        shown.print(f"  [yellow]spaces of {markup(summary.id)} could not be listed[/yellow]: {markup(summary.error)}", highlight=False)
    raise typer.Exit(EXIT_PARTIAL if failed else 0)
