"""``cck broker``: run the reference broker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import ssl
import sys
import time
import uuid
from pathlib import Path

from cryptography import x509

from cck.codec import PREAMBLE, Ping, ReplicaBegin, encode_packet
from cck.codec import RoutingType as WireRoutingType

from ._clock import monotonic_ms
from ._logging import configure_logging
from ._server import BrokerServer
from ._tls import TlsConfigError
from .broker import (
    Authorizer,
    BrokerCore,
    BrokerSettings,
    CertificateAuthenticator,
    JournalStorage,
    MirrorPoint,
    Queue,
    open_journal,
)
from .broker import Principal as BrokerPrincipal
from .cluster import UdpGroups, cluster_role, scale_down, start_cluster
from .config import (
    Acceptor,
    BrokerConfig,
    ConfigError,
    Permission,
    Principal,
    SecurityModel,
    default_config,
    load_config,
)
from .ha import BackupAnnouncer, Mirror, Replica, ReplicaEnd, Replication, SharedStoreActivation, SharedStoreLock
from .journal import JournalError

LOG = logging.getLogger("cck.reference")

DESCRIPTION = """\
The Core Conformance Kit's reference broker for the Apache ActiveMQ Artemis
core protocol.  Without --config it runs the embedded default: an acceptor on
127.0.0.1:61616, anonymous access, addresses and queues created on demand,
data under ./data.  Stop it with SIGTERM or Ctrl-C: clients get DISCONNECT.  The
active server of a shared-store pair stopped so leaves its backup passive unless
failover-on-shutdown is true.
"""


def _parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog or "python -m cck.reference", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    broker = commands.add_parser("broker", help="run the broker until SIGTERM/SIGINT", description=DESCRIPTION)
    broker.add_argument("--config", type=Path, help="an Artemis broker.xml (users and roles are read from the "
                        "artemis-users.properties / artemis-roles.properties / login.config beside it)")
    broker.add_argument("--host", help="acceptor address (default: the config's first CORE acceptor, or 127.0.0.1)")
    broker.add_argument("--port", type=int, help="acceptor port (default: the config's, or 61616; 0 picks one)")
    broker.add_argument("--data", type=Path, help="data directory (default: the config's journal directory, "
                        "or ./data)")
    broker.add_argument("--non-persistent", action="store_true",
                        help="keep everything in memory (no journal; nothing survives a restart)")
    broker.add_argument("--transparent-resume", action="store_true",
                        help="replication: mirror this server's sessions to its backup, so that clients failing "
                        "over to it resume their sessions instead of recreating them (spec 004; a reference "
                        "broker extension, needed on both servers of the pair; see docs/reference-broker.md)")
    broker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


async def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config else default_config(args.data or Path("data"))
    for warning in config.warnings:
        LOG.warning("unsupported configuration", extra={"element": warning.element, "path": warning.path,
                                                        "detail": warning.message})
    data = args.data or _journal_parent(config)
    settings = broker_settings(config, _node_id(data))
    settings = dataclasses.replace(settings, cluster=cluster_role(config, settings.node_id))
    # The handlers go in before anything can print a line a supervisor waits for: a supervisor that stops the
    # broker as soon as it reads "listening" (or "waiting") must get a graceful stop, not SIGTERM's default.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if config.ha_policy.kind == "replication":
        return await _replicated(args, config, settings, data, stop)
    if config.ha_policy.kind != "shared-store":
        return await _serve(args, config, settings, data, stop, None)
    policy = config.ha_policy
    lock = SharedStoreLock(data)
    request = data / FAILBACK_REQUEST
    deferring = False
    while True:
        if not await _activate_on_the_shared_store(config, settings, lock, stop, defer=deferring):
            return 0
        if not policy.is_backup:
            request.unlink(missing_ok=True)  # a failback this primary asked for is done
            lock.resume()  # a store its last server paused is in use again: a backup may take over from here
        failback = asyncio.Event()
        watcher = (asyncio.ensure_future(_watch_for_failback(request, failback))
                   if policy.is_backup and policy.allow_failback else None)
        try:
            code = await _serve(args, config, settings, data, stop, failback)
            if stop.is_set() and not policy.failover_on_shutdown:
                # a graceful stop is not a failure: the backup stays passive until a primary is back (Artemis:
                # the activation's close pauses the store unless failover-on-shutdown)
                lock.pause()
                LOG.info("stopped without failover-on-shutdown: the shared store is paused, its backup waits")
        finally:
            lock.release()
            if watcher is not None:
                watcher.cancel()
        if not failback.is_set() or not policy.restart_backup:
            return code
        LOG.info("handed the shared store back to the primary; waiting as its backup again")
        deferring = True


#: A primary that finds its backup active asks it, through this file in the shared store, to hand the store back
#: (``allow-failback`` on the backup).
FAILBACK_REQUEST = "failback-requested"


async def _watch_for_failback(request: Path, failback: asyncio.Event, poll_s: float = 0.1) -> None:
    """Sets ``failback`` once the primary asked for the store (``request`` exists)."""
    while not request.exists():
        await asyncio.sleep(poll_s)  # a file has no asynchronous wait; the broker's own poll, not a test's
    LOG.info("the primary asks for the shared store back (failback)")
    failback.set()


async def _activate_on_the_shared_store(config: BrokerConfig, settings: BrokerSettings, lock: SharedStoreLock,
                                        stop: asyncio.Event, *, defer: bool = False) -> bool:
    """Wait for the shared store's lock: at once for a primary whose store is free; otherwise (a backup, or a
    primary whose backup took over) announced as the active server's backup meanwhile.  A primary that finds the
    store taken asks for it back (a backup with ``allow-failback`` hands it over); ``defer``: a backup that just
    handed it over leaves it to the primary first.  False: told to stop while waiting."""
    request = lock.path.parent / FAILBACK_REQUEST
    activation = SharedStoreActivation(lock, stop, defer_to=request if defer else None,
                                       heed_pause=config.ha_policy.is_backup)
    if not defer and activation.try_now():
        return True
    announcer = _announcer(config, settings)
    if announcer is not None:
        announcer.start()
    if not config.ha_policy.is_backup:
        # asked only once the active server has taken this server in as its backup: its clients then know where
        # to go when it hands the store back
        if announcer is not None:
            told = asyncio.ensure_future(announcer.announced.wait())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait([told, stopping], return_when=asyncio.FIRST_COMPLETED)
            told.cancel()
            stopping.cancel()
            if stop.is_set():
                await announcer.stop()
                return False
        request.touch()
    role = "backup" if config.ha_policy.is_backup else "primary (its backup is active)"
    print(f"reference broker waiting for the shared store as {role} of node {settings.node_id}", file=sys.stderr,
          flush=True)
    try:
        return await activation.wait()
    finally:
        if announcer is not None:
            await announcer.stop()


def _announcer(config: BrokerConfig, settings: BrokerSettings) -> BackupAnnouncer | None:
    """Announces this server to the active one: its cluster connection's own connector, to its static
    connectors (the other server of the pair); ``None`` without a cluster connection (nobody to tell)."""
    role = settings.cluster
    if role is None or role.connector is None or not config.cluster_connections:
        return None
    connectors = {c.name: c for c in config.connectors}
    others = [connectors[n] for n in config.cluster_connections[0].static_connectors]
    return BackupAnnouncer(settings.node_id, role.connector, [(c.host, c.port) for c in others],
                           user=role.user, password=role.password)


async def _replicated(args: argparse.Namespace, config: BrokerConfig, settings: BrokerSettings, data: Path,
                      stop: asyncio.Event) -> int:
    """Replication: a primary serves and streams its journal to the backups that subscribe; a backup follows the
    primary into a journal of its own and takes over when the primary is lost (or stops) once it holds the
    primary's whole state.  A backup that took over, with allow-failback, hands back to a primary that comes back
    with check-for-live-server (the primary follows it until it holds its state, then takes over) and, with
    restart-backup, follows the primary again."""
    policy = config.ha_policy
    peers = _replication_peers(config)
    if not policy.is_backup:
        if policy.check_for_live_server and peers:
            # a backup may have taken over while this server was down: it is live with this node's ID
            end = await _follow(config, settings, data, stop, peers, once=True)
            if end is None:
                return 0
            _close_mirror(end)  # a primary starts on the journal it took: no client had a session on it yet
            if end.how != "refused" and not end.synced:
                LOG.warning("the live server's state could not be taken in full; activating on this server's own "
                            "journal", extra={"how": end.how, "detail": end.detail})
        lock = _pair_lock(config, settings.node_id)
        if lock is not None and not await _take_pair_lock(lock, stop):
            return 0
        try:
            return await _serve(args, config, settings, data, stop, None, replicate=True)
        finally:
            if lock is not None:
                lock.release()
    if not peers:
        raise ConfigError("a replication backup needs its primary among its cluster-connection's static connectors")
    while not stop.is_set():
        end = await _follow(config, settings, data, stop, peers, once=False)
        if end is None:
            return 0
        node_id = (data / "node-id").read_text(encoding="ascii").strip()
        lock = _pair_lock(config, node_id)
        if lock is not None and not lock.try_acquire():
            # the primary looks gone from here, yet it still holds the pair's lock: it is alive on the other side
            # of a partition, and activating would make two active servers (a split brain)
            LOG.warning("the primary is unreachable but still holds the pair's lock: not activating; following it "
                        "again", extra={"node": node_id, "lock": str(lock.path), "how": end.how})
            _close_mirror(end)
            continue
        LOG.info("the primary is gone: taking over", extra={"node": node_id, "how": end.how})
        failback = asyncio.Event()
        try:
            code = await _serve(args, config, dataclasses.replace(settings, node_id=node_id,
                                                                  cluster=cluster_role(config, node_id)),
                                data, stop, failback if policy.allow_failback else None, replicate=True,
                                mirror=end.mirror)
        finally:
            if lock is not None:
                lock.release()
        if not failback.is_set() or not policy.restart_backup:
            return code
        LOG.info("handed back to the primary; following it as its backup again")
        # said at once (a supervisor watching for it knows this server no longer serves), and again once synchronised
        print(f"reference broker waiting as the replication backup of node {node_id} (handed back)", file=sys.stderr,
              flush=True)
    return 0


def _pair_lock(config: BrokerConfig, node_id: str) -> SharedStoreLock | None:
    """The replication pair's lock under its lock manager (None without one): a file named by the coordination ID
    (by default the primary's node ID, which a backup serves as) in the manager's locks folder."""
    manager = config.ha_policy.lock_manager
    if manager is None:
        return None
    return SharedStoreLock(config.resolve_dir(manager.locks_folder), name=f"{manager.coordination_id or node_id}.lock")


async def _take_pair_lock(lock: SharedStoreLock, stop: asyncio.Event) -> bool:
    """Wait for the pair's lock (held by a backup that is active in this primary's place); False: told to stop."""
    if lock.try_acquire():
        return True
    print(f"reference broker waiting for the replication pair's lock {lock.path}", file=sys.stderr, flush=True)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _REPLICA_RETRY_S)
        if lock.try_acquire():
            return True
    return False


def _replication_peers(config: BrokerConfig) -> list[tuple[str, int]]:
    """The other server of the pair: the cluster connection's static connectors."""
    if not config.cluster_connections:
        return []
    connectors = {c.name: c for c in config.connectors}
    return [(connectors[n].host, connectors[n].port) for n in config.cluster_connections[0].static_connectors]


