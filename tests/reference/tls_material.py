"""Certificates and stores for the TLS tests, made with ``cryptography`` in a directory of the test's.

Three authorities: the broker's (``ca``), a stranger's (``other``) and the one whose client certificates a broker
with ``needClientAuth`` accepts (``clients``).  The broker's certificate names 127.0.0.1 and localhost; a second one
(``wrong_host``) names only ``broker.invalid``.  Key stores are PKCS#12 with the chain; trust stores are PKCS#12
with certificate-only entries marked trusted for Java (what ``keytool -importcert -storetype PKCS12`` writes), and
one is PEM.  :func:`keytool_truststore` makes one with keytool itself when it is on PATH.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "tls-test-secret"  # a test store's
KEYTOOL = shutil.which("keytool")

_Issued = tuple[ec.EllipticCurvePrivateKey, x509.Certificate]


@dataclass(frozen=True)
class Material:
    directory: Path
    server_keystore: Path  # the broker's key and certificate (127.0.0.1, localhost), chain: ca
    wrong_host_keystore: Path  # a certificate issued by ca for broker.invalid only
    trust_ca: Path  # PKCS#12 trust store: ca
    trust_ca_pem: Path  # the same as PEM
    trust_other: Path  # PKCS#12 trust store: other only
    trust_clients: Path  # PKCS#12 trust store: clients (for needClientAuth)
    client_keystore: Path  # a client certificate issued by clients
    stranger_keystore: Path  # a client certificate issued by other
    ca_pem: Path  # ca's certificate alone, PEM (for keytool)
    password: str = PASSWORD


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _builder(subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2)))


def _authority(common: str) -> _Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (_builder(common, _name(common), key)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False, key_agreement=False,
                                                key_cert_sign=True, crl_sign=True, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .sign(key, hashes.SHA256()))
    return key, certificate


def _issue(common: str, issuer: _Issued, *, server: bool, names: tuple[str, ...] = ()) -> _Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (_builder(common, issuer[1].subject, key)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if names:
        alternatives: list[x509.GeneralName] = []
        for name in names:
            try:
                alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alternatives.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
    return key, builder.sign(issuer[0], hashes.SHA256())


def _encryption() -> serialization.KeySerializationEncryption:
    return serialization.BestAvailableEncryption(PASSWORD.encode())


def _keystore(path: Path, issued: _Issued, issuer: _Issued) -> Path:
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"key", issued[0], issued[1], [issuer[1]],
                                                           _encryption()))
    return path


def _truststore(path: Path, *authorities: _Issued) -> Path:
    entries = [pkcs12.PKCS12Certificate(a[1], f"ca{i}".encode()) for i, a in enumerate(authorities)]
    path.write_bytes(pkcs12.serialize_java_truststore(entries, _encryption()))
    return path


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def make_material(directory: Path) -> Material:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other, clients = _authority("tls test ca"), _authority("tls stranger ca"), _authority("tls client ca")
    server = _issue("broker", ca, server=True, names=("127.0.0.1", "localhost"))
    wrong_host = _issue("elsewhere", ca, server=True, names=("broker.invalid",))
    (directory / "ca.pem").write_bytes(_pem(ca[1]))
    (directory / "trust-ca.pem").write_bytes(_pem(ca[1]))
    return Material(
        directory=directory,
        server_keystore=_keystore(directory / "server.p12", server, ca),
        wrong_host_keystore=_keystore(directory / "wrong-host.p12", wrong_host, ca),
        trust_ca=_truststore(directory / "trust-ca.p12", ca),
        trust_ca_pem=directory / "trust-ca.pem",
        trust_other=_truststore(directory / "trust-other.p12", other),
        trust_clients=_truststore(directory / "trust-clients.p12", clients),
        client_keystore=_keystore(directory / "client.p12", _issue("client", clients, server=False), clients),
        stranger_keystore=_keystore(directory / "stranger.p12", _issue("stranger", other, server=False), other),
        ca_pem=directory / "ca.pem",
    )


def keytool_truststore(material: Material, path: Path) -> Path:
    """A PKCS#12 trust store holding ``ca``, written by Java's keytool (``-importcert -storetype PKCS12``)."""
    assert KEYTOOL is not None
    subprocess.run([KEYTOOL, "-importcert", "-noprompt", "-storetype", "PKCS12", "-keystore", str(path),
                    "-storepass", material.password, "-alias", "test-ca", "-file", str(material.ca_pem)],
                   check=True, capture_output=True, timeout=60)
    return path


def keytool_jks(material: Material, path: Path) -> Path:
    """A JKS key store (Java's own format) made by keytool."""
    assert KEYTOOL is not None
    subprocess.run([KEYTOOL, "-genkeypair", "-storetype", "JKS", "-keystore", str(path), "-storepass",
                    material.password, "-keypass", material.password, "-alias", "k", "-keyalg", "EC",
                    "-dname", "CN=jks"], check=True, capture_output=True, timeout=60)
    return path
