"""Why a campaign request was refused: the API answers it as a 4xx naming the field."""

from __future__ import annotations


class CampaignError(Exception):
    def __init__(
        self, code: str, message: str, field: str | None = None, status_code: int = 422
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status_code = status_code
