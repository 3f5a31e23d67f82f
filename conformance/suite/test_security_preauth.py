"""Packets only a broker may send a broker, from a connection that never authenticated (Artemis user manual,
Clusters: Cluster User Credentials; CVE-2026-27446; notes, packet table: channels 0 and 3).

Each case opens a raw connection to the first of two clustered brokers with security enabled (a node announced
to it would get a bridge of its cluster connection), authenticates nowhere (no session, no CLUSTER_CONNECT with
the cluster credentials), and sends what a peer broker would: a node announcement, a scale-down announcement, a
topology, a request to federate back.  Whatever names a
connector names a "rogue broker", a listener on loopback.  What must hold, each observed for ``OBSERVE_S``
(the brokers act on these packets at once: Artemis deploys a federation upstream and its bridges dial while
handling the packet):

* the broker never dials the rogue broker;
* a topology subscriber that was listening before the packets (and got the broker's own node first, so it
  hears what the broker announces) is told of no new node and of no node leaving;
* no CLUSTER_CONNECT_REPLY says ``authorized``;
* the broker still opens an authenticated session afterwards.

The control case sends the node announcement after a CLUSTER_CONNECT with the node's own cluster credentials:
then the broker must act on it (a bridge dials the announced node, subscribers hear of it), which shows the other
cases' observations would see an effect if there were one.  Two more cases show that nothing but the cluster
credentials in CLUSTER_CONNECT makes a member: a client user's credentials there, and a session opened as the
cluster user.

What a backup sends its replication primary is tried on a replication pair (the primary has its backup): a
BACKUP_REGISTRATION naming the rogue broker as the backup, with and without a refused CLUSTER_CONNECT, and a
quorum vote, and what a primary sends its backup on channel 2 (a journal append, the end of a synchronisation, the
order to take over).  Besides the above, the attacker's connection must get no replication (nothing on channel 2) and
no QUORUM_VOTE_REPLY, and the backup must stay passive; two control cases send the vote and the registration after a
CLUSTER_CONNECT with the cluster credentials and must get the answers (a vote reply; a refusal of the registration or
replication).  The channel-2 packets have no control case: no server takes them on an acceptor (a backup takes them
only on the connection it opened to its primary), so a member's would have no effect either; what shows an effect
would be seen is the backup's acceptor, which the ha cases see take connections once a backup is active.

Before protocol 125 (HornetQ 2.4) there is no cluster login: NODE_ANNOUNCE and BACKUP_REGISTRATION are taken on
channel 0 from any connection, a registration judged by the credentials it carries (HORNETQ-1345 moved them to
channel 3 behind CLUSTER_CONNECT), so the attacks send them there and the cases that send CLUSTER_CONNECT are
UNSUPPORTED; the control that expects a server-connect vote to be
answered is UNSUPPORTED before Artemis 2.2.0's protocol, which first answers one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from cck.codec import (
    ADDRESSING_CHANGE_VERSION,
    ARTEMIS_2_18_0_VERSION,
    LIVE_FAILOVER_VOTE,
    AddOperationType,
    BackupRegistrationMessage,
    BackupReplicationStartFailedMessage,
    ClusterConnectMessage,
    ClusterConnectReplyMessage,
    ClusterTopologyChangeMessage_V2,
    ClusterTopologyChangeMessage_V4,
    CreateSessionMessage,
    FederationAddressPolicy,
    FederationDownstreamConnectMessage,
    NodeAnnounceMessage,
    Packet,
    PrimaryStopping,
    QuorumVoteMessage,
    QuorumVoteReplyMessage,
    ReplicationAddMessage,
    ReplicationPrimaryIsStoppingMessage,
    ReplicationStartSyncMessage,
    RoutingType,
    ScaleDownAnnounceMessage,
    ServerConnectVote,
    SubscribeClusterTopologyUpdatesMessageV2,
    SyncDataType,
    TransportConfiguration,
    netty_connector_factory,
)
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import CONFIG, ManagedTarget, Target
from cck.conformance.verdicts import CheckFailed, Unsupported

from ._ha_kit import acceptor, refuses
from ._kit import run, unique
from ._security_kit import (
    ADMIN,
    CLUSTER,
    CLUSTERED,
    PREFIX,
    REPLICATED,
    SETUP_CHANNEL,
    MakeTarget,
    Rogue,
    Wire,
    admin_session,
    secured,
    settings_for,
)

#: how long each case watches for an effect (the rogue broker dialled, a topology change)
OBSERVE_S = 5.0
#: how long the broker may take to send a subscriber its own node
ANSWER_S = 15.0
#: channel 0 carries pings and topology, channel 3 the cluster connection's packets, channel 4 a federation's
PING_CHANNEL = 0
#: a replication primary replicates on channel 2 of the connection its backup registered on
REPLICATION_CHANNEL = 2
CLUSTER_CHANNEL = 3
FEDERATION_CHANNEL = 4
#: the protocol (HornetQ 2.5.0, continued by Artemis 1.0.0) that moved the cluster packets from channel 0 to channel 3
#: behind CLUSTER_CONNECT (HORNETQ-1345); HornetQ 2.4 takes NODE_ANNOUNCE and BACKUP_REGISTRATION on channel 0
CLUSTER_LOGIN_VERSION = 125
#: the attacks that send CLUSTER_CONNECT: a cluster login that does not exist below CLUSTER_LOGIN_VERSION
CLUSTER_CONNECT_ATTACKS = frozenset({"default-credentials", "client-credentials", "wrong-cluster-password",
                                     "cluster-credentials", "default-credentials-registration", "member-vote",
                                     "member-registration"})
#: a server-connect vote is answered over the network from Artemis 2.2.0 (ServerConnectVoteHandler, ARTEMIS-1296;
#: protocol 129, which 2.0.0 and 2.1.0 speak too): 1.x registers no handler for it, HornetQ 2.4 has no QUORUM_VOTE
VOTE_HANDLER_VERSION = ADDRESSING_CHANGE_VERSION
#: the channel of the session a case opens before it attacks
SESSION_CHANNEL = 10
#: the cluster credentials Artemis ships in broker.xml (the kit's brokers are not given them)
DEFAULT_CLUSTER_USER = "ACTIVEMQ.CLUSTER.ADMIN.USER"
DEFAULT_CLUSTER_PASSWORD = "CHANGE ME!!"  # noqa: S105  (Artemis's documented default, sent to be refused)


@dataclass(frozen=True)
class Attack:
    """What the unauthenticated connection knows: the rogue's connector, a node ID of its own, the broker's."""

    rogue: TransportConfiguration
    fake_node: str
    broker_node: str
    version: int
    #: a multicast address with a queue on the broker: what a federation policy matching it would pull from upstream
    address: str

    @property
    def cluster_channel(self) -> int:
        """Where the server reads cluster packets: channel 3, or channel 0 before the cluster login."""
        return CLUSTER_CHANNEL if self.version >= CLUSTER_LOGIN_VERSION else PING_CHANNEL


def _federation(attack: Attack) -> list[tuple[Packet, int]]:
    # an address policy matching an address that has a multicast queue: the upstream it deploys connects at once to
    # create its remote consumer (a federation without a policy has nothing to pull, and would never dial)
    policy = FederationAddressPolicy(name="cck-rogue-policy", includes=(attack.address,))
    request = FederationDownstreamConnectMessage(
        name=f"cck-rogue-{attack.fake_node[:8]}", stream_name="cck-rogue-downstream", policies=(policy,),
        policy_refs=(policy.name,), upstream=attack.rogue)
    return [(request, FEDERATION_CHANNEL)]


def _announce(attack: Attack) -> NodeAnnounceMessage:
    return NodeAnnounceMessage(attack.fake_node, None, False, time.time_ns() // 1_000_000, attack.rogue)


def _node_announce(attack: Attack) -> list[tuple[Packet, int]]:
    return [(_announce(attack), attack.cluster_channel)]


def _default_credentials(attack: Attack) -> list[tuple[Packet, int]]:
    return [(ClusterConnectMessage(DEFAULT_CLUSTER_USER, DEFAULT_CLUSTER_PASSWORD), CLUSTER_CHANNEL),
            (_announce(attack), attack.cluster_channel)]


def _cluster_credentials(attack: Attack) -> list[tuple[Packet, int]]:
    return [(ClusterConnectMessage(CLUSTER.user, CLUSTER.password), CLUSTER_CHANNEL),
            (_announce(attack), attack.cluster_channel)]


def _client_topology(attack: Attack) -> list[tuple[Packet, int]]:
    event = time.time_ns() // 1_000_000
    if attack.version >= ARTEMIS_2_18_0_VERSION:
        packet: Packet = ClusterTopologyChangeMessage_V4(False, attack.fake_node, event, attack.rogue,
                                                         server_version=attack.version)
    else:
        packet = ClusterTopologyChangeMessage_V2(False, attack.fake_node, event, attack.rogue)
    return [(packet, PING_CHANNEL)]


def _scale_down(attack: Attack) -> list[tuple[Packet, int]]:
    return [(ScaleDownAnnounceMessage(attack.fake_node, attack.broker_node), attack.cluster_channel)]


ATTACKS: dict[str, tuple[str, Callable[[Attack], list[tuple[Packet, int]]]]] = {
    "federation": ("FEDERATION_DOWNSTREAM_CONNECT on channel 4 (as a federating broker sends it) asking the broker "
                   "to federate back to the rogue broker's connector (the request of CVE-2026-27446)", _federation),
    "node-announce": ("NODE_ANNOUNCE on the cluster channel (3; 0 below protocol 125), without CLUSTER_CONNECT, of "
                      "a live node whose connector is the rogue broker", _node_announce),
    "default-credentials": ("CLUSTER_CONNECT on channel 3 with Artemis's default cluster user and password (not "
                            "this broker's), then NODE_ANNOUNCE of a node whose connector is the rogue broker",
                            _default_credentials),
    "client-topology": ("CLUSTER_TOPOLOGY (V4 from protocol 131, V2 before) on channel 0, as a server sends it, "
                        "announcing a node whose connector is the rogue broker", _client_topology),
    "scale-down": ("SCALEDOWN_ANNOUNCEMENT on the cluster channel (3; 0 below protocol 125), without "
                   "CLUSTER_CONNECT, saying the broker's own node was scaled down to another", _scale_down),
}
PRE_AUTHENTICATION = tuple(
    Case(f"security.pre-auth.{n}", "security.pre-authentication",
         f"a connection with no session and no cluster login sends {what}",
         "no effect: the rogue broker is never dialled, a topology subscriber hears of no new node and no node "
         "leaving, nothing says authorized, and the broker still opens an authenticated session",
         params={"attack": name}, needs=(CONFIG,))
    for n, (name, (what, _)) in enumerate(ATTACKS.items(), 1)
)


def _client_credentials(attack: Attack) -> list[tuple[Packet, int]]:
    return [(ClusterConnectMessage(ADMIN.name, ADMIN.password), CLUSTER_CHANNEL),
            (_announce(attack), attack.cluster_channel)]


ATTACKS["client-credentials"] = ("", _client_credentials)


def _wrong_cluster_password(attack: Attack) -> list[tuple[Packet, int]]:
    return [(ClusterConnectMessage(CLUSTER.user, f"{CLUSTER.password}-not"), CLUSTER_CHANNEL),
            (_announce(attack), attack.cluster_channel)]


ATTACKS["wrong-cluster-password"] = ("", _wrong_cluster_password)
ATTACKS["session-cluster-user"] = ("", _node_announce)
#: the attacks that open a session first (CREATESESSION on channel 1, its answer awaited), with these credentials
SESSION_FIRST = {"session-cluster-user": (CLUSTER.user, CLUSTER.password)}
NOT_MEMBERS = (
    Case("security.cluster.4", "security.cluster-credentials",
         "a connection sends CLUSTER_CONNECT on channel 3 with the user name and password of a client user who holds "
         "every permission (not the cluster user), then NODE_ANNOUNCE of a live node whose connector is the rogue "
         "broker", "CLUSTER_CONNECT_REPLY says not authorized and the announcement has no effect: the rogue broker is "
         "never dialled, a topology subscriber hears of no new node",
         params={"attack": "client-credentials"}, needs=(CONFIG,)),
    Case("security.cluster.5", "security.cluster-credentials",
         "a connection opens a session with the cluster user and password as a client does (CREATESESSION, its "
         "answer awaited), then sends NODE_ANNOUNCE on the cluster channel (3; 0 below protocol 125) without "
         "CLUSTER_CONNECT",
         "the announcement has no effect (a client session, whatever its user, is no cluster connection): the rogue "
         "broker is never dialled, a topology subscriber hears of no new node",
         params={"attack": "session-cluster-user"}, needs=(CONFIG,)),
    Case("security.cluster.8", "security.cluster-credentials",
         "a connection sends CLUSTER_CONNECT on channel 3 with the node's own cluster user name and a wrong "
         "password, then NODE_ANNOUNCE of a live node whose connector is the rogue broker",
         "CLUSTER_CONNECT_REPLY says not authorized and the announcement has no effect: the rogue broker is never "
         "dialled, a topology subscriber hears of no new node", params={"attack": "wrong-cluster-password"},
         needs=(CONFIG,)),
)


CONTROL = (
    Case("security.cluster.1", "security.cluster-credentials",
         "a connection sends CLUSTER_CONNECT on channel 3 with the node's own cluster user and password, then "
         "NODE_ANNOUNCE of a live node whose connector is the rogue broker",
         "CLUSTER_CONNECT_REPLY says authorized; the broker acts on the announcement: it dials the rogue broker "
         "(a bridge of its cluster connection) and a topology subscriber hears of the node",
         params={"attack": "cluster-credentials"}, needs=(CONFIG,)),
)
ATTACKS["cluster-credentials"] = ("", _cluster_credentials)


def _expressible(attack: str, target: Target) -> None:
    """UNSUPPORTED when the server has no cluster login for an attack that sends CLUSTER_CONNECT, or answers no
    server-connect vote for the control that expects an answer: there is nothing to attack or to show."""
    version = target.protocol_version
    if version is None:
        return
    if attack in CLUSTER_CONNECT_ATTACKS and version < CLUSTER_LOGIN_VERSION:
        raise Unsupported(f"{target.name} {target.version} (protocol {version}) has no cluster login: CLUSTER_CONNECT "
                          f"came with protocol {CLUSTER_LOGIN_VERSION} (HornetQ 2.5.0, Artemis 1.0.0: HORNETQ-1345); "
                          f"before it the cluster packets are taken on channel 0 from any connection")
    if attack == "member-vote" and version < VOTE_HANDLER_VERSION:
        raise Unsupported(f"{target.name} {target.version} (protocol {version}) answers no server-connect vote over "
                          f"the network: its handler came with Artemis 2.2.0 (ServerConnectVoteHandler, ARTEMIS-1296)")


def _topology_news(frames: list[tuple[int, Packet]], after: int) -> list[Packet]:
    """The topology packets a subscriber received after its first ``after`` frames."""
    return [p for c, p in frames[after:] if c == PING_CHANNEL and hasattr(p, "node_id") and hasattr(p, "exit")]


def _names_rogue(connector: object, attack: Attack) -> bool:
    return isinstance(connector, TransportConfiguration) and str(connector.param("port")) == str(
        attack.rogue.param("port")) and connector.param("host") == attack.rogue.param("host")


@dataclass(frozen=True)
class Observation:
    """What a case saw: the attack's values, what the attacker's connection received, whether the rogue broker was
    dialled, and what the topology subscriber heard of the rogue (its node in any form, a member whose live or
    backup connector is the rogue's, the broker's own node reported gone)."""

    attack: Attack
    received: list[tuple[int, Packet]]
    undecodable: str | None
    dialled: bool
    told: list[Packet]

    def authorized(self) -> bool:
        return any(isinstance(p, ClusterConnectReplyMessage) and p.authorized for _, p in self.received)


async def _observe(case: Case, target: Target, cck_settings: Settings, evidence: CaseEvidence,
                   packets_of: Callable[[Attack], list[tuple[Packet, int]]],
                   wait_for: Callable[[int, Packet], bool] | None = None) -> Observation:
    """Subscribe to the first node's topology, send the attack's packets on a connection of their own (after a
    session, for the attacks in ``SESSION_FIRST``), watch for ``OBSERVE_S``; ``wait_for``: stop watching the
    attacker's connection early at a frame it matches (the rogue is still given the time to be dialled)."""
    settings = settings_for(target)
    attack_name = case.params["attack"]
    async with Rogue() as rogue, Wire(target.nodes[0].url, settings) as subscriber:
        await subscriber.write([(SubscribeClusterTopologyUpdatesMessageV2(False, settings.version), PING_CHANNEL)])
        _, own = await subscriber.until(lambda c, p: c == PING_CHANNEL and getattr(p, "last", False),
                                        cck_settings.deadline(ANSWER_S), "the broker's own node (topology)")
        heard = len(subscriber.frames)
        attack = Attack(TransportConfiguration.netty(rogue.host, rogue.port,
                                                     factory=netty_connector_factory(settings.version)),
                        str(uuid.uuid4()), str(getattr(own, "node_id", "")), settings.version,
                        unique(f"{PREFIX}.federated"))
        connection, admin = await admin_session(target)
        async with connection:
            await admin.create_address(attack.address, (RoutingType.MULTICAST,))
            await admin.create_queue(attack.address, attack.address, routing_type=RoutingType.MULTICAST)
        async with Wire(target.nodes[0].url, settings) as attacker:
            login = SESSION_FIRST.get(attack_name)
            if login is not None:
                await attacker.write([(CreateSessionMessage(unique("cck-member"), SESSION_CHANNEL,
                                                            settings.version, *login), SETUP_CHANNEL)])
                _, answer = await attacker.until(lambda c, _: c == SETUP_CHANNEL,
                                                 cck_settings.deadline(ANSWER_S), "CREATESESSION's answer")
                evidence.note("session_answer", repr(answer))
            await attacker.write(packets_of(attack))
            loop = asyncio.get_running_loop()
            watch_until = loop.time() + cck_settings.deadline(OBSERVE_S)
            if wait_for is not None:
                with contextlib.suppress(CheckFailed):
                    await attacker.until(wait_for, cck_settings.deadline(OBSERVE_S), "the broker's answer")
            # one watch for both: the rogue gets what is left of it
            dialled = await rogue.dialled_within(max(0.0, watch_until - loop.time()))
            if attack_name == "cluster-credentials":  # the dial may come before the news
                with contextlib.suppress(CheckFailed):
                    await subscriber.until(lambda _, p: getattr(p, "node_id", None) == attack.fake_node,
                                           cck_settings.deadline(OBSERVE_S), "news of the announced node")
        evidence.note("attacker_received", [(c, repr(p)) for c, p in attacker.frames])
        if attacker.undecodable is not None:
            evidence.note("attacker_undecodable", attacker.undecodable)
        news = _topology_news(subscriber.frames, heard)
        evidence.note("subscriber_heard", [repr(p) for p in news])
        evidence.note("rogue_contacts", rogue.contacts)
    told = [p for p in news if getattr(p, "node_id", None) == attack.fake_node
            or (getattr(p, "node_id", None) == attack.broker_node and getattr(p, "exit", False))
            or _names_rogue(getattr(p, "live", None), attack) or _names_rogue(getattr(p, "backup", None), attack)]
    return Observation(attack, list(attacker.frames), attacker.undecodable, dialled, told)


