"""TLS for the reference broker's acceptors and the kit's client, configured as Artemis configures Netty.

Artemis names the stores and options with transport parameters (``TransportConstants``; user manual, "Configuring
the Transport", "Configuring Netty SSL"): ``keyStorePath``/``keyStorePassword``/``keyStoreType``,
``trustStorePath``/``trustStorePassword``/``trustStoreType``, ``enabledProtocols``, and on either side its own
switches (``needClientAuth``, ``trustAll``, ...).  This module turns them into an :class:`ssl.SSLContext`; the
callers (``reference.config`` for an acceptor, the client's settings for a connector) read the parameters.

Stores, read with the ``cryptography`` package:

* ``PKCS12``: a key store holds a private key, its certificate and the chain; a trust store holds certificates,
  as ``keytool -importcert -storetype PKCS12`` writes them (certificate-only entries).  Every certificate of a
  trust store is trusted, as Java's trust manager trusts every certificate entry (and a key entry's certificate).
* ``PEM``: a file of PEM blocks, the private key (encrypted with the store's password, or not) and certificates.
* ``JKS`` (Artemis's default type) and ``JCEKS``: Java's own formats, which nothing in Python reads.  A JVM since
  Java 9 reads a PKCS#12 file named ``JKS`` and a JKS file named ``PKCS12`` (``keystore.type.compat``), so the
  format is taken from the content: a PKCS#12 file named ``JKS`` (or with no type) is read, a JKS or JCEKS file is
  refused whatever its type, with the keytool command that converts it.  Other types (``JCEKS``, ``PKCS11``,
  ``BCFKS``, ...) are refused.

A path is a file name (a relative one against the working directory, as Java's ``File``) or a ``file:`` URL.
Errors are :class:`TlsConfigError`, naming the parameter at fault and the file.

The broker's listener puts each connection behind :func:`server_layers` (asyncio's TLS layer, which sends the alert
of a failed handshake); the client names a failed handshake with :func:`handshake_failure`.

A client certificate's subject is named by :func:`subject_dn` as Artemis's certificate login names it (the string
a ``TextFileCertificateLoginModule`` users file is compared with).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import ssl
import tempfile
from asyncio import sslproto
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

__all__ = [
    "TLS_HANDSHAKE_TIMEOUT_S",
    "KeyStore",
    "TlsConfigError",
    "TrustStore",
    "client_context",
    "handshake_failure",
    "parse_protocols",
    "server_context",
    "server_layers",
    "subject_dn",
]

#: How long a TLS handshake may take before the connection is dropped: Artemis's ``handshake-timeout`` default
#: (``TransportConstants.DEFAULT_HANDSHAKE_TIMEOUT``, 10 s), so a client that never completes one (a plain TCP
#: client that sent too few bytes to be refused) cannot hold a connection open.
TLS_HANDSHAKE_TIMEOUT_S = 10.0

#: Artemis's default store type (``TransportConstants.DEFAULT_KEYSTORE_TYPE`` / ``DEFAULT_TRUSTSTORE_TYPE``)
DEFAULT_STORE_TYPE = "JKS"
#: the types whose files may be PKCS#12 (a JVM reads PKCS#12 under both names, ``keystore.type.compat``)
_PKCS12_NAMES = frozenset({"PKCS12", "JKS"})
_JKS_MAGIC = {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}

#: ``enabledProtocols`` names (Java's) -> ssl's versions, in order
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}

_PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | dsa.DSAPrivateKey | ed25519.Ed25519PrivateKey \
    | ed448.Ed448PrivateKey


class TlsConfigError(ValueError):
    """A TLS parameter that cannot be used: ``parameter`` (Artemis's name) is at fault, ``path`` the file when one
    is involved; ``reason`` says what is wrong."""

    def __init__(self, parameter: str, reason: str, path: str | None = None) -> None:
        self.parameter = parameter
        self.reason = reason
        self.path = path
        super().__init__(f"{parameter}: {reason}")


@dataclass(frozen=True)
class _Store:
    path: str
    password: str | None = field(default=None, repr=False)
    #: as given; ``None``: absent (Artemis's default, JKS)
    type: str | None = None

    prefix = ""  # "keyStore" / "trustStore": the parameters' names

    def _read(self) -> tuple[bytes, str]:
        """The file's bytes and the type to read them as (PKCS12 or PEM)."""
        declared = (self.type or DEFAULT_STORE_TYPE).upper()
        if declared not in _PKCS12_NAMES and declared != "PEM":
            raise TlsConfigError(f"{self.prefix}Type", f"store type '{self.type}' is not supported (PKCS12, PEM; "
                                 "JKS when the file is PKCS#12)", self.path)
        target = _file_of(self.path, f"{self.prefix}Path")
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise TlsConfigError(f"{self.prefix}Path", f"cannot read '{self.path}': {exc.strerror or exc}",
                                 self.path) from None
        if declared == "PEM":
            return data, "PEM"
        java = _JKS_MAGIC.get(data[:4])
        if java is not None:
            raise TlsConfigError(
                f"{self.prefix}Type",
                f"'{self.path}' is a {java} store, which cannot be read here (only by a JVM); convert it with "
                f"'keytool -importkeystore -srckeystore {self.path} -destkeystore <new>.p12 -deststoretype PKCS12' "
                f"and set {self.prefix}Type=PKCS12", self.path)
        if not data.startswith(b"\x30"):  # a PKCS#12 PFX is a DER SEQUENCE
            hint = f" (it looks like PEM: set {self.prefix}Type=PEM)" if b"-----BEGIN" in data[:4096] else ""
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}' is not a PKCS#12 store{hint}", self.path)
        return data, "PKCS12"

    def _password(self) -> bytes | None:
        return None if self.password is None else self.password.encode("utf-8")

    def _pkcs12(self, data: bytes) -> pkcs12.PKCS12KeyAndCertificates:
        try:
            return pkcs12.load_pkcs12(data, self._password())
        except ValueError:
            raise TlsConfigError(f"{self.prefix}Password", f"cannot open the PKCS#12 store '{self.path}': wrong "
                                 "or missing password, or a damaged file", self.path) from None

    def _pem_certificates(self, data: bytes) -> list[x509.Certificate]:
        if b"-----BEGIN CERTIFICATE-----" not in data:
            return []
        try:
            return x509.load_pem_x509_certificates(data)
        except ValueError as exc:
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}' holds a certificate that cannot be read: "
                                 f"{exc}", self.path) from None