async def _follow(config: BrokerConfig, settings: BrokerSettings, data: Path, stop: asyncio.Event,
                  peers: list[tuple[str, int]], *, once: bool) -> ReplicaEnd | None:
    """Follow the live server (one of ``peers``) into this server's journal, announced as its backup once
    synchronised, until it is lost or stops and this server holds its whole state (or, ``once``, after the
    first attempt whatever it gave).  None: told to stop meanwhile."""
    role = settings.cluster
    if role is None:
        raise ConfigError("replication needs a cluster-connection (its credentials and the pair's connectors)")
    link = config.cluster_connections[0]
    replica = Replica(data / "journal", data / "node-id", user=role.user, password=role.password,
                      name=str(role.connector.params if role.connector else settings.node_id),
                      file_size=config.journal.journal_file_size, check_period_ms=link.check_period,
                      ttl_ms=link.connection_ttl, make_mirror=lambda begin: _mirror_core(config, settings, data, begin))
    turn = 0
    holding = False  # the journal holds a live server's whole state (from a stream that ended)
    while not stop.is_set():
        host, port = peers[turn % len(peers)]
        turn += 1
        announcer: BackupAnnouncer | None = None
        following = asyncio.ensure_future(replica.follow(host, port))
        synced = asyncio.ensure_future(replica.synced.wait())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([following, synced, stopping], return_when=asyncio.FIRST_COMPLETED)
        if synced.done() and not following.done():
            # the live server's clients learn this server as its backup once it holds the live state
            node_id = (data / "node-id").read_text(encoding="ascii").strip()
            announcer = _announcer(config, dataclasses.replace(settings, node_id=node_id))
            if announcer is not None:
                announcer.start()
            print(f"reference broker waiting as the replication backup of node {node_id}", file=sys.stderr,
                  flush=True)
            await asyncio.wait([following, stopping], return_when=asyncio.FIRST_COMPLETED)
        for waiting in (synced, stopping):
            waiting.cancel()
        if announcer is not None:
            await announcer.stop()
        if not following.done():  # told to stop
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
            return None
        end = following.result()
        if end.how == "refused" and holding:
            # the primary that ended the stream while still answering is gone now: the state held is the last
            _close_mirror(end)
            return ReplicaEnd("lost", True, detail=f"the primary no longer answers: {end.detail}")
        holding = end.synced or (holding and end.how == "refused")
        if end.how == "lost" and end.synced and not once and await _answers(host, port):
            # the primary dropped this backup (it fell behind) but still serves: taking over now would make two
            # active servers; follow it again instead
            LOG.warning("the primary ended the replication but still answers: following it again",
                        extra={"detail": end.detail})
            _close_mirror(end)
            continue
        if once or (end.synced and (end.how == "lost" or (end.how == "stopped" and end.failover))):
            return end  # its mirror, if any, is the caller's
        _close_mirror(end)
        if end.how == "stopped":
            LOG.info("the primary stopped without handing over: waiting for it to come back")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _REPLICA_RETRY_S)
    return None