def _no_effect(seen: Observation, contacts: str) -> list[str]:
    problems = []
    if seen.dialled:
        problems.append(f"the broker dialled the rogue broker named by a connection that is no cluster member "
                        f"({contacts})")
    if seen.told:
        problems.append(f"the topology subscriber was told: {seen.told}")
    if seen.authorized():
        problems.append("CLUSTER_CONNECT_REPLY said authorized")
    return problems


async def _still_serves(target: Target) -> None:
    connection, admin = await admin_session(target)
    async with connection:
        await admin.queue_query("cck.sec.alive")  # answers: the broker still serves


@cases(*PRE_AUTHENTICATION, *CONTROL, *NOT_MEMBERS)
def test_server_packets_before_authentication(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                              evidence: CaseEvidence) -> None:
    _, packets_of = ATTACKS[case.params["attack"]]
    target: Target = secured(cck_make_target, CLUSTERED)
    _expressible(case.params["attack"], target)

    async def scenario() -> None:
        seen = await _observe(case, target, cck_settings, evidence, packets_of)
        if case.params["attack"] == "cluster-credentials":
            problems = [] if seen.authorized() else ["no CLUSTER_CONNECT_REPLY said authorized"]
            if not seen.dialled:
                problems.append("the broker did not dial the node announced by a cluster member")
            if not seen.told:
                problems.append("the topology subscriber did not hear of the node announced by a cluster member")
        else:
            problems = _no_effect(seen, "see rogue_contacts")
        assert not problems, "; ".join(problems)
        await _still_serves(target)

    run(cck_settings, scenario())


