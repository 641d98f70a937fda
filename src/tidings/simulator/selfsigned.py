"""A self-signed TLS certificate for simulated servers (SMTP STARTTLS and implicit TLS,
APNs over TLS).

Clients trust it by loading the certificate file as their CA (``ca_file``), so tests run
with certificate validation on.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tidings.simulator.keyfiles import pkcs8_pem, write_secret

# Strict X.509 verification (Python 3.13+) wants these on a certificate that is its own CA.
_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=False,
    encipher_only=False,
    decipher_only=False,
)


def self_signed(directory: Path, name: str, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """``(cert.pem, key.pem)`` under ``directory``, made once and reused afterwards."""
    cert_path = directory / f"{name}-cert.pem"
    key_path = directory / f"{name}-key.pem"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    write_secret(key_path, pkcs8_pem(key))
    cert_path.write_bytes(_certificate(key, host).public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def _certificate(key: ec.EllipticCurvePrivateKey, host: str) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tidings simulator")])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_KEY_USAGE, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )
