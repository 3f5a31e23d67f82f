"""TLS on the broker's acceptor (Artemis user manual, Configuring the Transport: Configuring SSL/TLS).

The kit makes its own authorities, a server certificate for 127.0.0.1 and client certificates for the run
(``_tls_material``), and gives the broker an acceptor with ``sslEnabled`` and that key store; for the last three
cases also ``needClientAuth`` with a trust store of the client authority.  The clients are the kit's client (its
TLS URL parameters, as Artemis's client spells them) and raw TLS connections of the case's own, which read the
certificate the broker presents and write core frames themselves:

* a client that trusts the kit's authority opens a session and the broker presents the configured certificate;
  one that trusts only another authority cannot complete the handshake;
* a client speaking plain TCP to the TLS acceptor gets no core answer and is closed, without hanging;
* with ``needClientAuth``: no certificate, or one a stranger issued, is refused; one the trusted authority
  issued opens a session.

Certificate login (``security.tls.7`` on; user manual, Security: Dual Authentication, CertificateLoginModule): the
same acceptor with security on and a certificate domain whose users are the subjects of certificates the client
authority issued (the administrator's among them: every connection presents one).  CREATESESSION carries no
credentials, or credentials that must play no part; the administrator counts what reached the queue.
"""

from __future__ import annotations

import contextlib
import hashlib
import ssl
from collections.abc import Awaitable
from pathlib import Path
from urllib.parse import quote

import pytest

from cck.codec import CreateSessionMessage, CreateSessionResponseMessage, ExceptionType, RoutingType
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import (
    CONFIG,
    PERMISSIONS,
    CertificateUser,
    SecurityRule,
    SecuritySpec,
    Target,
    TlsSpec,
    Topology,
)
from cck.conformance.verdicts import CheckFailed
from cck.reference.client import BrokerRefused, Connection, ConnectionFailed, connect

from ._kit import RECEIVE_S, message, observed, run, unique
from ._security_kit import (
    ADMIN,
    COUNT_S,
    PREFIX,
    SETUP_CHANNEL,
    MakeTarget,
    Wire,
    secured,
    settings_for,
    settled_count,
)
from ._tls_material import CERTIFIED, TlsMaterial, client_context, make_material, subject_of

#: how long a broker may take to answer, or to close a connection it refuses
ANSWER_S = 10.0
#: the channel of the raw connections' session
SESSION_CHANNEL = 10

TLS = tuple(
    Case(f"security.tls.{n}", "security.tls", description, expectation, params={"case": key}, needs=(CONFIG,))
    for n, (key, description, expectation) in enumerate((
        ("trusted", "an acceptor with sslEnabled and the kit's PKCS#12 key store; the kit's client, trusting the "
                    "kit's authority (trustStorePath), opens a session, sends a message and receives it; a raw TLS "
                    "connection reads the certificate the broker presents",
         "the session works over TLS; the certificate presented is the one in the configured key store"),
        ("stranger", "the same acceptor; a client that trusts only another authority connects",
         "the TLS handshake fails (the broker's certificate does not verify): no connection, no session"),
        ("plaintext", "the same acceptor; a client writes the core preamble and CREATESESSION in plain TCP",
         "no core frame answers, and the broker closes the connection (it does not hang)"),
        ("no-certificate", "an acceptor with needClientAuth and a trust store of the kit's client authority; a "
                           "client trusting the broker presents no certificate and sends CREATESESSION",
         "refused: the handshake fails or the connection closes, with no answer to CREATESESSION"),
        ("client-certificate", "the same acceptor; the client presents a certificate the client authority issued "
                               "and sends CREATESESSION",
         "the session is created"),
        ("stranger-certificate", "the same acceptor; the client presents a certificate another authority issued "
                                 "and sends CREATESESSION",
         "refused: the handshake fails or the connection closes, with no answer to CREATESESSION"),
    ), 1)
)
MUTUAL = ("no-certificate", "client-certificate", "stranger-certificate")

