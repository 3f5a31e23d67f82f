"""A backup announces itself to its primary on channel 3 (CLUSTER_CONNECT, then NODE_ANNOUNCE with backup=true);
the primary's topology pairs its own connector with the backup's while the backup's connection lives."""

from __future__ import annotations

from cck.codec import (
    LIVE_FAILOVER_VOTE,
    PREAMBLE,
    PRIMARY_FAILOVER_VOTE,
    BackupRegistrationMessage,
    BackupRegistrationProblem,
    BackupReplicationStartFailedMessage,
    ClusterConnectMessage,
    ClusterConnectReplyMessage,
    ClusterTopologyChangeMessage_V4,
    NodeAnnounceMessage,
    Packet,
    QuorumVoteMessage,
    QuorumVoteReplyMessage,
    ServerConnectVote,
    TransportConfiguration,
    TransportParam,
    TransportParamType,
    encode_packet,
)
from cck.reference.broker import BrokerCore, BrokerSettings, ClusterRole
from cck.reference.broker._backups import java_string

from .harness import Wire, connect

NODE = "node-1"
LIVE = TransportConfiguration.netty("127.0.0.1", 61616)
BACKUP = TransportConfiguration.netty("127.0.0.1", 61617)


def _core() -> BrokerCore:
    role = ClusterRole("c", NODE, LIVE, user="cu", password="cp")
    return BrokerCore(BrokerSettings(node_id=NODE, cluster=role))


def _pump(*wires: Wire) -> None:
    """Hand each wire its connection's output (one take for all: ``Wire.collect`` keeps only its own)."""
    out = wires[0].core.take_output()
    for wire in wires:
        wire.decoder.feed(out.get(wire.conn_id, b""))
        wire.received.extend(wire.decoder)


def _backup(core: BrokerCore, conn_id: int, *others: Wire, password: str = "cp", node: str = NODE) -> Wire:
    """A backup's connection: cluster login, then its announcement; the output of both goes to every wire."""
    core.connection_made(conn_id, 0)
    wire = Wire(core, conn_id)
    core.receive(conn_id, PREAMBLE + encode_packet(ClusterConnectMessage("cu", password), 3), 0)
    announce = NodeAnnounceMessage(node, backup=True, current_event_id=1, connector=None, backup_connector=BACKUP)
    core.receive(conn_id, encode_packet(announce, 3), 0)
    _pump(wire, *others)
    assert isinstance(wire.received[0].packet, ClusterConnectReplyMessage)
    return wire


def _members(wire: Wire) -> list[ClusterTopologyChangeMessage_V4]:
    return [f.packet for f in wire.received if isinstance(f.packet, ClusterTopologyChangeMessage_V4)]


def test_a_subscribed_client_hears_of_the_backup_and_of_its_leaving() -> None:
    core = _core()
    client = connect(core, 1)
    first = _members(client)[-1]
    assert (first.node_id, first.live, first.backup) == (NODE, LIVE, None)
    backup = _backup(core, 2, client)
    assert backup.received[0].packet == ClusterConnectReplyMessage(True)
    paired = _members(client)[-1]
    assert (paired.node_id, paired.live, paired.backup, paired.last) == (NODE, LIVE, BACKUP, False)
    core.connection_lost(2, 10)
    _pump(client)
    alone = _members(client)[-1]
    assert (alone.live, alone.backup) == (LIVE, None)


def test_a_client_subscribing_later_gets_the_pair_at_once() -> None:
    core = _core()
    _backup(core, 2)
    assert (_members(connect(core, 1))[-1].backup) == BACKUP


def test_wrong_cluster_credentials_are_refused_and_the_announcement_ignored() -> None:
    core = _core()
    client = connect(core, 1)
    backup = _backup(core, 2, client, password="wrong")
    assert backup.received[0].packet == ClusterConnectReplyMessage(False)
    assert all(m.backup is None for m in _members(client))


def test_an_announcement_for_another_node_is_not_this_node_s_backup() -> None:
    core = _core()
    _backup(core, 2, node="someone-else")
    assert _members(connect(core, 1))[-1].backup is None


def test_a_broker_outside_a_cluster_has_no_cluster_login() -> None:
    core = BrokerCore(BrokerSettings(node_id=NODE))
    backup = _backup(core, 2)
    assert backup.received[0].packet == ClusterConnectReplyMessage(False)


def _live(core: BrokerCore, conn_id: int, *others: Wire, password: str = "cp") -> Wire:
    """A cluster member's connection: cluster login, then the announcement of another live node."""
    core.connection_made(conn_id, 0)
    wire = Wire(core, conn_id)
    core.receive(conn_id, PREAMBLE + encode_packet(ClusterConnectMessage("cu", password), 3), 0)
    core.receive(conn_id, encode_packet(NodeAnnounceMessage("node-2", connector=OTHER), 3), 0)
    _pump(wire, *others)
    return wire


OTHER = TransportConfiguration.netty("127.0.0.1", 61618)


