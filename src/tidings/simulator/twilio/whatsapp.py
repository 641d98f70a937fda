"""The simulated Twilio's WhatsApp sender: a message whose ``To`` is ``whatsapp:+…``.

As Twilio documents it (Messages resource; "Send WhatsApp messages with Content
templates"; the error dictionary): ``From`` must be ``whatsapp:`` and one of the account's
WhatsApp senders (63007 otherwise, at once); an approved template is ``ContentSid`` (HX…,
21655 when unknown) with ``ContentVariables``, a JSON object of strings (21656 when not;
21654 without a ContentSid); free text is ``Body`` (at most 1,600 characters, 21617, as
for SMS). Twilio accepts the message (201) and then fails it in the status callback when
WhatsApp refuses it: free text outside the 24-hour window that a user's message opens
(63016), a template with the wrong number of variables (63028). Otherwise ``sent``,
``delivered`` and, when the behaviour reports it, ``read``. A user writing in
(``user_writes``) opens the window and is posted to the account's incoming-message URL,
signed like every callback."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from tidings.simulator.twilio.reports import API_VERSION, TwilioReports

PREFIX = "whatsapp:"
WINDOW_SECONDS = 24 * 3600
MAX_BODY = 1600  # characters of Body, on every channel (the Messages resource)


class TwilioWhatsApp:
    def __init__(
        self,
        reports: TwilioReports,
        senders: tuple[str, ...],
        contents: dict[str, int],
        inbound_url: str | None,
    ) -> None:
        self.reports = reports
        self.senders = {PREFIX + s for s in senders}
        self.contents = contents
        self.inbound_url = inbound_url
        self.windows: dict[str, float] = {}  # number (+E.164) -> when it last wrote in

    def invalid(self, form: dict[str, str]) -> int | None:
        """The error Twilio answers at once, or None (the message is created)."""
        if form.get("From") not in self.senders:
            return 63007
        if form.get("ContentVariables") and not form.get("ContentSid"):
            return 21654
        sid = form.get("ContentSid")
        if sid is None:
            body = form.get("Body", "")
            if not body:
                return 21602
            return 21617 if len(body) > MAX_BODY else None  # as for SMS: Body's own limit
        if sid not in self.contents:
            return 21655
        if _variables(form.get("ContentVariables")) is None:
            return 21656
        return None

    def refusal(self, form: dict[str, str]) -> str | None:
        """The code WhatsApp fails an accepted message with, reported in its callback."""
        sid = form.get("ContentSid")
        if sid is not None:
            given = _variables(form.get("ContentVariables")) or {}
            return None if len(given) == self.contents[sid] else "63028"
        number = form["To"].removeprefix(PREFIX)
        if time.time() - self.windows.get(number, -WINDOW_SECONDS) >= WINDOW_SECONDS:
            return "63016"
        return None

    def user_writes(self, number: str, body: str, at: float | None = None) -> None:
        """``number`` (+E.164) writes ``body`` to the first sender at ``at`` (default now)."""
        sent = time.time() if at is None else at
        self.windows[number] = max(sent, self.windows.get(number, sent))
        if self.inbound_url is None:
            return
        sid = "SM" + secrets.token_hex(16)
        form = {
            "AccountSid": self.reports.account_sid,
            "ApiVersion": API_VERSION,
            "MessageSid": sid,
            "SmsSid": sid,
            "SmsMessageSid": sid,
            "From": PREFIX + number,
            "To": sorted(self.senders)[0],
            "Body": body,
            "NumMedia": "0",
            "NumSegments": "1",
            "ProfileName": "A user",
            "WaId": number.removeprefix("+"),
        }
        self.reports.reporter.schedule((self.inbound_url, form), delay_ms=0)


def _variables(text: str | None) -> dict[str, str] | None:
    """ContentVariables as Twilio reads them: a JSON object of non-empty strings."""
    if text is None:
        return {}
    try:
        found: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict) or not all(isinstance(v, str) and v for v in found.values()):
        return None
    return found
