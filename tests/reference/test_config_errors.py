"""reference.config: every unsupported element is reported by name and path; malformed XML and
bad values raise ConfigError naming the file, the line and the element."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.reference.config import ConfigError, HAPolicy, parse_broker_xml

DATA = Path(__file__).parent / "data"


def test_unsupported_elements_are_reported_by_name_and_path() -> None:
    config = parse_broker_xml(DATA / "unsupported.xml")
    found = {(w.element, w.path) for w in config.warnings}
    expected = {
        ("jms", "configuration/jms"),
        ("persistance-enabled", "core/persistance-enabled"),
        ("jgroups-file", "core/broadcast-groups/broadcast-group[jg]"),
        ("diverts", "core/diverts"),
        ("bridges", "core/bridges"),
        ("federations", "core/federations"),
        ("metrics", "core/metrics"),
        ("broker-plugins", "core/broker-plugins"),
        ("replication", "core/ha-policy/replication"),
        ("colocated", "core/ha-policy/replication/colocated"),
        ("cluster-connection-uri", "core/cluster-connections/cluster-connection-uri[u]"),
        ("@last-value-key", "core/addresses/address[lvq]/anycast/queue[lvq]"),
        ("@exclusive", "core/addresses/address[lvq]/anycast/queue[lvq]"),
        ("slow-consumer-policy", "core/address-settings/address-setting[#]/slow-consumer-policy"),
    }
    assert expected <= found, expected - found
    assert len(config.warnings) == len(expected)
    by_element = {w.element: w for w in config.warnings}
    assert "unknown element 'persistance-enabled'" in by_element["persistance-enabled"].message
    assert "unsupported element 'diverts'" in by_element["diverts"].message
    assert "JGroups" in by_element["jgroups-file"].message
    assert "live-only" in by_element["replication"].message
    assert by_element["diverts"].line == 18  # where <diverts> is in the file
    assert all(w.file.endswith("unsupported.xml") for w in config.warnings)
    assert str(by_element["diverts"]).endswith("unsupported element 'diverts': ignored by the reference broker")
    # what is recognised is still there: the jgroups group (not started), the default policy
    assert config.broadcast_groups[0].is_jgroups
    assert config.ha_policy == HAPolicy()


def _core(body: str) -> str:
    # one element per line so that line numbers are predictable: line 1 <configuration>, 2 <core>, 3... body
    head = '<configuration xmlns="urn:activemq">\n<core xmlns="urn:activemq:core">\n'
    return head + body + "\n</core>\n</configuration>\n"


BAD_VALUES = [
    ("<acceptors>\n<acceptor name='a'>tcp://localhost:abc</acceptor>\n</acceptors>", 4, "acceptor", "port", "abc"),
    ("<acceptors>\n<acceptor name='a'>tcp://localhost:70000</acceptor>\n</acceptors>", 4, "acceptor", "port", "70000"),
    ("<acceptors>\n<acceptor name='a'>tcp://h:1?port=x</acceptor>\n</acceptors>", 4, "acceptor", "port", "x"),
    ("<acceptors>\n<acceptor name='a'>ftp://h:1</acceptor>\n</acceptors>", 4, "acceptor", "scheme", "ftp://h:1"),
    ("<connectors>\n<connector>tcp://h:1</connector>\n</connectors>", 4, "connector", "name", None),
    ("<persistence-enabled>yes</persistence-enabled>", 3, "persistence-enabled", "true or false", "yes"),
    ("<journal-file-size>ten</journal-file-size>", 3, "journal-file-size", "byte size", "ten"),
    ("<journal-min-files>0</journal-min-files>", 3, "journal-min-files", "> 0", "0"),
    ("<journal-compact-percentage>120</journal-compact-percentage>", 3, "journal-compact-percentage", "percentage",
     "120"),
    ("<journal-type>FAST</journal-type>", 3, "journal-type", "one of NIO, ASYNCIO, MAPPED", "FAST"),
    ("<id-cache-size>99999999999</id-cache-size>", 3, "id-cache-size", "Java int", "99999999999"),
    ("<transaction-timeout>1.5</transaction-timeout>", 3, "transaction-timeout", "integer", "1.5"),
    ("<connection-ttl-override>0</connection-ttl-override>", 3, "connection-ttl-override", "-1 or > 0", "0"),
    ("<journal-directory></journal-directory>", 3, "journal-directory", "must not be empty", None),
    ("<address-settings>\n<address-setting match='#'>\n<max-delivery-attempts>x</max-delivery-attempts>\n"
     "</address-setting>\n</address-settings>", 5, "max-delivery-attempts", "integer", "x"),
    ("<address-settings>\n<address-setting match='#'>\n<address-full-policy>SPILL</address-full-policy>\n"
     "</address-setting>\n</address-settings>", 5, "address-full-policy", "PAGE", "SPILL"),
    ("<address-settings>\n<address-setting match='a.#.b'>\n</address-setting>\n</address-settings>", 4,
     "address-setting", "'#' may only be the last", "a.#.b"),
    ("<security-settings>\n<security-setting match='#'>\n<permission type='fly' roles='r'/>\n"
     "</security-setting>\n</security-settings>", 5, "permission", "unknown permission type", "fly"),
    ("<security-settings>\n<security-setting>\n</security-setting>\n</security-settings>", 4, "security-setting",
     "attribute 'match' is required", None),
    ("<addresses>\n<address name='a'>\n<anycast>\n<queue name='q' max-consumers='many'/>\n</anycast>\n</address>\n"
     "</addresses>", 6, "queue", "max-consumers", "many"),
    ("<addresses>\n<address name='a'>\n</address>\n</addresses>", 4, "address", "<anycast> or <multicast>", None),
    ("<addresses>\n<address name='a'>\n<anycast>\n<queue name='q'/>\n<queue name='q'/>\n</anycast>\n</address>\n"
     "</addresses>", 4, "address", "queue defined twice", "q"),
    ("<addresses>\n<address name='a'>\n<multicast>\n<queue name='q'>\n<durable>maybe</durable>\n</queue>\n"
     "</multicast>\n</address>\n</addresses>", 7, "durable", "true or false", "maybe"),
    ("<discovery-groups>\n<discovery-group name='d'>\n<group-address>231.7.7.7</group-address>\n"
     "<group-port>9876</group-port>\n<refresh-timeout>-5</refresh-timeout>\n</discovery-group>\n</discovery-groups>",
     7, "refresh-timeout", "> 0", "-5"),
    ("<name>${loop}</name>", 3, "name", "does not terminate", "${loop}"),
]


@pytest.mark.parametrize(("body", "line", "element", "reason", "found"), BAD_VALUES)
def test_bad_values_name_file_line_and_element(body: str, line: int, element: str, reason: str,
                                               found: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        parse_broker_xml(_core(body), file="etc/broker.xml", properties={"loop": "${loop}"})
    err = info.value
    assert (err.file, err.line, err.element) == ("etc/broker.xml", line, element)
    assert reason in err.reason
    assert err.found == found
    text = str(err)
    assert text.startswith(f"bad config etc/broker.xml:{line} <{element}> (core/")
    if found is not None:
        assert repr(found) in text


@pytest.mark.parametrize(
    ("document", "line", "reason"),
    [
        ("<configuration>\n<core>\n<name>x</nam>\n</core>\n</configuration>", 3, "malformed XML"),
        ("<configuration>\n<core>\n", 3, "malformed XML"),
        ("", 1, "malformed XML"),
        ("<broker/>", 1, "root element"),
        ("<configuration>\n<jms/>\n</configuration>", 1, "no <core>"),
    ],
    ids=["mismatched-tag", "truncated", "empty", "wrong-root", "no-core"],
)
def test_malformed_documents(document: str, line: int, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_broker_xml(document, file="broker.xml")
    assert info.value.line == line
    assert reason in info.value.reason
    assert info.value.file == "broker.xml"


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        parse_broker_xml(tmp_path / "nope.xml")


def test_external_entities_are_not_resolved(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("leaked", encoding="utf-8")
    doc = (
        f'<!DOCTYPE c [<!ENTITY x SYSTEM "file://{secret}">]>'
        "<configuration><core><name>&x;</name></core></configuration>"
    )
    config = parse_broker_xml(doc)
    assert "leaked" not in config.name


def test_duplicates_are_reported() -> None:
    body = (
        "<name>a</name>\n<name>b</name>\n<address-settings>\n<address-setting match='#'/>\n"
        "<address-setting match='#'><max-delivery-attempts>3</max-delivery-attempts></address-setting>\n"
        "</address-settings>"
    )
    config = parse_broker_xml(_core(body))
    assert config.name == "a"
    assert config.address_settings_for("x").max_delivery_attempts == 10  # the first wins, as in Artemis
    assert [w.element for w in config.warnings] == ["name", "address-setting"]
