"""`syncd serve` as a real process for the daemon tests, and what reads its answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import cli_zygote
from tests.loopback import http, wait_for

START_TIMEOUT = 30.0
SIGTERM = signal.SIGTERM


@dataclass
class DaemonProcess:
    """A running `syncd serve --config FILE` with its log captured to a file."""

    config: Path
    state_dir: Path
    process: cli_zygote.ForkedProcess
    log_path: Path
    token: str | None = None
    """The control API's token: `daemon.token`, else the one the daemon made (from daemon.json)."""
    url: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, config: Path, state_dir: Path, *, token: str | None = None, wait: bool = True) -> DaemonProcess:
        log_path = config.with_name(f"daemon-{int(time.time() * 1000)}.log")
        with log_path.open("wb") as handle:  # the process's stdout and stderr (tests/cli_zygote.py)
            process = cli_zygote.spawn(
                ["serve", "--config", str(config)], cwd=config.parent, stdout=handle.fileno(), stderr=handle.fileno(),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        daemon = cls(config, state_dir, process, log_path, token)
        if wait:
            daemon.wait_ready()
        return daemon

    def wait_ready(self) -> None:
        info = self.state_dir / "daemon.json"

        def ready() -> str | None:
            if self.process.poll() is not None:
                raise AssertionError(f"the daemon exited with {self.process.returncode}:\n{self.log()}")
            if not info.exists():
                return None
            data = json.loads(info.read_text())
            if data.get("pid") != self.process.pid:
                return None
            return str(data["url"])

        self.url = wait_for("the daemon to listen", ready, START_TIMEOUT)
        if self.token is None:
            self.token = daemon_json_token(self.state_dir)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str) -> tuple[int, Any]:
        return http("GET", self.url + path, self.token)

    def post(self, path: str) -> tuple[int, Any]:
        return http("POST", self.url + path, self.token, body={})  # a JSON body: the API wants JSON

    def job(self, name: str) -> dict[str, Any]:
        status, body = self.get(f"/jobs/{name}")
        assert status == 200, body
        return body  # type: ignore[no-any-return]

    def finished_runs(self, name: str) -> list[dict[str, Any]]:
        return [run for run in self.job(name)["runs"] if run["outcome"] not in ("queued", "running")]

    def wait_run(self, run_id: int, timeout: float = 60.0) -> dict[str, Any]:
        def ended() -> dict[str, Any] | None:
            status, run = self.get(f"/runs/{run_id}")
            assert status == 200, run
            return run if run["outcome"] not in ("queued", "running") else None

        return wait_for(f"run {run_id} to end", ended, timeout)  # type: ignore[no-any-return]

    def metrics(self) -> str:
        status, text = self.get("/metrics")
        assert status == 200
        return str(text)

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def stop(self, timeout: float = 30.0, signum: int = SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def daemon_json_token(state_dir: Path) -> str:
    """The token a daemon without `daemon.token` made at start, as a client on the same
    machine reads it from `state/daemon.json`."""
    token = json.loads((state_dir / "daemon.json").read_text())["token"]
    assert isinstance(token, str) and token
    return token


def metric_samples(text: str, name: str, **labels: str) -> list[float]:
    """Values of the samples of `name` in the Prometheus text `text` whose labels include `labels`."""
    values = []
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, label_text = head.partition("{")
        if metric != name:
            continue
        found = dict(part.split("=", 1) for part in label_text.rstrip("}").split(",") if "=" in part)
        found = {key: raw.strip('"') for key, raw in found.items()}
        if all(found.get(key) == wanted for key, wanted in labels.items()):
            values.append(float(value))
    return values


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of the first matching sample, or None if there is none."""
    values = metric_samples(text, name, **labels)
    return values[0] if values else None


def toml_value(value: Any) -> str:
    """`value` as a TOML value: a dict an inline table, a list an array, a path (anything else) a string."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return json.dumps(value if isinstance(value, bool | int | float | str) else str(value))


def daemon_config(
    tmp: Path, url: str, token: str, *, retry: dict[str, Any], daemon: dict[str, Any], jobs: list[dict[str, Any]]
) -> Path:
    """`tmp/syncd.toml`: tenants `src` and `dst` on the emulator at `url` with `token`, state in
    `tmp/state`, and the given retry, daemon and job settings."""
    lines = [f"state_dir = {toml_value(tmp / 'state')}"]
    for tenant in ("src", "dst"):
        lines += [f"[tenants.{tenant}]", f"base_url = {toml_value(url)}", f"token = {toml_value(token)}"]
    for section, values in (("retry", retry), ("daemon", daemon)):
        lines += [f"[{section}]", *(f"{key} = {toml_value(value)}" for key, value in values.items())]
    for job in jobs:
        lines += ["[[jobs]]", *(f"{key} = {toml_value(value)}" for key, value in job.items())]
    path = tmp / "syncd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
