"""TLS on the reference broker's acceptor and in the kit's client, with Artemis's parameter names.

Stores and the config are read without sockets; the handshakes run on real sockets on 127.0.0.1 (port 0), with the
certificates of ``tls_material`` made once for the module.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

import cck.reference._server as server_module
import cck.reference._tls as tls_module
from cck.codec import PREAMBLE, CoreMessage, CreateSessionMessage_V2, encode_packet
from cck.reference.__main__ import main as broker_main
from cck.reference._server import BrokerServer
from cck.reference._tls import KeyStore, TlsConfigError, TrustStore, client_context, parse_protocols
from cck.reference.broker import BrokerCore, BrokerSettings, CoreInput, InputKind
from cck.reference.client import ClientSettings, ConnectFailed, connect, parse_locator_url
from cck.reference.config import AcceptorTls, ConfigError, parse_broker_xml

from .conftest import start_reference_broker, stop_reference_broker
from .tls_material import KEYTOOL, Material, keytool_jks, keytool_truststore, make_material

DEADLINE_S = 20.0
#: how soon a plain TCP client on a TLS acceptor must be closed (it fails the handshake at its first bytes)
PLAIN_CLOSED_S = 2.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return make_material(tmp_path_factory.mktemp("tls"))


def _run(scenario: object) -> None:
    asyncio.run(asyncio.wait_for(scenario, DEADLINE_S))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- stores


def test_pkcs12_key_store_gives_the_key_and_its_chain(tls: Material) -> None:
    key, chain = KeyStore(str(tls.server_keystore), tls.password, "PKCS12").load()
    assert [c.subject.rfc4514_string() for c in chain] == ["CN=broker", "CN=tls test ca"]
    assert key.public_key() == chain[0].public_key()


@pytest.mark.parametrize("kind", ["PKCS12", "JKS", None])  # a JVM reads a PKCS#12 file named JKS too
def test_pkcs12_trust_store_of_certificate_entries(tls: Material, kind: str | None) -> None:
    [ca] = TrustStore(str(tls.trust_ca), tls.password, kind).load()
    assert ca.subject.rfc4514_string() == "CN=tls test ca"


@pytest.mark.skipif(KEYTOOL is None, reason="Java's keytool is not on PATH: no keytool-made trust store to read")
def test_trust_store_written_by_keytool(tls: Material, tmp_path: Path) -> None:
    store = keytool_truststore(tls, tmp_path / "keytool-trust.p12")
    [ca] = TrustStore(str(store), tls.password, "PKCS12").load()
    assert ca.subject.rfc4514_string() == "CN=tls test ca"
    client_context(TrustStore(str(store), tls.password, "PKCS12"))  # and ssl takes it


def test_pem_trust_store(tls: Material) -> None:
    [ca] = TrustStore(str(tls.trust_ca_pem), None, "PEM").load()
    assert ca.subject.rfc4514_string() == "CN=tls test ca"


def test_store_errors_name_the_parameter_and_the_file(tls: Material, tmp_path: Path) -> None:
    missing = tmp_path / "missing.p12"
    with pytest.raises(TlsConfigError, match=r"^keyStorePath: cannot read '.*missing\.p12': No such file") as caught:
        KeyStore(str(missing), tls.password, "PKCS12").load()
    assert caught.value.path == str(missing)
    with pytest.raises(TlsConfigError, match=r"^keyStorePassword: cannot open the PKCS#12 store .*wrong"):
        KeyStore(str(tls.server_keystore), "not-the-password", "PKCS12").load()
    with pytest.raises(TlsConfigError, match=r"^trustStorePassword: "):
        TrustStore(str(tls.trust_ca), "not-the-password", "PKCS12").load()
    fake_jks = tmp_path / "fake.jks"
    fake_jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    with pytest.raises(TlsConfigError, match=r"^keyStoreType: '.*fake\.jks' is a JKS store.*-deststoretype PKCS12"):
        KeyStore(str(fake_jks), tls.password, "JKS").load()
    with pytest.raises(TlsConfigError, match=r"^trustStoreType: store type 'BCFKS' is not supported"):
        TrustStore(str(tls.trust_ca), tls.password, "BCFKS").load()
    with pytest.raises(TlsConfigError, match=r"^trustStorePath: .* is not a PKCS#12 store \(it looks like PEM"):
        TrustStore(str(tls.trust_ca_pem), None, "PKCS12").load()
    with pytest.raises(TlsConfigError, match=r"^keyStorePath: .* holds no private key"):
        KeyStore(str(tls.trust_ca), tls.password, "PKCS12").load()


@pytest.mark.skipif(KEYTOOL is None, reason="Java's keytool is not on PATH: no real JKS store to refuse")
def test_a_real_jks_store_is_refused(tls: Material, tmp_path: Path) -> None:
    store = keytool_jks(tls, tmp_path / "real.jks")
    with pytest.raises(TlsConfigError, match=r"^keyStoreType: .* is a JKS store"):
        KeyStore(str(store), tls.password, None).load()


def test_enabled_protocols() -> None:
    assert parse_protocols("TLSv1.3, TLSv1.2") == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert parse_protocols(None) is None
    with pytest.raises(TlsConfigError, match=r"^enabledProtocols: SSLv3: not a protocol"):
        parse_protocols("SSLv3,TLSv1.2")
    with pytest.raises(TlsConfigError, match=r"^enabledProtocols: .* leaves a gap"):
        parse_protocols("TLSv1.1,TLSv1.3")


# --------------------------------------------------------------------------- broker.xml


def _broker_xml(params: str, name: str = "tls") -> str:
    return f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <acceptors>
    <acceptor name="{name}">tcp://127.0.0.1:61617?protocols=CORE;{params}</acceptor>
  </acceptors>
</core></configuration>"""


