"""`GET /v1/user`: the user a token belongs to (OpenAPI `getAuthenticatedUser`)."""

from __future__ import annotations

from syncd.emulator.server import RunningEmulator
from tests.conftest import Api


async def test_the_authenticated_user_is_the_token_s_owner(api: Api, emulator: RunningEmulator) -> None:
    status, admin = await api.get("/v1/user")
    assert status == 200
    assert (admin["object"], admin["displayName"], admin["email"]) == ("user", "Emulator Admin", "admin@emulator.test")
    assert admin["urls"]["location"].endswith(f"/v1/users/{admin['id']}")
    status, owner = await api.as_token("org1-token").get("/v1/user")
    assert status == 200 and (owner["displayName"], owner["email"]) == ("Owner 1", "owner@org1.example.com")
    assert owner["id"] != admin["id"]
    status, error = await api.as_token("not-a-token").get("/v1/user")
    assert status == 401 and error["error"]["code"] == 401
