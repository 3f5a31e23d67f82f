"""Certificate users rendered for both brokers: login.config's certificate domain, its users and roles files, and
bootstrap.xml's ``certificate-domain``; the reference broker reads them back and logs the kit's certificates in."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from cck.conformance.suite._tls_material import CERTIFIED, TlsMaterial, make_material, subject_of
from cck.conformance.targets import CertificateUser, SecuritySpec, TlsSpec, Topology, User, free_ports, write_etc
from cck.conformance.targets._config import CERTIFICATE_DOMAIN, render_bootstrap, render_login_config
from cck.reference.config import Principal, SecurityModel, load_config

ADMIN = User("admin", "admin-secret", ("admin",))
SENDER = CertificateUser("sender", subject_of(CERTIFIED["sender"]), ("senders", "amq"))
ARTEMIS_BOOTSTRAP = """<broker xmlns="http://activemq.apache.org/schema">
   <jaas-security domain="activemq"/>
   <server configuration="file:/x/etc/broker.xml"/>
</broker>
"""


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_material(tmp_path_factory.mktemp("tls"))


def _topology(material: TlsMaterial, *users: CertificateUser) -> Topology:
    return Topology(tls=TlsSpec(material.server_keystore, material.password, material.client_authority),
                    security=SecuritySpec(enabled=True, users=(ADMIN,), certificate_users=users))


def _certificate(material: TlsMaterial, key: str) -> x509.Certificate:
    loaded = pkcs12.load_pkcs12(material.certified[key].read_bytes(), material.password.encode())
    assert loaded.cert is not None
    return loaded.cert.certificate


def test_login_config_has_a_certificate_domain_only_with_certificate_users() -> None:
    plain = render_login_config(SecuritySpec(enabled=True, users=(ADMIN,)))
    assert CERTIFICATE_DOMAIN not in plain
    assert "TextFileCertificateLoginModule" not in plain
    text = render_login_config(SecuritySpec(enabled=True, certificate_users=(SENDER,)))
    domain = text[text.index(f"{CERTIFICATE_DOMAIN} {{"):]
    assert "TextFileCertificateLoginModule required" in domain
    assert 'org.apache.activemq.jaas.textfiledn.user="cert-users.properties"' in domain
    assert 'org.apache.activemq.jaas.textfiledn.role="cert-roles.properties";' in domain


def test_bootstrap_is_amended_or_written_only_when_needed() -> None:
    with_users = SecuritySpec(enabled=True, certificate_users=(SENDER,))
    amended = render_bootstrap(with_users, ARTEMIS_BOOTSTRAP)
    assert amended is not None
    assert f'<jaas-security domain="activemq" certificate-domain="{CERTIFICATE_DOMAIN}"/>' in amended
    assert '<server configuration="file:/x/etc/broker.xml"/>' in amended  # the rest of Artemis's file stays
    assert render_bootstrap(SecuritySpec(), ARTEMIS_BOOTSTRAP) is None  # nothing to change
    # a file that named the certificate domain before loses it again
    assert render_bootstrap(SecuritySpec(), amended) == ARTEMIS_BOOTSTRAP
    assert render_bootstrap(SecuritySpec(), None) is None
    fresh = render_bootstrap(with_users, None)
    assert fresh is not None
    assert f'certificate-domain="{CERTIFICATE_DOMAIN}"' in fresh
    with pytest.raises(ValueError, match="jaas-security"):
        render_bootstrap(with_users, "<broker/>")


def test_certificate_users_need_a_tls_acceptor_with_client_authentication(material: TlsMaterial) -> None:
    security = SecuritySpec(enabled=True, certificate_users=(SENDER,))
    with pytest.raises(ValueError, match="client_truststore"):
        Topology(security=security)
    with pytest.raises(ValueError, match="client_truststore"):
        Topology(tls=TlsSpec(material.server_keystore, material.password), security=security)
    with pytest.raises(ValueError, match="duplicate certificate user"):
        SecuritySpec(certificate_users=(SENDER, SENDER))
    with pytest.raises(ValueError, match="newline"):
        CertificateUser("x", "CN=a\nO=b")
    assert SecuritySpec(enabled=True, certificate_users=(SENDER,)).roles == ("senders", "amq")


def test_the_reference_broker_logs_the_kits_certificates_in(material: TlsMaterial, tmp_path: Path) -> None:
    regex = CertificateUser("by-pattern", "/CN=cck (reader|nobody), O=Core Conformance Kit/", ("readers",))
    topology = _topology(material, SENDER, regex).resolve(tmp_path, free_ports, free_ports)
    config = load_config(write_etc(topology, "node0", tmp_path / "etc", max_disk_usage=None))
    assert config.warnings == (), [str(w) for w in config.warnings]
    assert config.login is not None
    assert config.login.certificate_domain == CERTIFICATE_DOMAIN
    security = SecurityModel(config)
    assert security.authenticate(None, None, _certificate(material, "sender")) == Principal(
        "sender", frozenset({"senders", "amq"}))
    assert security.authenticate(None, None, _certificate(material, "reader")) == Principal(
        "by-pattern", frozenset({"readers"}))
    # the certificate decides: no user has this subject, and valid credentials of the other domain do not help
    assert security.authenticate(ADMIN.name, ADMIN.password, _certificate(material, "unmapped")) is None
    # without a certificate the main domain decides
    assert security.authenticate(ADMIN.name, ADMIN.password) == Principal("admin", frozenset({"admin"}))
    assert security.authenticate(None, None) is None
