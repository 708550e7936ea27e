"""Logging for syncd: structlog, human lines for the CLI, JSON lines for the daemon.

Why one module: every log line, ours or a library's (aiohttp logs through stdlib
`logging`), goes through the same chain, and that chain ends with redaction, so an API
token cannot reach a terminal or a log file however it travels:

- values of keys that name a secret (token, authorization, password, secret, api_key,
  at any depth of dicts and lists, e.g. a headers mapping) are replaced by `********`;
- `Bearer <anything>` in any string, `token=...` in query strings and quoted
  `'Authorization': '...'` pairs (as in a repr of headers) are masked;
- every value registered with `register_secret` (the config loader registers each token it
  resolves) is masked wherever it occurs, e.g. inside a URL or an error message, and in
  every percent-encoded form: each character that an encoder may escape is matched raw or
  as its `%XX` bytes (either case of hex), so `tok/en+x==` is masked as `tok%2Fen%2Bx%3D%3D`,
  as yarl's path form `tok/en+x==` and as any mix of the two.

Exceptions are rendered to text BEFORE redaction, so tracebacks are scrubbed too; other
objects are turned into strings before redaction for the same reason. Records of stdlib
`logging` are also scrubbed when they are created, so handlers that are not ours (a
library's, pytest's) see them redacted as well.

Console lines are for terminals, and values often quote the server (titles, error messages):
escape sequences and control characters are removed from them (`syncd.safe_text.clean`),
and a line break inside a value becomes a space, so one event stays one line (a rendered
traceback keeps its lines). JSON lines need nothing more: JSON escapes control characters.
"""

from __future__ import annotations

import datetime as _dt
import enum
import logging
import re
import sys
import threading
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal, TextIO

import structlog
from pydantic import SecretStr
from structlog.typing import EventDict, Processor, WrappedLogger

from syncd.safe_text import clean

__all__ = [
    "LOG_OPTIONS",
    "MASK",
    "LogFormat",
    "configure_logging",
    "forget_secret",
    "get_logger",
    "redact",
    "redact_processor",
    "redact_text",
    "register_secret",
    "terminal_processor",
]

MASK = "********"
LogFormat = Literal["console", "json"]

# Key names whose values are secrets; a key also matches when it ends with `_<name>`
# (access_token, x_api_key, proxy_authorization). Compared lower case, '-' as '_'.
_SECRET_KEYS = frozenset(
    {"token", "authorization", "password", "passwd", "secret", "api_key", "apikey", "cookie", "set_cookie"}
)
_SECRET_SUFFIXES = tuple("_" + key for key in _SECRET_KEYS)
_MIN_SECRET_LENGTH = 4  # shorter "secrets" would mask half of every line
_MAX_DEPTH = 12
_META_KEYS = frozenset({"_record", "_from_structlog"})

_BEARER_RE = re.compile(r"(?i)\b(bearer)(\s+)[^\s'\"`,;()<>\[\]{}]+")
_QUERY_RE = re.compile(
    r"(?i)(\b(?:access_token|refresh_token|token|api_key|apikey|password|secret)=)[^&\s'\"#]+"
)
_QUOTED_PAIR_RE = re.compile(
    r"(?i)(['\"](?:[\w-]*[-_])?(?:authorization|token|password|secret|api[-_]?key|cookie)['\"]\s*[:=]\s*)"
    r"(['\"])(?:(?!\2).)*\2"
)

_lock = threading.Lock()
_secrets: set[str] = set()
_secrets_re: re.Pattern[str] | None = None
_configured = False
_HANDLER_FLAG = "_syncd_handler"


def register_secret(value: str | SecretStr | None) -> None:
    """Remember a secret so it is masked in any log line it turns up in.

    Called by the config loader for every token it reads; call it for any other secret
    syncd learns at run time. Values shorter than 4 characters are ignored.
    """
    global _secrets_re
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if not value:
        return
    value = value.strip()
    if len(value) < _MIN_SECRET_LENGTH:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        _secrets_re = _secrets_pattern(_secrets)


