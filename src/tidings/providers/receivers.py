"""Provider callbacks: what a provider tells tidings about the messages it sent.

Names, because "webhook" once meant three things: the **webhook channel** is an outbound
adapter (``providers/webhook/``: tidings POSTs a notification to a URL); **producer webhooks**
are tidings' own events sent to a producer's endpoints (``background/producer_webhooks.py``);
**provider callbacks** are the requests providers make to tidings (status reports, bounces,
opens, replies), received at ``POST /v1/webhooks/{kind}/{account}`` by the ``WebhookReceiver``
of that kind. This module is their vocabulary; ``providers/registry.py`` lists the receivers.

A receiver is framework-free: the route (``api/routes/callbacks.py``) gives it a
``Callback`` and turns its ``Answer`` or ``Refused`` into HTTP. Nothing is done with a
request before ``verify`` accepts it: a receiver never acts on an unauthenticated callback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from tidings.providers.accounts import AccountSettings

if TYPE_CHECKING:
    from tidings.store.engine import Database
    from tidings.store.tracking import Applied

Account = TypeVar("Account", bound=AccountSettings)
# What verify hands to accept: the request's content, parsed and authenticated.
Verified = TypeVar("Verified")


@dataclass(frozen=True)
class Callback:
    """One request a provider made to ``/v1/webhooks/{kind}/{account}[/{hook}]``."""

    account: str  # the account's name in the settings
    hook: str  # the path after the account ("" for the kind's main callback)
    body: bytes
    headers: Mapping[str, str]  # case-insensitive (the route passes Starlette's Headers)
    query: Mapping[str, str]
    url: str  # the URL the provider called: public_url + path + query, as sent


@dataclass(frozen=True)
class Refused:
    """A callback not taken: the API's error answer (``{"error": {code, message}}``)."""

    status: int
    code: str
    message: str
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Answer:
    """A callback taken: a JSON object (the counts, mostly) or text of ``media_type``."""

    body: dict[str, Any] | str
    media_type: str | None = None  # None: JSON
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


def counts(received: int, applied: Applied, ignored: int) -> Answer:
    """What every tracking callback answers: events received, and what became of them."""
    return Answer(
        {
            "received": received,
            "applied": applied.applied,
            "duplicates": applied.duplicates,
            "unmatched": applied.unmatched,
            "ignored": ignored,
        }
    )


class WebhookReceiver(Protocol[Account, Verified]):
    """The inbound side of one provider kind: verify its callbacks, map them to tracking
    events (each package's ``events.py``, pure) and record them."""

    kind: str  # the URL's {kind}, which is the accounts' kind
    title: str  # the provider's name in answers: "no Vonage account 'x'"
    account_type: type[Account]
    hooks: frozenset[str]  # the {hook} paths after the account it answers ("" is the main)

    def unconfigured(self, account: Account) -> Refused | None:
        """Why this account cannot take callbacks (no secret to verify them), or None."""
        ...

    async def verify(self, call: Callback, account: Account) -> Verified | Refused:
        """The callback's content when it is the provider's, for this account; else why not."""
        ...

    async def accept(
        self, verified: Verified, call: Callback, account: Account, db: Database
    ) -> Answer | Refused:
        """Record what a verified callback says (one transaction) and answer the provider."""
        ...


@runtime_checkable
class Handshake(Protocol):
    """A receiver whose provider first checks the callback URL with a GET (Meta's
    ``hub.challenge``): ``GET /v1/webhooks/{kind}/{account}`` is answered by ``handshake``."""

    async def handshake(self, call: Callback, account: Any) -> Answer | Refused:
        """The provider's answer when the request proves the account's own, else why not."""
        ...
