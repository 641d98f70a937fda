"""The settings of the bounce listener (``[bounces]``), read by ``bounce_listener.py``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class BounceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Where the SMTP listener for delivery status notifications listens, "host:port": port
    # 25 of the MX of ``domain``, or a loopback port a relay forwards bounces to.
    listen: str
    # The domain of the accounts' return paths (bounces+{delivery}@<domain>): the listener
    # refuses mail to any other (550 5.1.1).
    domain: str
    # Larger messages are refused (552); a DSN returning the whole original is rarely 100 KB.
    max_message_bytes: int = Field(default=1024 * 1024, ge=10_000, le=50 * 1024 * 1024)

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, value: str) -> str:
        split_listen(value)
        return value

    @field_validator("domain")
    @classmethod
    def _a_domain(cls, value: str) -> str:
        domain = value.strip().rstrip(".").lower()
        if not domain or "@" in domain or any(c.isspace() for c in domain):
            raise ValueError(f"not a domain: {value!r} (expected bounces.example.com)")
        return domain if domain.isascii() else domain.encode("idna").decode("ascii")

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]


def split_listen(value: str) -> tuple[str, int]:
    """``"127.0.0.1:2526"`` or ``"[::1]:25"`` -> (host, port); ValueError otherwise."""
    host, colon, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen must be host:port (127.0.0.1:2526), not {value!r}")
    return host, int(port)
