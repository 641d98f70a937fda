"""The SSRF guard (docs/security.md, Outbound requests): an explicit table of refused
networks, judged alike on every Python (the venv's is the oldest supported, 3.11, whose
``ipaddress`` calls fec0::/10 global); URLs that URL parsers read differently are refused
at the API naming the field; and a URL no request can be made to fails at once, not after
six tries inside the HTTP client."""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.helpers import email_to, eventually, post, put_type, running_dispatcher
from tests.integration.test_producer_webhooks import pushing
from tests.integration.test_provider_webhook import account, hook
from tidings.api.routes.webhook_endpoints import new_secret
from tidings.clock import utcnow
from tidings.providers.base import PermanentError
from tidings.providers.ssrf import UnsafeTarget, is_public, safe_addresses, url_problem
from tidings.providers.testing import ScriptedProvider
from tidings.providers.webhook import WebhookProvider
from tidings.service import Service
from tidings.settings import Settings
from tidings.simulator.server import Simulator, SimulatorConfig
from tidings.store import producer_hooks

REFUSED = [
    # IPv4: this network, private, shared (CGNAT), loopback, link-local, IETF, documentation,
    # 6to4 relay, benchmarking, multicast, reserved, broadcast.
    "0.0.0.0",
    "0.1.2.3",
    "10.1.2.3",
    "100.64.0.1",
    "100.127.255.254",
    "127.0.0.1",
    "127.255.0.9",
    "169.254.169.254",
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.1",
    "192.0.0.9",
    "192.0.0.170",
    "192.0.2.1",
    "192.88.99.1",
    "192.168.1.1",
    "198.18.0.1",
    "198.19.255.255",
    "198.51.100.7",
    "203.0.113.9",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    # IPv6: unspecified, loopback, IPv4-compatible, IPv4-mapped, IPv4-translated, NAT64
    # of a private address, local-use NAT64, discard, Teredo, documentation, 6to4 of a
    # private address, unique local, link-local, site-local, multicast, SRv6.
    "::",
    "::1",
    "::127.0.0.1",
    "::8.8.8.8",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:0:a00:1",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::c0a8:101",
    "64:ff9b:1::a00:1",
    "100::1",
    "2001::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:2::1",
    "2001:db8::1",
    "3fff::1",
    "2002:7f00:1::",
    "2002:a00:1::1",
    "2002:a9fe:a9fe::",
    "fc00::1",
    "fd12:3456:789a::1",
    "fe80::1",
    "febf::1",
    "fec0::1",
    "feff::1",
    "ff02::1",
    "ff0e::1",
    "5f00::1",
]
PUBLIC = [
    "8.8.8.8",
    "93.184.216.34",
    "100.63.255.255",
    "100.128.0.1",
    "172.32.0.1",
    "192.0.3.1",
    "198.20.0.1",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001::1",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


def test_the_oldest_supported_python_runs_these_tables() -> None:
    # pyproject's requires-python: the venv runs its oldest version (3.11).
    assert sys.version_info[:2] >= (3, 11)


@pytest.mark.parametrize("address", REFUSED)
def test_non_global_addresses_are_refused(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_global_addresses_are_allowed(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.1", "0", "[::1]", "localhost"],
)
async def test_every_ipv4_form_the_resolver_reads_is_judged_by_its_address(host: str) -> None:
    """The resolver reads inet_aton's forms (decimal, hex, octal, short) as 127.0.0.1: the
    address it answers is what is checked, and connected to."""
    with pytest.raises(UnsafeTarget):
        await safe_addresses(host.strip("[]"), 80, allow_private=False)


BAD_URLS = [
    "http://127.0.0.1:1\\@203.0.113.9/y",  # httpx: 203.0.113.9; a browser: 127.0.0.1:1
    "http://hooks.example.com\\@127.0.0.1/",
    "http://hooks.example.com\\x/",
    "https://hooks.example.com/a\\b",
    "http://user:pw@hooks.example.com/",
    "http://@hooks.example.com/",
    "https://hooks.example.com/a b",
    "https://hooks.example.com/\ta",
    " https://hooks.example.com/",
    "https://hooks.example.com/\u200b",
    "https://hooks.example.com/\x7f",
    "https://hooks.example.com/\x85",
    "https://hooks.example.com/a\r\nX-Injected: 1",
    "http://2130706433/",
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://1.2.3.4.5/",
    "http://%31%32%37.0.0.1/",
    "http://[fe80::1%25eth0]/",
    "http://[::1/",
    "http://hooks.example.com:0/",
    "http://hooks.example.com:65536/",
    "http://hooks.example.com:+80/",
    "http://hooks.example.com:/",
    "http://b\u00fccher.example/",
    "http:/hooks.example.com/",
    "http:hooks.example.com",
    "ftp://hooks.example.com/",
    "javascript:alert(1)",
]
GOOD_URLS = [
    "https://hooks.example.com/a?b=c#d",
    "HTTPS://Hooks.Example.COM./x",
    "http://203.0.113.9:8080/y",
    "http://[2001:db8::1]:8443/",
    "http://my_host.internal/x",
    "https://xn--bcher-kva.example/",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_urls_parsers_disagree_on_are_refused(url: str) -> None:
    assert url_problem(url) is not None


@pytest.mark.parametrize("url", GOOD_URLS)
def test_plain_urls_pass(url: str) -> None:
    assert url_problem(url) is None
    assert httpx.URL(url).host  # and the HTTP client reads them


BACKSLASH = "http://127.0.0.1:1\\@203.0.113.9/y"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_api_refuses_them_naming_the_field(
    client: httpx.AsyncClient, service: Service
) -> None:
    service.settings.webhooks.allow_private = False
    await put_type(client, channels=("webhook",), templates=False)
    for url in (BACKSLASH, "http://u@hooks.example.com/"):
        sent = await post(client, {"type": "order.confirmed", "to": {"webhookUrl": url}})
        assert sent.status_code == 422, sent.text
        assert sent.json()["error"]["field"] == "to.webhookUrl"
        made = await client.post(
            "/v1/webhook-endpoints", json={"url": url, "events": ["delivery.sent"]}
        )
        assert made.status_code == 422, made.text
        assert made.json()["error"]["field"] == "url"
        assert made.json()["error"]["code"] == "invalid_url"
    # fec0::/10 (site-local): Python 3.11 calls it global; the guard does not.
    site_local = await client.post(
        "/v1/webhook-endpoints", json={"url": "http://[fec0::1]/x", "events": ["delivery.sent"]}
    )
    assert site_local.status_code == 422, site_local.text
    assert site_local.json()["error"]["code"] == "private_url"


@pytest.fixture
async def sim(tmp_path: Any) -> AsyncIterator[Simulator]:
    async with Simulator(SimulatorConfig(credentials_dir=tmp_path)) as simulator:
        yield simulator


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:1\\@127.0.0.1:{port}/webhook-receiver/x",
        "http://user@127.0.0.1:{port}/webhook-receiver/x",
    ],
)
async def test_a_stored_url_the_client_cannot_send_to_fails_for_good(
    sim: Simulator, target: str
) -> None:
    """A webhook target stored before the API refused such URLs: permanent at the first
    attempt (it used to raise inside the HTTP client, six times), and nothing sent."""
    provider = WebhookProvider("hooks", account(sim))  # private and plain http allowed
    try:
        with pytest.raises(PermanentError) as caught:
            await provider.send(hook(target.format(port=sim.http_port)))
    finally:
        await provider.close()
    assert caught.value.reason == "invalid_target"
    assert sim.state("webhook").counts["requests"] == 0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    hooks = settings.webhooks.model_copy(
        update={"allow_private": True, "retry_delays": [0.05, 0.1], "poll_interval": 0.05}
    )
    return settings.model_copy(update={"webhooks": hooks})


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_producer_endpoint_that_cannot_be_sent_to_is_disabled_at_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    """Stored before the API refused it: disabled at its first attempt, not retried for
    the day ``give_up_after_hours`` allows."""
    assert service.settings.webhooks.give_up_after_hours >= 1
    url = BACKSLASH.replace("203.0.113.9", "127.0.0.1:9")
    endpoint = await producer_hooks.create(
        service.db, "default", url, ["delivery.sent"], None, new_secret(), utcnow()
    )
    await put_type(client, channels=("email",))
    async with pushing(service):
        await post(client, email_to())
        async with running_dispatcher(service, ScriptedProvider()):

            async def disabled() -> dict[str, Any] | None:
                shown = (await client.get(f"/v1/webhook-endpoints/{endpoint.id}")).json()
                return shown if shown["status"] == "disabled" else None

            shown = await eventually(disabled, within=15)
    assert "invalid" in shown["disabledReason"] or "URL" in shown["disabledReason"]
    [attempt] = (await client.get(f"/v1/webhook-endpoints/{endpoint.id}/attempts")).json()
    assert attempt["status"] == "FAILED" and attempt["attempts"] == 1