@dataclass(frozen=True)
class KeyStore(_Store):
    """Where a private key and its certificate chain are (Artemis ``keyStorePath`` and the rest)."""

    prefix = "keyStore"

    def load(self) -> tuple[_PrivateKey, list[x509.Certificate]]:
        """The private key and the chain, its own certificate first."""
        data, kind = self._read()
        if kind == "PKCS12":
            loaded = self._pkcs12(data)
            key, chain = loaded.key, ([loaded.cert.certificate] if loaded.cert is not None else [])
            chain += [c.certificate for c in loaded.additional_certs]
        else:
            key, chain = self._pem_key(data), self._pem_certificates(data)
        if key is None:
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}' holds no private key (a trust store, not a "
                                 "key store?)", self.path)
        if not isinstance(key, _PrivateKey):
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}': a {type(key).__name__} cannot sign a TLS "
                                 "handshake", self.path)
        if not chain:
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}' holds a private key but no certificate",
                                 self.path)
        return key, chain

    def _pem_key(self, data: bytes) -> PrivateKeyTypes | None:
        block = re.search(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", data, re.S)
        if block is None:
            return None
        encrypted = b"ENCRYPTED" in block.group(0)[:64] or b"Proc-Type: 4,ENCRYPTED" in block.group(0)
        try:
            return serialization.load_pem_private_key(block.group(0), self._password() if encrypted else None)
        except (ValueError, TypeError):
            raise TlsConfigError(f"{self.prefix}Password", f"cannot read the private key in '{self.path}': wrong "
                                 "password, or a damaged key", self.path) from None

    def load_into(self, context: ssl.SSLContext) -> None:
        """Give ``context`` this key and chain.  ssl reads them from files only: they are written, the key
        encrypted with a one-time password, to a private temporary directory that is removed at once."""
        key, chain = self.load()
        once = secrets.token_urlsafe(24)
        with tempfile.TemporaryDirectory(prefix="cck-tls-") as scratch:
            key_file, chain_file = Path(scratch) / "key.pem", Path(scratch) / "chain.pem"
            key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.BestAvailableEncryption(once.encode())))
            chain_file.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
            try:
                context.load_cert_chain(chain_file, key_file, password=once)
            except ssl.SSLError as exc:
                raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}': the key and certificate cannot be "
                                     f"used: {_ssl_reason(exc)}", self.path) from None


@dataclass(frozen=True)
class TrustStore(_Store):
    """Where the certificates a peer's must chain to are (Artemis ``trustStorePath`` and the rest)."""

    prefix = "trustStore"

    def load(self) -> list[x509.Certificate]:
        data, kind = self._read()
        if kind == "PKCS12":
            loaded = self._pkcs12(data)
            certificates = [c.certificate for c in loaded.additional_certs]
            if loaded.cert is not None:
                certificates.insert(0, loaded.cert.certificate)
        else:
            certificates = self._pem_certificates(data)
        if not certificates:
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}' holds no certificate", self.path)
        return certificates

    def load_into(self, context: ssl.SSLContext) -> None:
        pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in self.load())
        try:
            context.load_verify_locations(cadata=pem)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"{self.prefix}Path", f"'{self.path}': the certificates cannot be used: "
                                 f"{_ssl_reason(exc)}", self.path) from None


