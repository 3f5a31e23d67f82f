"""Keys and certificates for the TLS cases, made by the kit for one run: two certificate authorities (the
broker's and a stranger's), a server certificate for 127.0.0.1 and localhost issued by the first, client
certificates issued by each (and, for certificate login, more issued by the client authority, each with a subject
of its own), and the stores both brokers and the kit's client read.

Every store is PKCS#12 (Artemis reads it with ``keyStoreType=PKCS12``, the reference broker and the kit's client
with the ``cryptography`` package); trust stores hold certificate-only entries marked as trusted, as Java's
``keytool -importcert`` writes them, so a JVM takes them as trust anchors.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CERTIFIED", "STORE_PASSWORD", "TlsMaterial", "client_context", "make_material", "subject_of"]

#: the password of every store the kit writes (a test broker's, not a secret)
STORE_PASSWORD = "cck-store-secret"  # noqa: S105
#: long enough for any run, short enough that nothing mistakes these for real certificates
VALIDITY = datetime.timedelta(days=7)
ORGANIZATION = "Core Conformance Kit"
#: the client certificates for certificate login (the client authority issues them), by key: their common names
CERTIFIED = {"admin": "cck certificate admin", "sender": "cck sender", "reader": "cck reader",
             "unmapped": "cck unmapped"}


def subject_of(common: str) -> str:
    """The subject of the kit's certificate with common name ``common`` as Artemis's certificate login prints it
    (Java's ``X500Name.toString``: most specific first, ``", "`` between)."""
    return f"CN={common}, O={ORGANIZATION}"


@dataclass(frozen=True)
class TlsMaterial:
    """Where each store is, and what a case compares the broker's certificate with."""

    #: the broker's key and certificate (issued by the kit's authority), with the authority's certificate
    server_keystore: Path
    #: the kit's authority: what a client that trusts the broker trusts
    trust_broker: Path
    #: another authority only: a client that does not trust the broker
    trust_stranger: Path
    #: the authority whose client certificates a broker with needClientAuth accepts
    client_authority: Path
    #: a client's key and certificate issued by that authority, and one issued by the stranger
    client_keystore: Path
    stranger_keystore: Path
    #: keys of :data:`CERTIFIED` -> a key store of a client certificate with that subject (client authority)
    certified: dict[str, Path]
    #: SHA-256 of the server certificate (DER), lower-case hex
    server_fingerprint: str
    password: str = STORE_PASSWORD


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _authority(common: str, now: datetime.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    certificate = (
        x509.CertificateBuilder().subject_name(_name(common)).issuer_name(_name(common))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def _issued(common: str, issuer: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], now: datetime.datetime, *,
            server: bool) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    builder = (
        x509.CertificateBuilder().subject_name(_name(common)).issuer_name(issuer[1].subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                              else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    )
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return key, builder.sign(issuer[0], hashes.SHA256())


def _encryption() -> serialization.KeySerializationEncryption:
    return serialization.BestAvailableEncryption(STORE_PASSWORD.encode())


def _keystore(path: Path, alias: str, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate,
              chain: x509.Certificate) -> Path:
    path.write_bytes(pkcs12.serialize_key_and_certificates(alias.encode(), key, certificate, [chain],
                                                           _encryption()))
    return path


def _truststore(path: Path, alias: str, certificate: x509.Certificate) -> Path:
    entry = pkcs12.PKCS12Certificate(certificate, alias.encode())
    path.write_bytes(pkcs12.serialize_java_truststore([entry], _encryption()))
    return path


def make_material(directory: Path) -> TlsMaterial:
    """Write a fresh set of stores into ``directory`` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    kit = _authority("cck test authority", now)
    stranger = _authority("cck stranger authority", now)
    clients = _authority("cck client authority", now)
    server_key, server = _issued("cck broker", kit, now, server=True)
    client_key, client = _issued("cck client", clients, now, server=False)
    stranger_key, stranger_client = _issued("cck stranger client", stranger, now, server=False)
    certified = {}
    for key, common in CERTIFIED.items():
        issued_key, issued = _issued(common, clients, now, server=False)
        certified[key] = _keystore(directory / f"certified-{key}.p12", key, issued_key, issued, clients[1])
    return TlsMaterial(
        server_keystore=_keystore(directory / "broker-keystore.p12", "broker", server_key, server, kit[1]),
        trust_broker=_truststore(directory / "trust-broker.p12", "cck-authority", kit[1]),
        trust_stranger=_truststore(directory / "trust-stranger.p12", "stranger-authority", stranger[1]),
        client_authority=_truststore(directory / "trust-clients.p12", "client-authority", clients[1]),
        client_keystore=_keystore(directory / "client-keystore.p12", "client", client_key, client, clients[1]),
        stranger_keystore=_keystore(directory / "stranger-keystore.p12", "stranger", stranger_key,
                                    stranger_client, stranger[1]),
        certified=certified,
        server_fingerprint=hashlib.sha256(server.public_bytes(serialization.Encoding.DER)).hexdigest(),
    )


def _pem_of(store: Path, password: str) -> tuple[bytes, bytes, bytes]:
    """``(key, certificate, authorities)`` of a PKCS#12 store as PEM (empty where the store has none)."""
    loaded = pkcs12.load_pkcs12(store.read_bytes(), password.encode())
    key = b"" if loaded.key is None else loaded.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    certificate = b"" if loaded.cert is None else loaded.cert.certificate.public_bytes(serialization.Encoding.PEM)
    authorities = b"".join(c.certificate.public_bytes(serialization.Encoding.PEM) for c in loaded.additional_certs)
    return key, certificate, authorities


def client_context(material: TlsMaterial, *, trust: Path | None, identity: Path | None = None) -> ssl.SSLContext:
    """A TLS client context of the kit's own (no client library between the case and the broker): it verifies
    the broker against the authorities in ``trust`` (None: it verifies nothing) and presents the key and
    certificate of ``identity``.  The host name is not checked: the cases judge the broker's certificate chain
    and client authentication, and the server certificate names 127.0.0.1 and localhost anyway."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    if trust is None:
        context.verify_mode = ssl.CERT_NONE
    else:
        context.load_verify_locations(cadata=_pem_of(trust, material.password)[2].decode())
    if identity is not None:
        key, certificate, chain = _pem_of(identity, material.password)
        with tempfile.TemporaryDirectory(prefix="cck-tls-") as scratch:  # ssl reads a chain from files only
            chain_file, key_file = Path(scratch) / "chain.pem", Path(scratch) / "key.pem"
            chain_file.write_bytes(certificate + chain)
            key_file.write_bytes(key)
            context.load_cert_chain(chain_file, key_file)
    return context
