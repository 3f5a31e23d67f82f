"""The broker core's permission checks, driven packet by packet in memory: each operation with exactly the
permissions it needs is done, and without any one of them is refused with SECURITY_EXCEPTION (105) and Artemis's
text, with nothing of it done; which check comes first; a refused non-blocking send; a refused send in a
transaction; the cluster user; and broker.xml's security-settings through ``broker_settings``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cck.codec import (
    ActiveMQExceptionMessage,
    CoreMessage,
    CreateAddressMessage,
    CreateQueueMessage_V2,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    CreateSharedQueueMessage_V2,
    ExceptionType,
    NullResponseMessage,
    Packet,
    PacketsConfirmedMessage,
    PropertyType,
    RoutingType,
    SessionCommitMessage,
    SessionCreateConsumerMessage,
    SessionDeleteQueueMessage,
    SessionQueueQueryResponseMessage_V3,
    SessionSendMessage,
    SessionXAEndMessage,
    SessionXAPrepareMessage,
    SessionXAResponseMessage,
    SessionXAStartMessage,
    TypedProperties,
    Xid,
)
from cck.reference.__main__ import broker_settings
from cck.reference.broker import BrokerCore, BrokerSettings, CheckType, ClusterRole, Principal
from cck.reference.config import load_config

from .harness import Wire, connect, new_core, open_session

ALL = frozenset(CheckType)
PASSWORD = "pw"
ADMIN = "admin"
MANAGEMENT = "activemq.management"
#: read queue a.q's messageCount, the answer to address r
MANAGEMENT_REQUEST = TypedProperties.typed(("_AMQ_ResourceName", PropertyType.STRING, "queue.a.q"),
                                           ("_AMQ_Attribute", PropertyType.STRING, "messageCount"),
                                           ("JMSReplyTo", PropertyType.STRING, "r"))
ANYCAST_HINT = TypedProperties.typed(("_AMQ_ROUTING_TYPE", PropertyType.BYTE, int(RoutingType.ANYCAST)))


@dataclass(frozen=True)
class Who:
    """The tests' principal: ``grants`` holds ``PERMISSION`` (on every address) or ``PERMISSION@address``."""

    user: str | None
    grants: frozenset[str]


def _secured(users: dict[str, frozenset[str]], guest: frozenset[str] | None = None, **settings: object) -> BrokerCore:
    """A core whose authenticator knows ``users`` (password ``pw``) and, with ``guest``, lets anyone else in as
    the user ``guest``; its authoriser grants what the principal's ``grants`` say."""

    def authenticate(user: str | None, password: str | None) -> Principal | None:
        if user in users and password == PASSWORD:
            return Who(user, users[user])
        return Who("guest", guest) if guest is not None else None

    def authorize(principal: Principal, permission: str, address: str, queue: str | None) -> bool:
        assert isinstance(principal, Who)
        return permission in principal.grants or f"{permission}@{address}" in principal.grants

    return BrokerCore(BrokerSettings(node_id="node-1", authenticator=authenticate, authorizer=authorize,
                                     allow_anonymous=False, **settings))  # type: ignore[arg-type]


def _login(core: BrokerCore, user: str | None, conn_id: int, password: str | None = PASSWORD, **kw: Any) -> Wire:
    wire = connect(core, conn_id)
    open_session(wire, f"{user}-session", username=user, password=password, **kw)
    return wire


def _refusal(frames: list, text: str) -> None:  # type: ignore[type-arg]
    answer = frames[-1].packet
    assert isinstance(answer, ActiveMQExceptionMessage), answer
    assert answer.code == ExceptionType.SECURITY_EXCEPTION
    assert answer.message == text


def _no_permission(user: str, check: CheckType, address: str, queue: str | None = None) -> str:
    if queue is None:
        return f"AMQ229032: User: {user} does not have permission='{check}' on address {address}"
    return f"AMQ229213: User: {user} does not have permission='{check}' for queue {queue} on address {address}"


# ------------------------------------------------------------------------------------------ the operations