def _file_of(path: str, parameter: str) -> Path:
    if path.startswith("file:"):
        parsed = urlparse(path)
        if parsed.netloc not in ("", "localhost"):
            raise TlsConfigError(parameter, f"'{path}' is not a local file", path)
        return Path(unquote(parsed.path))
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]+:", path):
        raise TlsConfigError(parameter, f"'{path}': only files and file: URLs are supported", path)
    return Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)


def parse_protocols(text: str | None, parameter: str = "enabledProtocols") -> tuple[ssl.TLSVersion, ...] | None:
    """``enabledProtocols`` (``TLSv1.2,TLSv1.3``) as versions; ``None`` for none given (the defaults).  ssl sets a
    range of versions, so the list must be one (no gap)."""
    if text is None or not text.strip():
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in _PROTOCOLS]
    if unknown:
        raise TlsConfigError(parameter, f"{', '.join(unknown)}: not a protocol that can be enabled here "
                             f"({', '.join(_PROTOCOLS)})")
    order = list(_PROTOCOLS)
    positions = sorted({order.index(n) for n in names})
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise TlsConfigError(parameter, f"'{text}' leaves a gap: only a range of versions can be enabled here")
    return tuple(_PROTOCOLS[order[p]] for p in positions)


def _limit(context: ssl.SSLContext, protocols: Sequence[ssl.TLSVersion] | None) -> None:
    if protocols:
        context.minimum_version, context.maximum_version = protocols[0], protocols[-1]


