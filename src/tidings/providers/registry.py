"""Which provider sends each channel, built from settings."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tidings.priorities import Channel
from tidings.providers.base import Provider
from tidings.providers.sink import NoopProvider, SinkProvider
from tidings.providers.testing import RecordingProvider


def provider_from_spec(spec: str, outbox_dir: Path) -> Provider:
    """``sink``, ``noop`` or ``record:<path>[?delay_ms=N]``."""
    if spec == "sink":
        return SinkProvider(outbox_dir)
    if spec == "noop":
        return NoopProvider()
    if spec.startswith("record:"):
        parts = urlsplit(spec.removeprefix("record:"))
        delay_ms = float(parse_qs(parts.query).get("delay_ms", ["0"])[0])
        return RecordingProvider(Path(parts.path), delay=delay_ms / 1000)
    raise ValueError(f"unknown provider {spec!r}: expected sink, noop or record:<path>")


def providers_from_settings(specs: dict[str, str], outbox_dir: Path) -> dict[Channel, Provider]:
    """One provider per channel; channels sharing a spec share one provider instance."""
    built: dict[str, Provider] = {}
    providers: dict[Channel, Provider] = {}
    for channel in Channel:
        spec = specs.get(channel.value, "sink")
        if spec not in built:
            built[spec] = provider_from_spec(spec, outbox_dir)
        providers[channel] = built[spec]
    return providers
