"""Guard for outbound webhooks: a target must resolve to public addresses only.

Without it, anyone who can register a webhook URL could make tidings POST to its own
network (metadata services on 169.254.169.254, admin ports on loopback, the LAN).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class UnsafeTarget(Exception):
    """The host resolves to an address we must not reach."""


def is_public(address: IPAddress) -> bool:
    """False for loopback, private, link-local, multicast, reserved, unspecified and shared
    addresses, and for IPv6 forms that embed such an IPv4 address (mapped, 6to4, NAT64)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return is_public(embedded)
    return address.is_global and not (
        address.is_multicast
        or address.is_loopback
        or address.is_link_local
        or address.is_reserved
        or address.is_unspecified
        or address.is_private
    )


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
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