#: certificate login: where the certificate users' roles are granted, and the users (by :data:`CERTIFIED` key)
CERT_PREFIX = f"{PREFIX}.cert"
CERT_USERS = {
    "admin": CertificateUser("cck-cert-admin", subject_of(CERTIFIED["admin"]), ("admin",)),
    "sender": CertificateUser("cck-cert-sender", subject_of(CERTIFIED["sender"]), ("cert-senders",)),
    "reader": CertificateUser("cck-cert-reader", subject_of(CERTIFIED["reader"]), ("cert-readers",)),
}
CERT_RULES = (
    *(SecurityRule("#", p, ("admin",)) for p in PERMISSIONS),
    *(SecurityRule(f"{CERT_PREFIX}.#", p, ("admin", *{"send": ("cert-senders",),
                                                      "consume": ("cert-readers",)}.get(p, ())))
      for p in PERMISSIONS),
)
#: the username a session claims in the claimed-name case (no user of either domain has it)
CLAIMED = "cck-claimed"
CERT_LOGIN = tuple(
    Case(f"security.tls.{n}", "security.certificate-login", description, expectation, params={"case": key},
         needs=(CONFIG,))
    for n, (key, description, expectation) in enumerate((
        ("certificate-send", "needClientAuth and a certificate domain; a client presents a certificate whose subject "
                             "is a certificate user's (role granted send), sends CREATESESSION with no username or "
                             "password, then a message to a queue",
         "the session is created and the send accepted: the administrator counts 1 message on the queue"),
        ("certificate-unmapped", "the same broker; a client presents a certificate the trusted authority issued whose "
                                 "subject no certificate user has, and sends CREATESESSION with no credentials",
         "CREATESESSION is refused with SECURITY_EXCEPTION (105)"),
        ("certificate-no-send", "the same broker; a client presents the certificate of a user whose role may consume "
                                "but not send there, opens a session without credentials and sends to a queue",
         "the session is created; the send is refused with SECURITY_EXCEPTION (105) and the queue stays empty"),
        ("certificate-credentials", "the same broker; the client of the user without send sends CREATESESSION with "
                                    "the administrator's username and password (valid in the broker's other domain), "
                                    "then a message",
         "the certificate decides, not the credentials: the session is created, the send refused with "
         "SECURITY_EXCEPTION (105) and the queue stays empty"),
        ("certificate-claimed-name", f"the same broker; the administrator's certificate client opens a session "
                                     f"claiming username {CLAIMED!r} and sends to a queue; then the client of the "
                                     f"user without send opens one claiming the same username and sends there",
         "the administrator's send is accepted, the other refused with SECURITY_EXCEPTION (105): a name claimed in "
         "CREATESESSION grants nothing; the administrator counts 1 message"),
    ), len(TLS) + 1)
)


@pytest.fixture(scope="module")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_material(tmp_path_factory.mktemp("tls"))


def _topology(material: TlsMaterial, mutual: bool) -> Topology:
    return Topology(tls=TlsSpec(material.server_keystore, material.password,
                                material.client_authority if mutual else None))


def _client_url(url: str, material: TlsMaterial, trust: Path) -> str:
    """The kit's client URL: TLS, trusting the authorities in ``trust`` (Artemis's client parameters)."""
    params = {"sslEnabled": "true", "trustStorePath": str(trust), "trustStorePassword": material.password,
              "trustStoreType": "PKCS12"}
    return url + "?" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())


