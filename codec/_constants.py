"""Wire constants, named exactly as Artemis names them.

Packet type codes mirror ``PacketImpl`` (artemis-core-client,
``core/protocol/core/impl/PacketImpl.java``); protocol versions mirror the
``*_VERSION`` constants there and the ``incrementingVersion`` list of the
release; exception codes mirror ``ActiveMQExceptionType``.  Keeping the Java
names verbatim means one grep finds both sides.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ADDRESSING_CHANGE_VERSION",
    "ARTEMIS_2_7_0_VERSION",
    "ARTEMIS_2_18_0_VERSION",
    "ARTEMIS_2_21_0_VERSION",
    "ARTEMIS_2_24_0_VERSION",
    "ARTEMIS_2_28_0_VERSION",
    "ARTEMIS_2_29_0_VERSION",
    "ARTEMIS_2_37_0_VERSION",
    "COMPATIBLE_VERSIONS",
    "CURRENT_VERSION",
    "AddOperationType",
    "BackupRegistrationProblem",
    "DisconnectReason",
    "ExceptionType",
    "MessageType",
    "PacketType",
    "PrimaryStopping",
    "PropertyType",
    "RoutingType",
    "SyncDataType",
    "TransportParamType",
]

#: Version 129 (Artemis 2.0.0): new SESS_SEND / SESS_RECEIVE_MSG layout, address model.
ADDRESSING_CHANGE_VERSION = 129
#: Version 130 (2.7.0): correlation IDs on responses, consumer priority.
ARTEMIS_2_7_0_VERSION = 130
#: Version 131 (2.18.0): CLUSTER_TOPOLOGY_V4, CREATESESSION_V2, DISCONNECT_V3.
ARTEMIS_2_18_0_VERSION = 131
#: Version 132 (2.21.0): SESS_COMMIT carries a correlation ID.
ARTEMIS_2_21_0_VERSION = 132
#: Version 133 (2.24.0): replication paging change (broker to broker only).
ARTEMIS_2_24_0_VERSION = 133
#: Version 134 (2.28.0): producers announced, SESS_SEND V3 with senderID.
ARTEMIS_2_28_0_VERSION = 134
#: Version 135 (2.29.0): SESS_BINDINGQUERY_RESP_V5.
ARTEMIS_2_29_0_VERSION = 135
#: Version 136 (2.37.0): quorum-vote change (cluster only).
ARTEMIS_2_37_0_VERSION = 136

#: The protocol version this codec speaks by default (Artemis 2.37.0 and later).
CURRENT_VERSION = ARTEMIS_2_37_0_VERSION
#: Client versions an Artemis 2.44 broker accepts (``compatibleVersionList``).
COMPATIBLE_VERSIONS = tuple(range(121, 137))


class PacketType(IntEnum):
    """Packet type codes (``PacketImpl`` constants); the byte after the frame length."""

    PING = 10
    DISCONNECT = 11
    DISCONNECT_CONSUMER = 12
    DISCONNECT_CONSUMER_KILL = 13
    EXCEPTION = 20
    NULL_RESPONSE = 21
    PACKETS_CONFIRMED = 22
    CREATESESSION = 30
    CREATESESSION_RESP = 31
    REATTACH_SESSION = 32
    REATTACH_SESSION_RESP = 33
    CREATE_QUEUE = 34
    DELETE_QUEUE = 35
    CREATE_SHARED_QUEUE = 36
    SESS_XA_FAILED = 39
    SESS_CREATECONSUMER = 40
    SESS_ACKNOWLEDGE = 41
    SESS_EXPIRED = 42
    SESS_COMMIT = 43
    SESS_ROLLBACK = 44
    SESS_QUEUEQUERY = 45
    SESS_QUEUEQUERY_RESP = 46
    SESS_BINDINGQUERY = 49
    SESS_BINDINGQUERY_RESP = 50
    SESS_XA_START = 51
    SESS_XA_END = 52
    SESS_XA_COMMIT = 53
    SESS_XA_PREPARE = 54
    SESS_XA_RESP = 55
    SESS_XA_ROLLBACK = 56
    SESS_XA_JOIN = 57
    SESS_XA_SUSPEND = 58
    SESS_XA_RESUME = 59
    SESS_XA_FORGET = 60
    SESS_XA_INDOUBT_XIDS = 61
    SESS_XA_INDOUBT_XIDS_RESP = 62
    SESS_XA_SET_TIMEOUT = 63
    SESS_XA_SET_TIMEOUT_RESP = 64
    SESS_XA_GET_TIMEOUT = 65
    SESS_XA_GET_TIMEOUT_RESP = 66
    SESS_START = 67
    SESS_STOP = 68
    SESS_CLOSE = 69
    SESS_FLOWTOKEN = 70
    SESS_SEND = 71
    SESS_SEND_LARGE = 72
    SESS_SEND_CONTINUATION = 73
    SESS_CONSUMER_CLOSE = 74
    SESS_RECEIVE_MSG = 75
    SESS_RECEIVE_LARGE_MSG = 76
    SESS_RECEIVE_CONTINUATION = 77
    SESS_FORCE_CONSUMER_DELIVERY = 78
    SESS_PRODUCER_REQUEST_CREDITS = 79
    SESS_PRODUCER_CREDITS = 80
    SESS_INDIVIDUAL_ACKNOWLEDGE = 81
    SESS_PRODUCER_FAIL_CREDITS = 82
    REPLICATION_APPEND = 91
    SESS_ADD_METADATA = 104
    SESS_ADD_METADATA2 = 105
    SESS_UNIQUE_ADD_METADATA = 106
    CLUSTER_TOPOLOGY = 110
    NODE_ANNOUNCE = 111
    SUBSCRIBE_TOPOLOGY = 112
    SUBSCRIBE_TOPOLOGY_V2 = 113
    CLUSTER_TOPOLOGY_V2 = 114
    BACKUP_REGISTRATION = 115
    BACKUP_REGISTRATION_FAILED = 116
    REPLICATION_START_FINISH_SYNC = 120
    REPLICATION_SCHEDULED_FAILOVER = 121
    CLUSTER_TOPOLOGY_V3 = 122
    DISCONNECT_V2 = 124
    CLUSTER_CONNECT = 125
    CLUSTER_CONNECT_REPLY = 126
    QUORUM_VOTE = -2
    QUORUM_VOTE_REPLY = -3
    CHECK_FOR_FAILOVER = -4
    CHECK_FOR_FAILOVER_REPLY = -5
    SCALEDOWN_ANNOUNCEMENT = -6
    SESS_QUEUEQUERY_RESP_V2 = -7
    SESS_BINDINGQUERY_RESP_V2 = -8
    SESS_BINDINGQUERY_RESP_V3 = -10
    CREATE_ADDRESS = -11
    CREATE_QUEUE_V2 = -12
    CREATE_SHARED_QUEUE_V2 = -13
    SESS_QUEUEQUERY_RESP_V3 = -14
    SESS_BINDINGQUERY_RESP_V4 = -15
    FEDERATION_DOWNSTREAM_CONNECT = -16
    CLUSTER_TOPOLOGY_V4 = -17
    CREATESESSION_V2 = -18
    DISCONNECT_V3 = -19
    CREATE_PRODUCER = -20
    REMOVE_PRODUCER = -21
    SESS_BINDINGQUERY_RESP_V5 = -22
    # The kit's own packets, never sent to or by Artemis: journal replication between two reference brokers on
    # the cluster channel (``reference/ha``); codes from the bottom of the byte, far from Artemis's.
    KIT_REPLICA_SUBSCRIBE = -128
    KIT_REPLICA_BEGIN = -127
    KIT_REPLICA_RECORDS = -126
    KIT_REPLICA_ACK = -125
    KIT_REPLICA_STOPPING = -124
    KIT_REPLICA_INPUT = -123


class ExceptionType(IntEnum):
    """``ActiveMQExceptionType`` codes carried by EXCEPTION packets."""

    INTERNAL_ERROR = 0
    UNSUPPORTED_PACKET = 1
    NOT_CONNECTED = 2
    CONNECTION_TIMEDOUT = 3
    DISCONNECTED = 4
    UNBLOCKED = 5
    IO_ERROR = 6
    QUEUE_DOES_NOT_EXIST = 100
    QUEUE_EXISTS = 101
    OBJECT_CLOSED = 102
    INVALID_FILTER_EXPRESSION = 103
    ILLEGAL_STATE = 104
    SECURITY_EXCEPTION = 105
    ADDRESS_DOES_NOT_EXIST = 106
    ADDRESS_EXISTS = 107
    INCOMPATIBLE_CLIENT_SERVER_VERSIONS = 108
    LARGE_MESSAGE_ERROR_BODY = 110
    TRANSACTION_ROLLED_BACK = 111
    SESSION_CREATION_REJECTED = 112
    DUPLICATE_ID_REJECTED = 113
    DUPLICATE_METADATA = 114
    TRANSACTION_OUTCOME_UNKNOWN = 115
    ALREADY_REPLICATING = 116
    INTERCEPTOR_REJECTED_PACKET = 117
    INVALID_TRANSIENT_QUEUE_USE = 118
    REMOTE_DISCONNECT = 119
    TRANSACTION_TIMEOUT = 120
    NATIVE_ERROR_INTERNAL = 200
    NATIVE_ERROR_INVALID_BUFFER = 201
    NATIVE_ERROR_NOT_ALIGNED = 202
    NATIVE_ERROR_CANT_INITIALIZE_AIO = 203
    NATIVE_ERROR_CANT_RELEASE_AIO = 204
    NATIVE_ERROR_CANT_OPEN_CLOSE_FILE = 205
    NATIVE_ERROR_CANT_ALLOCATE_QUEUE = 206
    NATIVE_ERROR_PREALLOCATE_FILE = 208
    NATIVE_ERROR_ALLOCATE_MEMORY = 209
    ADDRESS_FULL = 210
    LARGE_MESSAGE_INTERRUPTED = 211
    CLUSTER_SECURITY_EXCEPTION = 212
    NOT_IMPLEMTNED_EXCEPTION = 213
    MAX_CONSUMER_LIMIT_EXCEEDED = 214
    UNEXPECTED_ROUTING_TYPE_FOR_ADDRESS = 215
    INVALID_QUEUE_CONFIGURATION = 216
    DELETE_ADDRESS_ERROR = 217
    NULL_REF = 218
    SHUTDOWN_ERROR = 219
    REPLICATION_TIMEOUT_ERROR = 220
    DIVERT_DOES_NOT_EXIST = 221
    ROUTING_EXCEPTION = 222
    TIMEOUT_EXCEPTION = 223
    GENERIC_EXCEPTION = 999


class RoutingType(IntEnum):
    """``RoutingType`` byte; ``None`` on the Python side stands for the wire's -1."""

    MULTICAST = 0
    ANYCAST = 1


