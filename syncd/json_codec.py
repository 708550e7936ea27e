"""JSON for the hot paths (answers decoded, rows encoded and hashed), with orjson.

Why: the standard library's encoder and decoder were a tenth of a crawl's CPU (every object
encoded twice, for its row and its hash; every answer decoded); orjson does the same in about
a fifth of the time. Why the fallbacks: the mirror's hashes must not change under a user's
existing mirror (an unchanged object would read as "updated"), and nothing the standard library
accepted may be refused now. So each function gives what the standard library gave:
- `loads`: orjson first for text up to `FAST_MAX` bytes (it holds about 15 times its input
  while it decodes, the standard library about once: a large answer or stored page goes to
  the standard library, whose memory the answer budget and the export count on); whatever
  it refuses (UTF-16, a lone surrogate, NaN, nesting deeper than 1024) goes to the standard
  library, which decides as before. Where orjson is more
  liberal than it should be (an integer beyond 64 bits, which it reads as a float), the
  answer is decoded by the standard library too, so that no digit is lost.
- `canonical`: the key-sorted compact text the hashes have always been taken of; orjson's
  output differs from it only in the spelling of some small floats (`0.00001` for `1e-05`)
  and refuses integers beyond 64 bits: those objects are encoded by the standard library.
- `compact`: the object as received, compact, for a row's `data`; the same rules.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["REFUSED", "canonical", "canonical_bytes", "compact", "loads", "loads_fast"]

REFUSED = object()
"""What `loads_fast` returns for text it leaves to the standard library."""
_SORTED = orjson.OPT_SORT_KEYS
FAST_MAX = 256 << 10
"""The longest text orjson decodes (see the module docstring): most pages of a listing are
smaller, and its transient (15 times the text) stays under 4 MB; at 1 MB the crawl of 430,000
objects peaked 11 MB higher, for no CPU saved."""
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""A translation table: every digit to `0`, every other byte to a space."""
_LONG = b"0" * 19
"""19 digits in a row: maybe an integer beyond 64 bits (-9223372036854775809 has 19; in a
string too: harmless, the standard library decodes that text)."""
_CHUNK = 1 << 20
_DIGIT = frozenset(b"0123456789")


def loads(raw: bytes | bytearray | str) -> Any:
    """The JSON value of `raw`; ValueError for text that is not JSON, RecursionError for
    nesting too deep for the standard library (callers say so in words)."""
    value = loads_fast(raw)
    return json.loads(raw) if value is REFUSED else value


def loads_fast(raw: bytes | bytearray | str) -> Any:
    """orjson's value of `raw`, or `REFUSED` where the standard library must decide."""
    if len(raw) > FAST_MAX:
        return REFUSED
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return REFUSED
    return REFUSED if _has_long_number(raw) else value


def canonical(value: Any) -> str:
    """Key-sorted, compact JSON, non-ASCII as it is: the text a content hash is taken of."""
    return canonical_bytes(value).decode()


def canonical_bytes(value: Any) -> bytes:
    """`canonical` as UTF-8 bytes (what is hashed)."""
    return _encoded(value, sort_keys=True)


def compact(value: Any) -> str:
    """Compact JSON in the object's own key order: a row's `data` as stored."""
    return _encoded(value, sort_keys=False).decode()


def _encoded(value: Any, *, sort_keys: bool) -> bytes:
    """orjson's compact UTF-8, or the standard library's where the two would differ."""
    try:
        out = orjson.dumps(value, option=_SORTED if sort_keys else None)
    except TypeError:
        out = None
    if out is None or _spelt_otherwise(out):
        return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False).encode()
    return out


def _spelt_otherwise(out: bytes) -> bool:
    """Whether orjson's text holds a float the standard library spells otherwise: `1e-7`
    (`1e-07`: one exponent digit) or `0.00001` (`1e-05`). C-speed `find`s: `e-` is common in
    text ("change-request"), a digit before it and one alone after it are not."""
    at = out.find(b"e-")
    while at != -1:
        if at and out[at - 1] in _DIGIT and at + 2 < len(out) and out[at + 2] in _DIGIT:
            if at + 3 == len(out) or out[at + 3] not in _DIGIT:
                return True
        at = out.find(b"e-", at + 2)
    at = out.find(b"0.0000")
    while at != -1:
        if at == 0 or (out[at - 1] not in _DIGIT and out[at - 1] != 0x2E):
            return True
        at = out.find(b"0.0000", at + 6)
    return False


def _has_long_number(raw: bytes | bytearray | str) -> bool:
    """Whether `raw` has a run of 19 digits (a C-speed look: translated, then searched), a
    megabyte at a time so that a large answer is not copied whole."""
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) <= _CHUNK:
        return _LONG in data.translate(_DIGITS)
    view = memoryview(data)
    for start in range(0, len(data), _CHUNK):
        if _LONG in bytes(view[start : start + _CHUNK + len(_LONG) - 1]).translate(_DIGITS):
            return True
    return False
