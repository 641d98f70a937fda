"""X-Twilio-Signature: the documented test vector and a cross-check with twilio-python."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from twilio.request_validator import RequestValidator

from tidings.providers.twilio.signature import (
    algorithm_from_settings,
    body_sha256,
    compute_signature,
    verify_json_signature,
    verify_signature,
)

TOKEN = "12345"
URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Caller": "+12349013030",
    "Digits": "1234",
    "From": "+12349013030",
    "To": "+18005551212",
}
EXPECTED = "0/KCTR6DLpKmkAf8muzZqo1nDgQ="

CALLBACK_URL = "https://tidings.example.com/v1/webhooks/twilio?account=main"
CALLBACK = {
    "MessageSid": "SM" + "a1" * 16,
    "MessageStatus": "undelivered",
    "AccountSid": "AC" + "b2" * 16,
    "From": "+15005550006",
    "To": "+15551230001",
    "ApiVersion": "2010-04-01",
    "ErrorCode": "30005",
}


def test_reference_vector() -> None:
    assert compute_signature(TOKEN, URL, PARAMS) == EXPECTED
    assert verify_signature(TOKEN, URL, PARAMS, EXPECTED)


def test_parameter_order_does_not_matter_but_names_are_sorted() -> None:
    reversed_params = dict(reversed(list(PARAMS.items())))
    assert compute_signature(TOKEN, URL, reversed_params) == EXPECTED


@pytest.mark.parametrize("algorithm", ["HMAC_SHA1", "HMAC_SHA256"])
def test_what_we_sign_twilio_python_validates_and_back(algorithm: str) -> None:
    theirs = RequestValidator("auth-token-0123")
    ours = compute_signature("auth-token-0123", CALLBACK_URL, CALLBACK, algorithm)
    assert theirs.validate(CALLBACK_URL, CALLBACK, ours, algorithm=algorithm)
    computed = theirs.compute_signature(CALLBACK_URL, CALLBACK, algorithm=algorithm)
    assert computed == ours
    assert verify_signature("auth-token-0123", CALLBACK_URL, CALLBACK, computed, algorithm)


def test_the_url_is_accepted_with_or_without_its_default_port() -> None:
    theirs = RequestValidator(TOKEN)
    with_port = "https://mycompany.com:443/myapp.php?foo=1&bar=2"
    signed_without = theirs.compute_signature(URL, PARAMS)
    signed_with = theirs.compute_signature(with_port, PARAMS)
    assert verify_signature(TOKEN, with_port, PARAMS, signed_without)
    assert verify_signature(TOKEN, URL, PARAMS, signed_with)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda url, params: (url, params | {"Digits": "1235"}),
        lambda url, params: (url, params | {"Extra": "1"}),
        lambda url, params: (url.replace("foo=1", "foo=2"), params),
        lambda url, params: (url.replace("https", "http"), params),
        lambda url, params: (url, {k: v for k, v in params.items() if k != "To"}),
    ],
)
def test_tampering_fails(
    tamper: Callable[[str, dict[str, str]], tuple[str, dict[str, str]]],
) -> None:
    url, params = tamper(URL, PARAMS)
    assert not verify_signature(TOKEN, url, params, EXPECTED)
    assert not RequestValidator(TOKEN).validate(url, params, EXPECTED)


def test_wrong_token_missing_or_unknown_algorithm_fails() -> None:
    assert not verify_signature("54321", URL, PARAMS, EXPECTED)
    assert not verify_signature(TOKEN, URL, PARAMS, None)
    assert not verify_signature(TOKEN, URL, PARAMS, "")
    assert not verify_signature(TOKEN, URL, PARAMS, EXPECTED, algorithm="HMAC_MD5")


def test_json_body_variant_cross_checked() -> None:
    body = json.dumps({"MessageSid": CALLBACK["MessageSid"], "status": "delivered"})
    url = f"https://tidings.example.com/v1/webhooks/twilio?bodySHA256={body_sha256(body.encode()).decode()}"
    theirs = RequestValidator(TOKEN)
    ours = compute_signature(TOKEN, url)
    assert theirs.validate(url, body, ours)
    assert verify_json_signature(TOKEN, url, body.encode(), theirs.compute_signature(url, {}))
    tampered = body.replace("delivered", "failed")
    assert not verify_json_signature(TOKEN, url, tampered.encode(), ours)
    assert not theirs.validate(url, tampered, ours)
    no_hash = "https://tidings.example.com/v1/webhooks/twilio"
    assert not verify_json_signature(
        TOKEN, no_hash, body.encode(), compute_signature(TOKEN, no_hash)
    )


def test_repeated_parameters_contribute_each_value_sorted() -> None:
    single = compute_signature(TOKEN, URL, {"MediaUrl": "b"})
    repeated = compute_signature(TOKEN, URL, {"MediaUrl": ["b", "a"]})
    assert repeated != single
    assert repeated == compute_signature(TOKEN, URL + "MediaUrla", {"MediaUrl": "b"})


def test_algorithm_from_the_settings_header() -> None:
    assert algorithm_from_settings(None) == "HMAC_SHA1"
    assert algorithm_from_settings("key=webhooks_sharedkey_1,algorithm=HMAC_SHA256") == (
        "HMAC_SHA256"
    )
