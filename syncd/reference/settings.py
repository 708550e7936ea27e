"""The configuration's reference page, read from the pydantic models of `syncd.config`: every
setting with its TOML key, type, default, `SYNCD_*` environment variable and description.

The walk starts at `Settings` and follows every field whose type is a model (`[daemon]`), a
table of models (`[tenants.NAME]`) or a list of them (`[[jobs]]`, one model per kind): a model
added to the settings is on the page without a line here. A description is the field's
`description`, else its attribute docstring (the string under it in the class, the way
`syncd.config` documents its fields). Secrets show no value, only that they are secrets.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ByteSize, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from syncd.config import Settings, TargetRef, format_duration, parse_duration
from syncd.config.settings import ENV_NESTED_DELIMITER, ENV_PREFIX
from syncd.reference.markdown import code, paragraphs, prose

__all__ = ["SettingDoc", "TableDoc", "attribute_docs", "settings_reference", "tables"]

INTRO = f"""\
Every setting of syncd, generated from the configuration's models when the site is built.
Settings come from a TOML file (`config/syncd.toml` when it exists, or the file `--config`
names) and from the environment, which wins over the file field by field: the variable is
`{ENV_PREFIX}` and the key path in upper case, with `{ENV_NESTED_DELIMITER}` between levels
(`SYNCD_DAEMON__PORT=9000`, `SYNCD_TENANTS__SRC__TOKEN=...`). A list or a table given in one
variable is JSON (`SYNCD_JOBS='[{{"name": "a", "kind": "sync", "source": "src"}}]'`); the jobs
come from the file or from `SYNCD_JOBS` as a whole. Tenant names are case-insensitive, like
the variables. `syncd config check` reads a configuration and says every problem, one line each.