# ------------------------------------------------------------------ what a replication primary takes from a backup

def _registration(attack: Attack, user: str, password: str) -> BackupRegistrationMessage:
    return BackupRegistrationMessage(user, password, False, attack.rogue)


#: the bindings journal's ID in a replicated append, and a queue binding's record type (JournalRecordIds)
BINDINGS_JOURNAL = 0
QUEUE_BINDING_RECORD = 21


def _append() -> ReplicationAddMessage:
    return ReplicationAddMessage(journal_id=BINDINGS_JOURNAL, operation=AddOperationType.ADD,
                                 record_id=2**40 + uuid.uuid4().int % 2**20, journal_record_type=QUEUE_BINDING_RECORD,
                                 record_data=b"cck.sec.rogue-binding")


def _vote(attack: Attack) -> QuorumVoteMessage:
    # the handler name every version from 2.2.0 answers (2.37.0 and later answer the new name too)
    return QuorumVoteMessage(LIVE_FAILOVER_VOTE, ServerConnectVote(True, attack.broker_node))


HA_ATTACKS: dict[str, tuple[str, Callable[[Attack], list[tuple[Packet, int]]]]] = {
    "backup-registration": (
        "BACKUP_REGISTRATION on the cluster channel (3; 0 below protocol 125), without CLUSTER_CONNECT, carrying "
        "Artemis's default cluster user and password and the rogue broker's connector as the backup's, to a "
        "replication primary",
        lambda a: [(_registration(a, DEFAULT_CLUSTER_USER, DEFAULT_CLUSTER_PASSWORD), a.cluster_channel)]),
    "default-credentials-registration": (
        "CLUSTER_CONNECT with Artemis's default cluster user and password (not this broker's), then "
        "BACKUP_REGISTRATION carrying them and the rogue broker's connector, to a replication primary",
        lambda a: [(ClusterConnectMessage(DEFAULT_CLUSTER_USER, DEFAULT_CLUSTER_PASSWORD), CLUSTER_CHANNEL),
                   (_registration(a, DEFAULT_CLUSTER_USER, DEFAULT_CLUSTER_PASSWORD), CLUSTER_CHANNEL)]),
    "quorum-vote": (
        "QUORUM_VOTE on channel 3, without CLUSTER_CONNECT: a server-connect vote asking a replication primary "
        "whether its own node is live", lambda a: [(_vote(a), CLUSTER_CHANNEL)]),
    # what a replication primary sends its backup, sent to the primary (a passive backup listens nowhere): each
    # would change a replica's journal or role if the server took it from anyone
    "replication-append": (
        "REPLICATION_APPEND on channel 2, as a primary replicates a journal write: a queue binding record (type 21) "
        "added to the bindings journal", lambda a: [(_append(), REPLICATION_CHANNEL)]),
    "replication-sync-done": (
        "REPLICATION_START_FINISH_SYNC on channel 2 saying a synchronisation of the broker's own node is finished, "
        "as a primary ends its backup's initial sync",
        lambda a: [(ReplicationStartSyncMessage(True, True, a.broker_node, SyncDataType.ActivationSequence, (1,)),
                    REPLICATION_CHANNEL)]),
    "replication-fail-over": (
        "REPLICATION_SCHEDULED_FAILOVER on channel 2, STOP_CALLED then FAIL_OVER, as a primary that is stopping "
        "tells its backup to take over",
        lambda a: [(ReplicationPrimaryIsStoppingMessage(PrimaryStopping.STOP_CALLED), REPLICATION_CHANNEL),
                   (ReplicationPrimaryIsStoppingMessage(PrimaryStopping.FAIL_OVER), REPLICATION_CHANNEL)]),
}
HA_PRE_AUTHENTICATION = tuple(
    Case(f"security.pre-auth.{n}", "security.pre-authentication",
         f"a connection with no session and no cluster login sends {what}",
         "no effect: nothing is replicated to it (no frame on channel 2), no QUORUM_VOTE_REPLY, the rogue broker is "
         "never dialled, a topology subscriber hears of no backup or node at the rogue's connector, the backup "
         "stays passive (its acceptor still refuses connections), and the primary still opens an authenticated "
         "session",
         params={"attack": name}, needs=(CONFIG,))
    for n, (name, (what, _)) in enumerate(HA_ATTACKS.items(), len(PRE_AUTHENTICATION) + 1)
)
HA_ATTACKS["member-vote"] = ("", lambda a: [(ClusterConnectMessage(CLUSTER.user, CLUSTER.password), CLUSTER_CHANNEL),
                                            (_vote(a), CLUSTER_CHANNEL)])
