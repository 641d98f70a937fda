"""Who fetched a pixel or followed a link, as far as the User-Agent tells (docs/tracking.md).

Opens are approximate: Apple Mail Privacy Protection fetches every image of every message
through its proxies, opened or not, and security scanners follow links before anyone
clicks. Those are "machine" events; reports can leave them out.
"""

from __future__ import annotations

import re

MAIL_CLIENT = "mail_client"
IMAGE_PROXY = "image_proxy"  # Gmail's and Yahoo's proxies fetch when the recipient opens
PRIVACY_PREFETCH = "privacy_prefetch"  # Apple Mail Privacy Protection, opened or not
SCANNER = "scanner"  # link and attachment scanners, bots, scripts
UNKNOWN = "unknown"
MACHINE = frozenset({PRIVACY_PREFETCH, SCANNER, UNKNOWN})

_PROXIES = re.compile(r"GoogleImageProxy|YahooMailProxy|ggpht\.com", re.IGNORECASE)
_SCANNERS = re.compile(
    r"bot\b|crawler|spider|scanner|barracuda|mimecast|proofpoint|safelinks|"
    r"python-|curl/|wget/|go-http-client|okhttp|java/|libwww|headless|httpclient",
    re.IGNORECASE,
)


def agent_class(user_agent: str | None) -> str:
    if not user_agent or not user_agent.strip():
        return UNKNOWN
    agent = user_agent.strip()
    if _PROXIES.search(agent):
        return IMAGE_PROXY
    # Apple's proxies send a bare "Mozilla/5.0", which no real client does.
    if agent == "Mozilla/5.0":
        return PRIVACY_PREFETCH
    if _SCANNERS.search(agent):
        return SCANNER
    return MAIL_CLIENT


def provider_open(user_agent: object, machine_flag: object = None) -> dict[str, object]:
    """The detail of an open a provider reported: the client's class from the User-Agent it
    passed on, machine when the provider says so (SendGrid's ``sg_machine_open``) or the
    class is one of ``MACHINE``, so that reports leave such opens out as they do ours."""
    agent = agent_class(user_agent[:1000] if isinstance(user_agent, str) else None)
    return {"agent": agent, "machine": machine_flag is True or agent in MACHINE}
