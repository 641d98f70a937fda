"""SendGrid Event Webhook signatures: the published vector, the official library, the window."""

from __future__ import annotations

import json

from sendgrid.helpers.eventwebhook import EventWebhook

from tidings.providers.sendgrid.signature import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    EventWebhookSigner,
    EventWebhookVerifier,
)

# From SendGrid's documentation and sendgrid-python's tests.
VECTOR_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7"
    "yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
)
VECTOR_TIMESTAMP = "1588788367"
VECTOR_BODY = b'{"category":"example_payload","event":"test_event","message_id":"message_id"}'
VECTOR_SIGNATURE = (
    "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWY"
    "NH2j/0="
)
EVENTS = json.dumps(
    [{"email": "ada@example.com", "event": "delivered", "delivery_id": "d-1", "timestamp": 1}]
).encode()


def test_the_published_vector_verifies() -> None:
    verifier = EventWebhookVerifier(VECTOR_KEY, clock=lambda: float(VECTOR_TIMESTAMP) + 10)

    assert verifier.verify(VECTOR_BODY, VECTOR_SIGNATURE, VECTOR_TIMESTAMP)
    assert not verifier.verify(VECTOR_BODY + b" ", VECTOR_SIGNATURE, VECTOR_TIMESTAMP)
    assert not verifier.verify(VECTOR_BODY, VECTOR_SIGNATURE, "1588788368")
    assert not verifier.verify(VECTOR_BODY, "not base64!", VECTOR_TIMESTAMP)


def test_the_official_library_verifies_what_we_sign() -> None:
    signer = EventWebhookSigner()
    headers = signer.sign(EVENTS)
    theirs = EventWebhook(signer.public_key)
    ours = EventWebhookVerifier(signer.public_key)

    signature, timestamp = headers[SIGNATURE_HEADER], headers[TIMESTAMP_HEADER]
    assert theirs.verify_signature(EVENTS.decode(), signature, timestamp)
    assert ours.verify_headers(EVENTS, headers)

    tampered = EVENTS.replace(b"delivered", b"bounce")
    assert not theirs.verify_signature(tampered.decode(), signature, timestamp)
    assert not ours.verify_headers(tampered, headers)


def test_the_official_library_agrees_on_the_vector() -> None:
    assert EventWebhook(VECTOR_KEY).verify_signature(
        VECTOR_BODY.decode(), VECTOR_SIGNATURE, VECTOR_TIMESTAMP
    )


def test_timestamps_outside_five_minutes_are_refused() -> None:
    now = 1_700_000_000.0
    signer = EventWebhookSigner(clock=lambda: now)
    verifier = EventWebhookVerifier(signer.public_key, clock=lambda: now)

    assert verifier.verify_headers(EVENTS, signer.sign(EVENTS, int(now) - 300))
    assert verifier.verify_headers(EVENTS, signer.sign(EVENTS, int(now) + 300))
    assert not verifier.verify_headers(EVENTS, signer.sign(EVENTS, int(now) - 301))
    assert not verifier.verify_headers(EVENTS, signer.sign(EVENTS, int(now) + 301))


def test_headers_are_found_case_insensitively_and_required() -> None:
    signer = EventWebhookSigner()
    verifier = EventWebhookVerifier(signer.public_key)
    lowered = {name.lower(): value for name, value in signer.sign(EVENTS).items()}

    assert verifier.verify_headers(EVENTS, lowered)
    assert not verifier.verify_headers(
        EVENTS, {TIMESTAMP_HEADER: lowered[TIMESTAMP_HEADER.lower()]}
    )


def test_another_key_does_not_verify() -> None:
    signer, other = EventWebhookSigner(), EventWebhookSigner()
    restored = EventWebhookSigner.from_pem(signer.private_key_pem())

    assert restored.public_key == signer.public_key
    assert not EventWebhookVerifier(other.public_key).verify_headers(EVENTS, signer.sign(EVENTS))