HA_ATTACKS["member-registration"] = ("", lambda a: [
    (ClusterConnectMessage(CLUSTER.user, CLUSTER.password), CLUSTER_CHANNEL),
    (_registration(a, CLUSTER.user, CLUSTER.password), CLUSTER_CHANNEL)])
HA_CONTROLS = (
    Case("security.cluster.6", "security.cluster-credentials",
         "a connection sends CLUSTER_CONNECT on channel 3 with the cluster user and password, then QUORUM_VOTE: a "
         "server-connect vote asking a replication primary whether its own node is live",
         "CLUSTER_CONNECT_REPLY says authorized and a QUORUM_VOTE_REPLY answers the vote (so the pre-auth cases' "
         "watch for one would see it)", params={"attack": "member-vote"}, needs=(CONFIG,)),
    Case("security.cluster.7", "security.cluster-credentials",
         "a connection sends CLUSTER_CONNECT on channel 3 with the cluster user and password, then "
         "BACKUP_REGISTRATION with them and the rogue broker's connector, to a replication primary that has its "
         "backup", "CLUSTER_CONNECT_REPLY says authorized and the primary acts on the registration: it refuses it "
         "with BACKUP_REGISTRATION_FAILED or starts replicating to the connection (so the pre-auth cases' watch for "
         "either would see it)", params={"attack": "member-registration"}, needs=(CONFIG,)),
)