def _anycast_queue(address: str, queue: str, *, durable: bool = True) -> list[Packet]:
    return [CreateAddressMessage(address, (RoutingType.ANYCAST,)),
            CreateQueueMessage_V2(address, queue, durable=durable, routing_type=RoutingType.ANYCAST)]


def _messages(core: BrokerCore, queue: str) -> int:
    found = core.post_office.queues.get(queue)
    return -1 if found is None else found.message_count


@dataclass(frozen=True)
class Operation:
    """What the administrator prepares, the user's request, the permissions it needs (each with the refusal's
    ``(address, queue)``), and whether it was done."""

    prepare: list[Packet]
    request: Packet
    needs: dict[CheckType, tuple[str, str | None]]
    done: Callable[[BrokerCore], bool]
    answer: type[Packet] = NullResponseMessage


OPERATIONS: dict[str, Operation] = {
    "send to an existing queue": Operation(
        _anycast_queue("a", "a.q"), SessionSendMessage(CoreMessage(b"x", address="a"), True, -2, 0),
        {CheckType.SEND: ("a", None)}, lambda core: _messages(core, "a.q") == 1),
    "send creating an anycast address and its queue": Operation(
        [], SessionSendMessage(CoreMessage(b"x", address="new", properties=ANYCAST_HINT), True, -2, 0),
        {CheckType.SEND: ("new", None), CheckType.CREATE_ADDRESS: ("new", None),
         CheckType.CREATE_DURABLE_QUEUE: ("new", "new")},
        lambda core: _messages(core, "new") == 1),
    "send creating a multicast address": Operation(
        [], SessionSendMessage(CoreMessage(b"x", address="topic"), True, -2, 0),
        {CheckType.SEND: ("topic", None), CheckType.CREATE_ADDRESS: ("topic", None)},
        lambda core: "topic" in core.post_office.addresses),
    "a management request, answered to a reply queue": Operation(
        [*_anycast_queue("a", "a.q"), *_anycast_queue("r", "r")],
        SessionSendMessage(CoreMessage(b"", address=MANAGEMENT, properties=MANAGEMENT_REQUEST), True, -2, 0),
        # manage first; the answer is the user's send to the reply queue, checked like one
        {CheckType.MANAGE: (MANAGEMENT, None), CheckType.SEND: ("r", None)}, lambda core: _messages(core, "r") == 1),
    "consumer": Operation(
        _anycast_queue("a", "a.q"), SessionCreateConsumerMessage(0, "a.q"),
        {CheckType.CONSUME: ("a", "a.q")}, lambda core: bool(core.post_office.queues["a.q"].consumers),
        SessionQueueQueryResponseMessage_V3),
    "browser": Operation(
        _anycast_queue("a", "a.q"), SessionCreateConsumerMessage(0, "a.q", browse_only=True),
        {CheckType.BROWSE: ("a", "a.q")}, lambda core: bool(core.post_office.queues["a.q"].consumers),
        SessionQueueQueryResponseMessage_V3),
    "create an address": Operation(
        [], CreateAddressMessage("b", (RoutingType.ANYCAST,)),
        {CheckType.CREATE_ADDRESS: ("b", None)}, lambda core: "b" in core.post_office.addresses),
    "create a durable queue": Operation(
        [CreateAddressMessage("a", (RoutingType.ANYCAST,))],
        CreateQueueMessage_V2("a", "a.q", durable=True, routing_type=RoutingType.ANYCAST),
        {CheckType.CREATE_DURABLE_QUEUE: ("a", "a.q")}, lambda core: "a.q" in core.post_office.queues),
    "create a non-durable queue": Operation(
        [CreateAddressMessage("a", (RoutingType.ANYCAST,))],
        CreateQueueMessage_V2("a", "a.q", durable=False, routing_type=RoutingType.ANYCAST),
        {CheckType.CREATE_NON_DURABLE_QUEUE: ("a", "a.q")}, lambda core: "a.q" in core.post_office.queues),
    "create a temporary queue": Operation(
        [CreateAddressMessage("a", (RoutingType.ANYCAST,))],
        CreateQueueMessage_V2("a", "a.tmp", durable=False, temporary=True, routing_type=RoutingType.ANYCAST),
        {CheckType.CREATE_NON_DURABLE_QUEUE: ("a", "a.tmp")}, lambda core: "a.tmp" in core.post_office.queues),
    "create a queue and its address": Operation(
        [], CreateQueueMessage_V2("c", "c.q", durable=True, routing_type=RoutingType.ANYCAST),
        {CheckType.CREATE_DURABLE_QUEUE: ("c", "c.q"), CheckType.CREATE_ADDRESS: ("c", "c.q")},
        lambda core: "c.q" in core.post_office.queues or "c" in core.post_office.addresses),
    "create a queue of another routing type": Operation(
        [CreateAddressMessage("a", (RoutingType.MULTICAST,))],
        CreateQueueMessage_V2("a", "a.q", durable=True, routing_type=RoutingType.ANYCAST),
        {CheckType.CREATE_DURABLE_QUEUE: ("a", "a.q"), CheckType.CREATE_ADDRESS: ("a", "a.q")},
        lambda core: "a.q" in core.post_office.queues
        or RoutingType.ANYCAST in core.post_office.addresses["a"].routing_types),
    "create a shared durable queue": Operation(
        [CreateAddressMessage("t", (RoutingType.MULTICAST,))], CreateSharedQueueMessage_V2("t", "t.sub"),
        {CheckType.CREATE_DURABLE_QUEUE: ("t", "t.sub")}, lambda core: "t.sub" in core.post_office.queues),
    "create a shared non-durable queue": Operation(
        [CreateAddressMessage("t", (RoutingType.MULTICAST,))], CreateSharedQueueMessage_V2("t", "t.sub", durable=False),
        {CheckType.CREATE_NON_DURABLE_QUEUE: ("t", "t.sub")}, lambda core: "t.sub" in core.post_office.queues),
    "delete a durable queue": Operation(
        _anycast_queue("a", "a.q"), SessionDeleteQueueMessage("a.q"),
        {CheckType.DELETE_DURABLE_QUEUE: ("a", "a.q")}, lambda core: "a.q" not in core.post_office.queues),
    "delete a non-durable queue": Operation(
        _anycast_queue("a", "a.q", durable=False), SessionDeleteQueueMessage("a.q"),
        {CheckType.DELETE_NON_DURABLE_QUEUE: ("a", "a.q")}, lambda core: "a.q" not in core.post_office.queues),
}


