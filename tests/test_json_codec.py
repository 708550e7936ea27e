"""The fast JSON of the hot paths gives what the standard library gave (`syncd.json_codec`).

Why it matters: a content hash or a link's id taken of a different text would make every
unchanged object of an existing mirror read as "updated" (or a link as new) after an upgrade;
a value decoded differently would be stored differently.
"""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd import catalog, json_codec
from syncd.api.answers import loads, loads_consuming
from syncd.state.rows import content_hash


def stdlib_canonical(value: Any) -> str:
    """The text hashes were taken of before `syncd.json_codec`."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_the_canonical_text_is_the_standard_librarys(value: Any) -> None:
    assert json_codec.canonical(value) == stdlib_canonical(value)
    assert json_codec.compact(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_an_answer_decodes_as_the_standard_library_decodes_it(value: Any) -> None:
    raw = json.dumps(value).encode()
    assert json_codec.loads(raw) == json.loads(raw)
    assert loads_consuming(bytearray(raw)) == json.loads(raw)


@pytest.mark.parametrize(
    "value",
    [1e-05, 1e-07, 9.99e-05, -2.5e-06, 0.0001, 1e16, 1e22, 5e-324, -0.0, 2**64, 2**64 - 1, -(2**63) - 1, 10**30,
     "\u0000\u001f\u007f\u2028 \"\\/é😀", {"b": [1e-7, {"z": 10**25}], "a": "x"}],
)
def test_the_values_where_orjson_spells_otherwise_fall_back(value: Any) -> None:
    """Small floats (orjson: `0.00001`, `1e-7`) and integers beyond 64 bits (orjson refuses
    them, or reads them as floats) take the standard library's way."""
    assert json_codec.canonical(value) == stdlib_canonical(value)
    assert json_codec.canonical_bytes(value) == stdlib_canonical(value).encode()
    raw = json.dumps(value).encode()
    decoded = json_codec.loads(raw)
    assert decoded == json.loads(raw)
    assert type(decoded) is type(json.loads(raw))


def test_a_content_hash_is_the_one_an_older_mirror_holds() -> None:
    data = {"id": "p1", "title": "Ünïcode ✓", "size": 12, "ratio": 1e-05, "updatedAt": "2026-01-01T00:00:00Z"}
    kept = {key: value for key, value in data.items() if key != "updatedAt"}
    assert content_hash(data, {"updatedAt"}) == hashlib.sha256(stdlib_canonical(kept).encode()).hexdigest()
    assert catalog.content_id(data) == "h" + hashlib.sha256(stdlib_canonical(data).encode()).hexdigest()[:20]


@pytest.mark.parametrize(
    "raw",
    [b"NaN", b'"\\ud800"', '{"a": 1}'.encode("utf-16"), b'{"n": 123456789012345678901234567890}', b"[1.5, -Infinity]"],
)
def test_what_orjson_refuses_the_standard_library_decides(raw: bytes) -> None:
    """NaN, a lone surrogate, UTF-16, a long integer: accepted as before, with every digit."""
    assert repr(loads(raw)) == repr(json.loads(raw))
    assert repr(loads_consuming(bytearray(raw))) == repr(json.loads(raw))


def test_text_that_is_not_json_is_a_value_error_and_deep_nesting_too() -> None:
    with pytest.raises(ValueError):
        loads(b'{"a": ')
    with pytest.raises(ValueError, match="nested too deeply"):
        loads(b"[" * 100_000)


def test_a_long_number_past_the_first_megabyte_is_found() -> None:  # (the check's own chunks)
    """The check reads a large text a megabyte at a time, runs across the seams included."""
    pad = " " * ((1 << 20) - 10)
    raw = ('{"pad": "' + pad + '", "n": 123456789012345678901234}').encode()
    assert json_codec._has_long_number(raw)
    assert not json_codec._has_long_number(raw.replace(b"123456789012345678901234", b"123456789012345678"))


def test_a_large_text_is_decoded_in_the_memory_of_the_standard_library() -> None:
    """orjson holds about 15 times its input while decoding: past FAST_MAX the standard
    library decodes, and the peak stays near the text's size (what the export counts on)."""
    text = json.dumps({"markdown": "Plain text é ü\n" * 50_000, "n": 1})
    assert len(text) > json_codec.FAST_MAX
    tracemalloc.start()
    try:
        assert json_codec.loads(text)["n"] == 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(text)
