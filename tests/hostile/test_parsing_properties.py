"""Issue 11: the answer parser and the paging code fed random and adversarial JSON (hypothesis).

Whatever the body, only the documented outcomes come out: data, or a `MalformedResponse`
(2xx bodies), an `ApiError` subclass (other statuses), `ValueError`/`TypeError` from the
envelope checks (which the client turns into `MalformedResponse`), a `PagingError` from the
paginator. Never a RecursionError, a KeyError, an AttributeError or any other traceback; and
whatever is kept of an error stays a few KB.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from syncd.api import ApiError, MalformedResponse, PagingError, Paginator, TenantClient, check_envelope, next_token
from syncd.api.answers import error_body as _error_body
from syncd.api.errors import MESSAGE_LIMIT
from tests.hostile.hostile_server import ESCAPES, HostileServer, deep_json
from syncd.config import RetryConfig

DEEP = 200_000
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = st.sampled_from(["items", "next", "page", "error", "code", "message", "id", "pages", ""]) | st.text(max_size=8)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(ESCAPES)
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=30,
)
ENVELOPES = st.fixed_dictionaries(
    {"items": st.lists(VALUES, max_size=4) | VALUES},
    optional={
        "next": st.none() | VALUES | st.fixed_dictionaries({"page": VALUES}) | st.fixed_dictionaries({"page": st.text(max_size=20)}),
    },
)


def _nested(depth: int, opener: bytes, closer: bytes) -> bytes:
    return opener * depth + closer * depth


ADVERSARIAL = [
    _nested(DEEP, b"[", b"]"),
    _nested(DEEP, b'{"a":', b"}"),
    b'{"items": ' + _nested(DEEP, b"[", b"]") + b"}",
    b'{"items": [], "next": {"page": ' + _nested(DEEP, b"[", b"]") + b"}}",
    b'{"error": ' + _nested(DEEP, b'{"message":', b"}") + b"}",
    b"[" * DEEP,
    b"1" * 5000,
    b'{"items": [], "next": {"page": ' + b"9" * 5000 + b"}}",
    b"NaN",
    b'{"items": [], "next": {"page": Infinity}}',
    b'{"items": [], "next": {"page": NaN}}',
    b"\xef\xbb\xbf{}",
    b"\xff\xfe{\x00}\x00",
    b'{"items": [}',
    b"<html><title>502 Bad Gateway</title></html>",
    b'"' + b"\\u0000" * 1000 + b'"',
    b'{"error": {"code": true, "message": ["x"]}}',
    b'{"error": {"code": 1e999, "message": "' + "\x1b[2J[/bold]".encode() * 1000 + b'"}}',
    b" \t\r\n ",
    b"",
]

RAW = (
    st.binary(max_size=200)
    | VALUES.map(lambda v: json.dumps(v).encode())
    | ENVELOPES.map(lambda v: json.dumps(v).encode())
    | ENVELOPES.map(lambda v: json.dumps(v).encode()).flatmap(lambda b: st.integers(0, len(b)).map(lambda n: b[:n]))
    | st.sampled_from(ADVERSARIAL)
)


@pytest.fixture(scope="module")
def client() -> TenantClient:
    return TenantClient("prop", "http://127.0.0.1:9", "property-token-1234")


def _bounded(error: ApiError) -> None:
    assert len(error.message) <= MESSAGE_LIMIT + 100
    assert len(str(error)) < 4 * 1024
    assert "property-token-1234" not in str(error)


@SETTINGS
@given(raw=RAW, method=st.sampled_from(["GET", "PUT", "POST", "DELETE"]), status=st.sampled_from([200, 201, 204]))
@example(raw=ADVERSARIAL[0], method="GET", status=200)
def test_decoding_a_2xx_body_gives_data_or_one_malformed_response(client: TenantClient, raw: bytes, method: str, status: int) -> None:
    # The standard library's parser is the oracle: what decodes is what it reads, and what is
    # refused unchecked is what it cannot read (or an empty body where data was due).
    parsed, expected = _stdlib(raw)
    blank = not raw.strip()
    for validate in (None, check_envelope):
        try:
            decoded = client._decode(raw, status, method, "/v1/x", validate)
        except MalformedResponse as error:
            _bounded(error)
            if validate is None:
                assert (blank and method == "GET" and status != 204) or (not blank and not parsed), raw[:80]
            continue
        if blank:
            assert decoded is None
        else:
            assert parsed and _same(decoded, expected), raw[:80]
        if validate is not None:
            assert isinstance(decoded, dict) and "items" in decoded


def _stdlib(raw: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(raw)
    except (ValueError, RecursionError):
        return False, None


def _same(left: Any, right: Any) -> bool:
    """Equal as JSON (NaN, which the parser accepts, equals itself here)."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


