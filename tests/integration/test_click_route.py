"""The click route as recipients meet it (docs/tracking.md, The links): ``/t/c/<token>``
answers 302 to the URI form of the very URL its token was made for, or 404 without a
``Location``, whatever the URL holds and whatever is done to the token; never another
URL, never a 5xx."""

from __future__ import annotations

import string
import time
import uuid
from typing import Any
from urllib.parse import quote, unquote_to_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidings.service import Service
from tidings.tracking.engagement_links import EngagementLinks
from tidings.tracking.uris import as_uri

DELIVERY = uuid.UUID("0190a6f0-0000-7000-8000-000000000001")
OTHER_DELIVERY = uuid.UUID("0190a6f0-0000-7000-8000-000000000002")
URI_CHARS = frozenset(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=")
HEX = frozenset(string.hexdigits)
# The client's database is shared by the examples; nothing they do depends on another's.
FUZZ: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture],
}

# (host as written in a message, the same host in a URI): IDNA's answers, written out.
HOSTS = [
    ("shop.example", "shop.example"),
    ("Shop.Example", "Shop.Example"),  # an ASCII host is left as written
    ("bücher.example", "xn--bcher-kva.example"),
    ("пример.испытание", "xn--e1afmkfd.xn--80akhbyknj4f"),
    ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
    ("faß.de", "xn--fa-hia.de"),  # UTS 46 as browsers apply it: ß is not "ss"
    ("shop.bücher.example", "shop.xn--bcher-kva.example"),
]
# Pieces that matter to the encoding, mixed with any character at all.
PIECES = ["%", "%20", "%e2%82%AC", "%zz", "%4", "?", "#", "&", "=", "/", "[", "]", "@", " "]
PIECES += ["€", "é", "ÿ", "П", "中", "😀", '"', "<", "\\", "^", "`", "{", "|", "\r\n", "\x00"]
# Characters a URL or a request can carry: UTF-8 has no lone surrogates (hypothesis makes
# them, and neither a message nor an HTTP request can hold one).
chars = st.characters(codec="utf-8")
rests = st.lists(st.one_of(chars, st.sampled_from(PIECES)), max_size=40).map("".join)


@st.composite
def urls(draw: st.DrawFn) -> tuple[str, str]:
    """(a URL as a message may hold it, the Location it must be redirected to)."""
    host, ascii_host = draw(st.sampled_from(HOSTS))
    scheme = draw(st.sampled_from(["https", "http", "HTTPS"]))
    port = draw(st.sampled_from(["", ":8080", ":"]))
    rest = "/" + draw(rests)
    return f"{scheme}://{host}{port}{rest}", f"{scheme}://{ascii_host}{port}{encoded(rest)}"


def encoded(text: str) -> str:
    """Every character a URI cannot hold as its UTF-8 %XX; escapes and the rest kept."""
    out, at = [], 0
    while at < len(text):
        if text[at] == "%" and len(text) >= at + 3 and set(text[at + 1 : at + 3]) <= HEX:
            out.append(text[at : at + 3])
            at += 3
            continue
        char = text[at]
        out.append(char if char in URI_CHARS else "".join(f"%{b:02X}" for b in char.encode()))
        at += 1
    return "".join(out)


def token_of(link: str) -> str:
    return link.rsplit("/", 1)[1]


async def follow(client: httpx.AsyncClient, token: str) -> httpx.Response:
    # Every character escaped, dots too: the client would take "." and ".." for segments.
    return await client.get("/t/c/" + quote(token, safe="").replace(".", "%2E"))


def assert_redirects_to(answer: httpx.Response, location: str) -> None:
    assert answer.status_code == 302, answer.text
    assert answer.headers["location"] == location
    assert set(location) <= URI_CHARS | {"%"}


def assert_refused(answer: httpx.Response) -> None:
    # A NUL anywhere in a path is refused (400) before any route (api/text_guard.py).
    nul = "\x00" in answer.request.url.path
    assert answer.status_code == (400 if nul else 404), answer.text
    assert "location" not in answer.headers


CASES = [
    ("https://shop.example/sale?id=7", "https://shop.example/sale?id=7"),
    ("https://shop.example/€/prix?d=10€", "https://shop.example/%E2%82%AC/prix?d=10%E2%82%AC"),
    (
        "https://shop.example/привет?q=да",
        "https://shop.example/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82?q=%D0%B4%D0%B0",
    ),
    ("https://shop.example/中文#片", "https://shop.example/%E4%B8%AD%E6%96%87#%E7%89%87"),
    ("https://shop.example/café?ü=ÿ", "https://shop.example/caf%C3%A9?%C3%BC=%C3%BF"),
    ("https://shop.example/a%20b/%E2%82%AC", "https://shop.example/a%20b/%E2%82%AC"),
    ("https://shop.example/50%/%zz", "https://shop.example/50%25/%25zz"),
    ('https://shop.example/a b?x="<y>"', "https://shop.example/a%20b?x=%22%3Cy%3E%22"),
    ("https://shop.example/:@!$&'()*+,;=?/[]#x", "https://shop.example/:@!$&'()*+,;=?/[]#x"),
    ("https://bücher.example:8443/é", "https://xn--bcher-kva.example:8443/%C3%A9"),
    ("https://anä:pw@例え.テスト/", "https://an%C3%A4:pw@xn--r8jz45g.xn--zckzah/"),
    ("https://[2001:db8::1]:8080/ü", "https://[2001:db8::1]:8080/%C3%BC"),
    ("https://€.example/", "https://%E2%82%AC.example/"),  # no IDN: percent-encoded instead
]


