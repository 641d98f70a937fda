"""A simulated webhook receiver: ``POST /webhook-receiver/{name}``.

Verifies the Standard Webhooks signature with the configured secret (401 when it does not
match), records the JSON body under ``name`` and dedupes by ``webhook-id``. Script an
address (the receiver ``name``) with an HTTP status such as ``"410"``, ``"429"`` or
``"500"`` to make the receiver answer with it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, Simulator
from tidings.tracking import standard_webhooks

NAME = "webhook"
RETRY_AFTER_SECONDS = "1"


class SimulatedWebhookReceiver:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.secret = sim.config.webhook_secret

    def routes(self) -> list[BaseRoute]:
        return [Route("/webhook-receiver/{name}", self.receive, methods=["POST"])]

    async def receive(self, request: Request) -> Response:
        body = await request.body()
        try:
            standard_webhooks.verify(self.secret, body, request.headers)
        except standard_webhooks.WebhookVerificationError as error:
            return JSONResponse({"error": str(error)}, status_code=401)
        name = request.path_params["name"]
        admission = await self.state.admit(name)
        if admission != OK:
            return _refusal(admission)
        try:
            payload: Any = json.loads(body)
        except ValueError:
            return JSONResponse({"error": "body is not JSON"}, status_code=400)
        msg_id = request.headers["webhook-id"]
        duplicate = self.state.record(
            name,
            msg_id,
            {
                "body": payload,
                "timestamp": request.headers["webhook-timestamp"],
                "host": request.headers.get("host"),
            },
        )
        return JSONResponse({"received": msg_id, "duplicate": duplicate}, status_code=200)


def _refusal(admission: str) -> Response:
    if admission == OUTAGE:
        return JSONResponse({"error": "unavailable"}, status_code=503)
    if admission == RATE_LIMITED:
        return _status(429)
    try:
        status = int(admission)
    except ValueError:
        status = 500
    return _status(status)


def _status(status: int) -> Response:
    headers = {"retry-after": RETRY_AFTER_SECONDS} if status in (429, 503) else None
    return JSONResponse({"error": f"scripted {status}"}, status_code=status, headers=headers)


HTTP_PROVIDERS[NAME] = SimulatedWebhookReceiver