class DisconnectReason(IntEnum):
    """``DisconnectReason`` byte of DISCONNECT_V3; ``None`` stands for the wire's -1."""

    REDIRECT = 0
    REDIRECT_ON_CRITICAL_ERROR = 1
    SCALE_DOWN = 2
    SCALE_DOWN_ON_CRITICAL_ERROR = 3
    SHUT_DOWN = 4
    SHUT_DOWN_ON_CRITICAL_ERROR = 5


class BackupRegistrationProblem(IntEnum):
    """Why a primary refuses a backup's registration: the ``int`` of BACKUP_REGISTRATION_FAILED
    (``BackupReplicationStartFailedMessage.BackupRegistrationProblem`` codes)."""

    EXCEPTION = 0
    AUTHENTICATION = 1
    ALREADY_REPLICATING = 2


class AddOperationType(IntEnum):
    """What a REPLICATION_APPEND does to its record: the byte ``ReplicationManager.ADD_OPERATION_TYPE.toRecord()``
    writes from protocol 131 (Artemis 2.18.0) on.  Before 131 the packet carries a boolean instead, true for
    ``UPDATE`` (see :class:`~codec.ReplicationAddMessage`)."""

    UPDATE = 0
    ADD = 1
    EVENT = 2


class SyncDataType(IntEnum):
    """What the IDs of a REPLICATION_START_FINISH_SYNC are (``ReplicationStartSyncMessage.SyncDataType`` codes):
    journal file IDs of the bindings or the messages journal, large-message IDs, or (with synchronization finished)
    the primary's node activation sequence."""

    JournalBindings = 0
    JournalMessages = 1
    LargeMessages = 2
    ActivationSequence = 3