Durations are written `30s`, `15m`, `2h`, `1d`, combined (`1h30m`) or with fractional seconds
(`0.5s`); a plain number means seconds. Sizes are bytes, or `64MiB`, `500MB`. Relative paths
are relative to the directory syncd is started in. The annotated examples are
`config/syncd.example.toml`, `config/fleet.example.toml` and `config/syncd.container.toml`.
"""


@dataclass(frozen=True)
class SettingDoc:
    """One setting as the page shows it."""

    key: str
    """Its TOML key path: `daemon.port`, `tenants.NAME.base_url`, `jobs[].schedule.every`."""
    env: str
    """How the environment gives it (markdown)."""
    type: str
    default: str
    description: str
    kinds: tuple[str, ...] = ()
    """The kinds of job that take it, when not every kind does."""


@dataclass
class TableDoc:
    """A table of the configuration (or its top level) and the settings in it."""

    key: str
    title: str
    models: tuple[type[BaseModel], ...]
    intro: str
    settings: list[SettingDoc] = field(default_factory=list)


# ----- descriptions ---------------------------------------------------------------------------


@cache
def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """The attribute docstrings of `model`'s fields, its bases' included (a subclass's wins)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls.__module__.startswith(("pydantic", "pydantic_settings")):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, following in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _description(models: tuple[type[BaseModel], ...], name: str) -> str:
    for model in models:
        info = model.model_fields.get(name)
        if info is None:
            continue
        text = info.description or attribute_docs(model).get(name, "")
        if text.strip():
            return text
    return ""


# ----- types ------------------------------------------------------------------------------------


def _peel(annotation: Any) -> tuple[Any, list[Any]]:
    """`annotation` without `Annotated` (its metadata collected) and without `| None`."""
    metadata: list[Any] = []
    while True:
        if get_origin(annotation) is Annotated:
            annotation, *extra = get_args(annotation)
            metadata += extra
        elif get_origin(annotation) in (Union, UnionType) and NoneType in get_args(annotation):
            rest = [arg for arg in get_args(annotation) if arg is not NoneType]
            annotation = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 - built at run time
        else:
            return annotation, metadata


def _is_duration(metadata: list[Any]) -> bool:
    return any(getattr(item, "func", None) is parse_duration for item in metadata)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _models_in(annotation: Any) -> tuple[type[BaseModel], ...]:
    """The models a union names (the kinds of job), in its order."""
    inner, _ = _peel(annotation)
    if get_origin(inner) in (Union, UnionType):
        return tuple(arg for option in get_args(inner) for arg in _models_in(option))
    return (inner,) if _is_model(inner) else ()


def _bounds(metadata: list[Any], shown: Callable[[Any], str]) -> str:
    """`1 to 4096`, `at least 1`, `more than 0`: the limits the field's validation holds,
    each value `shown` in the setting's own unit (`1s to 1h` for a duration)."""
    found: dict[str, Any] = {}
    for item in metadata:
        for limit in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            value = getattr(item, limit, None)
            if value is not None:
                found[limit] = value
    parts = []
    low = ("ge", found["ge"]) if "ge" in found else ("gt", found["gt"]) if "gt" in found else None
    high = ("le", found["le"]) if "le" in found else ("lt", found["lt"]) if "lt" in found else None
    if low and high and low[0] == "ge" and high[0] == "le":
        parts.append(f"{shown(low[1])} to {shown(high[1])}")
    else:
        if low:
            parts.append(("at least " if low[0] == "ge" else "more than ") + shown(low[1]))
        if high:
            parts.append(("at most " if high[0] == "le" else "less than ") + shown(high[1]))
    if "min_length" in found or "max_length" in found:
        parts.append(f"{found.get('min_length', 0)} to {found.get('max_length', '...')} characters")
    if "pattern" in found:
        parts.append("matching " + code(found["pattern"]))
    return ", ".join(parts)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _type(annotation: Any, metadata: list[Any] | None = None) -> str:
    """The type of a setting in words: `integer, 1 to 4096`, `duration`, `one of "copy", "mirror"`."""
    inner, more = _peel(annotation)
    metadata = [*(metadata or []), *more]
    bounds = _bounds(metadata, _shown_as(inner, metadata))
    if _is_duration(metadata):
        name = "duration"
    elif get_origin(inner) is Literal:
        name = "one of " + ", ".join(code(_toml(value)) for value in get_args(inner))
    elif get_origin(inner) in (Union, UnionType):
        name = " or ".join(_type(option) for option in get_args(inner))
    elif get_origin(inner) is list:
        (item,) = get_args(inner)
        models = _models_in(item)
        name = "list of tables" if models else f"list of {_type(item)}s"
    elif get_origin(inner) is dict:
        name = "table of tables, one per name" if _models_in(get_args(inner)[1]) else "table"
    elif _is_model(inner):
        name = "table"
    else:
        name = _SCALARS.get(inner, getattr(inner, "__name__", str(inner)))
    return f"{name}, {bounds}" if bounds else name


_SCALARS: dict[Any, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    Path: "path",
    SecretStr: "secret string",
    ByteSize: "size in bytes (or `64MiB`, `500MB`)",
    TargetRef: "`TENANT` or `TENANT:ORG_ID`",
}


def _shown_as(inner: Any, metadata: list[Any]) -> Callable[[Any], str]:
    """How a value of this type is written: a duration `1h`, a size `64KiB`, a number `0.5`."""
    if _is_duration(metadata):
        return lambda value: format_duration(float(value))
    if inner is ByteSize:
        return _size
    return _number


def _size(value: Any) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if isinstance(value, int) and value and value % size == 0:
            return f"{value // size}{unit}"
    return _number(value)


def _has_secret(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    return any(_has_secret(arg) for arg in get_args(annotation))


# ----- defaults ---------------------------------------------------------------------------------


def _toml(value: Any) -> str:
    """A value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return _number(value)


def _default(info: FieldInfo, metadata: list[Any]) -> str:
    """The default as markdown: a value, `none`, `required`, or a secret's words (never a value)."""
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "required"
    if _has_secret(info.annotation):
        return "none (a secret: its value is never shown)" if value is None else "a secret, not shown"
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "the defaults of each of its settings"
    _inner, more = _peel(info.annotation)
    if _is_duration([*metadata, *more]) and isinstance(value, int | float):
        return code(_toml(format_duration(float(value))))
    if _inner is ByteSize and isinstance(value, int):
        return code(_toml(_size(value)))
    return code(_toml(value))


# ----- the walk ---------------------------------------------------------------------------------


def _fields(models: tuple[type[BaseModel], ...]) -> Iterator[tuple[str, FieldInfo, tuple[type[BaseModel], ...]]]:
    """Each field of `models` once (the first model's order, then the others' new ones), with
    the models that have it."""
    seen: dict[str, list[type[BaseModel]]] = {}
    for model in models:
        for name in model.model_fields:
            seen.setdefault(name, []).append(model)
    for name, owners in seen.items():
        yield name, owners[0].model_fields[name], tuple(owners)


def _merged_type(name: str, owners: tuple[type[BaseModel], ...]) -> str:
    """The type of a field the models share: theirs, or the union of their literals (`kind`)."""
    infos = [owner.model_fields[name] for owner in owners]
    literals = [get_args(info.annotation) for info in infos if get_origin(info.annotation) is Literal]
    if len(owners) > 1 and len(literals) == len(infos):
        return "one of " + ", ".join(code(_toml(value)) for values in literals for value in values)
    return _type(infos[0].annotation, list(infos[0].metadata))


def _kind(model: type[BaseModel]) -> str:
    info = model.model_fields.get("kind")
    tags = get_args(info.annotation) if info is not None and get_origin(info.annotation) is Literal else ()
    return str(tags[0]) if tags else model.__name__


def _env(prefix: str | None, name: str, complex_value: bool, table: bool) -> str:
    """How the environment gives a setting: its variable; a list or table in one variable is
    JSON, and a table's settings have a variable each too; a job's are in `SYNCD_JOBS`."""
    if prefix is None:
        return "in `SYNCD_JOBS` (the jobs as a JSON list)"
    variable = code(prefix + name.upper())
    if table:
        return f"{variable} (JSON), or a variable per setting, below"
    return f"{variable} (JSON)" if complex_value else variable


def _intro(key: str, models: tuple[type[BaseModel], ...]) -> str:
    """What a table is for: its model's docstring, or a line per kind (the jobs). The top
    level has the page's introduction instead."""
    if not key:
        return ""
    if len(models) == 1:
        return paragraphs(inspect.getdoc(models[0]) or "")
    return "\n".join(f"- {code(_kind(model))}: {prose(' '.join((inspect.getdoc(model) or '').split()))}" for model in models)


def tables() -> list[TableDoc]:
    """Every table of the configuration, the top level first, each with its settings."""
    return _tables("", "Top level", ENV_PREFIX, (Settings,))


def _tables(key: str, title: str, env: str | None, models: tuple[type[BaseModel], ...]) -> list[TableDoc]:
    """The table at `key`, then the tables its settings open, each followed by its own."""
    table = TableDoc(key, title, models, _intro(key, models))
    found = [table]
    all_kinds = len(models) > 1
    for name, info, owners in _fields(models):
        full = f"{key}.{name}" if key else name
        inner, _ = _peel(info.annotation)
        nested = _nested(inner, full, name, env)
        if nested is not None:
            found += _tables(*nested)
        complex_value = nested is not None or get_origin(inner) in (list, dict)
        kinds = tuple(_kind(owner) for owner in owners) if all_kinds and len(owners) < len(models) else ()
        table.settings.append(
            SettingDoc(
                key=full,
                env=_env(env, name, complex_value, nested is not None and nested[2] is not None),
                type=_merged_type(name, owners),
                default=_default(info, list(info.metadata)),
                description=_description(owners, name),
                kinds=kinds,
            )
        )
    return found


def _nested(inner: Any, full: str, name: str, env: str | None) -> tuple[str, str, str | None, tuple[type[BaseModel], ...]] | None:
    """The table a field of type `inner` opens, if it is one: (key, title, env prefix, models)."""
    nested_env = None if env is None else f"{env}{name.upper()}{ENV_NESTED_DELIMITER}"
    table_env = None if nested_env is None else f"{nested_env}NAME{ENV_NESTED_DELIMITER}"
    if _is_model(inner):
        return full, code(f"[{full}]") if "[]" not in full else code(full), nested_env, (inner,)
    if get_origin(inner) is dict and _models_in(get_args(inner)[1]):
        key = f"{full}.NAME"
        return key, code(f"[{key}]"), table_env, _models_in(get_args(inner)[1])
    if get_origin(inner) is list and _models_in(get_args(inner)[0]):
        return f"{full}[]", code(f"[[{full}]]"), None, _models_in(get_args(inner)[0])
    return None


# ----- the page ---------------------------------------------------------------------------------


def _setting(doc: SettingDoc) -> str:
    facts = [f"- Type: {doc.type}", f"- Default: {doc.default}", f"- Environment: {doc.env}"]
    if doc.kinds:
        facts.append("- Jobs: " + " and ".join(code(kind) for kind in doc.kinds) + " only")
    return f"### {code(doc.key)}\n\n{paragraphs(doc.description)}\n\n" + "\n".join(facts)


def settings_reference() -> str:
    """The page: an introduction, then a section per table, a heading per setting."""
    parts = ["# Configuration", INTRO]
    for table in tables():
        parts.append(f"## {table.title}")
        if table.intro:
            parts.append(table.intro)
        parts += [_setting(doc) for doc in table.settings]
    return "\n\n".join(parts) + "\n"
