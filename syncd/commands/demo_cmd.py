"""`syncd demo`: the main job on the built-in emulator, no live account needed.

Today it starts the emulator with generated organizations and prints what it serves, read
back through the API the way any client sees it.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import typer
from rich.console import Console
from rich.table import Table

from syncd.errors import UsageError

DEMO_TOKEN = "demo-token"
ORG_LISTS = {
    "collections": "/collections",
    "spaces": "/spaces",
    "sites": "/sites",
    "members": "/members",
    "teams": "/teams",
    "saml": "/saml",
    "openapi": "/openapi",
    "translations": "/translations",
    "custom fields": "/custom-fields",
}


async def _count(session: aiohttp.ClientSession, url: str) -> int | str:
    async with session.get(url, params={"limit": "1"}) as resp:
        if resp.status != 200:
            return f"HTTP {resp.status}"
        return int((await resp.json())["count"])


async def _report(generate: str, seed: int, console: Console) -> None:
    from syncd.emulator.generate import generate as run_generate
    from syncd.emulator.generate import parse_spec
    from syncd.emulator.server import serve_emulator
    from syncd.emulator.store import Store

    try:
        params = parse_spec(generate)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    started = time.perf_counter()
    store = Store(seed=seed)
    result = run_generate(store, params, seed=seed, all_token=DEMO_TOKEN)
    console.print(f"generated {len(result.org_ids)} organization(s) in {time.perf_counter() - started:.2f}s (seed {seed})")
    async with serve_emulator(store) as running:
        console.print(f"emulator serving [bold]{running.url}/v1[/bold]; token [bold]{DEMO_TOKEN}[/bold] sees every organization")
        headers = {"Authorization": f"Bearer {DEMO_TOKEN}"}
        async with aiohttp.ClientSession(running.url, headers=headers) as session:
            async with session.get("/v1/orgs", params={"limit": "1000"}) as resp:
                orgs = (await resp.json())["items"]
            table = Table(title="What the emulator serves (counts read through the API)")
            table.add_column("list")
            columns = []
            for org in orgs:
                table.add_column(f"{org['title']}\n{org['id']}", justify="right")
                columns.append(await asyncio.gather(*(_count(session, f"/v1/orgs/{org['id']}{path}") for path in ORG_LISTS.values())))
            for row, name in enumerate(ORG_LISTS):
                table.add_row(name, *(str(column[row]) for column in columns))
            console.print(table)
        routes = sum(1 for _ in running.app.router.routes())
        console.print(f"{routes} routes served; `syncd emulator routes` lists the API operations.")


def demo(
    generate: str = typer.Option("orgs=2,collections=8,spaces=40,pages=10,sites=3", help="What to generate."),
    seed: int = typer.Option(0, help="Seed of the generator."),
) -> None:
    """Run the main job on the built-in emulator and print a report."""
    asyncio.run(_report(generate, seed, Console()))
