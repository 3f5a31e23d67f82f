"""The kit's own core-protocol client: a sans-IO connection core (time injected)
and an asyncio face over it.

Sessions, producers with credits, consumers with window flow control, cumulative
and individual acks, local transactions and the XA set; a :class:`ServerLocator` balances
its connections over the URL's connectors or the brokers' topology (Artemis's four
load-balancing policies, ``reference.client._balance``).  Connecting, reconnecting and
the reattach or recreate of every session after a failure are one sans-IO state
machine (:class:`Failover`, ``_failover.py``) that the asyncio layer only carries out.
"""

from __future__ import annotations

from ._aio import Connection, ServerLocator, connect
from ._aio_session import Consumer, Producer, Session
from ._balance import (
    FIRST_ELEMENT,
    RANDOM,
    RANDOM_STICKY,
    ROUND_ROBIN,
    Balancer,
    InitialConnect,
    LoadBalancingPolicy,
    make_policy,
)
from ._calls import Call, CallQueue
from ._connection import ClientConnectionCore, TopologyMember
from ._discovery import DiscoveryReceiver
from ._errors import (
    BrokerRefused,
    CallTimeout,
    ClientError,
    ConnectFailed,
    ConnectionFailed,
    DeliveryFromLostSession,
    FailoverInterrupted,
    ObjectClosed,
    ProtocolViolation,
    TransactionRolledBack,
    XAError,
)
from ._failover import Failover
from ._failover_terms import FailoverEvent
from ._flow import ConsumerCore, Delivery, ProducerCore
from ._locator import (
    Connector,
    DiscoveryEndpoint,
    LocatorURL,
    Reconnect,
    RetryLoop,
    connector_of,
    intervals,
    parse_locator_url,
)
from ._session import SessionCore
from ._session_channel import SessionOptions
from ._settings import ClientSettings

__all__ = [
    "FIRST_ELEMENT",
    "RANDOM",
    "RANDOM_STICKY",
    "ROUND_ROBIN",
    "Balancer",
    "BrokerRefused",
    "Call",
    "CallQueue",
    "CallTimeout",
    "ClientConnectionCore",
    "ClientError",
    "ClientSettings",
    "Connection",
    "ConnectionFailed",
    "ConnectFailed",
    "Connector",
    "Consumer",
    "ConsumerCore",
    "Delivery",
    "DiscoveryEndpoint",
    "DiscoveryReceiver",
    "Failover",
    "FailoverEvent",
    "DeliveryFromLostSession",
    "FailoverInterrupted",
    "InitialConnect",
    "LoadBalancingPolicy",
    "LocatorURL",
    "ObjectClosed",
    "Producer",
    "ProducerCore",
    "ProtocolViolation",
    "Reconnect",
    "RetryLoop",
    "ServerLocator",
    "Session",
    "SessionCore",
    "SessionOptions",
    "TopologyMember",
    "TransactionRolledBack",
    "XAError",
    "connector_of",
    "connect",
    "intervals",
    "make_policy",
    "parse_locator_url",
]