def _prepared(operation: Operation, user: str, grants: frozenset[str]) -> tuple[BrokerCore, Wire]:
    core = _secured({ADMIN: ALL, user: grants})
    admin = _login(core, ADMIN, 1)
    for packet in operation.prepare:
        assert isinstance(admin.send(packet)[-1].packet, NullResponseMessage), packet
    return core, _login(core, user, 2)


@pytest.mark.parametrize("name", OPERATIONS)
def test_done_with_exactly_the_permissions_it_needs(name: str) -> None:
    operation = OPERATIONS[name]
    core, wire = _prepared(operation, "alice", frozenset(operation.needs))
    assert not operation.done(core)
    assert isinstance(wire.send(operation.request)[-1].packet, operation.answer)
    assert operation.done(core)


@pytest.mark.parametrize(("name", "check"), [(n, c) for n, op in OPERATIONS.items() for c in op.needs])
def test_refused_without_one_of_them_and_nothing_done(name: str, check: CheckType) -> None:
    operation = OPERATIONS[name]
    core, wire = _prepared(operation, "bob", ALL - {check})
    addresses, queues = set(core.post_office.addresses), set(core.post_office.queues)
    _refusal(wire.send(operation.request), _no_permission("bob", check, *operation.needs[check]))
    assert not operation.done(core)
    assert set(core.post_office.addresses) == addresses
    assert set(core.post_office.queues) == queues
    assert all(not q.consumers and q.message_count == 0 for q in core.post_office.queues.values())
    assert not core.sessions.get("bob-session").consumers  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------ which check first


