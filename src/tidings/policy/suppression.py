"""The suppression list: (channel, address) pairs that nothing is ever sent to."""

from __future__ import annotations


def canonical_address(channel: str, address: str) -> str:
    """The form an address is suppressed and looked up in.

    Email addresses compare without case: a bounce for ``Ana@Example.com`` must stop mail to
    ``ana@example.com``. Phone numbers (E.164) and device tokens are compared as they are.
    """
    return address.lower() if channel == "email" else address