def server_context(key_store: KeyStore, trust_store: TrustStore | None = None, *, need_client_auth: bool = False,
                   want_client_auth: bool = False,
                   protocols: Sequence[ssl.TLSVersion] | None = None) -> ssl.SSLContext:
    """An acceptor's context: it presents ``key_store``'s certificate; with ``need_client_auth`` a client must
    present one that chains to ``trust_store`` (or, without one, to the system's authorities, as a JVM falls back
    to its default trust store); ``want_client_auth`` asks for one and checks it only if given
    (``need_client_auth`` wins, as in Artemis)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _limit(context, protocols)
    key_store.load_into(context)
    if need_client_auth or want_client_auth:
        context.verify_mode = ssl.CERT_REQUIRED if need_client_auth else ssl.CERT_OPTIONAL
        if trust_store is not None:
            trust_store.load_into(context)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(trust_store: TrustStore | None = None, key_store: KeyStore | None = None, *,
                   trust_all: bool = False, verify_host: bool = True,
                   protocols: Sequence[ssl.TLSVersion] | None = None) -> ssl.SSLContext:
    """A connector's context: the server's certificate must chain to ``trust_store`` (without one, to the
    system's authorities, as a JVM's default trust store) and, with ``verify_host``, name the host connected to;
    ``trust_all`` checks nothing (Artemis's testing switch: it wins over the trust store).  ``key_store`` is the
    client's own certificate, for an acceptor with ``needClientAuth``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _limit(context, protocols)
    if trust_all:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = verify_host
        if trust_store is not None:
            trust_store.load_into(context)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if key_store is not None:
        key_store.load_into(context)
    return context


class _AlertingServerTLS(sslproto.SSLProtocol):
    """asyncio's own TLS layer, server side, with one change: a handshake that fails sends the alert OpenSSL wrote
    for it before the socket closes.  CPython's ``SSLProtocol._do_handshake`` closes the socket at once and drops
    the alert, so a client refused for its certificate (TLS 1.3 verifies it after the client's handshake is done)
    would only see the connection close; with the alert it learns why (``certificate required``, ``unknown ca``),
    as a client of Artemis's Netty acceptor does."""

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        if handshake_exc is not None:
            with contextlib.suppress(Exception):  # best effort: the close that follows is what matters
                getattr(self, "_process_outgoing")()  # noqa: B009 - not in typeshed's stub of SSLProtocol
        super()._on_handshake_complete(handshake_exc)


#: whether this Python's SSLProtocol is the one :class:`_AlertingServerTLS` amends (3.11's rewrite and later)
_ALERTS = callable(getattr(sslproto.SSLProtocol, "_process_outgoing", None)) and callable(
    getattr(sslproto.SSLProtocol, "_on_handshake_complete", None))


def server_layers(loop: asyncio.AbstractEventLoop, app_protocols: Callable[[], asyncio.Protocol],
                  context: ssl.SSLContext, handshake_timeout: float) -> Callable[[], asyncio.BaseProtocol] | None:
    """A protocol factory for a listener made without ``ssl=``: each accepted connection gets a TLS layer that does
    the handshake (bounded by ``handshake_timeout``), then hands the protocol ``app_protocols`` makes a transport of
    the plain bytes.  ``None`` on a Python whose TLS layer is not the one expected: listen with ``ssl=context``
    instead (failed handshakes then send no alert)."""
    if not _ALERTS:
        return None

    def layer() -> asyncio.BaseProtocol:
        return _AlertingServerTLS(loop, app_protocols(), context, None,  # type: ignore[arg-type]  # no one waits
                                  server_side=True,
                                  ssl_handshake_timeout=handshake_timeout)  # type: ignore[arg-type]  # a float

    return layer


def _ssl_reason(exc: ssl.SSLError) -> str:
    """``[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:1006)`` -> ``tlsv1 alert unknown ca``."""
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", text) or (exc.reason or type(exc).__name__)


def handshake_failure(exc: BaseException) -> str | None:
    """What a failed TLS handshake (or a TLS alert after it) says, in words, or ``None`` when ``exc`` is not a
    TLS error: ``certificate verify failed: unable to get local issuer certificate``,
    ``tlsv13 alert certificate required``."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}" if exc.verify_message else _ssl_reason(exc)
    if isinstance(exc, ssl.SSLError):
        return _ssl_reason(exc)
    return None


# --------------------------------------------------------------------------- certificate subjects

#: attribute OIDs -> the keywords Java's ``X500Name.toString`` prints (any other: ``OID.<dotted>``)
_DN_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.12": "T", "1.3.6.1.4.1.42.2.11.2.1": "IP", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "2.5.4.46": "DNQ", "2.5.4.4": "SURNAME", "2.5.4.42": "GIVENNAME", "2.5.4.43": "INITIALS",
    "2.5.4.44": "GENERATION", "1.2.840.113549.1.9.1": "EMAILADDRESS", "0.9.2342.19200300.100.1.1": "UID",
    "2.5.4.5": "SERIALNUMBER",
}  # fmt: skip
#: characters that make Java quote a value (and of them, ``"`` and ``\\`` are also escaped with a backslash)
_DN_SPECIAL = ',+=\n<>#;\\"'
#: ASN.1 PrintableString's characters besides letters and digits (what Java treats as ordinary text)
_PRINTABLE = frozenset(" '()+,-./:=?")


def _dn_value(text: str) -> str:
    """An attribute value as ``AVA.toString`` prints it: quoted when it holds a special character, starts or ends
    with a blank, or holds two blanks in a row; ``"`` and ``\\`` then escaped."""
    quoted = len(text) > 1 and text[0] == text[-1] == '"'
    quote = False
    blank_before = False
    out: list[str] = []
    for i, ch in enumerate(text):
        if quoted and i in (0, len(text) - 1):
            out.append(ch)
            continue
        if (ch.isascii() and ch.isalnum()) or ch in _PRINTABLE or ch in _DN_SPECIAL:
            if (i == 0 and ch in " \n") or ch in _DN_SPECIAL:
                quote = True
            if ch in " \n":
                quote = quote or blank_before
                blank_before = True
            else:
                if ch in '"\\':
                    out.append("\\")
                blank_before = False
        else:
            blank_before = False
        out.append(ch)
    value = "".join(out)
    if value[-1:] in (" ", "\n"):
        quote = True
    return f'"{value}"' if quote and not quoted else value


def _dn_attribute(attribute: x509.NameAttribute[str | bytes]) -> str:
    oid = attribute.oid.dotted_string
    keyword = _DN_KEYWORDS.get(oid, f"OID.{oid}")
    value = attribute.value
    if isinstance(value, bytes):  # not a string type (a bit string): Java prints the value in hex (not compared)
        return f"{keyword}=#{value.hex()}"
    return f"{keyword}={_dn_value(value)}"


def subject_dn(certificate: x509.Certificate) -> str:
    """The certificate's subject as Artemis's certificate login compares it: ``getSubjectDN().getName()`` of the
    JDK's certificate (``CertificateLoginModule.getDistinguishedName``), Java's ``X500Name.toString``.  That is not
    RFC 2253 (``X500Principal.getName()``): the relative names come most specific first joined by ``", "``, the
    values of a multi-valued one by ``" + "``, a value with a special character is quoted rather than escaped, and
    only Java's own keywords are names (``EMAILADDRESS``, ``DNQ``, ``OID.2.5.4.17``).  For the kit's names:
    ``CN=cck client, O=Core Conformance Kit``."""
    names = [" + ".join(_dn_attribute(a) for a in rdn) for rdn in certificate.subject.rdns]
    return ", ".join(reversed(names))
