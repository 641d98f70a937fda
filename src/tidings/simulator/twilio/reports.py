"""The simulated Twilio's messages back: status callbacks and the recipient's replies.

As Twilio documents them ("Outbound message status in status callbacks"; "Webhooks
security"): after a message is created Twilio POSTs a form to its ``StatusCallback`` URL on
each status change (``sent``, then ``delivered``, ``undelivered`` or ``failed`` with an
``ErrorCode``), and a reply to the sending number is POSTed to the number's messaging URL
(``From`` the recipient, ``Body`` as typed). Each request is signed: ``X-Twilio-Signature``
is base64 of HMAC-SHA1, keyed with the auth token, over the full URL followed by every
form parameter sorted by name, as name then value.

A recipient who replies STOP (or UNSUBSCRIBE, CANCEL, END, QUIT, STOPALL) is opted out by
Twilio itself: a later message to that number is refused with error 21610; START or UNSTOP
opts them back in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

import httpx

from tidings.simulator.behaviour import ProviderState
from tidings.simulator.reports import Reporter

SIGNATURE_HEADER = "X-Twilio-Signature"
API_VERSION = "2010-04-01"
STOP_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"})
START_WORDS = frozenset({"START", "UNSTOP"})


def signature(auth_token: str, url: str, form: dict[str, str]) -> str:
    signed = url + "".join(name + form[name] for name in sorted(form))
    digest = hmac.new(auth_token.encode(), signed.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


class TwilioReports:
    def __init__(
        self, state: ProviderState, account_sid: str, auth_token: str, inbound_url: str | None
    ) -> None:
        self.state = state
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.inbound_url = inbound_url
        self.opted_out: set[str] = set()
        self.reporter = Reporter(state, self._post)

    def created(
        self, message: dict[str, str | None], callback: str | None, refused: str | None = None
    ) -> tuple[str, str | None]:
        """Schedule what follows the creation of ``message`` (Twilio's message JSON); the
        message's final status and error code. ``refused``: the code the channel (WhatsApp)
        fails it with; a WhatsApp message may also be ``read`` (the outcome ``read``)."""
        to, sender = str(message["to"]), str(message["from"] or "")
        outcome = self.state.report_outcome(to)
        if refused is not None:
            outcome = f"failed:{refused}"
        status, _, code = outcome.partition(":")
        if callback:
            base = {
                "AccountSid": self.account_sid,
                "ApiVersion": API_VERSION,
                "From": sender,
                "To": to,
                "MessageSid": str(message["sid"]),
                "SmsSid": str(message["sid"]),
            }
            self._status(callback, base, "sent", None, delay_ms=0)
            final = status if status in ("undelivered", "failed") else "delivered"
            self._status(callback, base, final, code or None)
            if outcome == "read" and to.startswith("whatsapp:"):
                self._status(callback, base, "read", None)
        if outcome == "stop":
            self.reply(to, sender, "STOP")
        if status in ("undelivered", "failed"):
            return status, code or None
        return "delivered", None

    def reply(self, sender: str, to: str, body: str) -> None:
        """``sender`` (a recipient) texts ``body`` to our number ``to``."""
        word = body.strip().upper()
        if word in STOP_WORDS:
            self.opted_out.add(sender)
        elif word in START_WORDS:
            self.opted_out.discard(sender)
        if self.inbound_url is None:
            return
        sid = "SM" + secrets.token_hex(16)
        form = {
            "AccountSid": self.account_sid,
            "ApiVersion": API_VERSION,
            "MessageSid": sid,
            "SmsSid": sid,
            "SmsMessageSid": sid,
            "From": sender,
            "To": to,
            "Body": body,
            "NumMedia": "0",
            "NumSegments": "1",
        }
        if word in STOP_WORDS:
            form["OptOutType"] = "STOP"
        self.reporter.schedule((self.inbound_url, form))

    def _status(
        self,
        url: str,
        base: dict[str, str],
        status: str,
        code: str | None,
        delay_ms: float | None = None,
    ) -> None:
        form = base | {"MessageStatus": status, "SmsStatus": status}
        if code:
            form["ErrorCode"] = code
        self.reporter.schedule((url, form), delay_ms)

    async def _post(self, client: httpx.AsyncClient, items: list[object]) -> httpx.Response:
        [item] = items
        assert isinstance(item, tuple)
        url: str = item[0]
        form: dict[str, str] = item[1]
        headers = {SIGNATURE_HEADER: signature(self.auth_token, url, form)}
        return await client.post(url, data=form, headers=headers)
