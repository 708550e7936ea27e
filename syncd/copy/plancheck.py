"""A plan file read field by field, before anything is done with it (`planfile.load_plan`).

A plan file travels (CI artifacts, review tools) and may have been edited: every field is
checked for its type and its values before the first write, and the first field that is not
what `mirror plan --out` writes is named in one line (`BadField`): an unknown action or
recipe, a method that is not one syncd sends (CR/LF in it, say), a path that is not one,
two ops with one key, an op waiting for an op the plan lacks or for itself through others,
an option of the wrong type. Text quoted from the file is shown with `repr` (no control
character reaches a terminal) and cut short.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, get_args

from syncd.catalog import BY_NAME
from syncd.copy.ops import ACTIONS, Recipe

__all__ = ["BadField", "check_document", "check_element"]

RECIPES: tuple[str, ...] = get_args(Recipe)
METHODS: tuple[str, ...] = ("POST", "PUT", "PATCH", "DELETE")
"""The methods syncd sends (an op that sends no call of its own has none: "")."""
OP_KINDS: frozenset[str] = frozenset(BY_NAME) | {"tree"}
"""What an op may be about: a kind of the catalog, or the tree of collections and spaces (its settle step)."""
FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
_PATH = re.compile(r"/v1/[^\s?#]*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP method is a token (RFC 9110)."""
OPTIONS = ("max_delete", "adopt", "with_access", "include", "exclude")


class BadField(ValueError):
    """A field of a plan file that is not what `mirror plan --out` writes (one line)."""


