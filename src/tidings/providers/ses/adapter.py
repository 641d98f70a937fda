"""The Amazon SES v2 ``SendEmail`` adapter (httpx, AWS Signature Version 4).

``POST {base_url}/v2/email/outbound-emails`` (default ``https://email.{region}.amazonaws.com``)
with a JSON body (``content.py``), signed for the service ``ses`` in the account's region
(``sigv4.py``). 200 answers ``{"MessageId"}``, our provider message id; SES's bounce,
complaint and delivery notifications (through SNS, ``receiver.py``) name it. SES has no
idempotency key: a repeated send is a second email. Errors are classified by their type
(``errors.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from tidings.providers._http import no_answer, pooled_client
from tidings.providers.base import (
    Message,
    SendResult,
)
from tidings.providers.ses.account import SesAccount
from tidings.providers.ses.content import send_email_body
from tidings.providers.ses.errors import classify
from tidings.providers.ses.sigv4 import Credentials, Scope, sign

SEND_PATH = "/v2/email/outbound-emails"
SERVICE = "ses"  # the signing name of SES v2


class SesProvider:
    def __init__(
        self, name: str, account: SesAccount, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.account = account
        self._clock = clock
        self._credentials = Credentials(
            account.access_key_id,
            account.secret_access_key.get_secret_value(),
            account.session_token.get_secret_value() if account.session_token else None,
        )
        self._scope = Scope(account.region, SERVICE)
        self._client = pooled_client(
            account.max_in_flight, base_url=account.endpoint, timeout=account.timeout
        )

    async def send(self, message: Message) -> SendResult:
        account = self.account
        body = send_email_body(
            message,
            from_email=account.from_email,
            from_name=account.from_name,
            configuration_set=account.configuration_set,
        )
        request = self._signed(json.dumps(body, separators=(",", ":")).encode())
        try:
            response = await self._client.send(request)
        except httpx.TransportError as error:  # connect, read, timeouts
            raise no_answer("SES", error) from error
        if response.is_success:
            return SendResult(self.name, _message_id(response))
        raise classify(response, self._clock())

    async def close(self) -> None:
        await self._client.aclose()

    def _signed(self, body: bytes) -> httpx.Request:
        """The request with its SigV4 headers, computed from exactly what is sent."""
        content_type = "application/json"
        request = self._client.build_request(
            "POST", SEND_PATH, content=body, headers={"Content-Type": content_type}
        )
        signed = [("Host", request.headers["Host"]), ("Content-Type", content_type)]
        now = datetime.fromtimestamp(self._clock(), UTC)
        path = request.url.raw_path.decode("ascii")
        request.headers.update(
            sign("POST", path, signed, body, self._credentials, self._scope, now)
        )
        return request


def _message_id(response: httpx.Response) -> str | None:
    try:
        found = response.json().get("MessageId")
    except (ValueError, AttributeError):
        return None
    return str(found) if found else None
