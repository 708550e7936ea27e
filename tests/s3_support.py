"""A real S3 for the object storage tests: moto's standalone server, one per test session (a
pytest-xdist worker), on a free loopback port, stopped by its PID; and a proxy in front of it
that injects faults (a 5xx, an answer dropped after the write was done, a request held until
the test lets it go) for the tests of what survives them.

moto comes with the test extra (`moto[server]`): a missing one fails the tests, it is never
skipped. Each test gets a bucket of its own (`bucket`), so tests share the server and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.loopback import in_thread, wait_for

__all__ = ["Fault", "FaultProxy", "bucket", "fault_proxy", "moto_server", "s3_env"]

REGION = "us-east-1"
KEYS = {"AWS_ACCESS_KEY_ID": "syncd-test-key", "AWS_SECRET_ACCESS_KEY": "syncd-test-secret"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url + "/moto-api/", timeout=2) as answer:  # moto's own dashboard
        return bool(answer.status == 200)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of this session's moto server (`python -m moto.server`), on 127.0.0.1."""
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"moto is needed (pip install -e '.[test]' installs moto[server]) and cannot be imported: {exc}", pytrace=False)
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("COVERAGE_", "AWS_"))}  # nothing of syncd to measure there
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=handle, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"moto's server exited with {process.returncode}:\n{log.read_text(errors='replace')}")
            return _answers(url)

        wait_for("moto's server to answer", up, 60.0)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def s3_env(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The standard AWS variables pointing at moto (and no profile or file of this machine's):
    what a user's shell would have. Returns the endpoint."""
    clear_aws(monkeypatch, tmp_path, KEYS)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_REGION", REGION)
    return moto_server


def make_bucket(endpoint: str) -> str:
    """A new, empty bucket on the S3 at `endpoint`; its name."""
    import boto3

    name = f"syncd-{secrets.token_hex(6)}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="k", aws_secret_access_key="s")
    client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def bucket(moto_server: str) -> str:
    """A bucket of this test's own on the session's moto server."""
    return make_bucket(moto_server)


def objects(endpoint: str, bucket_name: str, prefix: str = "") -> dict[str, bytes]:
    """Every object of the bucket under `prefix`, key -> bytes (a test's view, through boto3)."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="k", aws_secret_access_key="s")
    found: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket_name, Prefix=prefix):
        for item in page.get("Contents") or []:
            found[item["Key"]] = client.get_object(Bucket=bucket_name, Key=item["Key"])["Body"].read()
    return found


# ----- faults -------------------------------------------------------------------------------------


@dataclass
class Fault:
    """What the proxy does to the next `times` requests whose method is `method` and whose path
    matches `path` (a regular expression): `503` answers SlowDown without asking moto; `drop`
    lets moto do the request and closes the connection instead of answering (the answer is
    lost, the write is done); `hold` keeps the request waiting until `FaultProxy.release`."""

    method: str
    path: str
    action: str
    times: int = 1
    hits: int = 0


_SLOWDOWN = b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>'
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class FaultProxy:
    """A loopback HTTP proxy in front of moto (module docstring); `seen` lists (method, path) of
    every request, `held` is set when a request is held."""

    upstream: str
    url: str = ""
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    _loop: asyncio.AbstractEventLoop | None = None
    _release: asyncio.Event | None = None

    def add(self, method: str, path: str, action: str, times: int = 1) -> Fault:
        fault = Fault(method, path, action, times)
        self.faults.append(fault)
        return fault

    def release(self) -> None:
        """Let held requests (and any later one matching a `hold`) go on."""
        assert self._loop is not None and self._release is not None
        self._loop.call_soon_threadsafe(self._release.set)

    def _fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.hits < fault.times and re.search(fault.path, path):
                fault.hits += 1
                return fault
        return None

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[FaultProxy]:
        import aiohttp
        from aiohttp import web

        self._loop, self._release = asyncio.get_running_loop(), asyncio.Event()

        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            self.seen.append((request.method, request.path))
            fault = self._fault(request.method, request.path)
            if fault is not None and fault.action == "503":
                return web.Response(status=503, body=_SLOWDOWN, content_type="application/xml")
            if fault is not None and fault.action == "hold":
                self.held.set()
                assert self._release is not None
                await self._release.wait()
                if request.transport is None or request.transport.is_closing():
                    return web.Response(status=499)  # the client is gone: as if the body never arrived whole
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            async with session.request(request.method, self.upstream + request.path_qs, headers=headers, data=body, allow_redirects=False) as answer:
                data = await answer.read()
                out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
                length = answer.headers.get("Content-Length")
            if fault is not None and fault.action == "drop":
                assert request.transport is not None
                request.transport.close()  # moto did the write; its answer never reaches the client
                return web.Response(status=500)
            response = web.Response(status=answer.status, body=data if request.method != "HEAD" else None, headers=out)
            if request.method == "HEAD" and length is not None:
                response.headers["Content-Length"] = length
            return response

        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}"
            try:
                yield self
            finally:
                self._release.set()
                await runner.cleanup()


@pytest.fixture
def fault_proxy(moto_server: str) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the session's moto server, served by a thread."""
    proxy = FaultProxy(moto_server)
    with in_thread(proxy.serving, "s3-fault-proxy") as (running, _loop):
        yield running


def wait_held(proxy: FaultProxy, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not proxy.held.wait(0.1):
        assert time.monotonic() < deadline, f"no request was held within {timeout:g}s (seen: {proxy.seen[-5:]})"


def clear_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, keys: Mapping[str, str]) -> None:
    """No AWS setting of this machine's (no profile, no file, no instance metadata), and the
    test keys: what a configuration's storage table or a shell's variables name is all there is."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
