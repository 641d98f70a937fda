"""Simulated Firebase Cloud Messaging (HTTP v1) with its Google OAuth2 token endpoint.

At construction it writes a service-account JSON key (a fresh RSA key) into the
credentials directory; ``account()`` gives the settings of the matching FCM account. The
token endpoint verifies the JWT assertion like Google does and issues access tokens of
``push.fcm_token_lifetime`` seconds; ``messages:send`` checks the bearer token, the message
shape (and, for an Apple device's token, the ``apns`` block by Apple's rules, as FCM hands
it to APNs) and answers errors in Google's exact JSON shape.

It is a second, independent reading of Google's and Apple's documentation: it imports
nothing from tidings' adapters, so a misreading there is not copied into the check that
should catch it.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import jwt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import OK, OUTAGE, RATE_LIMITED, ErrorNames
from tidings.simulator.keyfiles import pkcs8_pem, write_secret
from tidings.simulator.keys import rsa_key
from tidings.simulator.server import HTTP_PROVIDERS, KNOWN_ERRORS

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

TOKEN_PATH = "/token"

# Google's documentation, written down here on its own.
# developers.google.com/identity/protocols/oauth2/service-account ("Preparing to make an
# authorized API call"): the JWT bearer grant and the token endpoint.
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
# firebase.google.com/docs/cloud-messaging/auth-server: the scope of messages:send.
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
# Either scope lets a token send (firebase-admin asks for cloud-platform and others).
SEND_SCOPES = frozenset({FCM_SCOPE, "https://www.googleapis.com/auth/cloud-platform"})
# firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode, FcmError and ApnsError; the
# field violations are google.rpc.BadRequest (cloud.google.com/apis/design/errors).
FCM_ERROR_TYPE = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
APNS_ERROR_TYPE = "type.googleapis.com/google.firebase.fcm.v1.ApnsError"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
# firebase.google.com/docs/cloud-messaging/concept-options: 4096 bytes of payload;
# .../rest/v1/projects.messages#AndroidConfig: ttl at most 4 weeks.
PAYLOAD_LIMIT = 4096
MAX_TTL = 28 * 24 * 3600
# developer.apple.com, "Sending notification requests to APNs": what APNs accepts in the
# headers FCM passes on from apns.headers.
APNS_PRIORITIES = frozenset({"10", "5", "1"})
APNS_COLLAPSE_ID_LIMIT = 64  # bytes
# Not Google's: the data key tidings' adapter carries the delivery id in (docs/providers.md).
DELIVERY_ID_KEY = "tidings_delivery_id"

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_:\-.]{16,4096}")
TTL_PATTERN = re.compile(r"\d+(\.\d{1,9})?s")

# errorCode -> (HTTP status, google.rpc status, message), as Google answers them.
ERRORS: dict[str, tuple[int, str, str]] = {
    "UNSPECIFIED_ERROR": (500, "UNKNOWN", "Unknown error."),
    "INVALID_ARGUMENT": (400, "INVALID_ARGUMENT", "Request contains an invalid argument."),
    "UNREGISTERED": (404, "NOT_FOUND", "Requested entity was not found."),
    "SENDER_ID_MISMATCH": (403, "PERMISSION_DENIED", "SenderId mismatch"),
    "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric."),
    "UNAVAILABLE": (503, "UNAVAILABLE", "The service is currently unavailable."),
    "INTERNAL": (500, "INTERNAL", "Internal error encountered."),
    "THIRD_PARTY_AUTH_ERROR": (401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service"),
}
RETRY_AFTER_SECONDS = "1"
# The description of a field violation, by field (scripted "INVALID_ARGUMENT:<field>").
FIELD_PROBLEMS = {
    "message.token": "The registration token is not a valid FCM registration token",
    "message.apns.headers": "Invalid APNs headers for an Apple registration token",
}


@dataclass
class Grant:
    access_token: str
    expires_at: float


class FcmSimulator:
    def __init__(self, sim: Simulator) -> None:
        self.state = sim.new_state("fcm")
        self.state.error_names = ERROR_NAMES
        self.project_id = sim.config.push.fcm_project_id
        self.lifetime = sim.config.push.fcm_token_lifetime
        self.apple_token_prefix = sim.config.push.fcm_apple_token_prefix
        self.client_email = f"tidings-sim@{self.project_id}.iam.gserviceaccount.com"
        self._key = rsa_key()
        self.key_id = secrets.token_hex(20)
        self.grants: dict[str, Grant] = {}
        self.clock: Callable[[], float] = time.time  # replaceable, to age tokens in tests
        self.service_account_path = sim.config.credentials_dir / "fcm-service-account.json"
        self._write_service_account(self.service_account_path)
        self._sim = sim

    def account(self, **overrides: Any) -> dict[str, Any]:
        """The settings of an FCM account pointed at this simulator (token_uri included),
        for ``FcmAccount.model_validate``."""
        settings: dict[str, Any] = {
            "kind": "fcm",
            "service_account_file": self.service_account_path,
            "base_url": self._sim.url,
            "token_uri": f"{self._sim.url}{TOKEN_PATH}",
        }
        return settings | overrides

    def is_apple(self, token: str) -> bool:
        """Whether ``token`` is an Apple device's (``push.fcm_apple_token_prefix``)."""
        return token.startswith(self.apple_token_prefix)

    def revoke_tokens(self) -> None:
        """Forget every issued access token (as when Google revokes them early)."""
        self.grants.clear()

    def routes(self) -> list[BaseRoute]:
        return [
            Route(TOKEN_PATH, self._token, methods=["POST"]),
            Route("/v1/projects/{project}/messages:send", self._send, methods=["POST"]),
        ]

    def _write_service_account(self, path: Path) -> None:
        pem = pkcs8_pem(self._key).decode()
        info = {
            "type": "service_account",
            "project_id": self.project_id,
            "private_key_id": self.key_id,
            "private_key": pem,
            "client_email": self.client_email,
            "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": GOOGLE_TOKEN_URI,
        }
        write_secret(path, json.dumps(info, indent=2).encode())

    # The OAuth2 token endpoint.

    async def _token(self, request: Request) -> Response:
        # Parsed by hand: Starlette's request.form() needs python-multipart.
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        if form.get("grant_type") != GRANT_TYPE:
            return _oauth_error("unsupported_grant_type", "Invalid grant_type")
        assertion = form.get("assertion")
        if not isinstance(assertion, str):
            return _oauth_error("invalid_request", "Missing required parameter: assertion")
        # Google takes its own token URL as the audience (google-auth always sends it),
        # whatever token_uri the request went to; tidings' adapter names the URL it used.
        problem = self._check_assertion(assertion, [GOOGLE_TOKEN_URI, _url_of(request)])
        if problem is not None:
            return _oauth_error("invalid_grant", problem)
        access_token = "ya29.sim-" + secrets.token_urlsafe(32)
        self.grants[access_token] = Grant(access_token, self.clock() + self.lifetime)
        self.state.counts["token_grants"] += 1
        return JSONResponse(
            {"access_token": access_token, "expires_in": self.lifetime, "token_type": "Bearer"}
        )

    def _check_assertion(self, assertion: str, audience: list[str]) -> str | None:
        """Google's checks: signature by the account's key, iss, aud, scope, iat/exp."""
        try:
            claims = jwt.decode(
                assertion,
                self._key.public_key(),
                algorithms=["RS256"],
                audience=audience,
                issuer=self.client_email,
                options={
                    "require": ["iss", "aud", "iat", "exp"],
                    "verify_exp": False,
                    "verify_iat": False,
                },
            )
        except jwt.InvalidSignatureError:
            return "Invalid JWT Signature."
        except jwt.PyJWTError as error:
            return f"Invalid JWT: {error}"
        now = self.clock()
        iat, exp = claims["iat"], claims["exp"]
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "Invalid JWT: iat and exp must be integers"
        if exp - iat > 3600 or exp < now or iat > now + 60:
            return (
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                "reasonable timeframe. Check your iat and exp values in the JWT claim."
            )
        if not SEND_SCOPES & set(str(claims.get("scope", "")).split()):
            return "Invalid OAuth scope or ID token audience provided."
        return None

    # messages:send

    async def _send(self, request: Request) -> Response:
        await request.body()  # read first: answering early breaks Hypercorn's HTTP/2 streams
        if not self._authorized(request.headers.get("authorization", "")):
            self.state.counts["unauthenticated"] += 1
            return _unauthenticated()
        if request.path_params["project"] != self.project_id:
            return _error(403, "PERMISSION_DENIED", _permission_denied(request), None)
        try:
            message = (await request.json())["message"]
        except (ValueError, KeyError, TypeError):
            message = None
        if not isinstance(message, dict):
            return _fcm_error("INVALID_ARGUMENT", "Invalid JSON payload received.")
        address = str(message.get("token") or message.get("fid") or message.get("topic") or "")
        admission = await self.state.admit(address)
        if admission != OK:
            return _admission_answer(admission)
        invalid = _invalid(message) or _invalid_apns(message, self.is_apple(address))
        if invalid is not None:
            return invalid
        return self._accept(address, message)

    def _authorized(self, authorization: str) -> bool:
        scheme, _, token = authorization.partition(" ")
        grant = self.grants.get(token) if scheme.lower() == "bearer" else None
        return grant is not None and self.clock() < grant.expires_at

    def _accept(self, address: str, message: dict[str, Any]) -> Response:
        """A new message id for every request: FCM has no idempotency key (``dedup``, off
        by default, answers a repeated delivery id as the first time, unlike FCM)."""
        found = (message.get("data") or {}).get(DELIVERY_ID_KEY)
        key = found if isinstance(found, str) else None
        dedup = key is not None and self.state.behaviour.dedup
        if key is not None and dedup and key in self.state.answers:
            self.state.record(address, key, message)
            return JSONResponse(self.state.answers[key])
        message_id = f"0:{time.time_ns() // 1000}%{secrets.token_hex(8)}"
        answer = {"name": f"projects/{self.project_id}/messages/{message_id}"}
        if key is not None and dedup:
            self.state.answers[key] = answer
        self.state.record(address, key, message)
        return JSONResponse(answer)


def _invalid(message: dict[str, Any]) -> Response | None:
    """Message validation in FCM's order of concern; None when the message is fine."""
    # fid: a Firebase installation ID, the target firebase-admin prefers to a token.
    targets = [k for k in ("token", "fid", "topic", "condition") if message.get(k)]
    if len(targets) != 1:
        return _fcm_error("INVALID_ARGUMENT", "Exactly one of token, fid, topic or condition")
    for target in ("token", "fid"):
        value = message.get(target)
        if value is not None and not TOKEN_PATTERN.fullmatch(str(value)):
            return _fcm_error(
                "INVALID_ARGUMENT",
                f"The registration {target} is not a valid FCM registration {target}",
                field=f"message.{target}",
            )
    if payload_size(message) > PAYLOAD_LIMIT:
        return _fcm_error("INVALID_ARGUMENT", "Message is too big")
    return _invalid_data(message.get("data")) or _invalid_android(message.get("android"))


def _invalid_data(data: Any) -> Response | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        return _fcm_error("INVALID_ARGUMENT", "Invalid value at 'message.data'")
    for key, value in data.items():
        if not isinstance(value, str):
            return _fcm_error(
                "INVALID_ARGUMENT", f"Invalid value at 'message.data[{key}].value'", "message.data"
            )
        lowered = key.lower()
        if lowered in ("from", "message_type") or lowered.startswith(("google", "gcm")):
            return _fcm_error("INVALID_ARGUMENT", f"Invalid data payload key: {key}")
    return None


def _invalid_android(android: Any) -> Response | None:
    if android is None:
        return None
    if not isinstance(android, dict):
        return _fcm_error("INVALID_ARGUMENT", "Invalid value at 'message.android'")
    # FCM takes the enum in any case: firebase-admin sends "high" and "normal".
    if str(android.get("priority", "NORMAL")).upper() not in ("NORMAL", "HIGH"):
        return _fcm_error("INVALID_ARGUMENT", "Invalid value at 'message.android.priority'")
    ttl = android.get("ttl")
    if ttl is not None and (not TTL_PATTERN.fullmatch(str(ttl)) or float(str(ttl)[:-1]) > MAX_TTL):
        return _fcm_error("INVALID_ARGUMENT", "Invalid value at 'message.android.ttl'")
    return None


def _invalid_apns(message: dict[str, Any], apple: bool) -> Response | None:
    """The apns block: header values are strings; for an Apple device's token, what FCM
    passes on must pass APNs (refused as INVALID_ARGUMENT with APNs' reason)."""
    apns = message.get("apns")
    if apns is None:
        return None
    headers = apns.get("headers", {}) if isinstance(apns, dict) else None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return _fcm_error(
            "INVALID_ARGUMENT", "Invalid value at 'message.apns.headers'", "message.apns.headers"
        )
    if not apple:
        return None  # FCM uses the apns block for Apple devices only
    reason = apns_refusal(headers, _aps(message, apns))
    if reason is None:
        return None
    return _fcm_error("INVALID_ARGUMENT", field="message.apns.headers", apns_reason=reason)


def _aps(message: dict[str, Any], apns: dict[str, Any]) -> dict[str, Any]:
    """The aps dictionary FCM sends to APNs: apns.payload.aps, with the notification's alert."""
    payload = apns.get("payload")
    aps = payload.get("aps") if isinstance(payload, dict) else None
    aps = dict(aps) if isinstance(aps, dict) else {}
    if message.get("notification"):
        aps.setdefault("alert", message["notification"])
    return aps


