"""compose.yaml and config/fleet.example.toml agree (issue 13): the file every replica mounts
loads with the environment compose gives each container, and that environment is what names
the replica, carries the secrets and points at the database service. (No Docker engine in CI:
`docker compose config` and a real `up` are checked by hand, see docs/guides/docker.md.)"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from syncd.config import load_settings

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "config" / "fleet.example.toml"
COMPOSE = REPO / "compose.yaml"


def _compose_env(service: str) -> dict[str, str]:
    """The `environment:` mapping of one service of compose.yaml, `${VAR:?...}` given a value."""
    text = COMPOSE.read_text()
    block = re.search(rf"^  {service}:\n(.*?)(?=^  \S|^\S|\Z)", text, re.MULTILINE | re.DOTALL)
    assert block, service
    env = re.search(r"^    environment:\n((?:      .*\n)+)", block.group(1), re.MULTILINE)
    assert env, service
    pairs = (line.strip().split(":", 1) for line in env.group(1).splitlines())
    return {key: re.sub(r"\$\{(\w+)[^}]*\}", lambda m: f"value-of-{m.group(1).lower()}", value.strip()) for key, value in pairs}


@pytest.mark.parametrize("service", ["syncd-1", "syncd-2"])
def test_each_replica_of_compose_loads_the_example_under_its_own_name(service: str) -> None:
    env = _compose_env(service)
    settings = load_settings(EXAMPLE, env)
    assert settings.fleet.replica == service  # SYNCD_FLEET__REPLICA: the nested-key convention
    assert settings.state_url is not None
    url = urlsplit(settings.state_url.get_secret_value())
    assert (url.hostname, url.password) == ("postgres", None)  # the compose service; the password is PGPASSWORD's
    assert env["PGPASSWORD"] == "value-of-syncd_pg_password"
    assert settings.daemon.token is not None and settings.daemon.host == "0.0.0.0"
    # The web page is on, and a browser on the host reaches it through the TLS proxy of compose
    # (issue 41): daemon.public_url is the address its Caddyfile serves, with the prefix it strips.
    assert settings.daemon.ui and re.search(r'"127\.0\.0\.1:\d+:8790"', COMPOSE.read_text())
    public = urlsplit(settings.daemon.public_url or "")
    caddy = (REPO / "config" / "Caddyfile").read_text()
    assert public.scheme == "https" and f"https://{public.netloc} {{" in caddy
    assert f"handle_path {public.path}/* {{" in caddy and "reverse_proxy syncd-1:8790 syncd-2:8790" in caddy
    assert f'"127.0.0.1:{public.port}:{public.port}"' in COMPOSE.read_text() and "./config/Caddyfile:/etc/caddy/Caddyfile:ro" in COMPOSE.read_text()
    assert settings.tenant("src").resolved_token().get_secret_value() == "value-of-src_token"
    assert {job.kind for job in settings.jobs} == {"sync", "backup", "mirror"}
    text = COMPOSE.read_text()
    assert '"/app/config/fleet.example.toml"' in text and "./config:/app/config:ro" in text
    assert "condition: service_healthy" in text and "image: postgres:16" in text


def test_the_replicas_of_compose_differ_in_name_port_and_state_volume() -> None:
    text = COMPOSE.read_text()
    assert _compose_env("syncd-1")["SYNCD_FLEET__REPLICA"] != _compose_env("syncd-2")["SYNCD_FLEET__REPLICA"]
    assert "syncd-1-state:/app/state" in text and "syncd-2-state:/app/state" in text  # one daemon per state_dir
    assert len(set(re.findall(r'"127\.0\.0\.1:(\d+):8790"', text))) == 2