@pytest.mark.parametrize(("url", "location"), CASES)
async def test_a_link_is_redirected_to_as_a_uri(
    client: httpx.AsyncClient, service: Service, url: str, location: str
) -> None:
    answer = await follow(client, token_of(service.engagement.click_url(DELIVERY, url)))
    assert_redirects_to(answer, location)


@settings(max_examples=150, **FUZZ)
@given(url=urls())
async def test_any_url_is_redirected_to_its_uri_form(
    client: httpx.AsyncClient, service: Service, url: tuple[str, str]
) -> None:
    written, location = url
    answer = await follow(client, token_of(service.engagement.click_url(DELIVERY, written)))
    assert_redirects_to(answer, location)


@settings(max_examples=100, **FUZZ)
@given(prefix=st.sampled_from(["", "https://shop.example/"]), text=st.text(chars, max_size=300))
async def test_whatever_a_token_holds_is_answered_with_a_uri(
    client: httpx.AsyncClient, service: Service, prefix: str, text: str
) -> None:
    url = prefix + text
    answer = await follow(client, token_of(service.engagement.click_url(DELIVERY, url)))
    if not url.lower().startswith(("http://", "https://")):
        # Never signed by tidings; refused even when signed with its secret.
        assert answer.status_code == 404 and "location" not in answer.headers
        return
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert set(location) <= URI_CHARS | {"%"}
    if prefix:  # its host is ASCII: only percent-encoding stands between the two
        assert unquote_to_bytes(location) == unquote_to_bytes(url)


tampering = st.one_of(
    st.tuples(st.just("change"), st.integers(min_value=0), chars),
    st.tuples(st.just("truncate"), st.integers(min_value=0)),
    st.tuples(st.just("extend"), st.text(chars, min_size=1, max_size=20)),
    st.tuples(st.just("arbitrary"), st.text(chars, max_size=200)),
    st.tuples(st.just("other delivery")),
    st.tuples(st.just("other link"), urls()),
    st.tuples(st.just("other secret")),
    st.tuples(st.just("open token")),
)


def tampered(
    links: EngagementLinks, url: tuple[str, str], how: tuple[object, ...]
) -> tuple[str, str | None]:
    """(a token made from the one for ``url``, the Location it may still lead to, if any)."""
    written, location = url
    token = token_of(links.click_url(DELIVERY, written))
    match how:
        case ("change", int(at), str(char)):
            at %= len(token)
            return token[:at] + char + token[at + 1 :], location
        case ("truncate", int(at)):
            return token[: at % len(token)], location
        case ("extend", str(text)):
            return token + text, location
        case ("arbitrary", str(text)):
            return text, None
        case ("other delivery",):
            return token_of(links.click_url(OTHER_DELIVERY, written)), location
        case ("other link", (str(other), str(other_location))):
            return token_of(links.click_url(DELIVERY, other)), other_location
        case ("other secret",):
            stranger = EngagementLinks("another secret", links.public_url, 365)
            return token_of(stranger.click_url(DELIVERY, written)), None
        case ("open token",):
            return token_of(links.open_url(DELIVERY)), None
    raise AssertionError(how)


@settings(max_examples=300, **FUZZ)
@given(url=urls(), how=tampering)
async def test_a_tampered_token_never_leads_to_another_url(
    client: httpx.AsyncClient, service: Service, url: tuple[str, str], how: tuple[object, ...]
) -> None:
    token, location = tampered(service.engagement, url, how)
    answer = await follow(client, token)
    if location is not None and answer.status_code == 302:
        assert_redirects_to(answer, location)
    else:
        assert_refused(answer)


async def test_an_expired_token_is_refused_at_the_route(
    client: httpx.AsyncClient, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    days = service.settings.tracking_link_days
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now - (days + 1) * 86400)
    click = token_of(service.engagement.click_url(DELIVERY, "https://shop.example/"))
    pixel = token_of(service.engagement.open_url(DELIVERY))
    monkeypatch.setattr(time, "time", lambda: now - (days - 1) * 86400)
    fresh = token_of(service.engagement.click_url(DELIVERY, "https://shop.example/"))
    monkeypatch.setattr(time, "time", lambda: now)
    assert_refused(await follow(client, click))
    assert_refused(await client.get(f"/t/o/{pixel}"))
    assert_redirects_to(await follow(client, fresh), "https://shop.example/")


def test_a_uri_is_left_as_it_is() -> None:
    uri = "https://Shop.Example:8080/a%20b/:@!$&'()*+,;=?x=[1]&y=%E2%82%AC#top"
    assert as_uri(uri) == uri


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "data:text/html,<b>x</b>", "//evil.example/", "ftp://x.example/"]
)
async def test_a_signed_token_for_a_link_that_is_not_http_is_refused(
    client: httpx.AsyncClient, service: Service, url: str
) -> None:
    answer = await follow(client, token_of(service.engagement.click_url(DELIVERY, url)))
    assert answer.status_code == 404 and "location" not in answer.headers
