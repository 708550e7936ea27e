"""The processes of a fleet benchmark (`bench/fleet.py`, `bench/fleet_share.py`): a database of
its own on PostgreSQL, replicas of `syncd serve` on it with their configurations, and the
emulator's admin calls. Every process started here is stopped by its PID; the database is dropped.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

TOP = Path(__file__).resolve().parent.parent
TOKENS = ("bench-fleet-one", "bench-fleet-two")
CONTROL = "bench-fleet-control-token"
READY_TIMEOUT = 60.0


def admin(url: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, method=method, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


# -- the database -------------------------------------------------------------------------------


@contextmanager
def own_database(server: str) -> Iterator[str]:
    """A fresh database on `server` for this run, dropped at the end whatever happens."""
    name = f"syncd_bench_fleet_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_schema(database: str, schema: str) -> str:
    """A new schema in `database`, as a URL whose search_path is it (a fleet of its own)."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    parts = urlsplit(database)
    return urlunsplit(parts._replace(query="options=" + quote(f"-csearch_path={schema}", safe="")))


# -- the replicas -------------------------------------------------------------------------------


def jobs_for(orgs: list[str], count: int) -> list[dict[str, Any]]:
    """`count` backup jobs spread over both tenants and the organizations, each due every second."""
    tenants = ("one", "two")
    return [
        {"name": f"backup-{n}", "kind": "backup", "source": f"{tenants[n % 2]}:{orgs[(n // 2) % len(orgs)]}", "keep_last": 1}
        for n in range(count)
    ]


def write_config(
    folder: Path, name: str, emulator_url: str, state_url: str, jobs: list[dict[str, Any]], tokens: tuple[str, str] = TOKENS
) -> Path:
    folder.mkdir(parents=True)
    q = json.dumps
    lines = [f"state_url = {q(state_url)}", f"state_dir = {q(str(folder / 'state'))}", 'log_level = "warning"']
    for tenant, token in zip(("one", "two"), tokens, strict=True):
        lines += [f"[tenants.{tenant}]", f"base_url = {q(emulator_url)}", f"token = {q(token)}"]
    lines += ["[retry]", "max_attempts = 8", 'initial_wait = "0.2s"', 'max_wait = "5s"']
    lines += ["[daemon]", "port = 0", f"token = {q(CONTROL)}", 'shutdown_deadline = "2s"', 'failure_backoff = "1s"']
    lines += ["[fleet]", f"replica = {q(name)}", 'lease = "10s"', 'poll = "0.5s"']
    for job in jobs:
        lines += ["[[jobs]]", *(f"{key} = {q(value)}" for key, value in job.items()), 'schedule = { every = "1s", jitter = "5s" }']
    path = folder / "syncd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    state_dir: Path

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"replica {self.name} exited with {self.process.returncode} (log: {self.state_dir.parent / 'serve.log'})")
        info = self.state_dir / "daemon.json"
        try:
            return bool(json.loads(info.read_text()).get("pid") == self.process.pid)
        except (OSError, ValueError):
            return False


def start_replica(config: Path, name: str) -> Replica:
    log = (config.parent / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "syncd.cli", "serve", "--config", str(config)],
        cwd=config.parent, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(TOP)},
    )
    log.close()
    return Replica(name, process, config.parent / "state")


def start_fleet(
    replicas: list[Replica], folder: Path, count: int, emulator_url: str, state_url: str, jobs: list[dict[str, Any]],
    tokens: tuple[str, str] = TOKENS,
) -> None:
    """Start `count` replicas into `replicas` (the caller stops them, also when this fails) and
    wait until each serves."""
    for index in range(count):
        name = f"r{index + 1}"
        replicas.append(start_replica(write_config(folder / name, name, emulator_url, state_url, jobs, tokens), name))
    deadline = time.monotonic() + READY_TIMEOUT
    while not all(replica.ready() for replica in replicas):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the replicas did not start within {READY_TIMEOUT:g} s")
        time.sleep(0.2)


def stop_replicas(replicas: list[Replica]) -> None:
    """SIGTERM to each (by its PID), then wait; one that does not stop is killed."""
    for replica in replicas:
        if replica.process.poll() is None:
            replica.process.send_signal(signal.SIGTERM)
    for replica in replicas:
        try:
            replica.process.wait(30)
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()