async def _session_answer(target: Target, tls: ssl.SSLContext, seconds: float,
                          evidence: CaseEvidence) -> tuple[bool, bool]:
    """A raw TLS connection that sends CREATESESSION: whether the session was created, and, if not, whether the
    broker refused the connection (the handshake failed, or it closed the connection within ``seconds``)."""
    settings = settings_for(target)
    try:
        async with Wire(target.nodes[0].url, settings, tls) as wire:
            await wire.write([(CreateSessionMessage(unique("cck-tls"), SESSION_CHANNEL, settings.version),
                               SETUP_CHANNEL)])
            with contextlib.suppress(CheckFailed):
                await wire.until(lambda channel, _: channel == SETUP_CHANNEL, seconds, "CREATESESSION's answer")
            created = any(isinstance(p, CreateSessionResponseMessage) for _, p in wire.frames)
            closed = created or await wire.closed_within(seconds)
            evidence.note("answers", [(c, repr(p)) for c, p in wire.frames])
            evidence.note("ended", wire.error or ("closed" if wire.closed_by_peer else "open"))
            return created, closed
    except (OSError, ssl.SSLError) as exc:
        evidence.note("handshake", f"{type(exc).__name__}: {exc}")
        return False, True


def _certificate_topology(material: TlsMaterial) -> Topology:
    return Topology(tls=TlsSpec(material.server_keystore, material.password, material.client_authority),
                    security=SecuritySpec(enabled=True, users=(ADMIN,), rules=CERT_RULES,
                                          certificate_users=tuple(CERT_USERS.values())))


def _certificate_url(url: str, material: TlsMaterial, key: str) -> str:
    """The kit's client URL presenting the certificate of :data:`CERTIFIED` ``key`` (``keyStorePath``)."""
    params = {"keyStorePath": str(material.certified[key]), "keyStorePassword": material.password,
              "keyStoreType": "PKCS12"}
    return _client_url(url, material, material.trust_broker) + "&" + "&".join(
        f"{k}={quote(v, safe='/')}" for k, v in params.items())


async def _refused(attempt: Awaitable[object], seconds: float, what: str, evidence: CaseEvidence) -> None:
    """``attempt`` is refused with SECURITY_EXCEPTION; a failed check otherwise."""
    try:
        await observed(attempt, seconds, what)
    except BrokerRefused as refused:
        evidence.note("refusal", refused.broker_message)
        if refused.code != ExceptionType.SECURITY_EXCEPTION:
            raise CheckFailed(f"{what}: refused with {refused.type or refused.code}, not SECURITY_EXCEPTION (105): "
                              f"{refused.broker_message}") from refused
        return
    raise CheckFailed(f"{what}: accepted")


@cases(*CERT_LOGIN)
def test_certificate_login(case: Case, cck_make_target: MakeTarget, tls_material: TlsMaterial,
                           cck_settings: Settings, evidence: CaseEvidence) -> None:
    key = case.params["case"]
    target = secured(cck_make_target, _certificate_topology(tls_material))
    seconds = cck_settings.deadline(ANSWER_S)
    url = target.nodes[0].url
    address = unique(CERT_PREFIX)

    async def client(certificate: str) -> Connection:
        return await connect(_certificate_url(url, tls_material, certificate), settings=settings_for(target))

    async def scenario() -> None:
        async with await client("admin") as admin_connection:
            admin = await observed(admin_connection.create_session(), seconds, "the administrator's CREATESESSION")
            await admin.create_address(address, (RoutingType.ANYCAST,))
            await admin.create_queue(address, address, routing_type=RoutingType.ANYCAST, durable=True)
            expected = 0
            if key == "certificate-claimed-name":
                claimed = await observed(admin_connection.create_session(username=CLAIMED), seconds,
                                         f"the administrator's CREATESESSION claiming {CLAIMED!r}")
                await observed(claimed.create_producer(address).send(message(f"{case.id}:admin", 0)), seconds,
                               "the administrator's send")
                expected = 1
            user = {"certificate-send": "sender", "certificate-unmapped": "unmapped"}.get(key, "reader")
            async with await client(user) as connection:
                credentials = {"certificate-credentials": (ADMIN.name, ADMIN.password),
                               "certificate-claimed-name": (CLAIMED, None)}.get(key, (None, None))
                attempt = connection.create_session(username=credentials[0], password=credentials[1])
                if key == "certificate-unmapped":
                    await _refused(attempt, seconds, "CREATESESSION with a certificate no user has", evidence)
                    return
                session = await observed(attempt, seconds, "CREATESESSION with the certificate")
                send = session.create_producer(address).send(message(f"{case.id}:0", 0))
                if key == "certificate-send":
                    await observed(send, seconds, "the certificate user's send")
                    expected += 1
                else:
                    await _refused(send, seconds, "the send of a certificate user without send", evidence)
            found = await settled_count(admin, address, expected, cck_settings.deadline(COUNT_S))
            evidence.note("messages", found)
            assert found == expected, f"{found} message(s) on {address}, expected {expected}"

    run(cck_settings, scenario())


