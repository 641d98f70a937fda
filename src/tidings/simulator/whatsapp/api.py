"""Simulated WhatsApp Cloud API: ``POST /{version}/{phone_number_id}/messages``.

Checks the bearer token (190, HTTP 401) and the phone number id (100), then the message
as Meta does: ``messaging_product`` whatsapp, a ``to`` of digits, and either a template
that is approved for its language with as many body parameters as it has (132001, 132000),
or free text, which is taken only inside the recipient's 24-hour customer service window
(``windows``: when each number last wrote in, through ``user_writes``, which also posts the
signed ``messages`` webhook; 131047 otherwise). It answers Meta's message JSON
with a ``wamid``, then posts status webhooks (``sent``, then ``delivered`` and ``read``, or
``failed`` with an error code, from the behaviour's ``reports``: ``read``,
``failed:<code>``) to ``whatsapp_webhook_url``, signed ``X-Hub-Signature-256`` with the app
secret, each echoing the message's ``biz_opaque_callback_data``. Errors are scripted by
number (digits, no ``+``) with a Cloud API error code. It knows a repeat by tidings'
``X-Tidings-Delivery`` header.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.reports import Reporter
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "whatsapp"
DELIVERY_HEADER = "x-tidings-delivery"
WINDOW_SECONDS = 24 * 3600  # the customer service window a user's message opens
DIGITS = re.compile(r"[1-9][0-9]{6,14}")
# Cloud API error codes: (HTTP status, title).
ERRORS: dict[int, tuple[int, str]] = {
    190: (401, "Access token has expired"),
    100: (400, "Invalid parameter"),
    131000: (500, "Something went wrong"),
    131026: (400, "Message undeliverable"),
    131047: (400, "Re-engagement message"),
    131049: (400, "Meta chose not to deliver"),
    131051: (400, "Unsupported message type"),
    131056: (400, "(Business Account, Consumer Account) pair rate limit hit"),
    130429: (400, "Rate limit hit"),
    132000: (400, "Number of parameters does not match the expected number of params"),
    132001: (404, "Template name does not exist in the translation"),
    368: (403, "Temporarily blocked for policies violations"),
}


class SimulatedWhatsApp:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        config = sim.config
        self.token = config.whatsapp_access_token
        self.phone_number_id = config.whatsapp_phone_number_id
        self.app_secret = config.whatsapp_app_secret
        self.webhook_url = config.whatsapp_webhook_url
        # Approved templates: "name:language" -> the number of body parameters.
        self.templates: dict[str, int] = dict(config.whatsapp_templates)
        # When each number last wrote in (epoch seconds): free text only within 24 hours.
        self.windows: dict[str, float] = {}
        self.reporter = Reporter(self.state, self._post)

    def routes(self) -> list[BaseRoute]:
        return [Route("/{version}/{phone}/messages", self.send, methods=["POST"])]

    async def send(self, request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.encode(), self.token.encode()
        ):
            return error(190)
        if request.path_params["phone"] != self.phone_number_id:
            return error(100, "Unsupported post request: unknown phone number id")
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return error(100, "the body is not JSON")
        problem = self._problem(payload)
        if problem is not None:
            return error(*problem)
        to = payload["to"]
        admission = await self.state.admit(to)
        if admission == OUTAGE:
            return error(131000, "service unavailable", status=503)
        if admission == RATE_LIMITED:
            return error(130429)
        if admission != OK:
            return error(int(admission))
        self.state.record(to, request.headers.get(DELIVERY_HEADER), payload)
        wamid = "wamid." + secrets.token_urlsafe(24)
        self._report(wamid, to, payload.get("biz_opaque_callback_data"))
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid, "message_status": "accepted"}],
            }
        )

    def _problem(self, payload: Any) -> tuple[int, str] | None:
        if not isinstance(payload, dict) or payload.get("messaging_product") != "whatsapp":
            return 100, "messaging_product must be whatsapp"
        if not DIGITS.fullmatch(str(payload.get("to", "")).removeprefix("+")):
            return 100, "to must be a phone number"
        payload["to"] = str(payload["to"]).removeprefix("+")
        kind = payload.get("type", "text")
        if kind == "text":
            text = payload.get("text")
            body = text.get("body") if isinstance(text, dict) else None
            if not isinstance(body, str) or not body or len(body) > 4096:
                return 100, "text.body must be 1 to 4096 characters"
            if time.time() - self.windows.get(payload["to"], -WINDOW_SECONDS) >= WINDOW_SECONDS:
                return 131047, (
                    "Message failed to send because more than 24 hours have passed since the "
                    "customer last replied to this number."
                )
            return None
        if kind != "template":
            return 131051, f"Unsupported message type {kind}"
        return self._template_problem(payload.get("template"))

    def _template_problem(self, template: Any) -> tuple[int, str] | None:
        if not isinstance(template, dict):
            return 100, "template must be an object"
        language = template.get("language")
        code = language.get("code") if isinstance(language, dict) else None
        expected = self.templates.get(f"{template.get('name')}:{code}")
        if expected is None:
            return 132001, f"template name ({template.get('name')}) does not exist in {code}"
        given = 0
        for component in template.get("components") or []:
            if isinstance(component, dict) and component.get("type") == "body":
                parameters = component.get("parameters") or []
                if not all(_text_parameter(p) for p in parameters):
                    return 100, "each body parameter must be text"
                given += len(parameters)
        if given != expected:
            return 132000, f"expected {expected} parameters, got {given}"
        return None

    def user_writes(self, number: str, text: str, at: float | None = None) -> None:
        """``number`` (digits) sends ``text`` to the business at ``at`` (default now): its
        window opens from then, and the ``messages`` webhook is posted as Meta does (``at``
        in the past: a webhook Meta delivers late, as its retries for up to 7 days do)."""
        sent = time.time() if at is None else at
        self.windows[number] = max(sent, self.windows.get(number, sent))
        if self.webhook_url is None:
            return
        message = {
            "from": number,
            "id": "wamid." + secrets.token_urlsafe(24),
            "timestamp": str(int(sent)),
            "type": "text",
            "text": {"body": text},
        }
        value = {
            "messaging_product": "whatsapp",
            "metadata": self._metadata(),
            "contacts": [{"profile": {"name": "A user"}, "wa_id": number}],
            "messages": [message],
        }
        self.reporter.schedule(_envelope(value), delay_ms=0)

    def _metadata(self) -> dict[str, str]:
        return {"display_phone_number": "15550001111", "phone_number_id": self.phone_number_id}

    def _report(self, wamid: str, to: str, opaque: Any) -> None:
        outcome = self.state.report_outcome(to)
        if self.webhook_url is None:
            return
        self.reporter.schedule(self._notification(wamid, to, opaque, "sent"), delay_ms=0)
        if outcome.startswith("failed:"):
            code = int(outcome.partition(":")[2])
            self.reporter.schedule(self._notification(wamid, to, opaque, "failed", code))
            return
        self.reporter.schedule(self._notification(wamid, to, opaque, "delivered"))
        if outcome == "read":
            self.reporter.schedule(self._notification(wamid, to, opaque, "read"))

    def _notification(
        self, wamid: str, to: str, opaque: Any, status: str, code: int | None = None
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": wamid,
            "status": status,
            "timestamp": str(int(time.time())),
            "recipient_id": to,
        }
        if opaque is not None:
            item["biz_opaque_callback_data"] = opaque
        if code is not None:
            item["errors"] = [{"code": code, "title": ERRORS.get(code, (400, "Error"))[1]}]
        value = {"messaging_product": "whatsapp", "metadata": self._metadata(), "statuses": [item]}
        return _envelope(value)

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        [notification] = items
        body = json.dumps(notification).encode()
        digest = hmac.new(self.app_secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {"content-type": "application/json", "X-Hub-Signature-256": f"sha256={digest}"}
        assert self.webhook_url is not None
        return await client.post(self.webhook_url, content=body, headers=headers)

    async def close(self) -> None:
        await self.reporter.close()


def _envelope(value: dict[str, Any]) -> dict[str, Any]:
    """A webhook notification around one change's ``value``."""
    change = {"value": value, "field": "messages"}
    entry = {"id": "102290129340398", "changes": [change]}
    return {"object": "whatsapp_business_account", "entry": [entry]}


def _text_parameter(parameter: Any) -> bool:
    return (
        isinstance(parameter, dict)
        and parameter.get("type") == "text"
        and bool(parameter.get("text"))
    )


def error(code: int, details: str | None = None, status: int | None = None) -> JSONResponse:
    http, title = ERRORS.get(code, (400, "Error"))
    body = {
        "error": {
            "message": f"({code}) {title}",
            "type": "OAuthException",
            "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": details or title},
            "fbtrace_id": "A" + secrets.token_hex(8),
        }
    }
    return JSONResponse(body, status_code=status or http)


ERROR_NAMES = ErrorNames(
    frozenset(map(str, ERRORS)), r"[1-9]\d{0,5}", "any other Cloud API error code"
)
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedWhatsApp
