"""Simulated Slack: ``POST /api/chat.postMessage`` and incoming webhooks
``POST /services/{team}/{bot}/{secret}``.

The Web API checks the bearer token (``not_authed``, ``invalid_auth``) and the message as
Slack does: a channel, text or blocks, at most 50 blocks of the kinds it knows (a header's
plain text at most 150 characters, a section's text at most 3000), text at most 40,000
characters, metadata with an event type and an object payload. It answers HTTP 200 with
``{"ok": true, "channel", "ts", "message"}`` or ``{"ok": false, "error"}``, 429 with
Retry-After when over its rate. A webhook answers 200 ``ok`` or an HTTP status with the
error as plain text. Errors are scripted by address: the conversation id, or the webhook's
``https://hooks.slack.com/services/...`` URL. Like Slack, it has no idempotency key; it
knows a repeat by the delivery the request names (tidings' ``X-Tidings-Delivery`` header).
"""

from __future__ import annotations

import hmac
import json
import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "slack"
DELIVERY_HEADER = "x-tidings-delivery"
CONVERSATION = re.compile(r"[CDGUW][A-Z0-9]{2,31}")
BLOCK_TYPES = frozenset({"header", "section", "context", "divider", "actions", "image"})
EVENT_TYPE = re.compile(r"[a-zA-Z0-9_]{1,255}")

# Web API errors the simulator answers (HTTP status; 200 unless said otherwise).
API_ERRORS: dict[str, int] = {
    "channel_not_found": 200,
    "not_in_channel": 200,
    "is_archived": 200,
    "msg_too_long": 200,
    "no_text": 200,
    "invalid_blocks": 200,
    "invalid_auth": 200,
    "not_authed": 200,
    "account_inactive": 200,
    "token_revoked": 200,
    "missing_scope": 200,
    "restricted_action": 200,
    "internal_error": 200,
    "fatal_error": 200,
    "service_unavailable": 503,
    "ratelimited": 429,
}
# Incoming webhook errors: the status Slack answers with.
WEBHOOK_ERRORS: dict[str, int] = {
    "invalid_payload": 400,
    "no_text": 400,
    "user_not_found": 400,
    "action_prohibited": 403,
    "posting_to_general_channel_denied": 403,
    "invalid_token": 403,
    "team_disabled": 403,
    "no_active_hooks": 410,
    "channel_not_found": 404,
    "no_service": 404,
    "no_team": 404,
    "channel_is_archived": 410,
    "rollup_error": 500,
}


class SimulatedSlack:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        self.token = sim.config.slack_bot_token

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/chat.postMessage", self.post_message, methods=["POST"]),
            Route("/services/{team}/{bot}/{secret}", self.webhook, methods=["POST"]),
        ]

    async def post_message(self, request: Request) -> Response:
        auth = _bearer(request)
        if auth is None:
            return _api_error("not_authed")
        if not hmac.compare_digest(auth.encode(), self.token.encode()):
            return _api_error("invalid_auth")
        payload = await _payload(request)
        if payload is None:
            return _api_error("invalid_arguments")
        channel = str(payload.get("channel") or "")
        if not CONVERSATION.fullmatch(channel):
            return _api_error("channel_not_found")
        problem = _message_problem(payload) or _metadata_problem(payload.get("metadata"))
        if problem is not None:
            return _api_error(problem)
        admission = await self.state.admit(channel)
        if admission != OK:
            return _api_refusal(admission)
        self.state.record(channel, request.headers.get(DELIVERY_HEADER), payload)
        # A message to a user id goes to the bot's direct message with that user.
        posted = "D" + channel[1:] if channel[0] in "UW" else channel
        ts = f"{time.time():.6f}"
        message = {"type": "message", "text": payload.get("text", ""), "ts": ts, "bot_id": "B0SIM"}
        return JSONResponse({"ok": True, "channel": posted, "ts": ts, "message": message})

    async def webhook(self, request: Request) -> Response:
        address = f"https://hooks.slack.com{request.url.path}"
        if not request.headers.get("content-type", "").startswith("application/json"):
            return PlainTextResponse("invalid_payload", status_code=400)
        payload = await _payload(request)
        if payload is None:
            return PlainTextResponse("invalid_payload", status_code=400)
        problem = _message_problem(payload)
        if problem is not None:
            status = 400
            return PlainTextResponse(problem if problem == "no_text" else "invalid_payload", status)
        admission = await self.state.admit(address)
        if admission == OUTAGE:
            return PlainTextResponse("service_unavailable", status_code=503)
        if admission == RATE_LIMITED:
            return PlainTextResponse("rate_limited", status_code=429, headers={"retry-after": "1"})
        if admission != OK:
            return PlainTextResponse(admission, status_code=WEBHOOK_ERRORS.get(admission, 400))
        self.state.record(address, request.headers.get(DELIVERY_HEADER), payload)
        return PlainTextResponse("ok")


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


async def _payload(request: Request) -> dict[str, Any] | None:
    try:
        payload = json.loads(await request.body())
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _message_problem(payload: dict[str, Any]) -> str | None:
    """The Slack error for a message it would refuse, or None."""
    text, blocks = payload.get("text"), payload.get("blocks")
    if not text and not blocks:
        return "no_text"
    if text is not None and (not isinstance(text, str) or len(text) > 40_000):
        return "msg_too_long"
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "invalid_blocks"
    return next((p for p in map(_block_problem, blocks) if p), None)


def _block_problem(block: Any) -> str | None:
    if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
        return "invalid_blocks"
    text, kind = block.get("text"), block["type"]
    if kind not in ("header", "section") or (kind == "section" and text is None):
        return None
    kinds = ("plain_text",) if kind == "header" else ("mrkdwn", "plain_text")
    limit = 150 if kind == "header" else 3000
    if not isinstance(text, dict) or text.get("type") not in kinds:
        return "invalid_blocks"
    return None if 0 < len(str(text.get("text", ""))) <= limit else "invalid_blocks"


def _metadata_problem(metadata: Any) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("event_payload"), dict):
        return "invalid_metadata_format"
    if not EVENT_TYPE.fullmatch(str(metadata.get("event_type", ""))):
        return "invalid_metadata_format"
    return None


def _api_error(error: str) -> JSONResponse:
    status = API_ERRORS.get(error, 200)
    headers = {"retry-after": "1"} if status == 429 else None
    return JSONResponse({"ok": False, "error": error}, status_code=status, headers=headers)


def _api_refusal(admission: str) -> Response:
    if admission == OUTAGE:
        return _api_error("service_unavailable")
    if admission == RATE_LIMITED:
        return _api_error("ratelimited")
    return _api_error(admission)


ERROR_NAMES = ErrorNames(
    frozenset(API_ERRORS) | frozenset(WEBHOOK_ERRORS),
    r"[a-z_]{3,60}",
    "any other Slack error code (snake_case, e.g. user_not_found)",
)
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedSlack
