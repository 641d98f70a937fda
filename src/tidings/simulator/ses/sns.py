"""A simulated Amazon SNS topic with one HTTP(S) subscription: where SES's notifications go.

As the SNS developer guide describes HTTP(S) endpoints: SNS first POSTs a
``SubscriptionConfirmation`` and delivers nothing until the endpoint GETs its
``SubscribeURL``; then each message is a ``Notification`` POST. Both are JSON (sent as
``text/plain; charset=UTF-8``) with ``x-amz-sns-message-type``/``-message-id``/
``-topic-arn`` headers, and signed: RSA over ``name\\nvalue\\n`` of the documented fields,
SHA-1 (``SignatureVersion`` 1) or SHA-256 (2), verified with the X.509 certificate at
``SigningCertURL``. The simulator makes its key and certificate at start and serves the
certificate itself, under a name that changes with it (as SNS names each certificate).

Notifications published before the subscription is confirmed are held, and delivered once
it is (the confirmation is posted again, at most once a second, while none came).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.keys import rsa_key
from tidings.simulator.reports import Reporter
from tidings.simulator.ses.config import SesConfig
from tidings.simulator.tidings_config import base_url

if TYPE_CHECKING:
    from tidings.simulator.server import Simulator

PATH = "/_sns/"
_FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
}
_HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
ASK_EVERY_SECONDS = 1.0


class SnsTopic:
    def __init__(
        self, sim: Simulator, state: ProviderState, config: SesConfig, endpoint: str | None
    ) -> None:
        self.sim = sim
        self.config = config
        self.endpoint = endpoint  # the subscribed HTTP(S) URL; None: nothing is posted
        self.key = rsa_key()
        self.certificate = _certificate(self.key, config.region)
        digest = hashlib.sha256(self.certificate.public_bytes(serialization.Encoding.DER))
        self.cert_path = f"{PATH}SimpleNotificationService-{digest.hexdigest()[:32]}.pem"
        self.token = secrets.token_hex(64)
        self.subscription_arn = f"{config.topic_arn}:{uuid.uuid4()}"
        self.confirmed = False
        self.held: list[dict[str, str]] = []
        self._asked_at: float | None = None  # when the confirmation was last posted
        # SNS's default HTTP/S delivery policy: three retries, 20 s apart.
        self.reporter = Reporter(state, self._post, attempts=4, retry_seconds=20.0)

    def routes(self) -> list[BaseRoute]:
        return [
            Route(self.cert_path, self._serve_certificate, methods=["GET"]),
            Route(PATH, self._action, methods=["GET"]),
        ]

    def publish(self, message: dict[str, Any]) -> None:
        """Deliver ``message`` (JSON) as a Notification, once subscribed."""
        if self.endpoint is None:
            return
        envelope = self.notification(message)
        if self.confirmed:
            self.reporter.schedule(envelope)
            return
        self.held.append(envelope)
        now = time.monotonic()
        if self._asked_at is None or now - self._asked_at >= ASK_EVERY_SECONDS:
            self._asked_at = now
            self.reporter.schedule(self.confirmation(), delay_ms=0)

    def notification(self, message: dict[str, Any]) -> dict[str, str]:
        """The signed Notification carrying ``message``, as SNS posts it."""
        unsubscribe = f"?Action=Unsubscribe&SubscriptionArn={quote(self.subscription_arn)}"
        return self.sign_message(
            {
                "Type": "Notification",
                "MessageId": str(uuid.uuid4()),
                "TopicArn": self.config.topic_arn,
                "Message": json.dumps(message),
                "Timestamp": _now(),
                "UnsubscribeURL": self._url(unsubscribe),
            }
        )

    def confirmation(self) -> dict[str, str]:
        topic = self.config.topic_arn
        return self.sign_message(
            {
                "Type": "SubscriptionConfirmation",
                "MessageId": str(uuid.uuid4()),
                "Token": self.token,
                "TopicArn": topic,
                "Message": (
                    f"You have chosen to subscribe to the topic {topic}.\nTo confirm the "
                    "subscription, visit the SubscribeURL included in this message."
                ),
                "SubscribeURL": self._url(
                    f"?Action=ConfirmSubscription&TopicArn={quote(topic)}&Token={self.token}"
                ),
                "Timestamp": _now(),
            }
        )

    @property
    def signing_cert_url(self) -> str:
        return f"{base_url(self.sim)}{self.cert_path}"

    def _url(self, query: str) -> str:
        return f"{base_url(self.sim)}{PATH}{query}"

    def sign_message(self, message: dict[str, str]) -> dict[str, str]:
        """``message`` with SNS's signature fields (the documented fields it holds, signed)."""
        version = self.config.sns_signature_version
        signed = "".join(
            f"{name}\n{message[name]}\n" for name in _FIELDS[message["Type"]] if name in message
        )
        signature = self.key.sign(signed.encode(), padding.PKCS1v15(), _HASHES[version]())
        return message | {
            "SignatureVersion": version,
            "Signature": base64.b64encode(signature).decode(),
            "SigningCertURL": self.signing_cert_url,
        }

    async def _serve_certificate(self, request: Request) -> Response:
        pem = self.certificate.public_bytes(serialization.Encoding.PEM)
        return Response(pem, media_type="application/x-x509-ca-cert")

    async def _action(self, request: Request) -> Response:
        """SNS's query API, as far as a subscriber uses it: ConfirmSubscription."""
        query = request.query_params
        if query.get("Action") != "ConfirmSubscription":
            return _xml_error(400, "InvalidAction", "only ConfirmSubscription is simulated")
        if query.get("TopicArn") != self.config.topic_arn or query.get("Token") != self.token:
            return _xml_error(400, "InvalidParameter", "Invalid token")
        self.confirmed = True
        held, self.held = self.held, []
        for envelope in held:
            self.reporter.schedule(envelope)
        return Response(
            '<ConfirmSubscriptionResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">'
            f"<ConfirmSubscriptionResult><SubscriptionArn>{self.subscription_arn}"
            "</SubscriptionArn></ConfirmSubscriptionResult></ConfirmSubscriptionResponse>",
            media_type="text/xml",
        )

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        [envelope] = items
        assert isinstance(envelope, dict) and self.endpoint is not None
        headers = {
            "Content-Type": "text/plain; charset=UTF-8",
            "User-Agent": "Amazon Simple Notification Service Agent",
            "x-amz-sns-message-type": envelope["Type"],
            "x-amz-sns-message-id": envelope["MessageId"],
            "x-amz-sns-topic-arn": envelope["TopicArn"],
        }
        if envelope["Type"] == "Notification":
            headers["x-amz-sns-subscription-arn"] = self.subscription_arn
        return await client.post(
            self.endpoint, content=json.dumps(envelope).encode(), headers=headers
        )


def _now() -> str:
    """SNS's timestamp form: ``2012-04-26T20:45:04.751Z``."""
    moment = datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _certificate(key: rsa.RSAPrivateKey, region: str) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"sns.{region}.amazonaws.com")])
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )


def _xml_error(status: int, code: str, message: str) -> Response:
    body = (
        '<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error>'
        f"<Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        "</ErrorResponse>"
    )
    return Response(body, status_code=status, media_type="text/xml")
