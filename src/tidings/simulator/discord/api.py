"""Simulated Discord webhooks: ``POST /api/webhooks/{id}/{token}`` (``/api/v10/...`` too).

Checks the message as Discord does: content or embeds (50006), content at most 2,000
characters, at most 10 embeds, a title at most 256 and a description at most 4,096
characters, all embeds together at most 6,000 (50035 Invalid Form Body). Answers 200 with
the message object when ``wait=true``, else 204. Over its rate it answers 429 with
``{"message", "retry_after": <float seconds>, "global": false}``, ``Retry-After`` (whole
seconds, rounded up) and ``X-RateLimit-Scope: user``; the scripted ``global_rate_limited``
is the global limit (``"global": true``, scope ``global``). Errors are scripted by address,
the webhook's ``https://discord.com/api/webhooks/{id}/{token}``: a JSON error code such as
``10015`` (Unknown Webhook) or ``50027`` (Invalid Webhook Token). It knows a repeat by the
delivery the request names (tidings' ``X-Tidings-Delivery`` header).
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "discord"
DELIVERY_HEADER = "x-tidings-delivery"
RETRY_AFTER = 0.75  # seconds, as Discord gives it: a float
GLOBAL = "global_rate_limited"

# Discord's JSON error codes: (HTTP status, message).
ERRORS: dict[int, tuple[int, str]] = {
    0: (500, "Internal Server Error"),
    10015: (404, "Unknown Webhook"),
    50027: (401, "Invalid Webhook Token"),
    50006: (400, "Cannot send an empty message"),
    50035: (400, "Invalid Form Body"),
    50013: (403, "Missing Permissions"),
    50001: (403, "Missing Access"),
    50083: (400, "Operation not allowed on an archived thread"),
    40005: (413, "Request entity too large"),
}


class SimulatedDiscord:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/webhooks/{id}/{token}", self.execute, methods=["POST"]),
            Route("/api/v{version:int}/webhooks/{id}/{token}", self.execute, methods=["POST"]),
        ]

    async def execute(self, request: Request) -> Response:
        hook, token = request.path_params["id"], request.path_params["token"]
        address = f"https://discord.com/api/webhooks/{hook}/{token}"
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return error(50035)
        if not isinstance(payload, dict):
            return error(50035)
        problem = _problem(payload)
        if problem is not None:
            return error(problem)
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return JSONResponse({"message": "Service Unavailable", "code": 0}, status_code=503)
        if admission in (RATE_LIMITED, GLOBAL):
            return throttled(admission == GLOBAL)
        if admission != OK:
            return error(int(admission))
        self.state.record(address, request.headers.get(DELIVERY_HEADER), payload)
        if request.query_params.get("wait", "").lower() != "true":
            return Response(status_code=204)
        return JSONResponse(
            {
                "id": str(secrets.randbelow(10**18) + 10**18),
                "type": 0,
                "channel_id": "1100000000000000001",
                "webhook_id": hook,
                "content": payload.get("content", ""),
                "embeds": payload.get("embeds", []),
            }
        )


def _problem(payload: dict[str, Any]) -> int | None:
    content, embeds = payload.get("content") or "", payload.get("embeds") or []
    if not content and not embeds:
        return 50006
    if not isinstance(content, str) or len(content) > 2000:
        return 50035
    if not isinstance(embeds, list) or len(embeds) > 10:
        return 50035
    total = 0
    for embed in embeds:
        if not isinstance(embed, dict):
            return 50035
        title, description = str(embed.get("title", "")), str(embed.get("description", ""))
        if len(title) > 256 or len(description) > 4096:
            return 50035
        total += len(title) + len(description)
    return 50035 if total > 6000 else None


def error(code: int) -> JSONResponse:
    status, text = ERRORS.get(code, (400, "Unknown error"))
    return JSONResponse({"message": text, "code": code}, status_code=status)


def throttled(is_global: bool) -> JSONResponse:
    headers = {
        "retry-after": str(math.ceil(RETRY_AFTER)),
        "x-ratelimit-scope": "global" if is_global else "user",
    }
    if is_global:
        headers["x-ratelimit-global"] = "true"
    body = {
        "message": "You are being rate limited.",
        "retry_after": RETRY_AFTER,
        "global": is_global,
    }
    return JSONResponse(body, status_code=429, headers=headers)


ERROR_NAMES = ErrorNames(
    frozenset({*map(str, ERRORS), GLOBAL}),
    r"[1-9]\d{4}",
    "any other Discord JSON error code (five digits)",
)
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedDiscord
