"""``subject_dn``: a certificate's subject as Artemis's certificate login compares it (Java's ``X500Name.toString``).
The expected strings are what OpenJDK 17 printed (``getSubjectDN().getName()``) for the same subjects."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ObjectIdentifier

from cck.reference._tls import subject_dn
from cck.reference.config import load_config

A = x509.NameAttribute


def _certificate(subject: x509.Name) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))


@pytest.mark.parametrize(("subject", "expected"), [
    (x509.Name([A(NameOID.ORGANIZATION_NAME, "Core Conformance Kit"), A(NameOID.COMMON_NAME, "cck client")]),
     "CN=cck client, O=Core Conformance Kit"),
    (x509.Name([A(NameOID.COUNTRY_NAME, "UK"), A(NameOID.STATE_OR_PROVINCE_NAME, "Some-State"),
                A(NameOID.LOCALITY_NAME, "L"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "a,b+c=d"),
                A(NameOID.COMMON_NAME, ' lead"q\\ ')]),
     'CN=" lead\\"q\\\\ ", OU="a,b+c=d", L=L, ST=Some-State, C=UK'),
    (x509.Name([x509.RelativeDistinguishedName([A(NameOID.COMMON_NAME, "x"), A(NameOID.USER_ID, "u1")]),
                x509.RelativeDistinguishedName([A(NameOID.DOMAIN_COMPONENT, "com")]),
                x509.RelativeDistinguishedName([A(NameOID.EMAIL_ADDRESS, "a@b.c")])]),
     "EMAILADDRESS=a@b.c, DC=com, CN=x + UID=u1"),
    (x509.Name([A(NameOID.SERIAL_NUMBER, "123"), A(NameOID.TITLE, "t"), A(NameOID.SURNAME, "s"),
                A(NameOID.GIVEN_NAME, "g"), A(ObjectIdentifier("1.2.3.4"), "odd"), A(NameOID.STREET_ADDRESS, "st"),
                A(NameOID.COMMON_NAME, "dbl  space;#<>")]),
     'CN="dbl  space;#<>", STREET=st, OID.1.2.3.4=odd, GIVENNAME=g, SURNAME=s, T=t, SERIALNUMBER=123'),
    (x509.Name([A(NameOID.COMMON_NAME, "Zoë ünï"), A(NameOID.ORGANIZATION_NAME, "#hash"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "tab\there\nnl")]),
     'OU="tab\there\nnl", O="#hash", CN=Zoë ünï'),
    (x509.Name([A(NameOID.PSEUDONYM, "p"), A(NameOID.INITIALS, "I"), A(NameOID.GENERATION_QUALIFIER, "Jr"),
                A(NameOID.DN_QUALIFIER, "q")]),
     "DNQ=q, GENERATION=Jr, INITIALS=I, OID.2.5.4.65=p"),
])
def test_subject_dn_is_javas_x500name_string(subject: x509.Name, expected: str) -> None:
    assert subject_dn(_certificate(subject)) == expected


def test_an_invalid_regular_expression_is_reported_and_ignored(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "broker.xml").write_text('<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
                                    "<security-enabled>true</security-enabled></core></configuration>")
    (etc / "login.config").write_text(
        "activemq { org.apache.activemq.artemis.spi.core.security.jaas.TextFileCertificateLoginModule required "
        'org.apache.activemq.jaas.textfiledn.user="u.properties" org.apache.activemq.jaas.textfiledn.role="r"; };')
    (etc / "u.properties").write_text("bad = /CN=(/\ngood = /CN=g.*/\n")
    (etc / "r").write_text("role = good\n")
    config = load_config(etc / "broker.xml")
    assert config.login is not None
    [module] = config.login.modules
    assert module.certificate_users == (("good", "/CN=g.*/"),)
    assert any("invalid regular expression" in w.message for w in config.warnings)
