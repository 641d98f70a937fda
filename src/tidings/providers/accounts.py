"""Provider accounts: the settings every adapter shares.

Each adapter module defines its own account model (a subclass with ``kind`` as a literal
and the provider's credentials as ``SecretStr``) and a provider class built from
``(name, account)``. The account's name is what deliveries record as their provider.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class AccountSettings(BaseModel):
    """Limits and timeouts of one provider account, whatever its kind."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    # Requests per second the account may make; None: no limit of ours.
    rate_per_second: float | None = Field(default=None, gt=0)
    # Requests the account may make at once (a bulkhead: a slow provider stalls only itself).
    max_in_flight: int = Field(default=100, ge=1, le=10_000)
    # Seconds for one request, connect included.
    timeout: float = Field(default=10.0, gt=0, le=300)
    # When a send may or may not have happened (no answer after the request went out):
    # "retry" sends again (at least once, perhaps twice), "fail" ends the delivery FAILED
    # with kind "ambiguous" (at most once). SMS accounts default to "fail": a second OTP
    # confuses more than a missing one, which the user can ask for again.
    on_ambiguous: Literal["retry", "fail"] = "retry"


Model = TypeVar("Model", bound=BaseModel)


def exactly_one(model: Model, *fields: str) -> Model:
    """``model`` when exactly one of ``fields`` is set (two ways to give one credential)."""
    given = [name for name in fields if getattr(model, name) is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of {', '.join(fields)}")
    return model
