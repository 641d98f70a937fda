"""Amazon SNS message signatures, and which URLs an SNS message may make us fetch.

As the SNS developer guide documents it ("Verifying the signatures of Amazon SNS
messages"): the string to sign is ``name\\nvalue\\n`` for each of a fixed list of fields in
that order, ``Message, MessageId, Subject (if present), Timestamp, TopicArn, Type`` for a
``Notification`` and ``Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type``
for a ``SubscriptionConfirmation`` or ``UnsubscribeConfirmation``. ``Signature`` is base64
of an RSA PKCS#1 v1.5 signature over it, SHA-1 for ``SignatureVersion`` 1 and SHA-256 for 2,
by the key of the X.509 certificate at ``SigningCertURL``.

That certificate, and the ``SubscribeURL`` we confirm, are trusted only at
``https://sns.<region>.amazonaws.com`` (``.amazonaws.com.cn`` in China) where ``<region>`` is
the topic's, or at an origin the account explicitly trusts (a simulator's): a message could
otherwise name a certificate of its author's, or make tidings fetch any URL.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

NOTIFICATION = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
SIGNED_FIELDS = {
    "Notification": NOTIFICATION,
    "SubscriptionConfirmation": CONFIRMATION,
    "UnsubscribeConfirmation": CONFIRMATION,
}
OPTIONAL = frozenset({"Subject"})
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:([a-z0-9-]+):\d{12}:[A-Za-z0-9_.-]+")
_MAX_SIGNATURE = 2048  # base64 characters: an RSA-8192 signature is 1,368


def string_to_sign(message: Mapping[str, Any]) -> bytes | None:
    """The bytes SNS signed, or None when ``message`` is not an SNS message of a known type."""
    kind = message.get("Type")
    names = SIGNED_FIELDS.get(kind) if isinstance(kind, str) else None
    if names is None:
        return None
    parts = []
    for name in names:
        value = message.get(name)
        if value is None and name in OPTIONAL:
            continue
        if not isinstance(value, str):
            return None
        parts.append(f"{name}\n{value}\n")
    return "".join(parts).encode()


def signature_valid(
    message: Mapping[str, Any], certificate: x509.Certificate, now: datetime
) -> bool:
    """True when ``certificate`` (valid at ``now``) signed ``message`` as SNS does."""
    signed = string_to_sign(message)
    algorithm = _HASHES.get(str(message.get("SignatureVersion")))
    signature = message.get("Signature")
    if signed is None or algorithm is None or not isinstance(signature, str):
        return False
    if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
        return False
    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey) or len(signature) > _MAX_SIGNATURE:
        return False
    try:
        raw = base64.b64decode(signature, validate=True)
        key.verify(raw, signed, padding.PKCS1v15(), algorithm())
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def topic_region(topic_arn: str) -> str | None:
    """The region of an SNS topic ARN (``arn:aws:sns:<region>:<account>:<name>``)."""
    found = _TOPIC_ARN.fullmatch(topic_arn)
    return found.group(1) if found else None


def trusted_url(url: Any, region: str, origins: Sequence[str] = ()) -> bool:
    """True for an https URL on SNS's host in ``region``, or on one of ``origins``."""
    if not isinstance(url, str) or not url.isascii():
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    if parts.username is not None or parts.password is not None:
        return False
    if f"{parts.scheme}://{parts.netloc.lower()}" in origins:
        return True
    hosts = (f"sns.{region}.amazonaws.com", f"sns.{region}.amazonaws.com.cn")
    return parts.scheme == "https" and port in (None, 443) and parts.hostname in hosts
