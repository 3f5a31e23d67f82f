"""The kit's own core-protocol client: a sans-IO connection core (time injected)
and an asyncio face over it.

Sessions, producers with credits, consumers with window flow control, cumulative
and individual acks, local transactions and the XA set; a :class:`ServerLocator` balances
its connections over the URL's connectors or the brokers' topology (Artemis's four
load-balancing policies, ``reference.client._balance``).  The conformance issue
grows it into a full ServerLocator (reconnect, reattach, failover).
"""

from __future__ import annotations

from ._aio import Connection, Consumer, FailoverEvent, Producer, ServerLocator, Session, connect
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
from ._discovery import DiscoveryReceiver, connector_of
from ._errors import (
    BrokerRefused,
    CallTimeout,
    ClientError,
    ConnectFailed,
    ConnectionFailed,
    FailoverInterrupted,
    ObjectClosed,
    ProtocolViolation,
    TransactionRolledBack,
    XAError,
)
from ._locator import Connector, DiscoveryEndpoint, LocatorURL, RetryLoop, intervals, parse_locator_url
from ._session import ConsumerCore, Delivery, ProducerCore, SessionCore, SessionOptions
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
    "FailoverEvent",
    "FailoverInterrupted",
    "InitialConnect",
    "LoadBalancingPolicy",
    "LocatorURL",
    "ObjectClosed",
    "Producer",
    "ProducerCore",
    "ProtocolViolation",
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
