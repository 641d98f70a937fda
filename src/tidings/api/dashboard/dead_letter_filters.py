"""The dashboard's dead letters filtered (type, kind, error, time) and replayed in bulk
after a confirmation that says how many: the API's filter (routes/deadletters.py), read
from the page's form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from pydantic import Field, ValidationError

from tidings.api.errors import validation_message
from tidings.api.routes.deadletters import dead_filter, dead_letter
from tidings.api.schemas import DeadLetter
from tidings.intake.requests import ApiModel
from tidings.refusal import Refusal
from tidings.service import Service
from tidings.services import deadletters
from tidings.services.deadletters import BULK_LIMIT, DeadFilter
from tidings.states import FailureKind

FIELDS = ("type", "kind", "error", "from", "to")
PAGE = 100


class Filters(ApiModel):
    type: str | None = Field(default=None, min_length=1, max_length=100)
    kind: FailureKind | None = None
    error: str | None = Field(default=None, min_length=1, max_length=200)
    start: datetime | None = Field(default=None, alias="from")
    end: datetime | None = Field(default=None, alias="to")


@dataclass(frozen=True)
class Filtered:
    asked: dict[str, str]  # the form's fields as given, shown back
    rows: list[DeadLetter] = field(default_factory=list)
    matching: int = 0
    error: str | None = None
    kinds: tuple[str, ...] = tuple(k.value for k in FailureKind)
    bulk_limit: int = BULK_LIMIT

    @property
    def query(self) -> str:
        """The filter as a query string, for the links that keep it."""
        return urlencode(self.asked)


def parse(query: Mapping[str, str]) -> tuple[dict[str, str], DeadFilter | str]:
    """The fields given, and their filter or the message saying what is wrong."""
    asked = {name: query[name] for name in FIELDS if query.get(name)}
    try:
        given = Filters.model_validate(asked)
        kinds = [given.kind] if given.kind else None
        return asked, dead_filter(kinds, given.type, given.error, given.start, given.end)
    except ValidationError as error:
        return asked, validation_message(dict(error.errors()[0]))
    except Refusal as refusal:
        return asked, refusal.message


async def filtered(service: Service, namespace: str, query: Mapping[str, str]) -> Filtered:
    asked, found = parse(query)
    if isinstance(found, str):
        return Filtered(asked, error=found)
    rows = await deadletters.listed(service.db, namespace, limit=PAGE, found=found)
    matching = await deadletters.count_dead(service.db, namespace, found)
    return Filtered(asked, [dead_letter(row) for row in rows], matching)
