"""The dashboard (docs/operations.md, Dashboard): server-rendered pages of the lanes, the last
hour's sends and failures, the breakers, the dead letters (replayed by an admin key) and
the campaigns.

It authenticates by its own session cookie (api/dashboard/sessions.py), not by a Bearer
key, so the router is PUBLIC to the API's scope check and checks the session on every
request: a ``read`` or ``admin`` key to see, ``admin`` to replay, and on every POST the
form's token and the browser's Origin.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from tidings.api.auth import PUBLIC, Caller, Scope, keyring_of
from tidings.api.dashboard import dead_letter_filters, messages, views
from tidings.api.dashboard.pages import page
from tidings.api.dashboard.sessions import Session, Sessions, same_origin
from tidings.api.deps import service_of
from tidings.clock import utcnow
from tidings.policy.unsubscribe import load_secret
from tidings.refusal import Refusal
from tidings.service import Service
from tidings.services import deadletters, notifications

log = logging.getLogger(__name__)

router = APIRouter(prefix="/dashboard", dependencies=PUBLIC, include_in_schema=False)

# Either scope shows the pages; only admin replays.
VIEWERS = frozenset({Scope.READ, Scope.ADMIN})
REFRESH_SECONDS = 15
LOGIN = "/dashboard/login"
# Where a replay form sends the browser back to: a name, never a URL from the form.
BACK = {"overview": "/dashboard", "dead-letters": "/dashboard/dead-letters"}
REPLAY_OUTCOMES = {
    "replayed": "was replayed: PENDING again, with a fresh set of attempts.",
    "not_failed": "is not FAILED (replayed already?): nothing was changed.",
    "not_found": "is not a delivery of this namespace.",
}

Load = Callable[[Service, str, datetime], Awaitable[dict[str, Any]]]


def _sessions(request: Request) -> Sessions:
    """The app's one signer of sessions, made with the service's secret at first use."""
    state = request.app.state
    found: Sessions | None = getattr(state, "dashboard_sessions", None)
    if found is None:
        settings = service_of(request).settings
        found = Sessions(load_secret(settings.secret_key, settings.secret_file))
        state.dashboard_sessions = found
    return found


async def _signed_in(request: Request) -> tuple[Session | None, Caller | None]:
    """The session and, while its key is valid and may view, its caller (anyone, while
    the service has no keys)."""
    session = _sessions(request).read(request)
    caller = await keyring_of(request).caller_by_id(session.key_id if session else None)
    if caller is not None and not caller.scopes & VIEWERS:
        caller = None
    return session, caller


async def _form(request: Request) -> dict[str, str]:
    """A posted form's fields (first values); empty when the body is no form."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        return {}
    try:
        fields = parse_qs((await request.body()).decode(), max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {name: values[0] for name, values in fields.items()}


def _posted_here(request: Request, session: Session | None, form: dict[str, str]) -> bool:
    return _sessions(request).csrf_ok(session, form.get("csrf")) and same_origin(request)


def _forbidden(message: str) -> Response:
    return page("message.html", 403, title="Forbidden", message=message, caller=None)


async def _show(
    request: Request, template: str, load: Load, refresh: int | None = REFRESH_SECONDS
) -> Response:
    """A page for a signed-in viewer; anyone else goes to the sign-in form."""
    session, caller = await _signed_in(request)
    if caller is None:
        response: Response = RedirectResponse(LOGIN, 303)
        if session is not None and session.key_id is not None:
            Sessions.clear_cookie(response)  # its key was revoked
        return response
    sessions = _sessions(request)
    fresh = session is None  # open service: a session only for the forms' token
    session = session or Sessions.new()
    now = utcnow()
    context = await load(service_of(request), caller.namespace, now)
    response = page(
        template,
        caller=caller,
        scopes=", ".join(sorted(s.value for s in caller.scopes)),
        can_replay=Scope.ADMIN in caller.scopes,
        csrf=sessions.csrf_token(session),
        now=now,
        refresh=refresh,
        flash=_replay_flash(request) or _cancel_flash(request),
        **context,
    )
    if fresh:
        sessions.set_cookie(response, session)
    return response


def _replay_flash(request: Request) -> str | None:
    """The message of the replay that redirected here."""
    bulk, changed = request.query_params.get("bulk", ""), request.query_params.get("changed", "")
    if bulk.isdigit() and changed.isdigit():
        also = f" ({changed} had changed meanwhile and were left)" if int(changed) else ""
        return f"Replayed {int(bulk)} dead letters: PENDING again, with fresh attempts{also}."
    outcome = REPLAY_OUTCOMES.get(request.query_params.get("outcome", ""))
    try:
        delivery_id = uuid.UUID(request.query_params.get("replayed", ""))
    except ValueError:
        return None
    return f"Delivery {delivery_id} {outcome}" if outcome else None


def _cancel_flash(request: Request) -> str | None:
    """The message of the cancel that redirected here."""
    deliveries, steps = (
        request.query_params.get("cancelled", ""),
        request.query_params.get("steps", ""),
    )
    if not (deliveries.isdigit() and steps.isdigit()):
        return None
    if not int(deliveries) and not int(steps):
        return "Nothing was cancelled: everything had been claimed or sent already."
    return f"Cancelled {int(deliveries)} deliveries and {int(steps)} workflow steps not yet sent."


async def _overview(service: Service, namespace: str, now: datetime) -> dict[str, Any]:
    found = await views.overview(service, namespace, now)
    peak = max((n for lane in found.lanes for n in lane.sent), default=0)
    return {"overview": found, "peak": peak}


@router.get("")
async def overview(request: Request) -> Response:
    return await _show(request, "overview.html", _overview)


@router.get("/dead-letters")
async def dead_letters(request: Request) -> Response:
    """The newest dead letters, filtered by type, kind, error and time; reloaded by itself
    only when unfiltered (a reload would lose the filter)."""
    query = dict(request.query_params)

    async def load(service: Service, namespace: str, _now: datetime) -> dict[str, Any]:
        found = await dead_letter_filters.filtered(service, namespace, query)
        return {"dead_letters": found.rows, "filtered": found, "limit": views.PAGE_DEAD_LETTERS}

    plain = not any(query.get(name) for name in dead_letter_filters.FIELDS)
    return await _show(request, "dead_letters.html", load, REFRESH_SECONDS if plain else None)


@router.get("/dead-letters/replay")
async def confirm_bulk_replay(request: Request) -> Response:
    """The confirmation of a bulk replay: how many dead letters the filter matches now."""
    query = dict(request.query_params)

    async def load(service: Service, namespace: str, _now: datetime) -> dict[str, Any]:
        return {"filtered": await dead_letter_filters.filtered(service, namespace, query)}

    return await _show(request, "dead_letters_confirm.html", load, refresh=None)


@router.post("/dead-letters/replay")
async def bulk_replay(request: Request) -> Response:
    """POST /v1/dead-letters/replay, from the confirmation's form of an admin's session."""
    session, caller = await _signed_in(request)
    form = await _form(request)
    if caller is None or not _posted_here(request, session, form):
        return _forbidden("The form expired or came from another site: reload the page.")
    if Scope.ADMIN not in caller.scopes:
        return _forbidden(f"Replaying needs the admin scope; the key {caller.key_name!r} lacks it.")
    asked, found = dead_letter_filters.parse(form)
    if isinstance(found, str):
        return _forbidden(f"The filter is not valid: {found}")
    service = service_of(request)
    replayed, changed = await deadletters.replay_matching(service, caller.namespace, found)
    log.info("dashboard: %r replayed %d dead letters in bulk", caller.key_name, replayed)
    query = urlencode({**asked, "bulk": replayed, "changed": changed})
    return RedirectResponse(f"/dashboard/dead-letters?{query}", 303)


@router.get("/messages")
async def messages_page(request: Request) -> Response:
    """The search of notifications; not reloaded by itself (it would lose the search)."""

    async def load(service: Service, namespace: str, _now: datetime) -> dict[str, Any]:
        query = dict(request.query_params)
        return {"messages": await messages.messages(service, namespace, query)}

    return await _show(request, "messages.html", load, refresh=None)


@router.get("/messages/{notification_id}")
async def message_page(request: Request, notification_id: uuid.UUID) -> Response:
    """One notification: each delivery's state and timeline, and a replay of a failed one."""

    async def load(service: Service, namespace: str, _now: datetime) -> dict[str, Any]:
        found = await messages.message(service, namespace, notification_id)
        return {"found": found, "notification_id": notification_id}

    return await _show(request, "notification.html", load, refresh=None)


@router.post("/messages/{notification_id}/cancel")
async def cancel(request: Request, notification_id: uuid.UUID) -> Response:
    """Cancel what of a notification is not sent yet, from its page's form (admin)."""
    session, caller = await _signed_in(request)
    form = await _form(request)
    if caller is None or not _posted_here(request, session, form):
        return _forbidden("The form expired or came from another site: reload the page.")
    if Scope.ADMIN not in caller.scopes:
        return _forbidden(
            f"Cancelling needs the admin scope; the key {caller.key_name!r} lacks it."
        )
    done = await notifications.cancel(service_of(request), notification_id, caller.namespace)
    if done is None:
        message = f"No notification {notification_id} in this namespace."
        return page("message.html", 404, title="Not found", message=message, caller=None)
    log.info("dashboard: %r cancelled notification %s", caller.key_name, notification_id)
    query = urlencode({"cancelled": done.deliveries, "steps": done.steps})
    return RedirectResponse(f"/dashboard/messages/{notification_id}?{query}", 303)


@router.get("/login")
async def login_form(request: Request) -> Response:
    session, caller = await _signed_in(request)
    if caller is not None:
        return RedirectResponse("/dashboard", 303)
    return _login(request, session)


def _login(
    request: Request, session: Session | None, error: str | None = None, status_code: int = 200
) -> Response:
    """The sign-in form, with a session (not signed in) for its token."""
    sessions = _sessions(request)
    fresh = session is None or session.key_id is not None
    if session is None or session.key_id is not None:
        session = Sessions.new()
    response = page(
        "login.html",
        status_code,
        title="Sign in",
        caller=None,
        csrf=sessions.csrf_token(session),
        error=error,
    )
    if fresh:
        sessions.set_cookie(response, session)
    return response


@router.post("/login")
async def sign_in(request: Request) -> Response:
    session = _sessions(request).read(request)
    form = await _form(request)
    if not _posted_here(request, session, form):
        return _forbidden("The sign-in form expired or came from another site: reload it.")
    try:
        caller = await keyring_of(request).caller(form.get("key", "").strip() or None)
    except Refusal:
        return _login(request, session, "That is not a valid API key (unknown or revoked).", 401)
    if not caller.scopes & VIEWERS:
        error = f"The key {caller.key_name!r} has neither the read nor the admin scope."
        return _login(request, session, error, 403)
    response = RedirectResponse("/dashboard", 303)
    # A new session id on sign-in: one planted before it is worth nothing after.
    _sessions(request).set_cookie(response, Sessions.new(caller.key_id))
    log.info("dashboard: signed in with the key %r", caller.key_name)
    return response


@router.post("/logout")
async def sign_out(request: Request) -> Response:
    session = _sessions(request).read(request)
    if not _posted_here(request, session, await _form(request)):
        return _forbidden("The form expired or came from another site: reload the page.")
    response = RedirectResponse(LOGIN, 303)
    Sessions.clear_cookie(response)
    return response


@router.post("/dead-letters/{delivery_id}/replay")
async def replay(request: Request, delivery_id: uuid.UUID) -> Response:
    """POST /v1/deliveries/{id}/replay, from a form of an admin's session."""
    session, caller = await _signed_in(request)
    form = await _form(request)
    if caller is None or not _posted_here(request, session, form):
        return _forbidden("The form expired or came from another site: reload the page.")
    if Scope.ADMIN not in caller.scopes:
        return _forbidden(f"Replaying needs the admin scope; the key {caller.key_name!r} lacks it.")
    replayed = await deadletters.replay(service_of(request), delivery_id, caller.namespace)
    outcome = replayed.value  # replayed, not_failed, not_found: REPLAY_OUTCOMES' keys
    if replayed is deadletters.Replay.REPLAYED:
        log.info("dashboard: %r replayed delivery %s", caller.key_name, delivery_id)
    back = BACK.get(form.get("back", ""), BACK["dead-letters"])
    if form.get("back") == "message":  # its notification's page, by an id checked here
        try:
            back = f"/dashboard/messages/{uuid.UUID(form.get('notification', ''))}"
        except ValueError:
            pass
    query = urlencode({"replayed": str(delivery_id), "outcome": outcome})
    return RedirectResponse(f"{back}?{query}", 303)
