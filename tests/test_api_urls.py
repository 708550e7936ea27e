"""A request's query, made without yarl (`syncd.api.urls.query_string`), is the one yarl's
`update_query` made: the same bytes on the wire for every key and value, page tokens of any
format included (the spec promises nothing about their characters)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from syncd.api import TenantClient
from syncd.api.urls import query_values

values = st.one_of(st.text(), st.integers(), st.booleans(), st.none(), st.lists(st.text(), max_size=3))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(min_size=1), values, min_size=1, max_size=4))
async def test_a_query_is_the_one_yarl_made(params: dict[str, Any]) -> None:
    client = TenantClient("t", "https://api.example.com/v1", "query-test-secret-4f9c2a")
    url, shown = client._url("GET", "/v1/spaces/s1/content", params)
    expected = URL("https://api.example.com/v1/spaces/s1/content", encoded=True).update_query(query_values(params))
    assert str(url) == str(expected)
    assert url.query == expected.query
    assert shown == "/v1/spaces/s1/content"


async def test_a_page_token_of_every_ascii_character_goes_as_yarl_sent_it() -> None:
    client = TenantClient("t", "http://127.0.0.1:9/", "query-test-secret-4f9c2a")
    token = "".join(chr(code) for code in range(32, 127)) + "é€😀\u2028"
    url, _ = client._url("GET", "/v1/orgs", {"limit": 1000, "page": token, "flag": True, "none": None})
    expected = URL("http://127.0.0.1:9/v1/orgs", encoded=True).update_query({"limit": "1000", "page": token, "flag": "true"})
    assert str(url) == str(expected) and url.query["page"] == token