def _secrets_pattern(secrets: set[str]) -> re.Pattern[str] | None:
    """One pattern for every secret, longest first (a secret containing another is masked whole)."""
    ordered = sorted(secrets, key=len, reverse=True)
    return re.compile("|".join(_encoded_forms(s) for s in ordered)) if ordered else None


_NEVER_ESCAPED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def _encoded_forms(secret: str) -> str:
    """A pattern for `secret` raw, percent-encoded, or any mix: a character an encoder may
    escape matches itself or its UTF-8 bytes as `%XX` (hex in either case)."""
    parts = []
    for char in secret:
        if char in _NEVER_ESCAPED:
            parts.append(re.escape(char))
            continue
        escaped = "".join(f"%(?i:{byte:02x})" for byte in char.encode())
        parts.append(f"(?:{re.escape(char)}|{escaped})")
    return "".join(parts)


def forget_secret(value: str) -> None:
    """Stop masking `value` (registered with `register_secret`): for secrets that live a
    short while, like a content source's capabilities, so the set does not grow forever."""
    global _secrets_re
    value = value.strip()
    with _lock:
        if value not in _secrets:
            return
        _secrets.discard(value)
        _secrets_re = _secrets_pattern(_secrets)


def _forget_secrets() -> None:
    """Drop all registered secrets (tests only)."""
    global _secrets_re
    with _lock:
        _secrets.clear()
        _secrets_re = None


def redact_text(text: str) -> str:
    """Mask registered secrets, `Bearer ...`, `token=...` and quoted secret pairs in `text`."""
    pattern = _secrets_re
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _BEARER_RE.sub(rf"\1\2{MASK}", text)
    text = _QUERY_RE.sub(rf"\1{MASK}", text)
    return _QUOTED_PAIR_RE.sub(rf"\1\2{MASK}\2", text)


def _is_secret_key(key: object) -> bool:
    name = str(key).lower().replace("-", "_")
    return name in _SECRET_KEYS or name.endswith(_SECRET_SUFFIXES)


def _to_text(value: object) -> str:
    """A readable string for an arbitrary object, so redaction can see inside it."""
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    return repr(value)


def redact(value: Any, _depth: int = 0) -> Any:
    """Return a redacted copy of `value` (never mutates it): see the module docstring.

    Strings are scrubbed, mappings and sequences are walked (values under secret keys are
    masked whole), numbers/bools/None pass, anything else becomes a scrubbed string.
    """
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, SecretStr):
        return MASK
    if _depth >= _MAX_DEPTH:
        return redact_text(_to_text(value))
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        items = value.items()
        for key, item in items:
            clean = MASK if (_is_secret_key(key) and item not in (None, "")) else redact(item, _depth + 1)
            safe_key = key if isinstance(key, str | int | float | bool) or key is None else redact_text(str(key))
            if isinstance(safe_key, str):
                safe_key = redact_text(safe_key)
            if safe_key in out:  # multidicts: repeated header names
                previous = out[safe_key]
                out[safe_key] = [*previous, clean] if isinstance(previous, list) else [previous, clean]
            else:
                out[safe_key] = clean
        return out
    if isinstance(value, list | tuple | set | frozenset):
        cleaned = [redact(item, _depth + 1) for item in value]
        return tuple(cleaned) if isinstance(value, tuple) else cleaned
    if isinstance(value, bytes | bytearray):
        return redact_text(repr(bytes(value)))
    return redact_text(_to_text(value))


