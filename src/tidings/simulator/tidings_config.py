"""The tidings configuration that points at a running simulator (``simulate --write-config``).

Every account uses the simulator's own credentials, so the file works as written:
``tidings serve --config tidings.toml``. Paths are absolute, so it works from any directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tidings.simulator.apns import ApnsSimulator
from tidings.simulator.fcm.api import TOKEN_PATH, FcmSimulator
from tidings.simulator.sendgrid import SendGridSimulator
from tidings.simulator.server import Simulator
from tidings.simulator.smtp import SmtpServer
from tidings.simulator.vonage import VonageSimulator
from tidings.simulator.webpush import WebPushSimulator

# Modest, so that a demo shows the rate limiter without ever waiting long.
RATE_PER_SECOND = 50.0
FROM_EMAIL = "tidings@example.com"
FROM_NUMBER = "+15005550006"  # Twilio's magic test number for a valid sender
CHAINS: dict[str, list[str]] = {
    "email": ["sendgrid-sim", "smtp-sim"],
    "sms": ["twilio-sim"],
    "push": ["fcm-sim"],
    "push_web": ["webpush-sim"],  # browsers' push subscriptions (Web Push)
    "webhook": ["webhook-sim"],
}
_WILDCARDS = {"", "0.0.0.0", "::"}


def client_host(host: str) -> str:
    """Where a client on this machine reaches a listener bound to ``host``."""
    return "127.0.0.1" if host in _WILDCARDS else host


def base_url(sim: Simulator) -> str:
    return f"http://{client_host(sim.config.host)}:{sim.http_port}"


def accounts(sim: Simulator) -> dict[str, dict[str, Any]]:
    """``[accounts.*]`` tables for every simulated provider, by account name."""
    url = base_url(sim)
    config = sim.config
    fcm, apns, sendgrid = sim.http["fcm"], sim.http["apns"], sim.http["sendgrid"]
    assert isinstance(fcm, FcmSimulator) and isinstance(apns, ApnsSimulator)
    assert isinstance(sendgrid, SendGridSimulator)
    found = {
        "smtp-sim": _smtp(sim),
        "sendgrid-sim": {
            "kind": "sendgrid",
            "api_key": config.sendgrid_api_key,
            "base_url": url,
            "from_email": FROM_EMAIL,
            "event_webhook_public_key": sendgrid.events.public_key,
        },
        "mailgun-sim": {
            "kind": "mailgun",
            "api_key": config.mailgun_api_key,
            "domain": config.mailgun_domains[0],
            "base_url": url,
            "from_email": FROM_EMAIL,
            "webhook_signing_key": config.mailgun_webhook_signing_key,
        },
        "postmark-sim": {
            "kind": "postmark",
            "server_token": config.postmark_server_token,
            "base_url": url,
            "from_email": FROM_EMAIL,
            "webhook_username": config.postmark_webhook_username,
            "webhook_password": config.postmark_webhook_password,
        },
        "resend-sim": {
            "kind": "resend",
            "api_key": config.resend_api_key,
            "base_url": url,
            "from_email": FROM_EMAIL,
            "webhook_secret": config.resend_webhook_secret,
        },
        "sparkpost-sim": {
            "kind": "sparkpost",
            "api_key": config.sparkpost_api_key,
            "base_url": url,
            "from_email": FROM_EMAIL,
            "webhook_username": config.sparkpost_webhook_username,
            "webhook_password": config.sparkpost_webhook_password,
        },
        "ses-sim": _ses(sim),
        "twilio-sim": {
            "kind": "twilio",
            "account_sid": config.twilio_account_sid,
            "auth_token": config.twilio_auth_token,
            "from_number": FROM_NUMBER,
            "base_url": url,
        },
        "vonage-sim": _vonage(sim),
        "fcm-sim": {
            "kind": "fcm",
            "service_account_file": fcm.service_account_path.resolve(),
            "base_url": url,
            "token_uri": f"{url}{TOKEN_PATH}",
        },
        "apns-sim": {
            "kind": "apns",
            "team_id": config.push.apns_team_id,
            "key_id": config.push.apns_key_id,
            "private_key_file": apns.key_path.resolve(),
            "topic": config.push.apns_topic,
            "base_url": url,
        },
        "webhook-sim": {
            "kind": "webhook",
            "secret": config.webhook_secret,
            "allow_private": True,  # the receiver is on loopback
            "allow_insecure": True,  # over plain http
        },
        "webpush-sim": _webpush(sim),
    }
    return {
        name: {**account, "rate_per_second": RATE_PER_SECOND} for name, account in found.items()
    }


def _vonage(sim: Simulator) -> dict[str, Any]:
    vonage = sim.http["vonage"]
    assert isinstance(vonage, VonageSimulator)
    # The application JWT, as Vonage recommends for the Messages API.
    account = vonage.account(jwt_auth=True, base_url=base_url(sim))
    return {**account, "private_key_file": vonage.key_path.resolve()}


def _webpush(sim: Simulator) -> dict[str, Any]:
    webpush = sim.http["webpush"]
    assert isinstance(webpush, WebPushSimulator)
    return {**webpush.account(), "vapid_private_key_file": webpush.vapid_key_path.resolve()}


def _ses(sim: Simulator) -> dict[str, Any]:
    ses, url = sim.config.ses, base_url(sim)
    account: dict[str, Any] = {
        "kind": "ses",
        "access_key_id": ses.access_key_id,
        "secret_access_key": ses.secret_access_key,
        "region": ses.region,
        "base_url": url,
        "from_email": FROM_EMAIL,
        "sns_topic_arns": [ses.topic_arn],
        "sns_trusted_origins": [url],  # its SNS serves certificates over plain http
    }
    if ses.session_token:
        account["session_token"] = ses.session_token
    return account


def _smtp(sim: Simulator) -> dict[str, Any]:
    server = sim.servers["smtp"]
    assert isinstance(server, SmtpServer)
    config = sim.config
    # The certificate names localhost and the bound address; a wildcard bind is reached
    # (and its certificate checked) as localhost.
    host = "localhost" if config.host in _WILDCARDS else config.host
    account: dict[str, Any] = {
        "kind": "smtp",
        "host": host,
        "port": server.port,
        "tls": config.smtp_tls,
        "from_address": FROM_EMAIL,
    }
    if config.smtp_username is not None:
        account |= {"username": config.smtp_username, "password": config.smtp_password}
    if server.cert_file is not None:  # made at start when the server does TLS
        account["ca_file"] = server.cert_file.resolve()
    return account


def render(sim: Simulator) -> str:
    """The TOML text: accounts, then the failover chain of each channel."""
    lines = [
        "# Written by `tidings simulate`: provider accounts pointing at the simulator at",
        f"# {base_url(sim)} (SMTP on port {sim.servers['smtp'].port}).",
        "# Use it with: tidings serve --config <this file>",
        "",
        "[providers]",
        *(f"{channel} = {_value(chain)}" for channel, chain in CHAINS.items()),
    ]
    for name, account in accounts(sim).items():
        lines += ["", f"[accounts.{name}]"]
        lines += [f"{key} = {_value(value)}" for key, value in account.items()]
    return "\n".join(lines) + "\n"


def write(sim: Simulator, path: Path) -> None:
    """Write the configuration whole (a reader never sees half a file); it holds secrets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(render(sim))
    partial.chmod(0o600)
    os.replace(partial, path)


def _value(value: Any) -> str:
    """A TOML value: the few types these tables hold (JSON strings are TOML strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)
