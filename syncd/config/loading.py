"""Reading the settings: the TOML file, the `SYNCD_*` environment over it, and every
problem, ONE line each.

Why up front: a daemon that finds a typo in its third job at 3 a.m. is worse than a
command that refuses to start. `load_settings` reads the file, overlays the environment
(per field, environment wins), validates everything with pydantic and turns each problem
into ONE line that names the source and the field path, e.g.::

    config/syncd.toml: tenants.src.base_url: must be an http(s) URL, got 'ftp://x'
    config/syncd.toml: tenants.src.tokne: unknown key; did you mean token?
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource
from pydantic_settings.exceptions import SettingsError
from pydantic_settings.sources.utils import parse_env_vars

from syncd.config.settings import ENV_NESTED_DELIMITER, ENV_PREFIX, Settings
from syncd.config.tenants import TOKEN_KEYS
from syncd.errors import ConfigError, ConfigProblem
from syncd.logging import register_secret
from syncd.safe_read import FileRefused, read_regular
from syncd.temp_dir import choose as choose_temp_dir

__all__ = ["DEFAULT_CONFIG_PATH", "load_settings"]

DEFAULT_CONFIG_PATH = Path("config/syncd.toml")
CONFIG_FILE_LIMIT = 16 * 1024 * 1024
"""The most of a configuration file read (a file of thousands of jobs is a few hundred KB)."""


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
    """Read the file (a regular file, to a bound: `syncd.safe_read`), turning every failure
    into one line (with the line number for syntax)."""

    def problem(message: str) -> ConfigError:
        return ConfigError(problems=[ConfigProblem(str(path), None, message)])

    try:
        return tomllib.loads(read_regular(path, CONFIG_FILE_LIMIT, "config file", encoding="utf-8"))
    except FileNotFoundError:
        raise problem("config file does not exist") from None
    except FileRefused as exc:  # a FIFO, a device, a directory, too large: one line, not a hang
        raise problem(exc.reason) from None
    except OSError as exc:
        raise problem(f"cannot read config file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise problem(f"invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise problem(f"invalid TOML: not UTF-8 ({exc.reason})") from None


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


def _narrowed(annotation: Any, data: Any) -> Any:
    """The type a value given as `data` is read as: `Annotated` and `None` peeled off, and of
    a union of models (a job's kinds) the one its `kind` names, or all of them when none."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        options = [option for option in get_args(annotation) if option is not type(None)]
        if len(options) == 1:
            return _narrowed(options[0], data)
        kind = data.get("kind") if isinstance(data, Mapping) else None
        for option in options:
            tags = get_args(option.model_fields["kind"].annotation) if _is_model(option) and "kind" in option.model_fields else ()
            if kind in tags:
                return option
        return tuple(option for option in options if _is_model(option))
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _keys_at(loc: tuple[str | int, ...], data: Any) -> list[str]:
    """The keys valid in the table at `loc` of the merged settings `data`: what an unknown
    key there may be a typo of (a job's: those of its kind)."""
    annotation: Any = Settings
    for part in loc:
        annotation = _narrowed(annotation, data)
        if _is_model(annotation):
            field = annotation.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return []
            annotation = field.annotation
        elif get_origin(annotation) in (list, dict) and get_args(annotation):
            annotation = get_args(annotation)[-1]  # an item of a list, a value of a table
        else:
            return []
        present = isinstance(data, Mapping) and part in data
        present = present or (isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data))
        data = data[part] if present else None
    found = _narrowed(annotation, data)
    models = found if isinstance(found, tuple) else (found,)
    return list(dict.fromkeys(key for model in models if _is_model(model) for key in model.model_fields))


def _message(error: Mapping[str, Any], loc: tuple[str | int, ...]) -> str:
    """What is wrong, in words: pydantic's sentence made to read as syncd's."""
    kind = error["type"]
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if kind == "syncd":
        return str(error["msg"])
    if kind == "missing":
        return "is required"
    message = str(error["msg"])
    if message.startswith("Input should be "):
        message = "must be " + message[len("Input should be ") :]
    message = message[:1].lower() + message[1:]
    value = error.get("input")
    if not _is_secret_loc(loc) and isinstance(value, str | int | float | bool) and kind not in ("model_type", "dict_type"):
        message += f", got {value!r}"
    return message


def _origin(
    error: Mapping[str, Any], loc: tuple[str | int, ...], file_data: dict[str, Any], env_data: dict[str, Any], config_path: Path | None
) -> str:
    """Where the value at fault was given: the environment variable, the file, or neither."""
    in_env, env_keys = _lookup(env_data, loc)
    in_file, _ = _lookup(file_data, loc)
    leaf = not isinstance(error.get("input"), Mapping)
    if in_env and (leaf or not in_file) and env_keys:
        return ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(k).upper() for k in env_keys)
    return str(config_path) if config_path is not None else "configuration"


def _problems(
    exc: ValidationError,
    file_data: dict[str, Any],
    env_data: dict[str, Any],
    config_path: Path | None,
) -> list[ConfigProblem]:
    """Every validation error as `SOURCE`, `field.path`, problem: an unknown key with the
    valid key it is closest to (`did you mean base_url?`), and the "is required" of that key
    folded into it (a typo is one problem, not two)."""
    merged = _overlay(file_data, env_data)
    errors = exc.errors(include_url=False)
    meant: set[tuple[str | int, ...]] = set()
    messages: list[str] = []
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] != "extra_forbidden":
            messages.append(_message(error, loc))
            continue
        close = difflib.get_close_matches(str(loc[-1]), _keys_at(loc[:-1], merged), n=1)
        messages.append("unknown key" + (f"; did you mean {close[0]}?" if close else ""))
        meant.update((*loc[:-1], key) for key in close)
    problems = []
    for error, message in zip(errors, messages, strict=True):
        loc = tuple(error["loc"])
        if error["type"] == "missing" and loc in meant:
            continue
        where = _format_loc(loc)
        problems.append(ConfigProblem(_origin(error, loc, file_data, env_data, config_path), where or None, " ".join(message.split())))
    return problems


def load_settings(
    config_path: Path | None = None, env: Mapping[str, str] | None = None, *, record_temp_dir: bool = True
) -> Settings:
    """Read the TOML file and the `SYNCD_*` environment into validated Settings.

    `config_path` None means `config/syncd.toml` if it exists, else no file; a path given
    explicitly must exist. `env` defaults to `os.environ` (tests pass a dict). Problems are
    one ConfigError with every problem found, each naming its source and field.
    `record_temp_dir`: record the settings' temporary directory as this process's
    (`syncd.temp_dir.choose`); a running daemon's reload does not (its place moves with a
    restart only, and a reload reads in a thread of its own).
    """
    if config_path is None and DEFAULT_CONFIG_PATH.exists():  # a FIFO or a folder there is refused, not passed over
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
        raise ConfigError(problems=_problems(exc, file_data, env_data, config_path)) from None
    settings._config_file = Path(config_path) if config_path is not None else None
    if record_temp_dir:
        choose_temp_dir(settings.temp_path)  # recorded only: made when a state is first written
    settings._env = env
    for entry in settings.storage.values():
        entry._env = env
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
