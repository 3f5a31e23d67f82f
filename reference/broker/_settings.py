"""What the broker core needs from the configuration (broker.xml, or a test)."""

from __future__ import annotations

from dataclasses import dataclass

from cck.codec import CURRENT_VERSION

from ._authorization import Authenticator, Authorizer, CertificateAuthenticator
from ._cluster import ClusterRole

__all__ = ["BrokerSettings"]


@dataclass(frozen=True)
class BrokerSettings:
    node_id: str
    #: user -> password; ``None`` means anonymous access is allowed.
    users: dict[str, str] | None = None
    allow_anonymous: bool = True
    #: (user, password) -> the session's principal, or ``None`` to refuse.  When set it decides, instead of ``users``.
    authenticator: Authenticator | None = None
    #: decides instead of ``authenticator`` for a connection that presented a client certificate (Artemis's
    #: certificate domain); ``None``: the certificate plays no part in the login
    certificate_authenticator: CertificateAuthenticator | None = None
    #: (principal, permission, address, queue) -> granted?  ``None``: every session may do everything.
    authorizer: Authorizer | None = None
    auto_create_queues: bool = True
    auto_create_addresses: bool = True
    default_routing_type: int = 0  # MULTICAST, Artemis's default-address-routing-type
    connection_ttl_override_ms: int = -1
    ttl_check_interval_ms: int = 2000
    #: the default timeout of an XA branch, in seconds as the protocol carries it (SESS_XA_GET_TIMEOUT)
    transaction_timeout_s: int = 300
    transaction_timeout_scan_ms: int = 1000
    server_version: int = CURRENT_VERSION
    #: this node's cluster connection, when broker.xml has one
    cluster: ClusterRole | None = None
    #: per address, how many producers' duplicate IDs are remembered (id-cache-size), and whether they are stored
    id_cache_size: int = 20000
    persist_id_cache: bool = True
    #: a replication primary: a backup that logged in with the cluster credentials may subscribe to the journal
    accept_replicas: bool = False