def test_the_queue_is_looked_up_before_the_consumer_and_deletion_checks() -> None:
    core = _secured({"nobody": frozenset()})
    wire = _login(core, "nobody", 1)
    for request in (SessionCreateConsumerMessage(0, "missing"), SessionDeleteQueueMessage("missing")):
        answer = wire.send(request)[-1].packet
        assert isinstance(answer, ActiveMQExceptionMessage)
        assert answer.code == ExceptionType.QUEUE_DOES_NOT_EXIST


def test_queue_creation_is_checked_before_the_queue_is_found_to_exist() -> None:
    core, wire = _prepared(OPERATIONS["create a durable queue"], "bob", frozenset())
    admin_queue = CreateQueueMessage_V2("a", "a.q", routing_type=RoutingType.ANYCAST)
    assert isinstance(_login(core, ADMIN, 3).send(admin_queue)[-1].packet, NullResponseMessage)
    _refusal(wire.send(admin_queue), _no_permission("bob", CheckType.CREATE_DURABLE_QUEUE, "a", "a.q"))


def test_deletion_is_checked_before_the_queue_is_found_busy() -> None:
    core, wire = _prepared(OPERATIONS["consumer"], "bob", frozenset({"CONSUME"}))
    assert isinstance(wire.send(SessionCreateConsumerMessage(0, "a.q"))[-1].packet, SessionQueueQueryResponseMessage_V3)
    _refusal(wire.send(SessionDeleteQueueMessage("a.q")),
             _no_permission("bob", CheckType.DELETE_DURABLE_QUEUE, "a", "a.q"))
    assert "a.q" in core.post_office.queues


def test_send_is_checked_before_the_address_is_found_missing() -> None:
    core = _secured({"bob": frozenset()}, auto_create_addresses=False)
    wire = _login(core, "bob", 1)
    _refusal(wire.send(SessionSendMessage(CoreMessage(b"x", address="nowhere"), True, -2, 0)),
             _no_permission("bob", CheckType.SEND, "nowhere"))


def test_a_fully_qualified_send_is_checked_on_its_address_and_queue() -> None:
    core = _secured({"bob": frozenset()})
    wire = _login(core, "bob", 1)
    _refusal(wire.send(SessionSendMessage(CoreMessage(b"x", address="a::a.q"), True, -2, 0)),
             _no_permission("bob", CheckType.SEND, "a", "a.q"))


# ------------------------------------------------------------------------------------------ who the refusal names


@pytest.mark.parametrize(("user", "password", "named"), [
    (None, None, "guest"),  # no user given: the principal's
    ("carol", "wrong", "carol"),  # refused credentials let in as the guest: the name the client gave
])
def test_the_refusal_names_the_given_user_or_else_the_principals(user: str | None, password: str | None,
                                                                named: str) -> None:
    core = _secured({}, guest=frozenset())
    wire = _login(core, user, 1, password)
    _refusal(wire.send(CreateAddressMessage("b", (RoutingType.ANYCAST,))),
             _no_permission(named, CheckType.CREATE_ADDRESS, "b"))


# ------------------------------------------------------------------------------------------ sends nobody waits for


def test_a_refused_non_blocking_send_is_not_answered_but_confirmed() -> None:
    """Artemis logs a refusal it cannot answer and confirms the command (its response is null, not an
    EXCEPTION); a blocking send's refusal is answered and not confirmed."""
    operation = OPERATIONS["send to an existing queue"]
    core = _secured({ADMIN: ALL, "bob": frozenset()})
    admin = _login(core, ADMIN, 1)
    for packet in operation.prepare:
        admin.send(packet)
    wire = _login(core, "bob", 2, window=0)  # window 0: every counted command is confirmed at once
    frames = wire.send(SessionSendMessage(CoreMessage(b"x", address="a"), False, None, 0))
    assert [f.packet for f in frames] == [PacketsConfirmedMessage(0)]
    frames = wire.send(SessionSendMessage(CoreMessage(b"x", address="a"), True, -2, 0))
    assert [type(f.packet) for f in frames] == [ActiveMQExceptionMessage]
    assert _messages(core, "a.q") == 0