def apns_refusal(headers: dict[str, str], aps: dict[str, Any]) -> str | None:
    """APNs' reason to refuse these headers and this aps dictionary, None when it accepts.

    Apple: a notification that shows nothing (a background one) must not use priority 10;
    a background push carries only content-available; the collapse id is at most 64 bytes.
    """
    visible = any(key in aps for key in ("alert", "sound", "badge"))
    # Without the header FCM chooses the priority; only an explicit 10 can be wrong.
    priority = headers.get("apns-priority", "10" if visible else "5")
    if priority not in APNS_PRIORITIES or (priority == "10" and not visible):
        return "BadPriority"
    background = headers.get("apns-push-type") == "background"
    if background and (visible or aps.get("content-available") != 1):
        return "InvalidPushType"
    if len(headers.get("apns-collapse-id", "").encode()) > APNS_COLLAPSE_ID_LIMIT:
        return "BadCollapseId"
    if not headers.get("apns-expiration", "0").isdigit():
        return "BadExpirationDate"
    return None


def payload_size(message: dict[str, Any]) -> int:
    """What counts against the 4096-byte limit: notification plus data, as compact JSON."""
    counted = {k: message[k] for k in ("notification", "data") if k in message}
    return len(json.dumps(counted, separators=(",", ":"), ensure_ascii=False).encode())


def _admission_answer(admission: str) -> Response:
    if admission == OUTAGE:
        return _fcm_error("UNAVAILABLE", retry_after=RETRY_AFTER_SECONDS)
    if admission == RATE_LIMITED:
        return _fcm_error("QUOTA_EXCEEDED", retry_after=RETRY_AFTER_SECONDS)
    if admission in ("UNAVAILABLE", "QUOTA_EXCEEDED"):
        return _fcm_error(admission, retry_after=RETRY_AFTER_SECONDS)
    code, _, field = admission.partition(":")
    if code == "INVALID_ARGUMENT" and field:
        # A scripted invalid argument about one field, with its field violation.
        return _fcm_error(code, FIELD_PROBLEMS.get(field, f"Invalid value at '{field}'"), field)
    return _fcm_error(admission if admission in ERRORS else "INTERNAL")


def _fcm_error(
    code: str,
    message: str | None = None,
    field: str | None = None,
    retry_after: str | None = None,
    apns_reason: str | None = None,
) -> Response:
    status, rpc_status, default = ERRORS[code]
    if message is None and field is not None:
        message = FIELD_PROBLEMS.get(field)
    details: list[dict[str, Any]] = [{"@type": FCM_ERROR_TYPE, "errorCode": code}]
    if field is not None:
        violation = {"field": field, "description": message or default}
        details.append({"@type": BAD_REQUEST_TYPE, "fieldViolations": [violation]})
    if apns_reason is not None:
        # What APNs answered FCM, passed on (FCM's ApnsError detail).
        details.append({"@type": APNS_ERROR_TYPE, "statusCode": 400, "reason": apns_reason})
    response = _error(status, rpc_status, message or default, details)
    if retry_after is not None:
        response.headers["retry-after"] = retry_after
    return response


def _error(
    status: int, rpc_status: str, message: str, details: list[dict[str, Any]] | None
) -> Response:
    error: dict[str, Any] = {"code": status, "message": message, "status": rpc_status}
    if details is not None:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status)


def _unauthenticated() -> Response:
    """Google's answer to a missing, unknown or expired access token: no FcmError."""
    response = _error(
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        "login cookie or other valid authentication credential.",
        None,
    )
    response.headers["www-authenticate"] = 'Bearer realm="https://accounts.google.com/"'
    return response


def _permission_denied(request: Request) -> str:
    project = request.path_params["project"]
    return (
        "Permission 'cloudmessaging.messages.create' denied on resource "
        f"'//cloudresourcemanager.googleapis.com/projects/{project}'"
    )


def _oauth_error(error: str, description: str) -> Response:
    return JSONResponse({"error": error, "error_description": description}, status_code=400)


def _url_of(request: Request) -> str:
    """The token endpoint's own URL: what an assertion's aud must name."""
    url = request.url
    return f"{url.scheme}://{url.netloc}{url.path}"


# The error names this provider answers as documented (the control API refuses others).
ERROR_NAMES = ErrorNames(
    frozenset(ERRORS), r"INVALID_ARGUMENT:[\w.\[\]]+", "INVALID_ARGUMENT:<field>"
)
KNOWN_ERRORS["fcm"] = ERROR_NAMES
HTTP_PROVIDERS["fcm"] = FcmSimulator
