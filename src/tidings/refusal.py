"""Why a request was refused: the API answers a ``Refusal`` as a 4xx JSON error naming the
field (``{"error": {"code", "message", "field"}}``)."""

from __future__ import annotations

from collections.abc import Mapping


class Refusal(Exception):
    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        status_code: int = 422,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status_code = status_code
        self.headers = headers
