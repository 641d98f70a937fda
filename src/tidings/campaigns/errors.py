"""Why a campaign request was refused: the API answers it as a 4xx naming the field."""

from __future__ import annotations

from tidings.refusal import Refusal


class CampaignError(Refusal):
    pass
