"""The one table from packet type code to packet class."""

from __future__ import annotations

from ._constants import PacketType
from ._packets import consumers as _c
from ._packets import control as _ctl
from ._packets import federation as _f
from ._packets import ha as _ha
from ._packets import kit as _kit
from ._packets import messages as _m
from ._packets import producers as _p
from ._packets import queues as _q
from ._packets import replication as _r
from ._packets import session as _s
from ._packets import topology as _t
from ._packets import xa as _x
from ._packets._base import Packet

__all__ = ["KIT_PACKET_CLASSES", "PACKET_CLASSES", "packet_class"]

#: Every packet the codec knows, grouped by family as in the notes' catalogue.
PACKET_CLASSES: dict[PacketType, type[Packet]] = {
    cls.TYPE: cls
    for cls in (
        # connection control, channel 0, generic responses
        _ctl.Ping,
        _ctl.DisconnectMessage,
        _ctl.DisconnectMessage_V2,
        _ctl.DisconnectMessage_V3,
        _ctl.ActiveMQExceptionMessage,
        _ctl.NullResponseMessage,
        _ctl.PacketsConfirmedMessage,
        _ctl.SubscribeClusterTopologyUpdatesMessage,
        _ctl.SubscribeClusterTopologyUpdatesMessageV2,
        _ctl.CheckFailoverMessage,
        _ctl.CheckFailoverReplyMessage,
        # topology and cluster connections
        _t.ClusterTopologyChangeMessage,
        _t.ClusterTopologyChangeMessage_V2,
        _t.ClusterTopologyChangeMessage_V3,
        _t.ClusterTopologyChangeMessage_V4,
        _t.NodeAnnounceMessage,
        _t.ClusterConnectMessage,
        _t.ClusterConnectReplyMessage,
        _t.ScaleDownAnnounceMessage,
        # high availability: backup registration and quorum votes
        _ha.BackupRegistrationMessage,
        _ha.BackupReplicationStartFailedMessage,
        _ha.QuorumVoteMessage,
        _ha.QuorumVoteReplyMessage,
        # journal replication from a primary to its backup (channel 2)
        _r.ReplicationAddMessage,
        _r.ReplicationStartSyncMessage,
        _r.ReplicationPrimaryIsStoppingMessage,
        # federation between brokers
        _f.FederationDownstreamConnectMessage,
        # sessions
        _s.CreateSessionMessage,
        _s.CreateSessionMessage_V2,
        _s.CreateSessionResponseMessage,
        _s.ReattachSessionMessage,
        _s.ReattachSessionResponseMessage,
        _s.SessionStart,
        _s.SessionStop,
        _s.SessionCloseMessage,
        _s.SessionAddMetaDataMessage,
        _s.SessionAddMetaDataMessageV2,
        _s.SessionUniqueAddMetaDataMessage,
        _s.SessionCommitMessage,
        _s.RollbackMessage,
        # addresses, queues, queries
        _q.CreateAddressMessage,
        _q.CreateQueueMessage,
        _q.CreateQueueMessage_V2,
        _q.CreateSharedQueueMessage,
        _q.CreateSharedQueueMessage_V2,
        _q.SessionDeleteQueueMessage,
        _q.SessionQueueQueryMessage,
        _q.SessionQueueQueryResponseMessage,
        _q.SessionQueueQueryResponseMessage_V2,
        _q.SessionQueueQueryResponseMessage_V3,
        _q.SessionBindingQueryMessage,
        _q.SessionBindingQueryResponseMessage,
        _q.SessionBindingQueryResponseMessage_V2,
        _q.SessionBindingQueryResponseMessage_V3,
        _q.SessionBindingQueryResponseMessage_V4,
        _q.SessionBindingQueryResponseMessage_V5,
        # consumers
        _c.SessionCreateConsumerMessage,
        _c.SessionConsumerFlowCreditMessage,
        _c.SessionAcknowledgeMessage,
        _c.SessionIndividualAcknowledgeMessage,
        _c.SessionExpireMessage,
        _c.SessionConsumerCloseMessage,
        _c.SessionForceConsumerDelivery,
        _c.DisconnectConsumerMessage,
        _c.DisconnectConsumerWithKillMessage,
        # producers
        _p.SessionRequestProducerCreditsMessage,
        _p.SessionProducerCreditsMessage,
        _p.SessionProducerCreditsFailMessage,
        _p.CreateProducerMessage,
        _p.RemoveProducerMessage,
        # XA
        _x.SessionXAStartMessage,
        _x.SessionXAEndMessage,
        _x.SessionXACommitMessage,
        _x.SessionXAPrepareMessage,
        _x.SessionXAResponseMessage,
        _x.SessionXARollbackMessage,
        _x.SessionXAJoinMessage,
        _x.SessionXASuspend,
        _x.SessionXAResumeMessage,
        _x.SessionXAForgetMessage,
        _x.SessionXAGetInDoubtXids,
        _x.SessionXAGetInDoubtXidsResponseMessage,
        _x.SessionXASetTimeoutMessage,
        _x.SessionXASetTimeoutResponseMessage,
        _x.SessionXAGetTimeout,
        _x.SessionXAGetTimeoutResponseMessage,
        _x.SessionXAAfterFailedMessage,
        # messages
        _m.SessionSendMessage,
        _m.SessionSendLargeMessage,
        _m.SessionSendContinuationMessage,
        _m.SessionReceiveMessage,
        _m.SessionReceiveLargeMessage,
        _m.SessionReceiveContinuationMessage,
    )
}

#: The kit's own packets (replication between reference brokers): decoded like the others, never Artemis's, so
#: outside the table the Artemis vectors must cover.
KIT_PACKET_CLASSES: dict[PacketType, type[Packet]] = {
    cls.TYPE: cls
    for cls in (_kit.ReplicaSubscribe, _kit.ReplicaBegin, _kit.ReplicaRecords, _kit.ReplicaAck, _kit.ReplicaStopping,
                _kit.ReplicaInput)
}

_BY_CODE: dict[int, type[Packet]] = {int(k): v for k, v in (PACKET_CLASSES | KIT_PACKET_CLASSES).items()}


def packet_class(type_code: int) -> type[Packet] | None:
    """The packet class for a type byte, or ``None`` when the codec does not know it."""
    return _BY_CODE.get(type_code)