def _close_mirror(end: ReplicaEnd) -> None:
    """A stream's end that is not taken over with: its mirror (the journal it holds open) is closed; what it
    wrote stays, for a later take-over from the journal alone."""
    if end.mirror is not None:
        end.mirror.close()


def _mirror_core(config: BrokerConfig, settings: BrokerSettings, data: Path, begin: ReplicaBegin) -> Mirror:
    """A core recovered from the journal the primary's live state was just written into, set to the primary's
    counters: the mirror its inputs go to from now on (``reference/ha/_mirror.py``)."""
    mirrored = dataclasses.replace(settings, node_id=begin.node_id, cluster=cluster_role(config, begin.node_id),
                                   accept_replicas=True)
    core, storage = _open_core(config, mirrored, data)
    assert storage is not None, "replication keeps a journal"
    core.continue_from(MirrorPoint(begin.next_id, begin.ttl_check_at_ms, begin.tx_scan_at_ms))
    return Mirror(core, storage)


#: How long a replication backup waits before it tries its primary again.
_REPLICA_RETRY_S = 0.5
#: How long a backup that lost its replication connection gives the primary to answer a ping.
_PROBE_S = 1.0
_PROBE_TTL_MS = 60_000


async def _answers(host: str, port: int) -> bool:
    """Whether a server at ``host:port`` answers a ping within :data:`_PROBE_S` (a process being killed may still
    accept a connection in the kernel, but it answers nothing)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), _PROBE_S)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(PREAMBLE + encode_packet(Ping(_PROBE_TTL_MS), 0))
        return bool(await asyncio.wait_for(reader.read(1), _PROBE_S))
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()


def _open_core(config: BrokerConfig, settings: BrokerSettings, data: Path, *,
               persistent: bool = True) -> tuple[BrokerCore, JournalStorage | None]:
    """The core on its recovered journal (or in memory), with the addresses broker.xml declares."""
    wall_clock = lambda: int(time.time() * 1000)  # noqa: E731 - a one-line clock
    storage: JournalStorage | None = None
    if not persistent:
        core = BrokerCore(settings, wall_clock_ms=wall_clock)
    else:
        journal, recovery = open_journal(data / "journal", file_size=config.journal.journal_file_size)
        storage = JournalStorage(journal, compact_min_files=config.journal.journal_compact_min_files,
                                 compact_percentage=config.journal.journal_compact_percentage,
                                 count_before_delivery=config.persist_delivery_count_before_delivery)
        core = BrokerCore(settings, storage=storage, wall_clock_ms=wall_clock)
        report = storage.recover(recovery, post_office=core.post_office, transactions=core.transactions,
                                 cluster=core.cluster, duplicates=core.duplicates)
        journal.compact()
        LOG.info("recovered", extra=vars(report))
    _declare_addresses(core, config)
    return core, storage


async def _serve(args: argparse.Namespace, config: BrokerConfig, settings: BrokerSettings, data: Path,
                 stop: asyncio.Event, failback: asyncio.Event | None, *, replicate: bool = False,
                 mirror: Mirror | None = None) -> int:
    """Serve until ``stop`` (a graceful stop: DISCONNECT to the clients, scale-down if configured) or ``failback``
    (the store goes back to the primary: DISCONNECT too, and the clients fail over to the primary they know as
    this server's backup; Artemis's backup stops the same way, ActiveMQServerImpl.stop freezing the connections)."""
    acceptor = next((a for a in config.acceptors if a.protocols is None or "CORE" in a.protocols), None)
    host = args.host or (acceptor.host if acceptor else "127.0.0.1")
    port = args.port if args.port is not None else (acceptor.port if acceptor else 61616)
    tls = _tls_context(config, acceptor)
    # Built before anything starts: a group that cannot work is a ConfigError.  The cluster
    # connections subscribe to ``udp_groups.discovery[name]``.
    udp_groups = UdpGroups(config, settings.node_id)
    persistent = not args.non_persistent and config.journal.persistence_enabled
    if replicate and persistent:
        settings = dataclasses.replace(settings, accept_replicas=True)
    clock = monotonic_ms
    first_conn_id = 1
    if mirror is not None:
        # the primary's sessions, ready for their clients to reattach; the mirror ran on the primary's clock, and
        # its deadlines are in it: this server's clock goes on from the primary's last time (same host: no change)
        core, mirrored_storage = mirror.core, mirror.storage
        storage: JournalStorage | None = mirrored_storage
        offset = max(0, mirror.now_ms - monotonic_ms())
        clock = lambda: monotonic_ms() + offset  # noqa: E731 - the primary's time base
        mirror.take_over(clock())
        first_conn_id = mirror.highest_conn_id + 1
    else:
        core, storage = _open_core(config, settings, data, persistent=persistent)
    # a backup that took over hands back (``failback``) once the primary that came back holds its state and has
    # announced itself as its backup (the clients then know where to go)
    handing_over = _HandBack(core, failback) if replicate and failback is not None else None
    # mirroring (--transparent-resume) is offered to a backup that subscribes before any session was opened here
    mirror_point = ((lambda: core.mirror_point() if core.sessions.opened == 0 else None)
                    if args.transparent_resume else None)
    replication = (Replication(storage.begin_sync, storage.journal, settings.node_id,
                               synced=handing_over.synced if handing_over is not None else None, mirror=mirror_point)
                   if replicate and storage is not None else None)
    server = BrokerServer(core, host, port, group_commit=replication or storage, clock=clock,
                          hand_over=replication.accept if replication is not None else None,
                          inputs=replication.core_input if replication is not None else None,
                          hold_early=replication.holds_early if replication is not None else None,
                          first_conn_id=first_conn_id, tls=tls)
    await server.start()
    await udp_groups.start()
    own_host = f"[{host}]" if ":" in host else host
    cluster = start_cluster(config, core.cluster, udp_groups, f"tcp://{own_host}:{server.bound_port}",
                            server.poke)
    print(f"reference broker listening on {host}:{server.bound_port}", file=sys.stderr, flush=True)
    ends = [asyncio.ensure_future(event.wait()) for event in (stop, failback) if event is not None]
    await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    for end in ends:
        end.cancel()
    handing_back = failback is not None and failback.is_set() and not stop.is_set()
    if cluster is not None:
        await cluster.stop()
    if not handing_back:
        await scale_down(config, core, server, udp_groups)
    await udp_groups.stop()
    # failover-on-shutdown is a shared-store setting: a replication backup takes over from a primary that stops
    # (Artemis's backup forces its failover after the primary's STOP_CALLED); told once the last record is stored
    await server.stop(drained=(lambda: replication.stopping(failover=True)) if replication is not None else None)
    if storage is not None:
        storage.journal.sync()
        storage.journal.close()
    return 0


def _tls_context(config: BrokerConfig, acceptor: Acceptor | None) -> ssl.SSLContext | None:
    """The acceptor's TLS context (``sslEnabled``), its stores read again: the config read them once already, so an
    error here means a store changed since; it is a ConfigError all the same."""
    if acceptor is None or acceptor.tls is None:
        return None
    try:
        return acceptor.tls.context()
    except TlsConfigError as exc:
        raise ConfigError(f"acceptor '{acceptor.name}': {exc.parameter}: {exc.reason}", file=config.source,
                          element="acceptor", path=f"core/acceptors/acceptor[{acceptor.name}]") from None


class _HandBack:
    """Sets ``failback`` once a backup is synchronised and announced (or :data:`ANNOUNCE_WAIT_S` after it was
    synchronised: a primary without a connector to announce is handed back to anyway)."""

    ANNOUNCE_WAIT_S = 5.0

    def __init__(self, core: BrokerCore, failback: asyncio.Event) -> None:
        self._core = core
        self._failback = failback
        self._announced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        core.backups.listen(self._backup_changed)

    def _backup_changed(self, connector: object) -> None:
        if connector is not None:
            self._announced.set()
        else:
            self._announced.clear()

    def synced(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._hand_back())

    async def _hand_back(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._announced.wait(), self.ANNOUNCE_WAIT_S)
        LOG.info("the primary holds this server's state: handing back to it (failback)")
        self._failback.set()


def broker_settings(config: BrokerConfig, node_id: str) -> BrokerSettings:
    """What the core needs, from a parsed broker.xml (and the users/roles/login files beside it)."""
    everything = config.address_settings_for("#")
    security = SecurityModel(config)
    return BrokerSettings(
        node_id=node_id,
        authenticator=security.authenticate if config.security_enabled else None,
        certificate_authenticator=_certificate_authenticator(security),
        authorizer=_authorizer(security) if config.security_enabled else None,
        allow_anonymous=not config.security_enabled,
        auto_create_queues=everything.auto_create_queues,
        auto_create_addresses=everything.auto_create_addresses,
        default_routing_type=int(WireRoutingType[everything.default_address_routing_type.value]),
        connection_ttl_override_ms=config.connection_ttl_override,
        ttl_check_interval_ms=config.connection_ttl_check_interval,
        transaction_timeout_s=config.transaction_timeout // 1000,
        transaction_timeout_scan_ms=config.transaction_timeout_scan_period,
        id_cache_size=config.id_cache_size,
        persist_id_cache=config.persist_id_cache,
    )


def _certificate_authenticator(security: SecurityModel) -> CertificateAuthenticator | None:
    """Logins of connections that presented a client certificate, when bootstrap.xml names a certificate domain
    (the certificate is handed to the security model, which reads its subject)."""
    if not security.enabled or security.login is None or security.login.certificate_domain is None:
        return None

    def authenticate(user: str | None, password: str | None, certificate: bytes) -> BrokerPrincipal | None:
        return security.authenticate(user, password, x509.load_der_x509_certificate(certificate))

    return authenticate


def _authorizer(security: SecurityModel) -> Authorizer:
    """The broker's permission checks, answered by broker.xml's security-settings (the principal is the one
    ``security.authenticate`` made; the permission is named as Artemis's CheckType and the config's Permission
    members are)."""

    def authorize(principal: BrokerPrincipal, permission: str, address: str, queue: str | None) -> bool:
        return isinstance(principal, Principal) and security.authorize(principal, Permission[permission], address,
                                                                       queue)

    return authorize


def _declare_addresses(core: BrokerCore, config: BrokerConfig) -> None:
    """Create the addresses and queues broker.xml declares (after recovery, so nothing doubles)."""
    for address in config.addresses:
        types = {int(WireRoutingType[t.value]) for t in address.routing_types}
        queues = [
            Queue(q.name, q.address or address.name, int(WireRoutingType[q.routing_type.value]), durable=q.durable,
                  filter_string=q.filter, max_consumers=-1 if q.max_consumers is None else q.max_consumers,
                  purge_on_no_consumers=q.purge_on_no_consumers)
            for q in address.queues
        ]
        for problem in core.define(address.name, types, queues):
            LOG.warning("configured queue not created", extra={"detail": problem})


def _journal_parent(config: BrokerConfig) -> Path:
    journal = Path(config.journal.journal_directory)
    if not journal.is_absolute() and config.instance_dir is not None:
        journal = config.instance_dir / journal
    return journal.parent


def _node_id(data: Path) -> str:
    """The broker's node ID: made once, kept in the data directory (as Artemis keeps its own)."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "node-id"
    node = str(uuid.uuid4())
    try:
        # exclusive: the two servers of a shared store may start together, and must not keep two IDs
        with path.open("x", encoding="ascii") as made:
            made.write(node + "\n")
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    return node


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """``prog``: the name usage lines give (``cck`` when the ``cck`` command runs this)."""
    args = _parser(prog).parse_args(argv)
    configure_logging(args.log_level)
    try:
        return asyncio.run(_run(args))
    except ConfigError as exc:
        print(f"reference broker: {exc}", file=sys.stderr)
        return 2
    except JournalError as exc:
        print(f"reference broker: journal: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"reference broker: cannot listen: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