def test_a_live_node_a_cluster_member_announces_joins_and_is_bridged_to() -> None:
    core = _core()
    asked: list[tuple[str, TransportConfiguration | None]] = []
    assert core.cluster is not None
    core.cluster.bridge_announced_through(lambda node, connector: asked.append((node, connector)))
    client = connect(core, 1)
    _live(core, 2, client)
    assert [(m.node_id, m.live) for m in _members(client)][-1] == ("node-2", OTHER)
    assert asked == [("node-2", OTHER)]
    _live(core, 3, client)  # known already: nothing new
    assert asked == [("node-2", OTHER)]


def test_a_live_node_announced_without_the_cluster_login_changes_nothing() -> None:
    core = _core()
    asked: list[tuple[str, TransportConfiguration | None]] = []
    assert core.cluster is not None
    core.cluster.bridge_announced_through(lambda node, connector: asked.append((node, connector)))
    client = connect(core, 1)
    _live(core, 2, client, password="wrong")
    assert all(m.node_id != "node-2" for m in _members(client))
    assert asked == []


# ------------------------------------------------------------------ quorum votes and Artemis's backup registration

def _member(core: BrokerCore, conn_id: int, *packets: Packet, login: bool = True) -> Wire:
    """A connection that logs in with the cluster credentials (unless ``login`` is false), then sends ``packets``
    on channel 3; its output so far is in ``received``."""
    core.connection_made(conn_id, 0)
    wire = Wire(core, conn_id)
    data = PREAMBLE + (encode_packet(ClusterConnectMessage("cu", "cp"), 3) if login else b"")
    core.receive(conn_id, data + b"".join(encode_packet(p, 3) for p in packets), 0)
    _pump(wire)
    return wire


def _replicating_core() -> BrokerCore:
    role = ClusterRole("c", NODE, LIVE, user="cu", password="cp")
    return BrokerCore(BrokerSettings(node_id=NODE, cluster=role, accept_replicas=True))


def _answers(wire: Wire, kind: type[Packet]) -> list[Packet]:
    return [f.packet for f in wire.received if isinstance(f.packet, kind)]


def test_a_member_asking_about_a_live_node_keeps_its_vote_and_gets_the_connector() -> None:
    wire = _member(_replicating_core(), 1, QuorumVoteMessage(LIVE_FAILOVER_VOTE, ServerConnectVote(True, NODE)))
    [reply] = _answers(wire, QuorumVoteReplyMessage)
    assert reply == QuorumVoteReplyMessage(LIVE_FAILOVER_VOTE, ServerConnectVote(True, NODE, java_string(LIVE)))


def test_a_member_asking_about_an_unknown_node_gets_the_opposite_vote() -> None:
    wire = _member(_replicating_core(), 1, QuorumVoteMessage(PRIMARY_FAILOVER_VOTE, ServerConnectVote(True, "gone")))
    assert _answers(wire, QuorumVoteReplyMessage) == [
        QuorumVoteReplyMessage(PRIMARY_FAILOVER_VOTE, ServerConnectVote(False, "gone", None))]


def test_no_vote_is_answered_before_a_cluster_login_or_by_a_server_that_does_not_replicate() -> None:
    vote = QuorumVoteMessage(LIVE_FAILOVER_VOTE, ServerConnectVote(True, NODE))
    assert _answers(_member(_replicating_core(), 1, vote, login=False), QuorumVoteReplyMessage) == []
    assert _answers(_member(_core(), 1, vote), QuorumVoteReplyMessage) == []
    other = QuorumVoteMessage("RequestBackupQuorumVote", vote_bytes=b"\x00\x00\x00\x01\x00\x01")
    assert _answers(_member(_replicating_core(), 2, other), QuorumVoteReplyMessage) == []


def test_artemis_backup_registration_is_ignored_before_a_login_and_refused_after() -> None:
    registration = BackupRegistrationMessage("cu", "cp", False, BACKUP)
    core = _replicating_core()
    assert _answers(_member(core, 1, registration, login=False), BackupReplicationStartFailedMessage) == []
    assert _answers(_member(core, 2, registration), BackupReplicationStartFailedMessage) == [
        BackupReplicationStartFailedMessage(BackupRegistrationProblem.EXCEPTION)]
    _backup(core, 3)  # a backup of the reference's own kind: the primary is replicating now
    assert _answers(_member(core, 4, registration), BackupReplicationStartFailedMessage) == [
        BackupReplicationStartFailedMessage(BackupRegistrationProblem.ALREADY_REPLICATING)]


def test_a_connector_is_printed_as_artemis_prints_it() -> None:
    connector = TransportConfiguration("node0", "org.apache.activemq.artemis.core.remoting.impl.netty."
                                       "NettyConnectorFactory", (
                                           TransportParam("host", TransportParamType.STRING, "127.0.0.1"),
                                           TransportParam("sslEnabled", TransportParamType.BOOLEAN, True),
                                           TransportParam("keyStorePassword", TransportParamType.STRING, "s")))
    assert java_string(connector) == (
        "TransportConfiguration(name=node0, factory=org-apache-activemq-artemis-core-remoting-impl-netty-"
        "NettyConnectorFactory)?host=127-0-0-1&sslEnabled=true&keyStorePassword=****")
