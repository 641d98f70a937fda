"""What both clients share: settings, request building, the retry loop's decisions."""

from __future__ import annotations

import random
from typing import Any

import httpx

from .calls import Call
from .errors import TidingsConnectionError
from .retrying import Attempts, Backoff

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "tidings-client (python)"


class ClientBase:
    def __init__(
        self, base_url: str, api_key: str | None, retries: int, backoff: Backoff | float
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff if isinstance(backoff, Backoff) else Backoff(base=backoff)
        self._headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if api_key is not None:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._rng = random.Random()

    def _request(self, http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        headers = dict(self._headers)
        if call.idempotency_key is not None:
            headers["Idempotency-Key"] = call.idempotency_key
        return http.build_request(
            call.method,
            self.base_url + call.path,
            json=call.body,
            params=call.params,
            headers=headers,
        )

    def _attempts(self) -> Attempts:
        return Attempts(self.retries, self.backoff, self._rng)

    @staticmethod
    def _no_answer(
        call: Call[Any], error: httpx.TransportError, attempts: Attempts
    ) -> TidingsConnectionError:
        again = " with the same Idempotency-Key" if call.idempotency_key else ""
        return TidingsConnectionError(
            f"no answer to {call.method} {call.path} after {attempts.made} attempt(s) "
            f"({type(error).__name__}: {error}); whether the server acted is unknown, "
            f"retrying{again} is safe",
            idempotency_key=call.idempotency_key,
        )


def own_client_check(http_client: object, transport: object) -> None:
    if http_client is not None and transport is not None:
        raise ValueError("give http_client or transport, not both")
