"""Guard for outbound requests to URLs someone else chose (webhook targets, producers'
webhook endpoints, push subscriptions): a target must resolve to public addresses only.

Without it, anyone who can register a webhook URL could make tidings POST to its own
network (metadata services on 169.254.169.254, admin ports on loopback, the LAN).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# The networks no outbound request may reach, written out rather than read from
# ``is_global``/``is_private``: their answers changed between Python versions (3.11 calls
# fec0::/10 and ::127.0.0.1 global, ::ffff:127.0.0.1 not loopback).
_REFUSED_V4 = tuple(
    ipaddress.IPv4Network(network)
    for network in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local: cloud metadata services
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
    )
)
# IPv6: only global unicast may be reached at all, so loopback, unspecified, IPv4-compatible
# (::/96), IPv4-translated, discard, local NAT64 (64:ff9b:1::/48), SRv6, unique local
# (fc00::/7), link-local, site-local (fec0::/10) and multicast are out by this one rule...
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
# ...and within it, these.
_REFUSED_V6 = tuple(
    ipaddress.IPv6Network(network)
    for network in (
        "2001::/23",  # IETF protocol assignments, Teredo (2001::/32) among them
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)
# IPv6 forms that carry an IPv4 address: judged by the IPv4 address they reach.
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


class UnsafeTarget(Exception):
    """The host resolves to an address we must not reach."""


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` may be reached: in no refused network, and for an IPv6 form that
    embeds an IPv4 address (mapped, NAT64, 6to4), that IPv4 address in none either."""
    if isinstance(address, ipaddress.IPv4Address):
        return not any(address in network for network in _REFUSED_V4)
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        return is_public(embedded)
    if address not in _GLOBAL_UNICAST:
        return False
    return not any(address in network for network in _REFUSED_V6)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    value = int(address)
    if address in _MAPPED or address in _NAT64:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    return None


# A host name: labels of letters, digits, "-" and "_" (some internal names use it), with an
# optional final dot. Anything else ("%", a second "[", non-ASCII) is read differently by
# different URL parsers.
_HOST_NAME = re.compile(
    r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?"
)
_AUTHORITY = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]]+)(?::(?P<port>[0-9]{1,5}))?")
# WHATWG reads a host whose last label is a number (decimal, 0x hex or 0-octal) as IPv4,
# in any of inet_aton's forms (2130706433, 0x7f.1, 0177.0.0.1): a mistake or an attempt.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*")


def url_problem(value: str) -> str | None:
    """What makes ``value`` a URL tidings will not send to (None: nothing), said after the
    field's name: an http(s) URL that every URL parser reads alike. Refused: whitespace,
    control characters and backslashes (``http://127.0.0.1:1\\@203.0.113.9/`` is one host to
    httpx and another to a browser), credentials (``user@``), hosts other than plain ASCII
    names, dotted-decimal IPv4 or bracketed IPv6, and ports other than 1-65535."""
    if any(c.isspace() or not c.isprintable() or c == "\\" for c in value):
        return "must not contain spaces, control characters or backslashes"
    try:
        parts = urlsplit(value)
    except ValueError:  # an unclosed "[", a netloc that changes under NFKC
        return "is not a URL every parser reads alike"
    if parts.scheme not in ("http", "https") or not value.lower().startswith(parts.scheme + "://"):
        return "must be an http(s)://host/... URL"
    if "@" in parts.netloc:
        return "must not carry credentials (user@host)"
    if not parts.netloc.isascii():
        return "must have an ASCII host (an international name in its xn-- form)"
    found = _AUTHORITY.fullmatch(parts.netloc)
    if found is None:
        return "must have a host name, a dotted IPv4 address or an [IPv6] address"
    problem = _host_problem(found["host"])
    if problem is not None:
        return problem
    port = found["port"]
    if port is not None and not 0 < int(port) < 65536:
        return "has a port outside 1-65535"
    return None


def _host_problem(host: str) -> str | None:
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return "has an invalid IPv6 address"
        return None
    if not _HOST_NAME.fullmatch(host):
        return "has an invalid host"
    last = host.rstrip(".").rsplit(".", 1)[-1]
    if _NUMERIC_LABEL.fullmatch(last):
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            address = None
        if address is None or str(address) != host:
            return "has a numeric host that is not a dotted-decimal IPv4 address"
    return None


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to, in the resolver's order, without duplicates."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
    return list(seen)


async def safe_addresses(host: str, port: int, allow_private: bool) -> list[IPAddress]:
    """The addresses to connect to; ``UnsafeTarget`` if any of them is not public.

    One private address among public ones is refused too: the caller connects to the
    checked addresses only, but a split answer is a typical DNS rebinding setup.
    """
    addresses = await resolve(host, port)
    if not allow_private:
        refused = [str(a) for a in addresses if not is_public(a)]
        if refused:
            raise UnsafeTarget(f"{host} resolves to non-public {', '.join(refused)}")
    return addresses
