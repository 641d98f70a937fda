"""Addresses in API answers are masked: enough to recognise, not enough to harvest."""

from __future__ import annotations


def mask_address(channel: str, address: str) -> str:
    if not address:
        return ""
    if channel == "email" and "@" in address:
        local, _, domain = address.rpartition("@")
        return f"{local[:1]}***@{domain}"
    if channel == "sms":
        return f"{address[:3]}{'*' * max(0, len(address) - 5)}{address[-2:]}"
    if channel == "webhook" and "://" in address:
        scheme, _, rest = address.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}/…"
    if len(address) <= 12:
        return address[:2] + "…"
    return f"{address[:6]}…{address[-4:]}"