def _tls_params(tls: Material, **overrides: str) -> str:
    params = {"sslEnabled": "true", "keyStorePath": str(tls.server_keystore), "keyStorePassword": tls.password,
              "keyStoreType": "PKCS12", **overrides}
    return ";".join(f"{k}={v}" for k, v in params.items() if v != "-")


def test_acceptor_with_ssl_enabled(tls: Material) -> None:
    config = parse_broker_xml(_broker_xml(_tls_params(
        tls, needClientAuth="true", trustStorePath=str(tls.trust_clients), trustStorePassword=tls.password,
        trustStoreType="PKCS12", enabledProtocols="TLSv1.2,TLSv1.3")))
    [acceptor] = config.acceptors
    assert acceptor.tls == AcceptorTls(str(tls.server_keystore), tls.password, "PKCS12", str(tls.trust_clients),
                                       tls.password, "PKCS12", need_client_auth=True,
                                       enabled_protocols="TLSv1.2,TLSv1.3")
    assert config.warnings == ()
    assert tls.password not in repr(acceptor.tls)
    context = acceptor.tls.context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2


def test_acceptor_without_ssl_enabled_is_plain_and_says_its_tls_parameters_are_unused(tls: Material) -> None:
    config = parse_broker_xml(_broker_xml(f"keyStorePath={tls.server_keystore}"))
    assert config.acceptors[0].tls is None
    [warning] = config.warnings
    assert "without sslEnabled=true are not used" in warning.message
    assert "keyStorePath" in warning.message


def test_unsupported_tls_parameters_are_warned_not_ignored_silently(tls: Material) -> None:
    config = parse_broker_xml(_broker_xml(_tls_params(
        tls, enabledCipherSuites="TLS_AES_128_GCM_SHA256", crlPath="/etc/crl.pem", verifyHost="false")))
    assert config.acceptors[0].tls is not None
    assert {(w.element, w.message.split(": ignored")[0]) for w in config.warnings} == {
        ("enabledCipherSuites", "acceptor 'tls': enabledCipherSuites is not supported by the reference broker"),
        ("crlPath", "acceptor 'tls': crlPath is not supported by the reference broker"),
    }
    assert "OpenSSL's default cipher suites" in str(config.warnings[0]) + str(config.warnings[1])


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"keyStorePath": "/nonexistent/broker.p12"},
     r"keyStorePath: cannot read '/nonexistent/broker\.p12': No such file or directory"),
    ({"keyStorePassword": "wrong"}, r"keyStorePassword: cannot open the PKCS#12 store '.*server\.p12': wrong"),
    ({"keyStorePath": "-"}, r"keyStorePath: sslEnabled=true needs a key store"),
    ({"keyStoreType": "PKCS11"}, r"keyStoreType: store type 'PKCS11' is not supported"),
    ({"sslEnabled": "yes"}, r"sslEnabled must be true or false; found 'yes'"),
    ({"needClientAuth": "true", "trustStorePath": "/nonexistent/trust.p12"}, r"trustStorePath: cannot read"),
], ids=["missing", "wrong-password", "no-key-store", "pkcs11", "bad-flag", "missing-trust-store"])
def test_acceptor_tls_errors_name_the_file_line_acceptor_and_parameter(
    tls: Material, overrides: dict[str, str], expected: str,
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_broker_xml(_broker_xml(_tls_params(tls, **overrides)), file="broker.xml")
    assert caught.value.line == 3
    assert caught.value.path == "core/acceptors/acceptor[tls]"
    message = str(caught.value)
    assert message.startswith("bad config broker.xml:3 <acceptor> (core/acceptors/acceptor[tls]): acceptor 'tls': ")
    assert re.search(expected, message), message
    assert "'wrong'" not in message  # a password is never echoed


def test_a_jks_key_store_is_a_config_error(tls: Material, tmp_path: Path) -> None:
    store = tmp_path / "broker.jks"
    if KEYTOOL is not None:
        keytool_jks(tls, store)
    else:
        store.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))  # the JKS magic is all the broker looks at
    with pytest.raises(ConfigError, match=r"acceptor 'tls': keyStoreType: '.*broker\.jks' is a JKS store, which "
                                          r"cannot be read here .*set keyStoreType=PKCS12"):
        parse_broker_xml(_broker_xml(_tls_params(tls, keyStorePath=str(store), keyStoreType="JKS")))


