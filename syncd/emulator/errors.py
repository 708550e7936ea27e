"""The API's failure answers: `{"error": {"code": <status>, "message": ...}}`."""

from __future__ import annotations

import json

from aiohttp import web


class ApiProblem(Exception):
    """Raised by handlers; the error middleware turns it into the documented error body."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}

    def response(self) -> web.Response:
        return error_response(self.status, self.message, self.headers)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = json.dumps({"error": {"code": status, "message": message}})
    return web.Response(status=status, text=body, content_type="application/json", headers=headers)


def bad_request(message: str) -> ApiProblem:
    return ApiProblem(400, message)


def unauthorized(message: str = "missing or invalid API token") -> ApiProblem:
    return ApiProblem(401, message)


def forbidden(message: str) -> ApiProblem:
    return ApiProblem(403, message)


def not_found(message: str) -> ApiProblem:
    return ApiProblem(404, message)


def conflict(message: str) -> ApiProblem:
    return ApiProblem(409, message)