def _acted_on(channel: int, packet: Packet) -> bool:
    """A frame that shows the primary acted on a vote or a registration."""
    return channel == REPLICATION_CHANNEL or isinstance(packet, (QuorumVoteReplyMessage,
                                                                 BackupReplicationStartFailedMessage))


@cases(*HA_PRE_AUTHENTICATION, *HA_CONTROLS)
def test_ha_packets_before_authentication(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                          evidence: CaseEvidence) -> None:
    attack_name = case.params["attack"]
    _, packets_of = HA_ATTACKS[attack_name]
    target = secured(cck_make_target, REPLICATED)
    assert isinstance(target, ManagedTarget), f"a managed target was made, got {target!r}"
    _expressible(attack_name, target)

    async def scenario() -> None:
        seen = await _observe(case, target, cck_settings, evidence, packets_of, wait_for=_acted_on)
        replicated = [repr(p) for c, p in seen.received if c == REPLICATION_CHANNEL]
        if seen.undecodable is not None:  # Artemis's replication packets are not in the codec
            replicated.append(f"bytes the codec does not read ({seen.undecodable})")
        votes = [p for _, p in seen.received if isinstance(p, QuorumVoteReplyMessage)]
        refusals = [p for _, p in seen.received if isinstance(p, BackupReplicationStartFailedMessage)]
        if attack_name.startswith("member-"):
            problems = [] if seen.authorized() else ["no CLUSTER_CONNECT_REPLY said authorized"]
            if attack_name == "member-vote" and not votes:
                problems.append("no QUORUM_VOTE_REPLY answered the cluster member's vote")
            if attack_name == "member-registration" and not (refusals or replicated):
                problems.append("the primary neither refused the cluster member's registration nor replicated")
        else:
            problems = _no_effect(seen, "see rogue_contacts")
            if replicated:
                problems.append(f"the primary replicated to a connection that is no cluster member: {replicated[:3]}")
            if votes:
                problems.append(f"a QUORUM_VOTE_REPLY answered a connection that is no cluster member: {votes}")
            if not await refuses(acceptor(target, "node1")):
                problems.append("the backup became active (its acceptor took a connection)")
        assert not problems, "; ".join(problems)
        await _still_serves(target)

    run(cck_settings, scenario())