def show(value: Any, limit: int = 80) -> str:
    """A value of the file as a message quotes it: `repr` (controls escaped), cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_document(data: Mapping[str, Any]) -> None:
    """BadField for the first field of the document that is malformed (module docstring)."""
    for side in ("source", "target"):
        _check_side(side, data.get(side))
    _expect(data.get("mode") in ("copy", "mirror"), f"mode {show(data.get('mode'))} is neither copy nor mirror")
    _check_options(data.get("options", {}))
    _expect(data.get("refused") is None or isinstance(data.get("refused"), str), "refused must be null or text")
    _texts(data.get("warnings", []), "warnings")
    _expect(isinstance(data.get("created_at", ""), str), "created_at must be text")
    skips = data.get("skips", [])
    _expect(isinstance(skips, list), "skips must be a list")
    for n, skip in enumerate(skips):
        _check_skip(n, skip)
    ops = data.get("ops")
    _expect(isinstance(ops, list), "ops must be a list")
    keys: set[str] = set()
    for n, op in enumerate(ops):
        _check_op(n, op)
        _expect(op["key"] not in keys, f"two ops have the key {show(op['key'])}")
        keys.add(op["key"])
    for op in ops:
        for key in op.get("after") or []:
            _expect(key in keys, f"op {show(op['key'])} waits for {show(key)}, which the plan does not hold")
    _check_order(ops)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise BadField(message)


def _check_side(side: str, value: Any) -> None:
    _expect(isinstance(value, dict), f"{side} must be an object")
    for name in ("tenant", "org"):
        _expect(_plain(value.get(name)) and value.get(name) != "", f"{side}.{name} {show(value.get(name))} is not a name")
    _expect(isinstance(value.get("ref", ""), str), f"{side}.ref must be text")
    fingerprint = value.get("fingerprint")
    _expect(isinstance(fingerprint, str) and FINGERPRINT.fullmatch(fingerprint) is not None, f"{side}.fingerprint {show(fingerprint)} is not sha256:<64 hex digits>")


def _check_options(options: Any) -> None:
    _expect(isinstance(options, dict), "options must be an object")
    for name in options:
        _expect(name in OPTIONS, f"options.{show(name)} is not an option of a plan ({', '.join(OPTIONS)})")
    if "max_delete" in options:
        value = options["max_delete"]
        _expect(isinstance(value, int) and not isinstance(value, bool) and value >= 0, f"options.max_delete {show(value)} is not a whole number >= 0")
    for name in ("adopt", "with_access"):
        if name in options:
            _expect(isinstance(options[name], bool), f"options.{name} {show(options[name])} is not true or false")
    for name in ("include", "exclude"):
        if name in options:
            _texts(options[name], f"options.{name}")


def check_element(name: str, n: int, value: Any) -> None:
    """BadField when `value`, the n-th element of the document's list `name` ("ops" or
    "skips"), is malformed: one element alone, for a reader that streams a plan (the web page)
    and never holds it whole."""
    {"ops": _check_op, "skips": _check_skip}[name](n, value)


def _check_skip(n: int, skip: Any) -> None:
    _expect(isinstance(skip, dict), f"skips[{n}] must be an object")
    where = f"skips[{n}]"
    _expect(isinstance(skip.get("kind"), str), f"{where}.kind must be text")
    _expect(skip.get("source_id") is None or isinstance(skip.get("source_id"), str), f"{where}.source_id must be text or null")
    for name in ("title", "reason"):
        _expect(isinstance(skip.get(name, ""), str), f"{where}.{name} must be text")
    _texts(skip.get("excuses", []), f"{where}.excuses")


_OP_FIELDS: dict[str, Callable[[str, Any], None]] = {}


def _field(name: str) -> Callable[[Callable[[str, Any], None]], Callable[[str, Any], None]]:
    def register(check: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        _OP_FIELDS[name] = check
        return check

    return register


def _check_op(n: int, op: Any) -> None:
    _expect(isinstance(op, dict), f"ops[{n}] must be an object")
    key = op.get("key")
    _expect(_plain(key) and key != "", f"ops[{n}].key {show(key)} is not a key")
    where = f"op {show(key)}"
    for name in ("action", "kind"):
        _expect(name in op, f"{where} has no {name}")
    for name, value in op.items():
        check = _OP_FIELDS.get(name)
        _expect(check is not None, f"{where} has an unknown field {show(name)}")
        assert check is not None
        check(where, value)


@_field("key")
def _key(where: str, value: Any) -> None:
    """Checked first, in `_check_op`."""


@_field("action")
def _action(where: str, value: Any) -> None:
    _expect(value in ACTIONS, f"{where}: action {show(value)} is not one of {', '.join(ACTIONS)}")


@_field("kind")
def _kind(where: str, value: Any) -> None:
    _expect(value in OP_KINDS, f"{where}: kind {show(value)} is not a kind syncd copies")


@_field("recipe")
def _recipe(where: str, value: Any) -> None:
    _expect(value in RECIPES, f"{where}: recipe {show(value)} is not one of {', '.join(RECIPES)}")


@_field("method")
def _method(where: str, value: Any) -> None:
    _expect(isinstance(value, str), f"{where}: method {show(value)} is not text")
    _expect(value == "" or _TOKEN.fullmatch(value) is not None, f"{where}: method {show(value)} is not an HTTP method")
    _expect(value in ("", *METHODS), f"{where}: method {show(value)} is not one syncd sends ({', '.join(METHODS)})")


@_field("path")
def _path(where: str, value: Any) -> None:
    _expect(isinstance(value, str) and (value == "" or _PATH.fullmatch(value) is not None), f"{where}: path {show(value)} is not an API path (/v1/...)")


@_field("side")
def _side(where: str, value: Any) -> None:
    _expect(value in ("target", "source"), f"{where}: side {show(value)} is neither target nor source")


@_field("source_id")
@_field("target_id")
@_field("serial")
def _text_or_null(where: str, value: Any) -> None:
    _expect(value is None or _plain(value), f"{where}: {show(value)} must be text or null")


@_field("title")
@_field("note")
def _text(where: str, value: Any) -> None:
    _expect(isinstance(value, str), f"{where}: {show(value)} must be text")


@_field("after")
@_field("preview")
def _list_of_text(where: str, value: Any) -> None:
    _texts(value, where)


@_field("body")
@_field("want")
@_field("spec")
def _value(where: str, value: Any) -> None:
    for bad in _bad_refs(value):
        raise BadField(f"{where}: a reference {show(bad)} must be {{\"$ref\": [kind, source id]}}")


@_field("expect")
def _expect_field(where: str, value: Any) -> None:
    if value is None:
        return
    _expect(isinstance(value, dict), f"{where}: expect must be an object")
    _path(f"{where}: expect", value.get("path"))
    _expect(value.get("path") != "", f"{where}: expect.path is empty")
    _side(f"{where}: expect", value.get("side", "target"))
    _text_or_null(f"{where}: expect.parent_field", value.get("parent_field"))
    _expect(_plain(value.get("id_field", "id")), f"{where}: expect.id_field must be text")
    _expect(isinstance(value.get("exclude", []), list), f"{where}: expect.exclude must be a list")
    _value(f"{where}: expect", [value.get("parent"), value.get("exclude")])
    for name in value:
        _expect(name in ("path", "side", "parent_field", "parent", "exclude", "id_field"), f"{where}: expect has an unknown field {show(name)}")


@_field("makes")
def _makes(where: str, value: Any) -> None:
    _expect(isinstance(value, list), f"{where}: makes must be a list")
    for item in value:
        _expect(isinstance(item, list) and len(item) == 2 and all(_plain(v) for v in item), f"{where}: makes {show(item)} is not [kind, source id]")


def _bad_refs(value: Any) -> Iterator[Any]:
    """References (`{"$ref": ...}`) that are not exactly `{"$ref": [kind, source id]}`."""
    if isinstance(value, dict):
        if "$ref" in value:
            ref = value["$ref"]
            if len(value) != 1 or not isinstance(ref, list) or len(ref) != 2 or not all(_plain(v) and v for v in ref):
                yield value
            return
        for item in value.values():
            yield from _bad_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _bad_refs(item)


def _texts(value: Any, where: str) -> None:
    _expect(isinstance(value, list) and all(isinstance(v, str) for v in value), f"{where} must be a list of text")


def _plain(value: Any) -> bool:
    """Text without control characters (a name, an id, a key)."""
    return isinstance(value, str) and not any(ord(c) < 32 or ord(c) == 127 for c in value)


def _check_order(ops: list[dict[str, Any]]) -> None:
    """BadField when the ops wait for each other in a cycle (through `after` or the objects
    they name): such a plan can never run to its end."""
    from syncd.copy.apply import dependencies
    from syncd.copy.ops import Plan, op_from_json

    try:
        dependencies(Plan([op_from_json(op) for op in ops]))
    except ValueError as exc:
        raise BadField(str(exc)) from None
