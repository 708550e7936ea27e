"""`syncd emulator serve|routes`: the built-in fake of the API."""

from __future__ import annotations

import asyncio
import json

import typer

from syncd.errors import UsageError
from syncd.safe_text import clean

app = typer.Typer(help="Run the built-in emulator of the Documentation Management API.", no_args_is_help=True)


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8787, help="Port to listen on (0 picks a free one)."),
    token: list[str] = typer.Option([], help="A token that sees every generated organization (repeatable)."),
    generate: str = typer.Option("", help="What to generate, e.g. orgs=2,collections=20,spaces=200,pages=20,sites=5."),
    seed: int = typer.Option(0, help="Seed of the generator: the same seed gives the same data."),
    rate_limit: float = typer.Option(100.0, help="Requests per second per token (0: unlimited, and no X-RateLimit headers)."),
    burst: float = typer.Option(0.0, help="Bucket size of the rate limit (default: one second's worth)."),
    page_cap: int | None = typer.Option(None, help="Largest page the server answers, whatever `limit` asks (default: the profile's, 1000 or 100)."),
    latency_ms: float = typer.Option(0.0, help="Added latency per request, in milliseconds."),
    faults: str = typer.Option("", help="Fault probabilities, e.g. 5xx=0.1,drop=0.05,lost=0.1,truncate=0.05,html502=0.02,jitter=5."),
    profile: str = typer.Option("default", help="Behaviour at the points the spec leaves open: default, divergent, or mixed:SEED (each open point drawn from SEED)."),
    print_json: bool = typer.Option(False, "--json", help="Print the start-up report as one JSON line."),
    resettable: bool = typer.Option(False, help="Keep a copy of the start, for POST /_emulator/reset (tests sharing one emulator)."),
) -> None:
    """Serve generated organizations over HTTP until interrupted."""
    from syncd.emulator.faults import parse_faults
    from syncd.emulator.generate import generate as run_generate
    from syncd.emulator.generate import parse_spec
    from syncd.emulator.profile import get_profile
    from syncd.emulator.server import serve_forever
    from syncd.emulator.store import Store

    try:
        get_profile(profile)
        params = parse_spec(generate)
        fault_values = parse_faults(faults)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if latency_ms:
        fault_values["latency"] = latency_ms
    if rate_limit < 0 or (page_cap is not None and page_cap < 1):
        raise UsageError("--rate-limit must be >= 0 and --page-cap >= 1")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {port}")
    store = Store(seed=seed)
    result = run_generate(store, params, seed=seed, all_token=token[0] if token else None)
    for extra in token[1:]:
        store.add_token(extra, store.tokens[token[0]])
        result.tokens[extra] = result.tokens[token[0]]

    def ready(running: object) -> None:
        url = running.url
        report = {
            "url": url,
            "profile": profile,
            "organizations": [{"id": o, "title": store.orgs[o]["title"]} for o in result.org_ids],
            "tokens": result.tokens,
            "objects": {kind: len(rows) for kind, rows in sorted(store.tables.items())},
        }
        if print_json:
            print(json.dumps(report), flush=True)
            return
        print(f"emulator serving {url}/v1 (admin: {url}/_emulator), profile {profile}", flush=True)
        for org in report["organizations"]:
            print(f"  organization {clean(org['id'])}  {clean(org['title'])}", flush=True)
        for tok, orgs in result.tokens.items():
            print(f"  token {clean(tok)}  sees {len(orgs)} organization(s)", flush=True)
        counts = ", ".join(f"{n} {k}" for k, n in report["objects"].items())
        print(f"  objects: {counts}", flush=True)

    try:
        asyncio.run(
            serve_forever(
                store, host, port, ready,
                profile=profile, rate_limit=rate_limit, burst=burst or None, page_cap=page_cap, faults=fault_values, resettable=resettable,
            )
        )
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@app.command("routes")
def routes() -> None:
    """Print one `METHOD PATH` line per API operation the emulator serves."""
    from syncd.emulator.app import api_routes, create_app
    from syncd.emulator.store import Store

    for method, path in api_routes(create_app(Store())):
        print(f"{method} {path}")
