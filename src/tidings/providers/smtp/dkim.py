"""DKIM signatures (RFC 6376) for the SMTP kind, with dkimpy.

A receiving server checks them against the public key at ``<selector>._domainkey.<domain>``
(DNS TXT). The signature covers the headers a receiver shows or acts on, among them
``List-Unsubscribe`` and ``List-Unsubscribe-Post``, which RFC 8058 requires to be signed.
Headers are signed "relaxed", so a relay that refolds them does not break the signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dkim

if TYPE_CHECKING:
    from tidings.providers.smtp.adapter import SmtpAccount

SIGNED_HEADERS = (
    b"From",
    b"To",
    b"Cc",
    b"Reply-To",
    b"Subject",
    b"Date",
    b"Message-ID",
    b"MIME-Version",
    b"Content-Type",
    b"List-Unsubscribe",
    b"List-Unsubscribe-Post",
)


def check_dkim_settings(account: SmtpAccount) -> None:
    """All of domain, selector and one key, or none; the key must load."""
    given = [account.dkim_domain, account.dkim_selector]
    keys = [account.dkim_private_key, account.dkim_private_key_file]
    if not any(given) and not any(keys):
        return
    if not all(given) or sum(k is not None for k in keys) != 1:
        raise ValueError(
            "DKIM needs dkim_domain, dkim_selector and exactly one of dkim_private_key and "
            "dkim_private_key_file"
        )
    DkimSigner.of(account)  # a key that does not load fails at start, not at the first send


@dataclass(frozen=True)
class DkimSigner:
    domain: bytes
    selector: bytes
    private_key: bytes

    @classmethod
    def of(cls, account: SmtpAccount) -> DkimSigner | None:
        if account.dkim_domain is None or account.dkim_selector is None:
            return None
        if account.dkim_private_key is not None:
            key = account.dkim_private_key.get_secret_value().encode()
        elif account.dkim_private_key_file is not None:
            key = account.dkim_private_key_file.read_bytes()
        else:
            return None
        signer = cls(account.dkim_domain.encode("idna"), account.dkim_selector.encode(), key)
        signer.sign(b"From: a@example.com\r\n\r\ncheck\r\n")  # raises on an unusable key
        return signer

    def sign(self, raw: bytes) -> bytes:
        """``raw`` with its DKIM-Signature header first."""
        present = {line.split(b":", 1)[0].strip().lower() for line in _header_lines(raw)}
        headers = [h for h in SIGNED_HEADERS if h.lower() in present]
        try:
            signature = dkim.sign(
                raw,
                self.selector,
                self.domain,
                self.private_key,
                canonicalize=(b"relaxed", b"simple"),
                include_headers=headers,
            )
        except dkim.DKIMException as error:
            raise ValueError(f"DKIM signing failed: {error}") from error
        return bytes(signature) + raw


def _header_lines(raw: bytes) -> list[bytes]:
    head = raw.split(b"\r\n\r\n", 1)[0]
    return [line for line in head.split(b"\r\n") if line and not line[:1].isspace()]
