"""The reference broker's sans-IO core (no sockets, no clock): feed it bytes and
time (monotonic ms), take the bytes it wants written."""

from __future__ import annotations

from ._authorization import Authenticator, Authorizer, CertificateAuthenticator, CheckType, Principal
from ._cluster import (
    MANAGEMENT_ADDRESS,
    NOTIFICATIONS_ADDRESS,
    ROUTE_TO_KEY,
    SF_PREFIX,
    ClusterRole,
    ClusterState,
    LoadBalancing,
    Notification,
    RemoteBinding,
    decode_ids,
    encode_ids,
    internal_address,
    queue_info_request,
)
from ._cluster_hooks import ClusterHooks, bridge_dup_id, forwardable
from ._core import BrokerCore, MirrorPoint
from ._engine import DeliveryEngine
from ._errors import BrokerError
from ._inputs import CoreInput, InputKind, apply_input
from ._journal_storage import JournalStorage, RecoveryReport, open_journal
from ._model import Address, MessageRef, PostOffice, Queue, stable_id
from ._session import Consumer, Session, SessionRegistry, Transaction
from ._settings import BrokerSettings
from ._storage import MemoryStorage, Storage
from ._transactions import Transactions

__all__ = [
    "MANAGEMENT_ADDRESS",
    "NOTIFICATIONS_ADDRESS",
    "ROUTE_TO_KEY",
    "SF_PREFIX",
    "Address",
    "Authenticator",
    "CertificateAuthenticator",
    "Authorizer",
    "BrokerCore",
    "CoreInput",
    "InputKind",
    "MirrorPoint",
    "apply_input",
    "BrokerError",
    "BrokerSettings",
    "CheckType",
    "ClusterHooks",
    "ClusterRole",
    "ClusterState",
    "Consumer",
    "DeliveryEngine",
    "JournalStorage",
    "LoadBalancing",
    "MemoryStorage",
    "MessageRef",
    "Notification",
    "PostOffice",
    "Principal",
    "Queue",
    "RecoveryReport",
    "RemoteBinding",
    "Session",
    "SessionRegistry",
    "Storage",
    "Transaction",
    "Transactions",
    "bridge_dup_id",
    "decode_ids",
    "encode_ids",
    "forwardable",
    "internal_address",
    "open_journal",
    "queue_info_request",
    "stable_id",
]
