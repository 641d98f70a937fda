"""One-click unsubscribe (RFC 8058): signed links that switch a category off.

A token carries the user (or, for a notification sent to a bare address, the address), the
category and the channel, signed with the service's secret: it cannot be forged, and an
altered one fails its signature. A link rendered into a message also names its delivery,
so that an unsubscribe through it is counted in that delivery's history and reports; links
made before that (four fields) still read.
"""

from __future__ import annotations

import os
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

from itsdangerous import BadSignature, URLSafeSerializer

_SALT = "tidings.unsubscribe"


@dataclass(frozen=True)
class Unsubscribe:
    category: str
    channel: str
    user_id: str | None = None
    address: str | None = None
    delivery_id: uuid.UUID | None = None


class InvalidToken(Exception):
    pass


class Unsubscriber:
    def __init__(self, secret: str, public_url: str) -> None:
        self._serializer = URLSafeSerializer(secret, salt=_SALT)
        self.public_url = public_url.rstrip("/")

    def token(self, request: Unsubscribe) -> str:
        payload = [request.category, request.channel, request.user_id, request.address]
        if request.delivery_id is not None:
            payload.append(request.delivery_id.hex)
        return self._serializer.dumps(payload)

    def url(self, request: Unsubscribe) -> str:
        return f"{self.public_url}/u/{self.token(request)}"

    def read(self, token: str) -> Unsubscribe:
        try:
            category, channel, user_id, address, *delivery = self._serializer.loads(token)
            delivery_id = uuid.UUID(hex=delivery[0]) if delivery else None
        except (BadSignature, ValueError, TypeError, AttributeError):
            raise InvalidToken("this unsubscribe link is not valid") from None
        if len(delivery) > 1:
            raise InvalidToken("this unsubscribe link is not valid")
        return Unsubscribe(category, channel, user_id, address, delivery_id)

    def headers(self, request: Unsubscribe) -> dict[str, str]:
        """The two headers of RFC 8058, for a marketing email."""
        return {
            "List-Unsubscribe": f"<{self.url(request)}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        }


def load_secret(secret: str | None, secret_file: Path) -> str:
    """The configured secret, or one kept in ``secret_file`` (made on first use), so that the
    embedded mode's links survive a restart without any configuration."""
    if secret:
        return secret
    if not secret_file.exists():
        _create_secret_file(secret_file)
    return secret_file.read_text().strip()


def _create_secret_file(secret_file: Path) -> None:
    """Write a new secret to ``secret_file`` unless another process got there first.

    Several processes may start at once (``tidings api --workers N``): the secret is written
    whole to a private file, then hard-linked into place, which fails if the name exists, so
    every process ends up reading the one secret that won, never a half-written file."""
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    staging = secret_file.with_name(f".{secret_file.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(staging, secret_file)
        except FileExistsError:
            pass
    finally:
        staging.unlink(missing_ok=True)
