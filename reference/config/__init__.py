"""The reference broker's configuration, read from the same files an Artemis instance reads.

``broker.xml`` (namespaced ``urn:activemq`` / ``urn:activemq:core`` or not, ``${name:default}``
substituted from a mapping you pass) becomes a frozen :class:`BrokerConfig`; ``login.config``
and the users and roles files beside it become its ``login``; :class:`SecurityModel` answers
"who is this" and "may they".  Everything the reference broker does not implement is returned in
``BrokerConfig.warnings`` as :class:`ConfigWarning` (path, element, message); anything it cannot
start with raises :class:`ConfigError` naming file, line and element::

    from cck.reference.config import load_config, SecurityModel, Permission

    config = load_config("instance/etc/broker.xml", properties={"port": "61617"})
    for w in config.warnings:
        print(w)
    security = SecurityModel(config)
    principal = security.authenticate("admin", "secret")
    if principal and security.authorize(principal, Permission.SEND, "orders.eu"):
        ...
    config.address_settings_for("orders.eu").max_delivery_attempts
"""

from __future__ import annotations

from ._errors import ConfigError, ConfigWarning
from ._model import (
    FILE_LOCK_MANAGERS,
    Acceptor,
    AcceptorTls,
    AddressConfig,
    AddressFullPolicy,
    AddressSettings,
    BroadcastGroup,
    BrokerConfig,
    ClusterConnection,
    Connector,
    DiscoveryGroup,
    HAPolicy,
    JournalConfig,
    JournalType,
    LockManager,
    LoginConfig,
    LoginFlag,
    LoginModule,
    MessageLoadBalancing,
    Permission,
    QueueConfig,
    ResolvedAddressSettings,
    Role,
    RoutingType,
    ScaleDown,
    SecuritySetting,
    UserEntry,
)
from ._parse import default_config, load_config, parse_broker_xml
from ._security import Principal, SecurityModel
from ._wildcard import matches as wildcard_matches
from ._wildcard import matches_in_order

__all__ = [
    # reading
    "load_config",
    "parse_broker_xml",
    "default_config",
    "ConfigError",
    "ConfigWarning",
    # the model
    "BrokerConfig",
    "Acceptor",
    "AcceptorTls",
    "Connector",
    "SecuritySetting",
    "Role",
    "Permission",
    "AddressConfig",
    "QueueConfig",
    "RoutingType",
    "AddressSettings",
    "ResolvedAddressSettings",
    "AddressFullPolicy",
    "JournalConfig",
    "JournalType",
    "BroadcastGroup",
    "DiscoveryGroup",
    "ClusterConnection",
    "MessageLoadBalancing",
    "FILE_LOCK_MANAGERS",
    "HAPolicy",
    "LockManager",
    "ScaleDown",
    "LoginConfig",
    "LoginModule",
    "LoginFlag",
    "UserEntry",
    # security
    "SecurityModel",
    "Principal",
    "wildcard_matches",
    "matches_in_order",
]