def test_a_send_refused_in_a_transaction_makes_its_commit_roll_back_with_the_refusal() -> None:
    """Artemis marks the transaction rollback-only with the refusal, accepts later sends, and rethrows the
    refusal at commit."""
    core = _secured({ADMIN: ALL, "bob": frozenset({"SEND@a"})})
    admin = _login(core, ADMIN, 1)
    for packet in (*_anycast_queue("a", "a.q"), *_anycast_queue("secret", "secret.q")):
        admin.send(packet)
    wire = _login(core, "bob", 2, auto_commit_sends=False)

    def send(address: str) -> list:  # type: ignore[type-arg]
        return wire.send(SessionSendMessage(CoreMessage(b"x", address=address), False, None, 0))

    assert send("a") == []
    assert send("secret") == []  # refused, but nobody waits for the answer
    assert send("a") == []  # accepted into the doomed transaction
    refusal = _no_permission("bob", CheckType.SEND, "secret")
    _refusal(wire.send(SessionCommitMessage(-3)), refusal)
    assert _messages(core, "a.q") == 0
    assert _messages(core, "secret.q") == 0
    send("a")
    assert wire.send(SessionCommitMessage(-4))[-1].packet == NullResponseMessage(-4)  # a new transaction
    assert _messages(core, "a.q") == 1


def test_a_send_refused_in_an_xa_branch_makes_its_prepare_fail_with_the_refusal() -> None:
    core = _secured({ADMIN: ALL, "bob": frozenset()})
    admin = _login(core, ADMIN, 1)
    for packet in _anycast_queue("a", "a.q"):
        admin.send(packet)
    wire = _login(core, "bob", 2, xa=True, auto_commit_sends=False, auto_commit_acks=False)
    xid = Xid(1, b"gtrid", b"bqual")
    ok = SessionXAResponseMessage(False, 0, None)
    assert wire.send(SessionXAStartMessage(xid))[-1].packet == ok
    assert wire.send(SessionSendMessage(CoreMessage(b"x", address="a"), False, None, 0)) == []
    assert wire.send(SessionXAEndMessage(xid, False))[-1].packet == ok
    _refusal(wire.send(SessionXAPrepareMessage(xid)), _no_permission("bob", CheckType.SEND, "a"))
    assert xid not in core.transactions.branches
    assert _messages(core, "a.q") == 0


# ------------------------------------------------------------------------------------------ who may do everything


def test_the_cluster_user_holds_every_permission() -> None:
    role = ClusterRole("cc", "node-1", None, user="cluster", password="cluster-pw")
    core = _secured({}, cluster=role)
    wire = _login(core, "cluster", 1, "cluster-pw")
    for packet in (*_anycast_queue("a", "a.q"), SessionSendMessage(CoreMessage(b"x", address="a"), True, -2, 0)):
        assert isinstance(wire.send(packet)[-1].packet, NullResponseMessage), packet
    assert _messages(core, "a.q") == 1


def test_without_an_authoriser_every_session_may_do_everything() -> None:
    core = new_core(users={"bob": "pw"}, allow_anonymous=False)
    wire = connect(core)
    open_session(wire, username="bob", password=PASSWORD)
    for packet in (*_anycast_queue("a", "a.q"), SessionSendMessage(CoreMessage(b"x", address="a"), True, -2, 0),
                   SessionDeleteQueueMessage("a.q")):
        assert isinstance(wire.send(packet)[-1].packet, NullResponseMessage), packet


# ------------------------------------------------------------------------------------------ broker.xml