class PrimaryStopping(IntEnum):
    """The ``int`` of REPLICATION_SCHEDULED_FAILOVER (``ReplicationPrimaryIsStoppingMessage.PrimaryStopping``, called
    ``ReplicationLiveIsStoppingMessage.LiveStopping`` before Artemis 2.32.0): the primary's stop was called, then the
    order to fail over now."""

    STOP_CALLED = 0
    FAIL_OVER = 1


class MessageType(IntEnum):
    """The message type byte of the core message header (``Message.*_TYPE``)."""

    DEFAULT = 0
    OBJECT = 2
    TEXT = 3
    BYTES = 4
    MAP = 5
    STREAM = 6
    EMBEDDED = 7
    LARGE_EMBEDDED = 8


class PropertyType(IntEnum):
    """TypedProperties value tags (``DataConstants``); tag 1 is unused."""

    NULL = 0
    BOOLEAN = 2
    BYTE = 3
    BYTES = 4
    SHORT = 5
    INT = 6
    LONG = 7
    FLOAT = 8
    DOUBLE = 9
    STRING = 10
    CHAR = 11


class TransportParamType(IntEnum):
    """Value type byte of a TransportConfiguration parameter."""

    BOOLEAN = 0
    INT = 1
    LONG = 2
    STRING = 3
