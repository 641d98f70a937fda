"""A simulated webhook receiver: ``POST /webhook-receiver/{name}``.

Verifies the Standard Webhooks signature with the endpoint's own secret (401 when it does
not match) and records the JSON body under ``name``, flagging a repeated ``webhook-id``.
Every ``name`` is an endpoint of its own: its secret is derived from the configured account
secret and the URL the request was sent to, written here independently of tidings' sender
so that a mistake on either side shows. Script an address (the receiver ``name``) with an
HTTP status such as ``"410"``, ``"429"`` or ``"500"`` to make the receiver answer with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames, ProviderState
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS, Simulator

NAME = "webhook"
RETRY_AFTER_SECONDS = "1"
TOLERANCE_SECONDS = 300
_DEFAULT_PORTS = {"http": 80, "https": 443}


class SimulatedWebhookReceiver:
    def __init__(self, sim: Simulator) -> None:
        self.state: ProviderState = sim.new_state(NAME)
        self.state.error_names = ERROR_NAMES
        self.secret = sim.config.webhook_secret  # the account's: never verifies by itself

    def routes(self) -> list[BaseRoute]:
        return [Route("/webhook-receiver/{name}", self.receive, methods=["POST"])]

    async def receive(self, request: Request) -> Response:
        body = await request.body()
        endpoint = endpoint_url(request)
        refusal = verify(endpoint_secret(self.secret, endpoint), body, request.headers)
        if refusal is not None:
            return JSONResponse({"error": refusal, "endpoint": endpoint}, status_code=401)
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
                "endpoint": endpoint,
                # As received, so a test can check them with another verifier.
                "signature": request.headers["webhook-signature"],
                "raw": body.decode("utf-8", "replace"),
            },
        )
        return JSONResponse({"received": msg_id, "duplicate": duplicate}, status_code=200)


def verify(secret: str, body: bytes, headers: Mapping[str, str]) -> str | None:
    """Why a request's Standard Webhooks signature does not hold, or None when it does.

    As the specification has it: the signed content is ``{webhook-id}.{webhook-timestamp}.
    {body}``, HMAC-SHA256 keyed with the base64 after ``whsec_``; ``webhook-signature`` is a
    space-separated list of ``v1,<base64>`` (any one may match); a timestamp more than five
    minutes off is refused.
    """
    msg_id, stamp = headers.get("webhook-id"), headers.get("webhook-timestamp")
    given = headers.get("webhook-signature")
    if not msg_id or not stamp or not given:
        return "missing webhook-id, webhook-timestamp or webhook-signature"
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE_SECONDS:
        return "timestamp missing or more than five minutes off"
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for entry in given.split(" "):
        version, _, value = entry.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return None
    return "no signature matches"


def endpoint_url(request: Request) -> str:
    """The URL the request was sent to, in canonical form: scheme and host lower-cased, the
    default port dropped, path and query as on the request line."""
    scheme = request.url.scheme.lower()
    where = urlsplit(f"//{request.headers.get('host', '')}")
    host = (where.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    if where.port is not None and where.port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{where.port}"
    raw_path: bytes = request.scope.get("raw_path") or request.url.path.encode()
    query: bytes = request.scope.get("query_string") or b""
    target = raw_path.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")
    return f"{scheme}://{host}{target}"


def endpoint_secret(account_secret: str, endpoint: str) -> str:
    """whsec_ + base64(HMAC-SHA256(account key, endpoint URL)), as tidings signs with."""
    encoded = account_secret.removeprefix("whsec_")
    key = base64.b64decode(encoded + "=" * (-len(encoded) % 4))
    digest = hmac.new(key, endpoint.encode(), hashlib.sha256).digest()
    return "whsec_" + base64.b64encode(digest).decode()


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
    # Throttling and server errors say when to come back, as many real receivers do.
    headers = {"retry-after": RETRY_AFTER_SECONDS} if status == 429 or status >= 500 else None
    return JSONResponse({"error": f"scripted {status}"}, status_code=status, headers=headers)


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(frozenset(), r"[45]\d\d", "any HTTP status from 400 to 599")
KNOWN_ERRORS[NAME] = ERROR_NAMES
HTTP_PROVIDERS[NAME] = SimulatedWebhookReceiver
