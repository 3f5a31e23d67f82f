"""reference.config: address settings (merge order and defaults), addresses and queues, journal and
core values, namespaces, ${...} substitution, the embedded default."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.reference.config import (
    AddressFullPolicy,
    BrokerConfig,
    JournalType,
    ResolvedAddressSettings,
    RoutingType,
    SecurityModel,
    default_config,
    parse_broker_xml,
)

DATA = Path(__file__).parent / "data"


def _core(body: str, ns: bool = True) -> str:
    if ns:
        return f'<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">{body}</core></configuration>'
    return f"<configuration><core>{body}</core></configuration>"


def test_address_settings_merge_most_specific_first() -> None:
    config = parse_broker_xml(DATA / "address-settings.xml")
    eu = config.address_settings_for("orders.eu")
    assert eu.address == "orders.eu"
    assert eu.max_delivery_attempts == -1  # orders.eu (exact)
    assert eu.auto_create_queues is False
    assert eu.auto_create_addresses is False
    assert eu.max_redelivery_delay == 60000
    assert eu.page_size_bytes == 1024 * 1024  # "1MiB"
    assert eu.dead_letter_address == "orders.DLQ"  # orders.#
    assert eu.redelivery_delay_multiplier == 2.0
    assert eu.default_queue_routing_type is RoutingType.ANYCAST
    assert eu.redistribution_delay == 0
    assert eu.expiry_address == "ExpiryQueue"  # #
    assert eu.redelivery_delay == 100
    assert eu.max_size_bytes == 100 * 1024 * 1024  # "100Mb"
    assert eu.address_full_policy is AddressFullPolicy.BLOCK
    assert eu.auto_delete_queues is False
    assert eu.expiry_delay == -1  # nowhere: Artemis default

    us = config.address_settings_for("orders.us")
    assert us.max_delivery_attempts == 5
    assert us.max_redelivery_delay == 1000  # unset: redelivery-delay * 10 (AddressSettings)
    assert us.auto_create_queues is True
    assert config.address_settings_for("orders").dead_letter_address == "orders.DLQ"  # orders.# matches orders
    other = config.address_settings_for("prices")
    assert other.dead_letter_address == "DLQ"
    assert other.default_address_routing_type is RoutingType.MULTICAST


def test_artemis_defaults_when_nothing_matches() -> None:
    resolved = BrokerConfig().address_settings_for("x")
    assert resolved == ResolvedAddressSettings("x")
    assert resolved.max_delivery_attempts == 10
    assert resolved.address_full_policy is AddressFullPolicy.PAGE
    assert resolved.auto_create_queues
    assert resolved.auto_create_addresses
    assert resolved.auto_delete_queues
    assert resolved.auto_delete_addresses
    assert resolved.default_queue_routing_type is RoutingType.MULTICAST
    assert resolved.redistribution_delay == -1
    assert resolved.default_max_consumers == -1
    assert resolved.dead_letter_address is None
    assert resolved.expiry_address is None


def test_addresses_and_queues() -> None:
    config = parse_broker_xml(DATA / "address-settings.xml")
    orders, prices = config.addresses
    assert orders.routing_types == frozenset({RoutingType.ANYCAST})
    (q,) = orders.queues
    assert (q.name, q.address, q.routing_type, q.durable, q.filter) == (
        "orders.eu", "orders.eu", RoutingType.ANYCAST, True, None,
    )
    assert q.max_consumers is None
    assert q.purge_on_no_consumers is False
    assert prices.routing_types == frozenset({RoutingType.ANYCAST, RoutingType.MULTICAST})
    all_q, audit = prices.queues
    assert all_q.routing_type is RoutingType.MULTICAST
    assert (all_q.durable, all_q.filter, all_q.max_consumers, all_q.purge_on_no_consumers, all_q.user) == (
        False, "currency = 'EUR'", 1, True, "alice",
    )
    assert audit.durable is True
    assert audit.user is None
    assert config.warnings == ()


def test_core_defaults_from_active_mq_default_configuration() -> None:
    config = parse_broker_xml(_core(""))
    assert config.name == "localhost"
    assert config.security_enabled is True
    assert (config.connection_ttl_override, config.connection_ttl_check_interval) == (-1, 2000)
    assert (config.transaction_timeout, config.transaction_timeout_scan_period) == (300000, 1000)
    assert (config.id_cache_size, config.persist_id_cache) == (20000, True)
    assert config.persist_delivery_count_before_delivery is True  # the reference broker's default (Artemis: false)
    assert (config.cluster_user, config.cluster_password) == ("ACTIVEMQ.CLUSTER.ADMIN.USER", "CHANGE ME!!")
    j = config.journal
    assert j.persistence_enabled
    assert j.journal_type is JournalType.ASYNCIO
    assert (j.journal_directory, j.bindings_directory, j.paging_directory, j.large_messages_directory) == (
        "data/journal", "data/bindings", "data/paging", "data/largemessages",
    )
    assert (j.journal_file_size, j.journal_min_files) == (10485760, 2)
    assert (j.journal_sync_transactional, j.journal_sync_non_transactional) == (True, True)
    assert j.journal_buffer_timeout == 500000  # ASYNCIO default
    assert (j.journal_compact_min_files, j.journal_compact_percentage) == (10, 30)
    assert config.acceptors == ()
    assert config.addresses == ()
    assert config.warnings == ()


def test_core_values_read() -> None:
    body = (
        "<name>n1</name><security-enabled>false</security-enabled><persistence-enabled>false</persistence-enabled>"
        "<journal-type>NIO</journal-type><journal-directory>j</journal-directory>"
        "<journal-file-size>1M</journal-file-size><journal-min-files>3</journal-min-files>"
        "<journal-sync-transactional>false</journal-sync-transactional>"
        "<journal-sync-non-transactional>false</journal-sync-non-transactional>"
        "<journal-compact-min-files>0</journal-compact-min-files>"
        "<journal-compact-percentage>50</journal-compact-percentage>"
        "<connection-ttl-override>30000</connection-ttl-override>"
        "<connection-ttl-check-interval>500</connection-ttl-check-interval>"
        "<transaction-timeout>1000</transaction-timeout><transaction-timeout-scan-period>100</transaction-timeout-scan-period>"
        "<id-cache-size>5</id-cache-size><persist-id-cache>false</persist-id-cache>"
        "<persist-delivery-count-before-delivery>false</persist-delivery-count-before-delivery>"
    )
    config = parse_broker_xml(_core(body, ns=False))
    assert (config.name, config.security_enabled) == ("n1", False)
    j = config.journal
    assert (j.persistence_enabled, j.journal_type, j.journal_directory) == (False, JournalType.NIO, "j")
    assert (j.journal_file_size, j.journal_min_files) == (1024 * 1024, 3)
    assert j.journal_buffer_timeout == 3333333  # NIO default
    assert (j.journal_sync_transactional, j.journal_sync_non_transactional) == (False, False)
    assert (j.journal_compact_min_files, j.journal_compact_percentage) == (0, 50)
    assert (config.connection_ttl_override, config.connection_ttl_check_interval) == (30000, 500)
    assert (config.transaction_timeout, config.transaction_timeout_scan_period) == (1000, 100)
    assert (config.id_cache_size, config.persist_id_cache) == (5, False)
    assert config.persist_delivery_count_before_delivery is False
    assert config.warnings == ()


@pytest.mark.parametrize(
    "document",
    [
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><name>x</name></core></configuration>',
        "<configuration><core><name>x</name></core></configuration>",
        '<core xmlns="urn:activemq:core"><name>x</name></core>',
        '<a:configuration xmlns:a="urn:activemq"><c:core xmlns:c="urn:activemq:core"><c:name>x</c:name></c:core>'
        "</a:configuration>",
    ],
    ids=["namespaced", "plain", "core-root", "prefixed"],
)
def test_namespaced_and_plain_files(document: str) -> None:
    assert parse_broker_xml(document).name == "x"


def test_property_substitution_as_artemis() -> None:
    body = (
        "<name>${broker.name}</name>"
        "<acceptors><acceptor name='${acc:main}'>tcp://${host:0.0.0.0}:${port}?protocols=CORE</acceptor></acceptors>"
        "<journal-directory>${data.dir}/journal</journal-directory>"
        "<cluster-user>${ user : fallback }</cluster-user>"
        "<cluster-password>${unset}x${unset}</cluster-password>"
    )
    config = parse_broker_xml(_core(body), properties={"broker.name": "b1", "port": "61617", "data.dir": "/d"})
    assert config.name == "b1"
    (acc,) = config.acceptors
    assert (acc.name, acc.host, acc.port) == ("main", "0.0.0.0", 61617)
    assert config.journal.journal_directory == "/d/journal"
    assert config.cluster_user == "fallback"  # trimmed name and default
    assert config.cluster_password == "x"  # no value, no default: '' (as Artemis) ...
    (warning,) = config.warnings  # ... and reported once per element
    assert warning.element == "cluster-password"
    assert "${unset}" in warning.message


def test_embedded_default(tmp_path: Path) -> None:
    config = default_config(tmp_path / "data")
    (acc,) = config.acceptors
    assert (acc.host, acc.port, acc.protocols) == ("127.0.0.1", 61616, ("CORE",))
    assert config.security_enabled is False
    assert config.journal.persistence_enabled is True
    for d in (config.journal.journal_directory, config.journal.bindings_directory,
              config.journal.paging_directory, config.journal.large_messages_directory):
        assert Path(d).parent == tmp_path / "data"
    settings = config.address_settings_for("anything.at.all")
    assert settings.auto_create_addresses
    assert settings.auto_create_queues
    assert config.warnings == ()
    security = SecurityModel(config)
    assert security.anonymous_allowed
    assert security.authenticate(None, None) is not None


def test_config_is_frozen() -> None:
    import dataclasses

    config = default_config("d")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.acceptors[0].params["x"] = "y"  # type: ignore[index]


def test_xinclude_as_artemis_supports_it(tmp_path: Path) -> None:
    (tmp_path / "addresses.xml").write_text(
        '<addresses xmlns="urn:activemq:core"><address name="inc"><anycast><queue name="inc"/></anycast></address>'
        "</addresses>",
        encoding="utf-8",
    )
    (tmp_path / "broker.xml").write_text(
        '<configuration xmlns="urn:activemq" xmlns:xi="http://www.w3.org/2001/XInclude">'
        '<core xmlns="urn:activemq:core"><xi:include href="addresses.xml"/></core></configuration>',
        encoding="utf-8",
    )
    config = parse_broker_xml(tmp_path / "broker.xml")
    assert [a.name for a in config.addresses] == ["inc"]
    assert config.warnings == ()
