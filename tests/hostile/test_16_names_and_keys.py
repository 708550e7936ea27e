"""Issue 22, case 10 (names may end in a newline) and case 11 (budget keys confirm a token).

- `^...$` lets a final newline through (`$` matches before it): jobs `sync` and `sync\\n` both
  loaded and showed alike, tenant names too. Every name and id pattern is `\\A...\\Z` now: a
  name with a trailing newline is refused when the configuration is read, one line, exit 2.
- `token_budgets.key` was a plain sha256 of the base URL and the token: whoever read the table
  could confirm a guessed token, and a token had the same key in every database. It is an HMAC
  under a secret the state database makes at first use (`fleet_secrets`) now; rows keyed the
  old way are deleted by the migration that brings the secret.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from syncd.config import Settings
from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
from syncd.pg.budget import SharedBudget
from syncd.pg.connect import connect
from syncd.pg.migrations import migrate
from syncd.read.blobs import BlobStore
from tests.hostile.cli_support import clean_env, run_cli
from tests.pg_support import fresh_schema

BASE_URL = "https://api.example.com"
TOKEN = "budget-guessable-token-1"


# ----------------------------------------------------------------------------- names


def _config(tmp_path: Path, tenant: str, job: str | None) -> Path:
    """A configuration file with one tenant and maybe a sync job of it, names written as TOML
    escapes (`\\n`)."""
    path = tmp_path / "syncd.toml"
    text = f'state_dir = "{tmp_path / "state"}"\n[tenants."{tenant}"]\nbase_url = "http://127.0.0.1:9"\ntoken = "names-token-1"\n'
    if job is not None:
        text += f'[[jobs]]\nname = "{job}"\nkind = "sync"\nsource = "{tenant}"\nschedule = {{ every = "15m" }}\n'
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("tenant", "job", "named"),
    [("src\\n", None, "tenant name"), ("src", "sync\\n", "jobs[0].name")],
    ids=["tenant", "job"],
)
def test_case10_a_name_ending_in_a_newline_is_refused_at_config_load(tmp_path: Path, tenant: str, job: str | None, named: str) -> None:
    config = _config(tmp_path, tenant, job)
    ran = run_cli("config", "check", "--config", config, env=clean_env(), cwd=tmp_path)
    line = ran.one_line_error(2)
    assert named in line and "\\n" in line, line
    assert not (tmp_path / "state").exists(), "a refused configuration wrote state"


def test_case10_ids_and_names_read_in_process_are_anchored_at_the_very_end() -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate({"tenants": {"src": {"base_url": "http://127.0.0.1:9", "token_env": "SYNCD_TOKEN\n"}}})
    with pytest.raises(ValidationError):
        Settings.model_validate({"tenants": {"src\n": {"base_url": "http://127.0.0.1:9", "token": "t"}}})
    with pytest.raises(ValueError, match="not a sha256"):
        BlobStore(Path("/nonexistent")).path_for("a" * 64 + "\n")


# ----------------------------------------------------------------------------- budget keys


def _plain_hashes() -> set[str]:
    """The keys a plain hash of the URL and token would give (the old one among them)."""
    texts = [f"{BASE_URL}\n{TOKEN}", f"{BASE_URL}{TOKEN}", TOKEN]
    return {hashlib.sha256(text.encode()).hexdigest() for text in texts}


def _budget_rows(url: str) -> list[tuple[Any, ...]]:
    with connect(url) as conn:
        return conn.execute("SELECT * FROM token_budgets").fetchall()


async def _spend_one_permit(url: str) -> str:
    """What a replica does at its first request: reserve a permit for the token; its row's key."""
    async with SharedBudget(url, BASE_URL, TOKEN) as budget:
        await budget.acquire(1)
        budget.forget(1)
    ((key,),) = [(row[0],) for row in _budget_rows(url)]
    return str(key)


async def test_case11_budget_keys_are_keyed_hashes_that_differ_between_databases(pg_server: str) -> None:
    with fresh_schema(pg_server) as first, fresh_schema(pg_server) as second:
        key_one, key_two = await _spend_one_permit(first), await _spend_one_permit(second)
        again = await _spend_one_permit(first)  # the secret is made once: the same key next time
        rows = _budget_rows(first) + _budget_rows(second)
    assert len(key_one) == 64 and key_one not in _plain_hashes(), "the key is a plain sha256 of the URL and token"
    assert key_one != key_two, "the same token has the same key in two databases"
    assert again == key_one
    assert all(TOKEN not in str(value) for row in rows for value in row)


async def test_case11_rows_keyed_by_the_old_plain_hash_are_dropped_by_the_migration(pg_url: str) -> None:
    """A database a syncd of before filled: its sha256-keyed row goes; the budget goes on with a
    row of its own (the pacing figures lost are rebuilt by the next answers)."""
    before = tuple(m for m in FLEET_MIGRATIONS if m.name != "0003-budget-key-secret")
    old_key = hashlib.sha256(f"{BASE_URL}\n{TOKEN}".encode()).hexdigest()
    with connect(pg_url) as conn:
        migrate(conn, before)
        conn.execute("INSERT INTO token_budgets (key, tickets) VALUES (%s, 41)", (old_key,))
    key = await _spend_one_permit(pg_url)
    assert key != old_key and [row[0] for row in _budget_rows(pg_url)] == [key]
    with connect(pg_url) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO fleet_secrets (name, secret) VALUES ('short', '\\x00')")