def test_a_relative_store_path_is_found_beside_broker_xml(tls: Material, tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "server.p12").write_bytes(tls.server_keystore.read_bytes())
    (etc / "broker.xml").write_text(_broker_xml(_tls_params(tls, keyStorePath="server.p12")))
    config = parse_broker_xml(etc / "broker.xml")
    assert config.acceptors[0].tls is not None
    assert config.acceptors[0].tls.key_store_path == str(etc / "server.p12")


@pytest.fixture
def broker_logging() -> Iterator[None]:
    """The broker command configures the ``cck.reference`` logger (to the stderr of its test): put it back."""
    logger = logging.getLogger("cck.reference")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


@pytest.mark.usefixtures("broker_logging")
def test_the_broker_command_refuses_to_start_naming_the_store(tls: Material, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    broker_xml = tmp_path / "broker.xml"
    broker_xml.write_text(_broker_xml(_tls_params(tls, keyStorePassword="wrong")))
    assert broker_main(["broker", "--config", str(broker_xml), "--data", str(tmp_path / "data")]) == 2
    error = capsys.readouterr().err
    assert f"reference broker: bad config {broker_xml}:3 <acceptor>" in error
    assert "acceptor 'tls': keyStorePassword: cannot open the PKCS#12 store" in error


def test_the_broker_command_serves_tls_on_its_acceptor(tls: Material, tmp_path: Path) -> None:
    broker_xml = tmp_path / "broker.xml"
    broker_xml.write_text(_broker_xml(_tls_params(tls)).replace(
        "<acceptors>", "<security-enabled>false</security-enabled><persistence-enabled>false</persistence-enabled>"
                       "<acceptors>"))
    broker = start_reference_broker(tmp_path / "data", "--config", str(broker_xml))
    try:
        _run(_round_trip(_trusting(tls, broker.port)))
        with pytest.raises(ConnectFailed, match="certificate verify failed"):
            _run(connect(_trusting(tls, broker.port, tls.trust_other), connect_timeout=5))
    finally:
        assert stop_reference_broker(broker) == 0


# --------------------------------------------------------------------------- client settings


def _url(port: int, **params: str) -> str:
    return f"tcp://127.0.0.1:{port}?" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())


def test_client_url_parameters(tls: Material) -> None:
    settings = parse_locator_url(_url(61617, sslEnabled="true", trustStorePath=str(tls.trust_ca),
                                      trustStorePassword=tls.password, trustStoreType="PKCS12",
                                      keyStorePath=str(tls.client_keystore), keyStorePassword=tls.password,
                                      keyStoreType="PKCS12", verifyHost="false", trustAll="false",
                                      enabledProtocols="TLSv1.3")).settings()
    assert (settings.ssl_enabled, settings.trust_store_path, settings.trust_store_type, settings.key_store_path,
            settings.verify_host, settings.trust_all, settings.enabled_protocols) == (
        True, str(tls.trust_ca), "PKCS12", str(tls.client_keystore), False, False, "TLSv1.3")
    assert tls.password not in repr(settings)
    context = settings.tls_context()
    assert context is not None
    assert context.check_hostname is False
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert ClientSettings().verify_host is True  # TransportConstants.DEFAULT_CONNECTOR_VERIFY_HOST
    assert ClientSettings().tls_context() is None
    trust_all = ClientSettings(ssl_enabled=True, trust_all=True).tls_context()
    assert trust_all is not None
    assert trust_all.verify_mode is ssl.CERT_NONE
    default = ClientSettings(ssl_enabled=True).tls_context()  # the system's authorities, the host name checked
    assert default is not None
    assert default.check_hostname
    assert default.verify_mode is ssl.CERT_REQUIRED


def test_client_store_errors_are_value_errors_naming_the_parameter(tls: Material) -> None:
    with pytest.raises(ValueError, match=r"^client parameter trustStorePassword: cannot open"):
        ClientSettings(ssl_enabled=True, trust_store_path=str(tls.trust_ca), trust_store_password="x").tls_context()
    with pytest.raises(ValueError, match=r"^client parameter enabledProtocols: SSLv3"):
        ClientSettings(enabled_protocols="SSLv3")


# --------------------------------------------------------------------------- handshakes on sockets


class _Inputs(list[CoreInput]):
    """What the core was fed (the server's one way in)."""

    def made(self) -> int:
        return sum(1 for event in self if event.kind is InputKind.MADE)


@contextlib.asynccontextmanager
async def _broker(context: ssl.SSLContext, inputs: _Inputs | None = None) -> AsyncIterator[BrokerServer]:
    async with BrokerServer(BrokerCore(BrokerSettings(node_id="n1")), "127.0.0.1", 0, tls=context,
                            inputs=inputs.append if inputs is not None else None) as server:
        yield server


def _server_context(tls: Material, *, keystore: Path | None = None, clients: bool = False) -> ssl.SSLContext:
    return AcceptorTls(str(keystore or tls.server_keystore), tls.password, "PKCS12",
                       str(tls.trust_clients) if clients else None, tls.password, "PKCS12",
                       need_client_auth=clients).context()


def _trusting(tls: Material, port: int, trust: Path | None = None, **params: str) -> str:
    return _url(port, sslEnabled="true", trustStorePath=str(trust or tls.trust_ca), trustStorePassword=tls.password,
                trustStoreType="PKCS12", **params)


_QUEUES = itertools.count()


async def _round_trip(url: str) -> None:
    """Connect, open a session, send a message and receive it."""
    queue = f"tls.q{next(_QUEUES)}"
    async with await connect(url, connect_timeout=5) as connection:
        session = await connection.create_session()
        await session.create_queue(queue, queue)
        await session.create_producer(queue).send(CoreMessage(b"over tls", durable=False))
        consumer = await session.create_consumer(queue)
        session.start()
        delivery = await consumer.receive(5.0)
        assert delivery is not None
        assert delivery.message.body == b"over tls"


def test_a_client_trusting_the_brokers_authority_opens_a_session(tls: Material) -> None:
    async def scenario() -> None:
        async with _broker(_server_context(tls)) as server:
            await _round_trip(_trusting(tls, server.bound_port))
            # the same authority as a PEM trust store
            await _round_trip(_url(server.bound_port, sslEnabled="true", trustStorePath=str(tls.trust_ca_pem),
                                   trustStoreType="PEM"))

    _run(scenario())


def test_a_client_trusting_another_authority_is_refused_naming_the_verification(tls: Material) -> None:
    async def scenario() -> None:
        async with _broker(_server_context(tls)) as server:
            started = time.monotonic()
            with pytest.raises(ConnectFailed, match=r"TLS handshake with 127\.0\.0\.1:\d+ failed: certificate "
                                                    r"verify failed: self-signed certificate in certificate chain"):
                await connect(_trusting(tls, server.bound_port, tls.trust_other), connect_timeout=5)
            assert time.monotonic() - started < 5

    _run(scenario())


def test_trust_all_connects_to_any_certificate(tls: Material) -> None:
    async def scenario() -> None:
        async with _broker(_server_context(tls)) as server:
            await _round_trip(_url(server.bound_port, sslEnabled="true", trustAll="true"))

    _run(scenario())


def test_verify_host_checks_the_name_in_the_brokers_certificate(tls: Material) -> None:
    async def scenario() -> None:
        async with _broker(_server_context(tls, keystore=tls.wrong_host_keystore)) as server:
            with pytest.raises(ConnectFailed, match=r"certificate verify failed: IP address mismatch"):
                await connect(_trusting(tls, server.bound_port), connect_timeout=5)
            await _round_trip(_trusting(tls, server.bound_port, verifyHost="false"))

    _run(scenario())


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Everything the peer sent until it closed; fails if it has not closed within ``seconds``."""
    received = b""
    async with asyncio.timeout(seconds):
        while chunk := await reader.read(4096):
            received += chunk
    return received


@pytest.mark.parametrize("alerts", [True, False], ids=["tls-layer", "asyncio-ssl"])
def test_a_plain_tcp_client_on_a_tls_acceptor_is_closed_and_never_reaches_the_core(
    tls: Material, alerts: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tls_module, "_ALERTS", alerts)  # False: the listener's own ssl= (a Python without the layer)

    async def scenario() -> None:
        inputs = _Inputs()
        async with _broker(_server_context(tls), inputs) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_port)
            writer.write(PREAMBLE + encode_packet(CreateSessionMessage_V2("plain", 10, 136), 1))
            received = await _closed_within(reader, PLAIN_CLOSED_S)
            writer.close()
            assert not received.startswith(b"\x00"), f"a core frame answered a plain TCP client: {received!r}"
            assert inputs.made() == 0
            assert not [e for e in inputs if e.kind is InputKind.RECEIVED]
            await _round_trip(_trusting(tls, server.bound_port))  # the acceptor still serves TLS clients
            assert inputs.made() == 1

    _run(scenario())


def test_a_stalled_handshake_blocks_no_one_and_is_dropped_after_the_bound(
    tls: Material, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_module, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)

    async def scenario() -> None:
        inputs = _Inputs()
        async with _broker(_server_context(tls), inputs) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_port)
            writer.write(b"\x16\x03")  # the start of a TLS record, then nothing: the handshake waits
            await _round_trip(_trusting(tls, server.bound_port))  # meanwhile another client is served
            await _closed_within(reader, 0.5 + PLAIN_CLOSED_S)
            writer.close()
            assert inputs.made() == 1  # the TLS client's only

    _run(scenario())


def test_need_client_auth(tls: Material) -> None:
    async def scenario() -> None:
        async with _broker(_server_context(tls, clients=True)) as server:
            port = server.bound_port
            # the broker's alert tells the client why (TLS 1.3 verifies the client after its handshake is done)
            with pytest.raises(ConnectFailed, match=r"the TLS connection to 127\.0\.0\.1:\d+ failed: tlsv13 alert "
                                                    r"certificate required"):
                await connect(_trusting(tls, port), connect_timeout=5)
            with pytest.raises(ConnectFailed, match=r"the TLS connection to 127\.0\.0\.1:\d+ failed: tlsv1 alert "
                                                    r"unknown ca"):
                await connect(_trusting(tls, port, keyStorePath=str(tls.stranger_keystore),
                                        keyStorePassword=tls.password, keyStoreType="PKCS12"), connect_timeout=5)
            await _round_trip(_trusting(tls, port, keyStorePath=str(tls.client_keystore),
                                        keyStorePassword=tls.password, keyStoreType="PKCS12"))

    _run(scenario())


def test_a_broker_that_never_answers_the_handshake_fails_the_connect_within_its_timeout(tls: Material) -> None:
    async def scenario() -> None:
        held: list[asyncio.StreamWriter] = []  # kept: a writer collected closes its connection (Python 3.13)
        silent = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)  # accepts, never answers
        port = silent.sockets[0].getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ConnectFailed, match=r"cannot connect to 127\.0\.0\.1:\d+: timed out after 0\.5 s"):
            await connect(_trusting(tls, port), connect_timeout=0.5)
        assert time.monotonic() - started < 3
        silent.close()

    _run(scenario())


def test_the_tls_settings_carry_over_to_the_reconnection(tls: Material) -> None:
    async def scenario() -> None:
        inputs = _Inputs()
        async with _broker(_server_context(tls, clients=True), inputs) as server:
            url = _trusting(tls, server.bound_port, keyStorePath=str(tls.client_keystore),
                            keyStorePassword=tls.password, keyStoreType="PKCS12", reconnectAttempts="-1",
                            retryInterval="50")
            async with await connect(url, connect_timeout=5) as connection:
                session = await connection.create_session()
                await session.create_queue("tls.again", "tls.again")
                restored = asyncio.get_running_loop().create_future()
                connection.add_event_listener(lambda event: restored.set_result(event.kind) if event.kind in (
                    "reattached", "recreated", "gave-up") and not restored.done() else None)
                assert connection._transport is not None
                connection._transport.close()  # the socket goes; the broker stays: the client reconnects
                assert await restored == "recreated"  # no confirmation window: the session is made anew
                await session.create_queue("tls.again.2", "tls.again.2")
                assert inputs.made() == 2  # both connections passed the handshake with the client certificate

    _run(scenario())
