"""Simulated Teams Workflows webhooks: a Power Automate request trigger at
``POST /workflows/{id}/triggers/manual/paths/invoke`` (Logic Apps' URLs) and
``POST /powerautomate/automations/direct/workflows/{id}/triggers/manual/paths/invoke``
(Power Platform's).

The URL must carry ``api-version`` and its signature ``sig`` (401 otherwise). The body must
be what the "Post to a channel when a webhook request is received" template takes: a
``message`` whose attachments are Adaptive Cards (``AdaptiveCard``, version 1.0-1.5, a body
of known elements, each TextBlock with text), at most 28 KB (Teams' limit), else 400
``TriggerInputSchemaMismatch`` (413 over the size): stricter than the real trigger, which
accepts and lets the run fail later. Success is 202 with ``x-ms-workflow-run-id``. Over its
rate, 429 with Retry-After. Errors are scripted by workflow id with an HTTP status
(``404`` WorkflowNotFound, ``401`` a wrong signature, ``409`` the workflow turned off...).
It knows a repeat by tidings' ``X-Tidings-Delivery`` header.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "teams"
DELIVERY_HEADER = "x-tidings-delivery"
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
VERSIONS = frozenset({"1.0", "1.1", "1.2", "1.3", "1.4", "1.5"})
ELEMENTS = frozenset(
    {"TextBlock", "RichTextBlock", "Image", "ImageSet", "Container", "ColumnSet", "FactSet",
     "ActionSet", "Table"}
)  # fmt: skip
MAX_BYTES = 28 * 1024
CODES = {
    400: "TriggerInputSchemaMismatch",
    401: "DirectApiInvalidAuthorizationScheme",
    403: "AuthorizationFailed",
    404: "WorkflowNotFound",
    409: "WorkflowTriggerIsNotEnabled",
    413: "MessageSizeTooBig",
    429: "WorkflowRequestsThrottled",
    500: "InternalServerError",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


class SimulatedTeams:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES

    def routes(self) -> list[BaseRoute]:
        invoke = "/workflows/{id}/triggers/manual/paths/invoke"
        return [
            Route(invoke, self.invoke, methods=["POST"]),
            Route(f"/powerautomate/automations/direct{invoke}", self.invoke, methods=["POST"]),
        ]

    async def invoke(self, request: Request) -> Response:
        workflow = request.path_params["id"]
        if not request.query_params.get("sig") or not request.query_params.get("api-version"):
            return error(401, "the request must be signed: sig and api-version in the URL")
        raw = await request.body()
        if len(raw) > MAX_BYTES:
            return error(413, f"the message is {len(raw)} bytes; Teams takes {MAX_BYTES}")
        try:
            payload = json.loads(raw)
        except ValueError:
            return error(400, "the body is not JSON")
        problem = message_problem(payload)
        if problem is not None:
            return error(400, problem)
        admission = await self.state.admit(workflow)
        if admission == OUTAGE:
            return error(503, "the service is unavailable")
        if admission == RATE_LIMITED:
            return error(429, "the workflow's trigger is throttled", {"retry-after": "1"})
        if admission != OK:
            return error(int(admission), "scripted")
        self.state.record(workflow, request.headers.get(DELIVERY_HEADER), payload)
        run = "0858" + secrets.token_hex(12).upper()
        return Response(status_code=202, headers={"x-ms-workflow-run-id": run})


def message_problem(payload: Any) -> str | None:
    """Why the trigger's schema (and Teams) would refuse the message, or None."""
    if not isinstance(payload, dict) or payload.get("type") != "message":
        return "the body must be a message (type: message)"
    attachments = payload.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return "the message must have attachments"
    for attachment in attachments:
        if not isinstance(attachment, dict) or attachment.get("contentType") != CARD_TYPE:
            return f"each attachment must be an Adaptive Card ({CARD_TYPE})"
        problem = card_problem(attachment.get("content"))
        if problem is not None:
            return problem
    return None


def card_problem(card: Any) -> str | None:
    if not isinstance(card, dict) or card.get("type") != "AdaptiveCard":
        return "content must be an AdaptiveCard"
    if card.get("version") not in VERSIONS:
        return "the card's version must be 1.0 to 1.5"
    body = card.get("body")
    if not isinstance(body, list) or not body:
        return "the card's body must have elements"
    for element in body:
        if not isinstance(element, dict) or element.get("type") not in ELEMENTS:
            return "an element of the card's body is of no known type"
        text = element.get("text")
        if element["type"] == "TextBlock" and (not isinstance(text, str) or not text):
            return "a TextBlock must have text"
    return None


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"code": CODES.get(status, "Error"), "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


ERROR_NAMES = ErrorNames(frozenset(map(str, CODES)), r"[45]\d\d", "any HTTP status from 400 to 599")
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedTeams
