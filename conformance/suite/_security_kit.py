"""What the security group's modules share: the secured broker's users, roles and rules, an administrator's
session, a connection the kit writes frames to itself, and a "rogue broker" that notices being dialled.

The rules live under ``cck.sec.``: ``#`` grants everything to the administrator only; each authorisation case's
permission is granted under ``cck.sec.authz.#`` to a role of its own (``can-<permission>``); the match cases and
the guest have blocks of their own, the fully-qualified-queue-name cases a topology of their own.  A
``security-setting`` inherits nothing from a less specific one, so every block grants the administrator everything
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType

from cck.codec import ADDRESSING_CHANGE_VERSION, CodecError, FrameDecoder, Packet, encode_packet
from cck.conformance.targets import PERMISSIONS as ALL_PERMISSIONS
from cck.conformance.targets import ClusterSpec, HASpec, SecurityRule, SecuritySpec, Target, Topology, User
from cck.conformance.verdicts import CheckFailed, Unsupported
from cck.reference.client import ClientSettings, Connection, Session, connect

from ._kit import RESTARTING, client_settings, poll_value

__all__ = [
    "ADMIN", "ANSWERS", "ARTEMIS_1_0_0_VERSION", "ATTRIBUTE_KEY", "CLUSTER", "CLUSTERED", "FQQN_ADDRESS",
    "FQQN_QUEUES", "FQQN_RULES", "FQQN_SECURED", "FQQN_USER", "GUEST_ROLE", "MANAGEMENT_ADDRESS", "MATCHER",
    "PERMISSIONS", "PREFIX", "REPLICATED", "REPLY_TO_KEY", "RESOURCE_KEY", "RULES", "SECURED", "SETUP_CHANNEL",
    "SUCCEEDED_KEY", "USERS", "WITH_GUEST", "MakeTarget", "ManagementNames", "Rogue", "Wire", "COUNT_S",
    "admin_session", "all_but", "enforced", "management_names", "only", "secured", "settings_for", "settled_count",
]  # fmt: skip

MakeTarget = Callable[[Topology], Target]
PREFIX = "cck.sec"
#: what the authorisation cases exercise (deleteAddress has no core packet of its own; manage is a send to the
#: management address)
PERMISSIONS = ("send", "consume", "browse", "createAddress", "createDurableQueue", "deleteDurableQueue",
               "createNonDurableQueue", "deleteNonDurableQueue", "manage")
#: the management message API (Artemis user manual, Management): the address, the request's and answer's properties
#: (the kit's legacy launcher gives HornetQ this address too; :func:`management_names` for the older servers' names)
MANAGEMENT_ADDRESS = "activemq.management"
#: Artemis 1.x's management address (its default, kept: 1.5.6's scale-down asks the target for queue IDs there, a name
#: written into ScaleDownHandler.getQueueID, and waits for the answer without a timeout)
ARTEMIS_1_MANAGEMENT_ADDRESS = "jms.queue.activemq.management"
RESOURCE_KEY = "_AMQ_ResourceName"
ATTRIBUTE_KEY = "_AMQ_Attribute"
SUCCEEDED_KEY = "_AMQ_OperationSucceeded"
REPLY_TO_KEY = "JMSReplyTo"
#: Artemis 1.0.0's protocol: management properties named _AMQ_ from it (HornetQ's are _HQ_)
ARTEMIS_1_0_0_VERSION = 126
#: the addresses management answers are sent to
ANSWERS = f"{PREFIX}.answers"
ADMIN = User("cck-admin", "admin-secret", ("admin",))
MATCHER = User("matcher", "matcher-secret", ("wide",))
FQQN_USER = User("fqqn", "fqqn-secret", ("fqqn-role",))
GUEST_ROLE = "guests"
#: the fully-qualified-queue-name cases' address and its two queues (fixed: the rules name them)
FQQN_ADDRESS = f"{PREFIX}.fqqn.address"
FQQN_QUEUES = (f"{PREFIX}.fqqn.q1", f"{PREFIX}.fqqn.q2")
#: the channel of session setup (CREATESESSION and its answer)
SETUP_CHANNEL = 1


@dataclass(frozen=True)
class ManagementNames:
    """The management request's and answer's property names and a queue's resource name, as a server speaking a
    protocol version reads them: HornetQ's ``_HQ_`` properties below Artemis 1.0.0 (126); a queue's resource name
    ``core.queue.<name>`` until Artemis 2.0.0's addressing (129), ``queue.<name>`` since; the management address
    ``jms.queue.activemq.management`` on Artemis 1.x, else the one the kit's launcher gives HornetQ and 2.x's."""

    address: str
    resource_key: str
    attribute_key: str
    succeeded_key: str
    queue_prefix: str


def management_names(version: int) -> ManagementNames:
    if version >= ARTEMIS_1_0_0_VERSION:
        keys = (RESOURCE_KEY, ATTRIBUTE_KEY, SUCCEEDED_KEY)
    else:
        keys = ("_HQ_ResourceName", "_HQ_Attribute", "_HQ_OperationSucceeded")
    artemis_1 = ARTEMIS_1_0_0_VERSION <= version < ADDRESSING_CHANGE_VERSION
    return ManagementNames(ARTEMIS_1_MANAGEMENT_ADDRESS if artemis_1 else MANAGEMENT_ADDRESS, *keys,
                           queue_prefix="queue." if version >= ADDRESSING_CHANGE_VERSION else "core.queue.")


def only(permission: str) -> User:
    """A user whose one role is granted ``permission`` (under ``cck.sec.authz.#``)."""
    return User(f"only-{permission}", f"{permission}-secret", (f"can-{permission}",))


def all_but(permission: str) -> User:
    """A user whose roles are granted every exercised permission but ``permission``."""
    return User(f"all-but-{permission}", f"not-{permission}-secret",
                tuple(f"can-{p}" for p in PERMISSIONS if p != permission))


def _block(match: str, grants: dict[str, tuple[str, ...]]) -> tuple[SecurityRule, ...]:
    """One ``security-setting``: the administrator holds every permission (nothing is inherited), plus ``grants``."""
    return tuple(SecurityRule(match, p, ("admin", *grants.get(p, ()))) for p in ALL_PERMISSIONS)


RULES = (
    *_block("#", {}),
    *_block(f"{PREFIX}.authz.#", {p: (f"can-{p}",) for p in PERMISSIONS}),
    # the management address: manage for the role granted it only, every other permission for every case role
    # (so a refused request is refused for want of manage alone)
    *(rule for address in (MANAGEMENT_ADDRESS, ARTEMIS_1_MANAGEMENT_ADDRESS)
      for rule in _block(address, {p: (("can-manage",) if p == "manage" else tuple(f"can-{q}" for q in PERMISSIONS))
                                   for p in ALL_PERMISSIONS})),
    # where management answers go: the answer is sent as the requesting user, who needs send there
    *_block(f"{ANSWERS}.#", {"send": tuple(f"can-{q}" for q in PERMISSIONS)}),
    # the match cases: send under match.#, not under match.narrow.# (consume only) but again on one exact
    # address there, and not on a single word under match.star
    *_block(f"{PREFIX}.match.#", {"send": ("wide",)}),
    *_block(f"{PREFIX}.match.narrow.#", {"consume": ("wide",)}),
    *_block(f"{PREFIX}.match.narrow.exact", {"send": ("wide",)}),
    *_block(f"{PREFIX}.match.star.*", {"consume": ("wide",)}),
    *_block(f"{PREFIX}.guest.#", {"send": (GUEST_ROLE,), "consume": (GUEST_ROLE,)}),
)
#: consume from the first queue of the address only, granted on its fully qualified name: a topology of its own, as
#: servers without security settings on queue names (before Artemis 2.15.0) cannot be given it
FQQN_RULES = _block(f"{FQQN_ADDRESS}::{FQQN_QUEUES[0]}", {"consume": ("fqqn-role",)})
USERS = (ADMIN, MATCHER, FQQN_USER, *(only(p) for p in PERMISSIONS), *(all_but(p) for p in PERMISSIONS))
SECURED = Topology(security=SecuritySpec(enabled=True, users=USERS, rules=RULES))
FQQN_SECURED = Topology(security=SecuritySpec(enabled=True, users=USERS, rules=(*RULES, *FQQN_RULES)))
WITH_GUEST = Topology(security=SecuritySpec(enabled=True, users=USERS, rules=RULES, guest_role=GUEST_ROLE))
#: two nodes in a cluster (static connectors to each other): a cluster connection with connectors bridges to
#: every live node announced to it (one without any makes no bridges at all)
CLUSTER = ClusterSpec()
CLUSTERED = Topology(Topology.cluster_of(2).nodes, security=SecuritySpec(enabled=True, users=USERS, rules=RULES),
                     cluster=CLUSTER)
#: a replication primary and its backup (node0, node1), in a cluster of the two
REPLICATED = dataclasses.replace(Topology.ha_pair(HASpec("replication"), CLUSTER),
                                 security=SecuritySpec(enabled=True, users=USERS, rules=RULES))


def secured(make: MakeTarget, topology: Topology = SECURED) -> Target:
    """A started target with ``topology``'s users, roles and rules; UNSUPPORTED, saying security is not configured,
    where the kit cannot configure the broker (a bare URL: its users, if any, are unknown to the kit)."""
    try:
        return make(topology)
    except Unsupported as exc:
        raise Unsupported(f"security not configured: the case needs a broker the kit gives its users, roles, "
                          f"security-settings or TLS acceptor ({exc})") from exc


def enforced(target: Target, permission: str) -> None:
    """UNSUPPORTED when the broker has no ``permission`` (``Target.permissions``: the older servers lack some):
    nothing there grants or refuses it, so a case exercising it would judge something else."""
    if permission not in target.permissions:
        raise Unsupported(f"{target.name} {target.version} has no {permission!r} permission (its security settings "
                          f"have only {', '.join(p for p in ALL_PERMISSIONS if p in target.permissions)})")


def settings_for(target: Target) -> ClientSettings:
    """The kit's client for these cases: no reconnection, acknowledgements answered (so what the administrator
    sees next counts them)."""
    return client_settings(target, RESTARTING, reconnect_attempts=0, block_on_acknowledge=True)


#: how long a queue's message count may lag behind the answer to a send
COUNT_S = 5.0


async def settled_count(admin: Session, queue: str, expected: int, seconds: float) -> int:
    """The message count of ``queue``, looked at until it is ``expected`` or ``seconds`` passed (the last one seen).
    Artemis may count a durable message on its queue a moment after it answered the send (both wait for the same
    journal write, and the answer can come first), and an acknowledged one a moment after the acknowledgement."""
    async def count() -> int:
        return (await admin.queue_query(queue)).message_count

    return (await poll_value(count, lambda n: n == expected, seconds))[-1]


async def admin_session(target: Target) -> tuple[Connection, Session]:
    """A connection and a session of the administrator (the caller closes the connection)."""
    connection = await connect(target.url, settings=settings_for(target))
    return connection, await connection.create_session(username=ADMIN.name, password=ADMIN.password)


#: how long closing a raw TLS connection waits for the broker's close_notify
TLS_SHUTDOWN_S = 1.0


@dataclass
class Wire:
    """A connection to ``url`` that the kit writes frames to itself, with no session and no client logic; every
    frame the broker sends is kept in order as ``(channel, packet)``."""

    url: str
    settings: ClientSettings
    #: TLS with this context (None: plain TCP)
    tls: ssl.SSLContext | None = None
    frames: list[tuple[int, Packet]] = field(default_factory=list)
    closed_by_peer: bool = False
    #: what ended the connection when it was not a clean close (a reset, a TLS alert), and what made the bytes
    #: received undecodable as core frames
    error: str | None = None
    undecodable: str | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _writer: asyncio.StreamWriter | None = None
    _reading: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Wire:
        host, _, port = self.url.removeprefix("tcp://").rpartition(":")
        # a TLS close waits for the broker's close_notify (asyncio's default: up to 30 s, and Artemis sends none): the
        # kit judges nothing of it, so the wait is bounded
        reader, self._writer = await asyncio.open_connection(
            host.strip("[]"), int(port), ssl=self.tls,
            ssl_shutdown_timeout=TLS_SHUTDOWN_S if self.tls is not None else None)
        self._writer.write(self.settings.preamble_bytes())
        self._reading = asyncio.ensure_future(self._read(reader))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder(version=self.settings.version)
        try:
            while chunk := await reader.read(65536):
                if self.undecodable is not None:
                    continue  # past bytes that were no core frames: only the close is of interest
                decoder.feed(chunk)
                try:
                    for frame in decoder:
                        self.frames.append((frame.channel_id, frame.packet))
                        self._arrived.set()
                except CodecError as exc:  # a TLS alert read as plain TCP, say
                    self.undecodable = str(exc)
        except (OSError, ssl.SSLError) as exc:  # a reset, or the TLS layer refusing
            self.error = f"{type(exc).__name__}: {exc}"
        self.closed_by_peer = True
        self._arrived.set()

    @property
    def peer_certificate(self) -> bytes | None:
        """The certificate the broker presented (DER), on a TLS connection."""
        tls = self._writer.get_extra_info("ssl_object") if self._writer is not None else None
        return None if tls is None else tls.getpeercert(binary_form=True)

    async def closed_within(self, seconds: float) -> bool:
        """Whether the broker closes the connection by ``seconds`` from now (at once when it has)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while not self.closed_by_peer and (left := until - loop.time()) > 0:
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)
        return self.closed_by_peer

    async def write(self, packets: Iterable[tuple[Packet, int]]) -> None:
        """The packets, each on its channel, in one write (the broker sees them back to back)."""
        assert self._writer is not None, "write before the connection was opened"
        version = self.settings.version
        self._writer.write(b"".join(encode_packet(p, channel, version=version) for p, channel in packets))
        await self._writer.drain()

    async def until(self, found: Callable[[int, Packet], bool], seconds: float, what: str) -> tuple[int, Packet]:
        """The first frame (already in, or arriving within ``seconds``) for which ``found`` holds; a failed check
        naming ``what`` when none does in time or the broker closes the connection first."""
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        seen = 0
        while True:
            for channel, packet in self.frames[seen:]:
                if found(channel, packet):
                    return channel, packet
            seen = len(self.frames)
            if self.closed_by_peer:
                raise CheckFailed(f"{what}: the broker closed the connection first")
            left = until - loop.time()
            if left <= 0:
                raise CheckFailed(f"{what}: not within {seconds:.1f} s")
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)


@dataclass
class Rogue:
    """A listener on loopback standing for a broker an attacker runs: it accepts every connection, reads what is
    written and records the peer.  A broker under test must never dial it on an unauthenticated request."""

    host: str = "127.0.0.1"
    contacts: list[str] = field(default_factory=list)
    _contacted: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "the rogue broker is not listening"
        return int(self._server.sockets[0].getsockname()[1])

    async def __aenter__(self) -> Rogue:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.contacts.append(str(writer.get_extra_info("peername")))
        self._contacted.set()
        with contextlib.suppress(OSError):
            await reader.read(65536)
        writer.close()

    async def dialled_within(self, seconds: float) -> bool:
        """Whether anything connected to it by ``seconds`` from now (at once when something already has)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._contacted.wait(), seconds)
        return bool(self.contacts)
