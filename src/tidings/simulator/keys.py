"""The RSA key the simulated providers sign with (FCM's service account, SNS's certificate,
a Vonage application): one per process. Generating a 2048-bit key costs tens of
milliseconds, and a test suite starts a simulator hundreds of times; a simulator's key
needs to be secret from nobody, only to be a real key."""

from __future__ import annotations

import functools

from cryptography.hazmat.primitives.asymmetric import rsa


@functools.cache
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)