@SETTINGS
@given(raw=RAW, status=st.sampled_from([400, 401, 403, 404, 409, 410, 429, 500, 501, 502, 503]))
def test_an_error_answer_of_any_body_becomes_one_bounded_api_error(client: TenantClient, raw: bytes, status: int) -> None:
    code, message = _error_body(raw)
    assert code is None or isinstance(code, int | str)
    assert message is None or isinstance(message, str)
    error = client._status_error(status, raw, {"Retry-After": "x"}, "GET", "/v1/x")
    assert isinstance(error, ApiError) and error.status == status
    _bounded(error)


@SETTINGS
@given(data=VALUES | ENVELOPES)
def test_envelope_checks_raise_only_value_or_type_errors(data: Any) -> None:
    try:
        check_envelope(data)
    except (ValueError, TypeError):
        return
    token = next_token(data)
    assert token is None or (isinstance(token, str) and token)


@SETTINGS
@given(pages=st.lists(ENVELOPES, min_size=1, max_size=30), max_pages=st.integers(1, 40))
def test_the_paginator_ends_or_raises_a_paging_error(pages: list[Any], max_pages: int) -> None:
    pager = Paginator(path="/v1/x", max_pages=max_pages)
    for page in pages:
        try:
            check_envelope(page)
        except (ValueError, TypeError):
            continue  # the client retries, then raises MalformedResponse: never reaches update
        try:
            items = pager.update(page)
        except PagingError as error:
            assert pager.done and pager.pages <= max_pages
            _bounded(error)
            return
        assert isinstance(items, list)
        if pager.done:
            return
        assert pager.token is not None and "page" in pager.params()


@SETTINGS
@given(tokens=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=60))
def test_a_repeated_token_is_always_caught(tokens: list[str]) -> None:
    pager = Paginator(path="/v1/x", max_pages=1000)
    seen: set[str] = set()
    for token in tokens:
        try:
            pager.update({"items": [], "next": {"page": token}})
        except PagingError:
            assert token in seen
            return
        assert token not in seen
        seen.add(token)


@pytest.mark.parametrize("body", [b"[" * DEEP + b"]" * DEEP, b'{"items": ' + b"[" * DEEP + b"]" * DEEP + b"}"], ids=["array", "items"])
async def test_a_200k_deep_answer_is_one_malformed_response_end_to_end(body: bytes) -> None:
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", deep_json(1, opener=body, closer=b""))
        hostile.on("/v1/orgs/x", deep_json(DEEP, status=500, opener=b'{"error":', closer=b"}"))
        retry = RetryConfig(max_attempts=2, initial_wait=0.01, max_wait=0.02)
        async with TenantClient("src", hostile.url, "deep-token-1", retry=retry) as api:
            with pytest.raises(MalformedResponse, match="nested too deeply") as caught:
                async for _ in api.paginate("/v1/orgs"):
                    pass
            _bounded(caught.value)
            with pytest.raises(ApiError) as server:
                await api.get_json("/v1/orgs/x")
    assert server.value.status == 500
    _bounded(server.value)
