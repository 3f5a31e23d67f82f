"""reference.config on the files a real ``artemis create`` (2.44.0) writes.

The copies in data/artemis-2.44.0-*/etc were made with
``artemis create <dir> --user admin --password admin --require-login --silent --no-web``
(plus ``--clustered --cluster-user cu --cluster-password cp --host 127.0.0.1`` and
``--allow-anonymous`` for the other two); bootstrap.xml, which holds absolute paths, is left out.
The test marked ``artemis`` runs ``artemis create`` again and reads its fresh output.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cck.reference.config import (
    AddressFullPolicy,
    JournalType,
    LoginFlag,
    MessageLoadBalancing,
    Permission,
    RoutingType,
    SecurityModel,
    load_config,
)

DATA = Path(__file__).parent / "data"
CREATE = DATA / "artemis-2.44.0-create" / "etc"
CLUSTERED = DATA / "artemis-2.44.0-clustered" / "etc"
ANONYMOUS = DATA / "artemis-2.44.0-anonymous" / "etc"


def test_data_files_hold_no_machine_paths() -> None:
    for path in DATA.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            for marker in ("/tmp/", "/" + "root/", "/home/", "C:\\"):
                assert marker not in text, f"{path.relative_to(DATA)} contains {marker!r}"


def test_generated_broker_xml_core_values() -> None:
    config = load_config(CREATE / "broker.xml")
    assert config.name == "0.0.0.0"
    assert config.security_enabled is True
    assert config.instance_dir == CREATE.parent
    j = config.journal
    assert j.persistence_enabled is True
    assert j.journal_type is JournalType.NIO
    assert (j.journal_directory, j.bindings_directory) == ("data/journal", "data/bindings")
    assert (j.paging_directory, j.large_messages_directory) == ("data/paging", "data/large-messages")
    assert j.journal_file_size == 10 * 1024 * 1024  # written as "10M"
    assert j.journal_min_files == 2
    assert j.journal_buffer_timeout == 88000
    assert config.resolve_dir(j.journal_directory) == CREATE.parent / "data" / "journal"


def test_generated_acceptors() -> None:
    config = load_config(CREATE / "broker.xml")
    names = [a.name for a in config.acceptors]
    assert names == ["artemis", "amqp", "stomp", "hornetq", "mqtt"]
    artemis = config.acceptors[0]
    assert (artemis.scheme, artemis.host, artemis.port) == ("tcp", "0.0.0.0", 61616)
    assert artemis.protocols == ("CORE", "AMQP", "STOMP", "HORNETQ", "MQTT", "OPENWIRE")
    assert artemis.params["tcpSendBufferSize"] == "1048576"
    hornetq = config.acceptors[3]
    # ';' separates parameters; the trailing '.' stays in the value
    assert hornetq.params["anycastPrefix"] == "jms.queue."
    assert hornetq.protocols == ("HORNETQ", "STOMP")


def test_generated_security_addresses_and_settings() -> None:
    config = load_config(CREATE / "broker.xml")
    (setting,) = config.security_settings
    assert setting.match == "#"
    (role,) = setting.roles
    assert role.name == "amq"
    assert role.permissions == frozenset(Permission)
    assert [(a.name, [q.name for q in a.queues]) for a in config.addresses] == [
        ("DLQ", ["DLQ"]),
        ("ExpiryQueue", ["ExpiryQueue"]),
    ]
    assert config.addresses[0].routing_types == frozenset({RoutingType.ANYCAST})
    mgmt = config.address_settings_for("activemq.management.abc")
    assert mgmt.auto_create_queues
    assert mgmt.dead_letter_address == "DLQ"
    plain = config.address_settings_for("orders")
    assert plain.auto_delete_queues is False  # from match "#"
    assert plain.address_full_policy is AddressFullPolicy.PAGE
    assert plain.page_size_bytes == 10 * 1024 * 1024
    assert plain.max_delivery_attempts == 10  # not in the file: Artemis default


def test_generated_warnings_name_every_unsupported_element() -> None:
    config = load_config(CREATE / "broker.xml")
    reported = {w.element for w in config.warnings}
    for name in (
        "max-redelivery-records",
        "purge-page-folders",
        "journal-pool-files",
        "journal-device-block-size",
        "journal-max-io",
        "disk-scan-period",
        "max-disk-usage",
        "critical-analyzer",
        "page-sync-timeout",
        "global-max-messages",
        "message-counter-history-day-limit",
        "max-read-page-bytes",
        "page-limit-messages",
        "protocols",
    ):
        assert name in reported, name
    # supported elements are not reported
    for name in ("journal-type", "journal-directory", "acceptors", "security-settings", "address-settings"):
        assert name not in reported, name
    assert all(w.line is not None for w in config.warnings)
    assert all(w.file for w in config.warnings)


def test_generated_users_hashed_password_is_reported_and_cannot_log_in() -> None:
    config = load_config(CREATE / "broker.xml")
    assert config.login is not None
    (module,) = config.login.modules
    assert module.kind == "properties"
    assert module.flag is LoginFlag.REQUIRED
    assert module.users["admin"].password is None
    assert module.users["admin"].roles == frozenset({"amq"})
    (warning,) = [w for w in config.warnings if w.element == "admin"]
    assert "hashed password" in warning.message
    assert "cannot log in" in warning.message
    security = SecurityModel(config)
    assert security.authenticate("admin", "admin") is None
    assert not security.anonymous_allowed
    assert security.authenticate(None, None) is None


def test_generated_instance_with_plain_text_password(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    shutil.copytree(CREATE, etc)
    (etc / "artemis-users.properties").write_text("admin = admin\n", encoding="utf-8")
    config = load_config(etc / "broker.xml")
    security = SecurityModel(config)
    principal = security.authenticate("admin", "admin")
    assert principal is not None
    assert principal.roles == frozenset({"amq"})
    assert security.authenticate("admin", "wrong") is None
    assert security.authorize(principal, Permission.SEND, "any.address")
    assert not [w for w in config.warnings if w.element == "admin"]


def test_generated_anonymous_instance(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    shutil.copytree(CREATE, etc)
    shutil.copy(ANONYMOUS / "login.config", etc / "login.config")
    (etc / "artemis-users.properties").write_text("admin=admin\n", encoding="utf-8")
    config = load_config(etc / "broker.xml")
    security = SecurityModel(config)
    assert security.anonymous_allowed
    assert security.guest_role == "amq"
    anonymous = security.authenticate(None, None)
    assert anonymous is not None
    assert anonymous.guest
    assert anonymous.roles == frozenset({"amq"})
    assert security.authorize(anonymous, Permission.CONSUME, "x")
    # both modules are "sufficient": a wrong password falls through to the guest identity (as Artemis)
    fallback = security.authenticate("admin", "wrong")
    assert fallback is not None
    assert fallback.guest
    real = security.authenticate("admin", "admin")
    assert real is not None
    assert not real.guest


def test_generated_clustered_instance() -> None:
    config = load_config(CLUSTERED / "broker.xml")
    assert (config.cluster_user, config.cluster_password) == ("cu", "cp")
    (connector,) = config.connectors
    assert (connector.name, connector.host, connector.port) == ("artemis", "127.0.0.1", 61616)
    (bg,) = config.broadcast_groups
    assert (bg.name, bg.group_address, bg.group_port, bg.broadcast_period) == ("bg-group1", "231.7.7.7", 9876, 5000)
    assert bg.connector_refs == ("artemis",)
    (dg,) = config.discovery_groups
    assert (dg.name, dg.refresh_timeout, dg.initial_wait_timeout) == ("dg-group1", 10000, 10000)
    (cc,) = config.cluster_connections
    assert cc.discovery_group_ref == "dg-group1"
    assert cc.static_connectors == ()
    assert cc.message_load_balancing is MessageLoadBalancing.ON_DEMAND
    assert cc.max_hops == 1
    # defaults, as ActiveMQDefaultConfiguration has them
    assert (cc.retry_interval, cc.max_retry_interval, cc.check_period, cc.connection_ttl) == (500, 2000, 30000, 60000)
    assert cc.confirmation_window_size == 10 * 1024 * 1024
    # no login.config copied here
    assert config.login is None
    assert any(w.element == "login.config" for w in config.warnings)


def _artemis_home() -> Path:
    from cck.conformance.artemis import ensure_distribution

    return ensure_distribution().home


@pytest.mark.artemis
@pytest.mark.parametrize(
    "options",
    [
        ["--require-login"],
        ["--allow-anonymous", "--clustered", "--cluster-user", "cu", "--cluster-password", "cp", "--host", "127.0.0.1"],
    ],
    ids=["require-login", "anonymous-clustered"],
)
def test_fresh_artemis_create_is_read(tmp_path: Path, options: list[str]) -> None:
    home = _artemis_home()
    instance = tmp_path / "instance"
    cmd = [str(home / "bin" / "artemis"), "create", str(instance), "--user", "admin", "--password", "admin"]
    subprocess.run([*cmd, *options, "--silent", "--no-web"], check=True, capture_output=True, timeout=300)
    config = load_config(instance / "etc" / "broker.xml")
    assert config.login is not None
    assert config.acceptors[0].port == 61616
    assert config.instance_dir == instance
    assert not [w for w in config.warnings if "unknown element" in w.message]
    if "--clustered" in options:
        assert config.cluster_connections[0].discovery_group_ref == "dg-group1"
        assert SecurityModel(config).anonymous_allowed