@cases(*TLS)
def test_tls_acceptor(case: Case, cck_make_target: MakeTarget, tls_material: TlsMaterial, cck_settings: Settings,
                      evidence: CaseEvidence) -> None:
    key = case.params["case"]
    target = secured(cck_make_target, _topology(tls_material, key in MUTUAL))
    deadline = cck_settings.deadline
    url = target.nodes[0].url

    async def trusted() -> None:
        address = unique("cck.tls")
        async with await connect(_client_url(url, tls_material, tls_material.trust_broker),
                                 settings=settings_for(target)) as connection:
            session = await connection.create_session()
            await session.create_queue(address, address)
            await session.create_producer(address).send(message(f"{case.id}:0", 0))
            consumer = await session.create_consumer(address)
            session.start()
            delivery = await observed(consumer.receive(deadline(RECEIVE_S)), deadline(RECEIVE_S),
                                      "the message sent over TLS")
            assert delivery is not None, "the message sent over TLS did not come back"
        async with Wire(url, settings_for(target), client_context(tls_material, trust=None)) as probe:
            presented = probe.peer_certificate
        assert presented is not None, "the broker presented no certificate"
        fingerprint = hashlib.sha256(presented).hexdigest()
        evidence.note("certificate_sha256", fingerprint)
        assert fingerprint == tls_material.server_fingerprint, (
            "the broker presented another certificate than the one in its configured key store")

    async def stranger() -> None:
        try:
            async with await connect(_client_url(url, tls_material, tls_material.trust_stranger),
                                     settings=settings_for(target), connect_timeout=deadline(ANSWER_S)):
                pass
        except ConnectionFailed as exc:
            evidence.note("refused", str(exc))
            return
        raise CheckFailed("a client trusting only another authority completed the handshake and connected")

    async def plaintext() -> None:
        async with Wire(url, settings_for(target)) as wire:
            await wire.write([(CreateSessionMessage(unique("cck-plain"), SESSION_CHANNEL, wire.settings.version),
                               SETUP_CHANNEL)])
            closed = await wire.closed_within(deadline(ANSWER_S))
            evidence.note("frames", [(c, repr(p)) for c, p in wire.frames])
            evidence.note("ended", wire.error or wire.undecodable or ("closed" if closed else "open"))
        assert not wire.frames, f"core frames answered a plain TCP client on a TLS acceptor: {wire.frames}"
        assert closed, f"the broker kept a plain TCP connection to its TLS acceptor open for {deadline(ANSWER_S)} s"

    async def mutual() -> None:
        identity: Path | None = {"no-certificate": None, "client-certificate": tls_material.client_keystore,
                                 "stranger-certificate": tls_material.stranger_keystore}[key]
        context = client_context(tls_material, trust=tls_material.trust_broker, identity=identity)
        created, refused = await _session_answer(target, context, deadline(ANSWER_S), evidence)
        if key == "client-certificate":
            assert created, "no session for a client certificate the trusted authority issued"
        else:
            assert not created, "a session for a client without a certificate the trusted authority issued"
            assert refused, f"the connection of a client without a trusted certificate stayed open for " \
                            f"{deadline(ANSWER_S)} s"

    scenarios = {"trusted": trusted, "stranger": stranger, "plaintext": plaintext}
    run(cck_settings, scenarios.get(key, mutual)())