BROKER_XML = """<?xml version="1.0"?>
<configuration xmlns="urn:activemq">
   <core xmlns="urn:activemq:core">
      <security-enabled>{enabled}</security-enabled>
      <cluster-user>cluster</cluster-user>
      <cluster-password>cluster-pw</cluster-password>
      <security-settings>
         <security-setting match="#">
{admin}
         </security-setting>
         <security-setting match="news.#">
{admin}
            <permission type="send" roles="editor"/>
         </security-setting>
         <security-setting match="news.*">
{admin}
            <permission type="consume" roles="editor"/>
         </security-setting>
         <security-setting match="news.europe">
{admin}
            <permission type="send" roles="editor"/>
         </security-setting>
      </security-settings>
   </core>
</configuration>
"""
PERMISSION_TYPES = ("send", "consume", "browse", "manage", "createAddress", "deleteAddress", "createDurableQueue",
                    "deleteDurableQueue", "createNonDurableQueue", "deleteNonDurableQueue")
LOGIN_CONFIG = """activemq {
   org.apache.activemq.artemis.spi.core.security.jaas.PropertiesLoginModule required
       org.apache.activemq.jaas.properties.user="artemis-users.properties"
       org.apache.activemq.jaas.properties.role="artemis-roles.properties";
};
"""


def _configured(tmp_path: Path, *, enabled: bool = True) -> BrokerCore:
    etc = tmp_path / "etc"
    shutil.rmtree(etc, ignore_errors=True)
    etc.mkdir()
    admin = "\n".join(f'            <permission type="{p}" roles="admin"/>' for p in PERMISSION_TYPES)
    (etc / "broker.xml").write_text(BROKER_XML.format(enabled=str(enabled).lower(), admin=admin), encoding="utf-8")
    (etc / "login.config").write_text(LOGIN_CONFIG, encoding="utf-8")
    (etc / "artemis-users.properties").write_text("admin = pw\neve = pw\n", encoding="utf-8")
    (etc / "artemis-roles.properties").write_text("admin = admin\neditor = eve\n", encoding="utf-8")
    return BrokerCore(broker_settings(load_config(etc / "broker.xml"), "node-1"))


# (address, may eve send there?, why)
MATCHES = [
    ("news", True, "news.# matches news itself"),
    ("news.uk.sport", True, "only news.# matches three words"),
    ("news.uk", False, "news.* is more specific than news.# and grants eve no send"),
    ("news.europe", True, "the exact match is more specific than news.*"),
    ("sport", False, "only # matches, which grants eve nothing"),
]


@pytest.mark.parametrize(("address", "allowed", "why"), MATCHES)
def test_the_most_specific_security_setting_decides(tmp_path: Path, address: str, allowed: bool, why: str) -> None:
    core = _configured(tmp_path)
    admin = _login(core, ADMIN, 1)
    for packet in _anycast_queue(address, address):
        assert isinstance(admin.send(packet)[-1].packet, NullResponseMessage), packet
    eve = _login(core, "eve", 2)
    frames = eve.send(SessionSendMessage(CoreMessage(b"x", address=address), True, -2, 0))
    if allowed:
        assert frames[-1].packet == NullResponseMessage(-2), why
    else:
        _refusal(frames, _no_permission("eve", CheckType.SEND, address))
    assert _messages(core, address) == (1 if allowed else 0), why


def test_broker_xml_cluster_user_holds_every_permission(tmp_path: Path) -> None:
    core = _configured(tmp_path)
    wire = _login(core, "cluster", 1, "cluster-pw")
    for packet in (*_anycast_queue("sport", "sport"), SessionDeleteQueueMessage("sport")):
        assert isinstance(wire.send(packet)[-1].packet, NullResponseMessage), packet


def test_broker_xml_security_disabled_lets_everyone_do_everything(tmp_path: Path) -> None:
    core = _configured(tmp_path, enabled=False)
    assert core.settings.authorizer is None
    wire = connect(core)
    frames = wire.send(CreateSessionMessage_V2("anonymous", 10, 136), 1)
    assert isinstance(frames[-1].packet, CreateSessionResponseMessage)
    send = SessionSendMessage(CoreMessage(b"x", address="sport"), True, -2, 0)
    for packet in (*_anycast_queue("sport", "sport"), send, SessionCreateConsumerMessage(0, "sport")):
        frames = wire.send(packet)
        assert not any(isinstance(f.packet, ActiveMQExceptionMessage) for f in frames), frames
    assert core.post_office.queues["sport"].consumers
