"""Reading the settings: the TOML file, the `SYNCD_*` environment over it, and the first
problem as ONE line.

Why up front: a daemon that finds a typo in its third job at 3 a.m. is worse than a
command that refuses to start. `load_settings` reads the file, overlays the environment
(per field, environment wins), validates everything with pydantic and turns the first
problem into ONE line that names the source and the field path, e.g.::

    config/syncd.toml: tenants.src.base_url: must be an http(s) URL, got 'ftp://x'
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource
from pydantic_settings.exceptions import SettingsError
from pydantic_settings.sources.utils import parse_env_vars

from syncd.config.settings import ENV_NESTED_DELIMITER, ENV_PREFIX, Settings
from syncd.config.tenants import TOKEN_KEYS
from syncd.errors import ConfigError
from syncd.logging import register_secret

__all__ = ["DEFAULT_CONFIG_PATH", "load_settings"]

DEFAULT_CONFIG_PATH = Path("config/syncd.toml")


class _MappingEnvSource(EnvSettingsSource):
    """The ordinary env source, reading a given mapping instead of `os.environ` (tests)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._mapping, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def _read_toml(path: Path) -> dict[str, Any]:
    """Read the file, turning every failure into one line (with the line number for syntax)."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 ({exc.reason})") from None


def _lower_tenants(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """Lower-case tenant names so file and environment agree on who is who."""
    tenants = data.get("tenants")
    if not isinstance(tenants, dict):
        return data
    lowered: dict[str, Any] = {}
    for key, value in tenants.items():
        name = str(key).lower()
        if name in lowered:
            raise ConfigError(
                f"{origin}: tenants.{name}: tenant names are case-insensitive and "
                f"{key!r} is given twice"
            )
        lowered[name] = value
    return {**data, "tenants": lowered}


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge `over` onto `base`: dicts merge per key, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _overlay(file_data: dict[str, Any], env_data: dict[str, Any]) -> dict[str, Any]:
    """Environment over file, per field; a token source from the environment replaces the file's.

    Without that one exception, `SYNCD_TENANTS__SRC__TOKEN` over a file with `token_env`
    would be "two token sources" instead of the override the user meant.
    """
    file_tenants = file_data.get("tenants")
    env_tenants = env_data.get("tenants")
    if isinstance(file_tenants, dict) and isinstance(env_tenants, Mapping):
        trimmed = dict(file_tenants)
        for name, env_tenant in env_tenants.items():
            file_tenant = trimmed.get(name)
            if (
                isinstance(env_tenant, Mapping)
                and isinstance(file_tenant, dict)
                and any(key in env_tenant for key in TOKEN_KEYS)
            ):
                trimmed[name] = {k: v for k, v in file_tenant.items() if k not in TOKEN_KEYS}
        file_data = {**file_data, "tenants": trimmed}
    return _merge(file_data, env_data)


def _format_loc(loc: tuple[str | int, ...]) -> str:
    """('jobs', 1, 'schedule') -> 'jobs[1].schedule'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _lookup(data: Any, loc: tuple[str | int, ...]) -> tuple[bool, list[str | int]]:
    """Whether `loc` exists in `data`, and the dict-key prefix walked before any list."""
    keys: list[str | int] = []
    in_list = False
    for part in loc:
        if isinstance(data, Mapping) and isinstance(part, str) and part in data:
            data = data[part]
            if not in_list:
                keys.append(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
            in_list = True
        else:
            return False, keys
    return True, keys


def _is_secret_loc(loc: tuple[str | int, ...]) -> bool:
    return any(isinstance(part, str) and part == "token" for part in loc)


def _error_line(
    exc: ValidationError,
    file_data: dict[str, Any],
    env_data: dict[str, Any],
    config_path: Path | None,
) -> str:
    """The first validation error as `SOURCE: field.path: problem[, got VALUE]`."""
    errors = exc.errors(include_url=False)
    error = errors[0]
    loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "value_error":
        message = str(error.get("ctx", {}).get("error", error["msg"]))
    elif kind == "syncd":
        message = error["msg"]
    elif kind == "missing":
        message = "is required"
    elif kind == "extra_forbidden":
        message = "unknown field"
    else:
        message = error["msg"]
        if message.startswith("Input should be "):
            message = "must be " + message[len("Input should be ") :]
        message = message[:1].lower() + message[1:]
        value = error.get("input")
        if (
            not _is_secret_loc(loc)
            and isinstance(value, str | int | float | bool)
            and kind not in ("model_type", "dict_type")
        ):
            message += f", got {value!r}"
    in_env, env_keys = _lookup(env_data, loc)
    in_file, _ = _lookup(file_data, loc)
    leaf = not isinstance(error.get("input"), Mapping)
    if in_env and (leaf or not in_file) and env_keys:
        origin = ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(k).upper() for k in env_keys)
    elif config_path is not None:
        origin = str(config_path)
    else:
        origin = "configuration"
    where = _format_loc(loc)
    line = f"{origin}: {where}: {message}" if where else f"{origin}: {message}"
    if len(errors) > 1:
        more = len(errors) - 1
        line += f" (and {more} more problem{'s' if more > 1 else ''})"
    return " ".join(line.split())


def load_settings(
    config_path: Path | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read the TOML file and the `SYNCD_*` environment into validated Settings.

    `config_path` None means `config/syncd.toml` if it exists, else no file; a path given
    explicitly must exist. `env` defaults to `os.environ` (tests pass a dict). Any problem
    is a ConfigError with one line naming the source and the field.
    """
    if config_path is None and DEFAULT_CONFIG_PATH.is_file():
        config_path = DEFAULT_CONFIG_PATH
    file_data: dict[str, Any] = {}
    if config_path is not None:
        file_data = _lower_tenants(_read_toml(Path(config_path)), str(config_path))
    env_map: Mapping[str, str] = os.environ if env is None else env
    try:
        env_data = _MappingEnvSource(Settings, env_map)()
    except SettingsError as exc:
        # e.g. SYNCD_JOBS='[{bad': name the variable, never echo its value (may hold tokens)
        match = re.search(r'field "(\w+)"', str(exc))
        variable = f"{ENV_PREFIX}{match.group(1).upper()}" if match else "environment"
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if isinstance(cause, ValueError) else ""
        if isinstance(cause, ValueError) and hasattr(cause, "doc"):
            detail = f" ({cause.msg} at position {cause.pos})"  # type: ignore[attr-defined]
        raise ConfigError(f"{variable}: not valid JSON{detail}") from None
    env_data = _lower_tenants(env_data, "environment")
    merged = _overlay(file_data, env_data)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_error_line(exc, file_data, env_data, config_path)) from None
    settings._config_file = Path(config_path) if config_path is not None else None
    settings._env = env
    env_tenants = env_data.get("tenants")
    for name, tenant in settings.tenants.items():
        tenant._env = env
        env_tenant = env_tenants.get(name) if isinstance(env_tenants, Mapping) else None
        if tenant.token is not None and isinstance(env_tenant, Mapping) and "token" in env_tenant:
            tenant._token_origin = f"env:{ENV_PREFIX}TENANTS{ENV_NESTED_DELIMITER}{name.upper()}{ENV_NESTED_DELIMITER}TOKEN"
        if tenant.token is not None:
            register_secret(tenant.token.get_secret_value())
    if settings.daemon.token is not None:
        register_secret(settings.daemon.token.get_secret_value())
    return settings