def redact_processor(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: redact every value of the event (exceptions already rendered)."""
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        if key in _META_KEYS:
            out[key] = value
        elif key != "event" and _is_secret_key(key) and value not in (None, ""):
            out[key] = MASK
        else:
            out[key] = redact(value)
    return out


_MULTILINE_KEYS = frozenset({"exception", "stack"})


def _terminal_text(value: str, multiline: bool) -> str:
    return clean(value, newlines=multiline)


def terminal_processor(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor for console lines: string values without escape sequences or
    control characters, one line each (tracebacks keep their lines). Values that are not
    strings are rendered with repr(), which escapes control characters itself."""
    return {
        key: _terminal_text(value, key in _MULTILINE_KEYS) if isinstance(value, str) and key not in _META_KEYS else value
        for key, value in event_dict.items()
    }


def _render_exc_info(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Turn exc_info/stack_info into text now, so the redactor sees the traceback."""
    event_dict = structlog.processors.StackInfoRenderer()(logger, method_name, event_dict)
    return structlog.processors.format_exc_info(logger, method_name, event_dict)


def _install_record_factory() -> None:
    """Scrub every stdlib LogRecord when it is made, for handlers that are not ours.

    Our handler redacts through its ProcessorFormatter; this covers the others (a
    library's, pytest's, an error tracker's): the message is merged and scrubbed, and the
    traceback is pre-rendered scrubbed into `exc_text`, which `logging.Formatter` reuses.
    Installed once; structlog's own records (already redacted dicts) pass untouched.
    """
    current = logging.getLogRecordFactory()
    if getattr(current, _HANDLER_FLAG, False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = current(*args, **kwargs)
        if isinstance(record.msg, dict):
            return record
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is the logging module's business, not ours
            return record
        record.msg, record.args = redact_text(message), ()
        if record.exc_info and record.exc_info[0] is not None:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return record

    setattr(factory, _HANDLER_FLAG, True)
    logging.setLogRecordFactory(factory)


def _level_number(level: str | int) -> int:
    if isinstance(level, int):
        return level
    number = logging.getLevelNamesMapping().get(level.strip().upper())
    if number is None:
        raise ValueError(f"unknown log level {level!r} (use debug, info, warning, error or critical)")
    return number


LOG_OPTIONS: dict[str, str] = {}
"""`format` / `level` given on the command line (--log-format, --log-level): they win over
the configuration's `log_format` / `log_level` where a command reads those (`syncd serve`)."""


def configure_logging(
    fmt: LogFormat = "console", level: str | int = "info", stream: TextIO | None = None
) -> None:
    """Send structlog and stdlib logging to `stream` (default: the current sys.stderr).

    `console` is for people at a terminal, `json` (one object per line) for the daemon and
    log collectors. Safe to call again: the previous handler is replaced, not stacked.
    """
    global _configured
    if fmt not in ("console", "json"):
        raise ValueError(f"unknown log format {fmt!r} (use console or json)")
    number = _level_number(level)
    out = stream if stream is not None else sys.stderr

    renderer: Processor
    for_terminal: list[Processor] = []
    if fmt == "json":
        timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
        renderer = structlog.processors.JSONRenderer()
    else:
        for_terminal.append(terminal_processor)
        timestamper = structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False)
        isatty = getattr(out, "isatty", None)
        renderer = structlog.dev.ConsoleRenderer(
            colors=bool(isatty and isatty()),
            exception_formatter=structlog.dev.plain_traceback,
        )

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        timestamper,
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            _render_exc_info,
            redact_processor,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        cache_logger_on_first_use=False,
    )

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _render_exc_info,
            redact_processor,
            *for_terminal,
            renderer,
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    setattr(handler, _HANDLER_FLAG, True)

    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_FLAG, False):
            root.removeHandler(old)
            old.close()  # flushes; a StreamHandler never closes its stream
    root.addHandler(handler)
    root.setLevel(number)
    _install_record_factory()
    _configured = True


def get_logger(name: str | None = None, **initial: Any) -> structlog.stdlib.BoundLogger:
    """A structlog logger; configures console logging first if nobody has yet.

    So a library-style `get_logger()` can never log through structlog's unredacted defaults.
    """
    if not _configured:
        configure_logging()
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name, **initial)
    return logger
