"""The ground every settings model stands on: the strict base model, durations, names, and
validation errors located at one field.

The lowest module of `syncd.config`: it imports none of the others.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, SecretStr, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from syncd.safe_text import check_secret

__all__ = [
    "NAME_RE", "Host", "Problem", "Seconds", "StrictModel", "format_duration", "local_url", "parse_duration", "raise_all",
    "raise_at", "trimmed_secret",
]  # fmt: skip

# `\A...\Z`, not `^...$`: `$` also matches before a final newline, so "sync\n" passed as a name.
NAME_RE = re.compile(r"\A[a-z0-9][a-z0-9_-]*\Z")
"""A tenant or job name: lower case letters, digits, '_' and '-'."""


class StrictModel(BaseModel):
    """Strict base: unknown keys are typos, and typos are errors."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


Problem = tuple[tuple[str | int, ...], str, object]
"""A problem found by a check across fields: where (below the model), what, the value."""


def _syncd_error(loc: tuple[str | int, ...], message: str, value: object) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("syncd", "{message}", {"message": message}), loc=loc, input=value)


def raise_all(problems: list[Problem], found: ValidationError | None = None) -> None:
    """Raise one validation error holding every problem (and those of `found`, a validation
    that failed first), each located at its field below the model being validated.

    Cross-field checks live on the parent model but belong to one field; pointing at
    `jobs[1].target` instead of `jobs[1]` is the whole point of the error message, and
    saying every problem at once spares the user one run per typo. Nothing to say: no error.
    """
    details: list[InitErrorDetails] = []
    for error in found.errors(include_url=False) if found is not None else ():
        if error["type"] == "syncd":  # ours: rebuilt (pydantic knows no error type "syncd")
            details.append(_syncd_error(tuple(error["loc"]), error["msg"], error["input"]))
        else:
            ctx = {"ctx": error["ctx"]} if "ctx" in error else {}
            details.append(InitErrorDetails(type=error["type"], loc=tuple(error["loc"]), input=error["input"], **ctx))  # type: ignore[typeddict-item]
    details.extend(_syncd_error(loc, message, value) for loc, message, value in problems)
    if details:
        raise ValidationError.from_exception_data(found.title if found is not None else "syncd", details)


def raise_at(loc: tuple[str | int, ...], message: str, value: object) -> None:
    """Raise a validation error located at `loc` below the model being validated (`raise_all`)."""
    raise_all([(loc, message, value)])


# --------------------------------------------------------------------------- durations

_DURATION_RE = re.compile(r"\A(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?\Z")
_DURATION_HINT = "use e.g. 0.5s, 30s, 15m, 2h, 1d or 1h30m"


def parse_duration(value: object) -> float:
    """Turn `30s`, `15m`, `2h`, `1d`, `1h30m` (or a plain number of seconds) into seconds.

    One format for every time setting, so `every = "15m"` and `request_timeout = "30s"`
    read the same way; bare numbers stay accepted because TOML users write them.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        match = _DURATION_RE.match(text)
        if text and match and any(match.groups()):
            days, hours, minutes = (int(g) if g else 0 for g in match.groups()[:3])
            secs = float(match.group(4) or 0)
            seconds = float(((days * 24 + hours) * 60 + minutes) * 60) + secs
        else:
            try:
                seconds = float(text)
            except ValueError:
                raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})") from None
    else:
        raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})")
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})")
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds the way they are written in the file (`1h30m`), for humans."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest = int(seconds)
    if rest == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


Seconds = Annotated[float, BeforeValidator(parse_duration)]
"""A duration setting, held as seconds (float); accepts `15m`-style strings and numbers."""


# --------------------------------------------------------------------------- addresses


def _host(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


Host = Annotated[str, AfterValidator(_host)]
"""An address to listen on: not empty, spaces trimmed."""

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def local_url(host: str, port: int) -> str:
    """The URL a client on this machine dials for a server bound to host:port (a wildcard
    address is reached through loopback): the daemon's control API and the content source."""
    host = _WILDCARDS.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def trimmed_secret(value: SecretStr | None) -> SecretStr | None:
    """A token as given, trimmed: a space or the newline of a file or variable is not part of it;
    empty after trimming, or holding what no header can carry, is refused."""
    if value is None:
        return None
    text = value.get_secret_value().strip()
    if not text:
        raise ValueError("must not be empty")
    check_secret(text)
    return SecretStr(text)
