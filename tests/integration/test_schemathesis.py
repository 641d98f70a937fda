"""The whole HTTP API against its own OpenAPI schema, on SQLite and PostgreSQL, called with
an API key that has every scope (and, by schemathesis' ignored_auth check, without it: a
route that needs a key must then answer 401).

schemathesis generates requests from ``app.openapi()`` (valid and invalid ones) and checks
every answer: no 5xx, a status code the operation declares, a body that fits the schema
declared for that status. The stateful test follows the schema's links (create a type,
then send a notification of it; create a user, then read it; upload a template, then
preview it).

Hypothesis runs synchronously, while the service's database engine belongs to one event
loop: each test runs the service on a loop in a thread of its own, and every ASGI call
schemathesis makes is forwarded to that loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize
from schemathesis.config import SchemathesisConfig
from schemathesis.generation.stateful.state_machine import StepInput, StepOutput

from tidings.api.app import create_app
from tidings.api.auth import ALL_SCOPES, issue_key
from tidings.service import Service
from tidings.settings import Settings
from tidings.store import api_keys
from tidings.store import schema as schema_tables
from tidings.store.schema import metadata

T = TypeVar("T")
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Bounded so that the module takes a couple of minutes on both databases.
EXAMPLES = 50
STATEFUL_SCENARIOS = 20
STATEFUL_STEPS = 8
HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        # One database per operation and backend, shared by its examples, on purpose.
        HealthCheck.function_scoped_fixture,
    ],
    print_blob=True,
)

# Checks that ask more than a schema can say:
# - positive_data_acceptance wants every schema-valid request accepted, but a valid-looking
#   request can name a type that is not registered (422) or carry an unsigned token (400).
# - /v1/notifications/batch, /v1/notifications/cancel, /v1/templates/preview and
#   /v1/users/batch are also matched by the templated GET
#   /v1/notifications/{notificationId}, GET /v1/templates/{typeName} and
#   GET/PUT/DELETE /v1/users/{userId}, so other methods there get those routes' answers,
#   and Allow lists their methods as well.
# - use_after_free on a user's devices and topics: those lists answer for any user id,
#   registered or not (a device may be registered before its profile), so after an erasure
#   they answer 200 with an empty list, not 404.
# - negative_data_rejection: 413 is a rejection too (a template part of 100,000 characters
#   can take more than the body limit once JSON-escaped).
# - negative_data_rejection on the batch: an invalid item is answered in its own result
#   (200, "status": "error"), by design, so that the valid items are still accepted.
# schemathesis' own list of answers that reject invalid data.
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5XX"]
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"enabled": False},
            "negative_data_rejection": {"expected-statuses": [*REJECTED, "413"]},
        },
        "operations": [
            {
                "include-path": [
                    "/v1/notifications/batch",
                    "/v1/notifications/cancel",
                    "/v1/templates/preview",
                    "/v1/users/batch",
                ],
                "checks": {
                    "unsupported_method": {"enabled": False},
                    "allow_header_conformance": {"enabled": False},
                },
            },
            {
                "include-path": "/v1/notifications/batch",
                "checks": {"negative_data_rejection": {"enabled": False}},
            },
            {
                "include-path": ["/v1/users/{user_id}/devices", "/v1/users/{user_id}/topics"],
                "checks": {"use_after_free": {"enabled": False}},
            },
        ],
    }
)


class Api:
    """The service and its app on an event loop in a thread of their own."""

    def __init__(self, settings: Settings) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.service = Service.from_settings(settings)
        self.app = create_app(self.service)
        self.key, stored = issue_key("fuzz", [scope.value for scope in ALL_SCOPES], "default")
        self.run(api_keys.insert(self.service.db, stored))

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def headers_for(self, case: schemathesis.Case) -> dict[str, str]:
        """A valid key in place of the one schemathesis made up; none where it left the
        header out on purpose (a negative case: the answer must then be 401)."""
        given = {name.lower() for name in (case.headers or {})}
        return self.headers if "authorization" in given else {}

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def empty_database(self) -> None:
        async def empty() -> None:
            async with self.service.db.engine.begin() as conn:
                for table in reversed(metadata.sorted_tables):
                    if table is not schema_tables.api_key:  # the key the calls carry
                        await conn.execute(table.delete())
            self.service.types.invalidate()
            await self.service.templates.reload_now()

        self.run(empty())

    def close(self) -> None:
        self.run(self.service.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


class Forwarder:
    """The ASGI app schemathesis calls: hands each call to the current test's app, on the
    loop its service lives on."""

    def __init__(self) -> None:
        self.api: Api | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.api is None:
            raise RuntimeError("no API to call: the test must use the `api` fixture")
        api, caller = self.api, asyncio.get_running_loop()

        async def on(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
            async def wrapped() -> T:
                return await awaitable

            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(wrapped(), loop))

        async def receive_here() -> Message:
            return await on(caller, receive())

        async def send_here(message: Message) -> None:
            await on(caller, send(message))

        await on(api.loop, api.app(scope, receive_here, send_here))


def _openapi() -> dict[str, Any]:
    """The schema: building it needs an app, never a database (this one is not opened)."""
    unused = Settings(database_url="sqlite:////nonexistent/schema.db", secret_key="unused")
    return create_app(Service.from_settings(unused)).openapi()


forwarder = Forwarder()
schema = schemathesis.openapi.from_dict(_openapi(), config=CONFIG)
schema.app = forwarder


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    """The API over a fresh database, on each backend."""
    forwarder.api = Api(settings)
    try:
        yield forwarder.api
    finally:
        forwarder.api.close()
        forwarder.api = None


# The inbox's live stream never ends by itself: tests/integration/test_inbox_stream.py
# reads it over a socket.
STREAMS = "/v1/users/{user_id}/inbox/stream"


@schema.exclude(path=STREAMS).parametrize()
@HYPOTHESIS
def test_api_answers_as_its_schema_says(case: schemathesis.Case, api: Api) -> None:
    case.call_and_validate(headers=api.headers_for(case))


USER = "/v1/users/{user_id}"


def _created(path: str, method: str, **fixed: Any) -> st.SearchStrategy[StepInput]:
    return schema[path][method].as_strategy(**fixed).map(StepInput.initial)


class Links(schema.exclude(path=STREAMS).as_state_machine()):  # type: ignore[misc]
    """Sequences of calls that follow the schema's links, each from an empty database (so
    that hypothesis sees the same answers when it replays one).

    schemathesis starts sequences only from POST (and GET) operations; types and users are
    created with PUT here, so each sequence starts by creating one of each."""

    def setup(self) -> None:
        assert forwarder.api is not None
        forwarder.api.empty_database()

    def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
        assert forwarder.api is not None
        return {"headers": forwarder.api.headers}

    def _first(self, input: StepInput) -> StepOutput | None:
        self.recorder.record_case(case=input.case)
        return self._step(input)

    @initialize(target=Bundle("catch_all"), input=_created("/v1/types/{name}", "PUT"))
    def create_type(self, input: StepInput) -> StepOutput | None:
        return self._first(input)

    # Random emails and phones are mostly refused; an empty profile is always accepted.
    @initialize(
        target=Bundle("catch_all"),
        input=_created(USER, "PUT") | _created(USER, "PUT", body={}),
    )
    def create_user(self, input: StepInput) -> StepOutput | None:
        return self._first(input)


def test_api_links_hold_together(api: Api) -> None:
    Links.run(
        settings=settings(
            HYPOTHESIS, max_examples=STATEFUL_SCENARIOS, stateful_step_count=STATEFUL_STEPS
        )
    )
