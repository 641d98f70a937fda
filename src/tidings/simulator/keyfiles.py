"""Private keys the simulator hands to tidings (TLS, FCM service account, APNs .p8)."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes


def pkcs8_pem(key: PrivateKeyTypes) -> bytes:
    """The unencrypted PKCS#8 PEM form, as Apple's .p8 and Google's JSON keys hold it."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_secret(path: Path, data: bytes) -> None:
    """Write a credential file that only its owner may read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
