"""Who may open a session and what a session may do (Artemis user manual, Security; notes, packet table:
CREATESESSION and the session packets each permission guards).

Every case runs against a broker the kit configures with security enabled: users in the properties files, roles,
and ``security-settings`` under ``cck.sec.``.  An administrator (every permission) prepares what a case needs and,
afterwards, looks at what the case's user left behind: a refusal must leave nothing done.  A broker the kit cannot
configure (a bare URL) cannot be given users, so the cases are UNSUPPORTED there.

* authentication: the right credentials open a session; a wrong password, an unknown user, an empty password and
  no credentials (without a guest) are refused with SECURITY_EXCEPTION, and packets the client sent on the refused
  session's channel before the answer (one raw write) have no effect;
* anonymous: with a guest login module, no credentials or refused credentials log in as the guest role, which may
  do what it is granted and no more;
* authorisation: for each permission a user holding only that permission may do the operation, and a user holding
  every other one is refused it, with nothing done;
* match: the most specific ``security-setting`` decides, without inheriting from less specific ones.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cck.codec import (
    ADDRESSING_CHANGE_VERSION,
    ActiveMQExceptionMessage,
    CoreMessage,
    CreateQueueMessage,
    CreateQueueMessage_V2,
    CreateSessionMessage,
    ExceptionType,
    Packet,
    PropertyType,
    RoutingType,
    SessionQueueQueryMessage,
    TypedProperties,
)
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import CONFIG, User
from cck.conformance.verdicts import CheckFailed
from cck.reference.client import BrokerRefused, ClientSettings, Connection, Session, connect

from ._kit import QUIET_S, RECEIVE_S, message, observed, run, unique
from ._security_kit import (
    ADMIN,
    ANSWERS,
    COUNT_S,
    FQQN_ADDRESS,
    FQQN_QUEUES,
    FQQN_SECURED,
    FQQN_USER,
    GUEST_ROLE,
    MATCHER,
    PERMISSIONS,
    PREFIX,
    REPLY_TO_KEY,
    SETUP_CHANNEL,
    WITH_GUEST,
    MakeTarget,
    Wire,
    admin_session,
    all_but,
    enforced,
    management_names,
    only,
    secured,
    settings_for,
    settled_count,
)

#: how long a broker may take to answer a request
ANSWER_S = 15.0
WRONG_PASSWORD = "wrong-password"  # noqa: S105  (sent to be refused)
#: the channel the pipelined case asks its (refused) session on
REFUSED_CHANNEL = 10


# ---------------------------------------------------------------------------------------------- authentication

@dataclass(frozen=True)
class Login:
    user: str | None
    password: str | None
    refused: bool
    what: str


LOGINS = (
    Login(ADMIN.name, ADMIN.password, False, "a known user with the right password"),
    Login(only("send").name, WRONG_PASSWORD, True, "a known user with a wrong password"),
    Login("nobody-knows-me", "whatever", True, "a user the properties files do not know"),
    Login(only("send").name, "", True, "a known user with an empty password"),
    Login(None, None, True, "no credentials at all (no guest login module)"),
)
AUTHENTICATION = tuple(
    Case(f"security.auth.{n}", "security.authentication",
         f"CREATESESSION with {login.what}",
         "SECURITY_EXCEPTION (105) answers CREATESESSION and no session exists" if login.refused
         else "the session is created",
         params={"login": login}, needs=(CONFIG,))
    for n, login in enumerate(LOGINS, 1)
)
PIPELINED = (
    Case("security.auth.6", "security.authentication",
         "one raw write: CREATESESSION with a wrong password on channel 10, then, on channel 10 before any answer, "
         "CREATE_QUEUE for a durable queue and SESS_QUEUEQUERY for it",
         "SECURITY_EXCEPTION answers CREATESESSION; nothing answers on channel 10; the queue does not exist",
         needs=(CONFIG,)),
)
GUEST = tuple(
    Case(f"security.anonymous.{n}", "security.anonymous",
         f"a guest login module with role {GUEST_ROLE!r} (send and consume under {PREFIX}.guest.#); CREATESESSION "
         f"with {what}; the session sends to a queue there and then creates a durable queue there",
         "the session is created as the guest; the send is accepted; the queue creation is refused with "
         "SECURITY_EXCEPTION and the queue does not exist",
         params={"user": user, "password": password}, needs=(CONFIG,))
    for n, (user, password, what) in enumerate(((None, None, "no credentials"),
                                                (only("send").name, WRONG_PASSWORD,
                                                 "a known user's name and a wrong password")), 1)
)


async def _refusal(attempt: Awaitable[object], seconds: float, what: str) -> BrokerRefused:
    """The broker's refusal of ``attempt``; a failed check when it was accepted or refused with another type."""
    try:
        await observed(attempt, seconds, what)
    except BrokerRefused as refused:
        if refused.code != ExceptionType.SECURITY_EXCEPTION:
            raise CheckFailed(f"{what}: refused with {refused.type or refused.code}, not SECURITY_EXCEPTION "
                              f"(105): {refused.broker_message}") from refused
        return refused
    raise CheckFailed(f"{what}: accepted")


async def _decided(attempt: Awaitable[object], allowed: bool, seconds: float, what: str,
                   evidence: CaseEvidence) -> None:
    """Await ``attempt``: done when ``allowed``, else refused with SECURITY_EXCEPTION (its text in the evidence)."""
    if allowed:
        await observed(attempt, seconds, what)
    else:
        refused = await _refusal(attempt, seconds, what)
        evidence.note("refusal", refused.broker_message)


@cases(*AUTHENTICATION)
def test_authentication(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                        evidence: CaseEvidence) -> None:
    login: Login = case.params["login"]
    target = secured(cck_make_target)

    async def scenario() -> None:
        async with await connect(target.url, settings=settings_for(target)) as connection:
            attempt = connection.create_session(username=login.user, password=login.password)
            if not login.refused:
                session = await observed(attempt, cck_settings.deadline(ANSWER_S), "CREATESESSION's answer")
                await session.close()
                return
            refused = await _refusal(attempt, cck_settings.deadline(ANSWER_S), "CREATESESSION")
            evidence.note("refusal", refused.broker_message)

    run(cck_settings, scenario())


def _pipelined(settings: ClientSettings, address: str) -> list[tuple[Packet, int]]:
    version = settings.version
    create: Packet = (CreateQueueMessage_V2(address, address, routing_type=int(RoutingType.ANYCAST))
                      if version >= ADDRESSING_CHANGE_VERSION else CreateQueueMessage(address, address))
    return [
        (CreateSessionMessage(unique("cck-refused"), REFUSED_CHANNEL, version, only("send").name, WRONG_PASSWORD),
         SETUP_CHANNEL),
        (create, REFUSED_CHANNEL),
        (SessionQueueQueryMessage(address), REFUSED_CHANNEL),
    ]


@cases(*PIPELINED)
def test_nothing_before_authentication(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                       evidence: CaseEvidence) -> None:
    target = secured(cck_make_target)
    address = unique(f"{PREFIX}.authz.pipelined")

    async def scenario() -> None:
        async with Wire(target.url, settings_for(target)) as wire:
            await wire.write(_pipelined(wire.settings, address))
            _, answer = await wire.until(lambda channel, _: channel == SETUP_CHANNEL,
                                         cck_settings.deadline(ANSWER_S), "the answer to CREATESESSION")
            # anything the refused session's channel would answer comes after the answer to CREATESESSION, in order
            with contextlib.suppress(CheckFailed):
                await wire.until(lambda channel, _: channel == REFUSED_CHANNEL, cck_settings.deadline(QUIET_S),
                                 "an answer on the refused session's channel")
            evidence.note("frames", [(channel, repr(packet)) for channel, packet in wire.frames])
        assert isinstance(answer, ActiveMQExceptionMessage), f"CREATESESSION was answered with {answer!r}"
        assert answer.code == ExceptionType.SECURITY_EXCEPTION, (
            f"CREATESESSION was refused with code {answer.code}, not SECURITY_EXCEPTION (105)")
        others = [(c, p) for c, p in wire.frames if c not in (0, SETUP_CHANNEL)]
        assert not others, f"the refused session's channel answered: {others}"
        connection, admin = await admin_session(target)
        async with connection:
            assert not (await admin.queue_query(address)).exists, f"queue {address} exists: a refused login made it"

    run(cck_settings, scenario())


GUEST_UNDER_A_NAME = tuple(
    Case(f"security.anonymous.{n}", "security.anonymous",
         f"a guest login module with role {GUEST_ROLE!r} (send only under {PREFIX}.guest.#); {first}CREATESESSION "
         f"with the administrator's user name and a wrong password (let in as the guest) sends to a queue under "
         f"{PREFIX}.authz.#",
         "the guest's send is refused with SECURITY_EXCEPTION and the queue holds no message of it (a session let in "
         "as the guest has the guest role's rights, whatever name it gave" + (", and none of what that name's user "
                                                                               "was granted before)" if sent else ")"),
         params={"admin_first": sent}, needs=(CONFIG,))
    for n, (sent, first) in enumerate(((True, "the administrator sends to the queue, then "), (False, "")), 3)
)


@cases(*GUEST_UNDER_A_NAME)
def test_guest_under_a_users_name(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                  evidence: CaseEvidence) -> None:
    target = secured(cck_make_target, WITH_GUEST)
    address = unique(f"{PREFIX}.authz.guest-named")
    names = Names(address, address)

    async def scenario() -> None:
        connection, admin = await admin_session(target)
        async with connection:
            await _queue(admin, names)
            before = 0
            if case.params["admin_first"]:  # a grant of send on the address to a session named like the guest's
                await admin.create_producer(address).send(message(f"{case.id}:admin", 0))
                before = 1
            guest = await observed(connection.create_session(username=ADMIN.name, password=WRONG_PASSWORD),
                                   cck_settings.deadline(ANSWER_S), "CREATESESSION's answer (as the guest)")
            await _decided(_send(guest, names, 0.0), False, cck_settings.deadline(ANSWER_S),
                           "the send of the guest named like the administrator", evidence)
            problems = await _count_is(admin, names, False, if_allowed=before + 1, if_refused=before)
            assert not problems, "; ".join(problems)

    run(cck_settings, scenario())


@cases(*GUEST)
def test_guest(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
               evidence: CaseEvidence) -> None:
    target = secured(cck_make_target, WITH_GUEST)
    address = unique(f"{PREFIX}.guest")
    created = f"{address}.created"

    async def scenario() -> None:
        connection, admin = await admin_session(target)
        async with connection:
            await admin.create_address(address, (RoutingType.ANYCAST,))
            await admin.create_queue(address, address, routing_type=RoutingType.ANYCAST, durable=True)
            guest = await observed(connection.create_session(username=case.params["user"],
                                                             password=case.params["password"]),
                                   cck_settings.deadline(ANSWER_S), "CREATESESSION's answer (as the guest)")
            await observed(guest.create_producer(address).send(message(f"{case.id}:0", 0)),
                           cck_settings.deadline(ANSWER_S), "the guest's send")
            await _refusal(guest.create_queue(address, created, routing_type=RoutingType.ANYCAST, durable=True),
                           cck_settings.deadline(ANSWER_S), "the guest's CREATE_QUEUE")
            found = await settled_count(admin, address, 1, cck_settings.deadline(COUNT_S))
            assert found == 1, f"{found} message(s) on {address}: the guest's message is not on the queue"
            assert not (await admin.queue_query(created)).exists, f"the guest's refused queue {created} exists"

    run(cck_settings, scenario())


# ---------------------------------------------------------------------------------------------- authorisation

@dataclass(frozen=True)
class Names:
    address: str
    queue: str


#: per permission: what the administrator prepares, what the user does, and what the administrator sees after
#: (given whether the user was allowed); the last returns the problems it found
Prepare = Callable[[Session, Names], Awaitable[None]]
Attempt = Callable[[Session, Names, float], Awaitable[None]]
Verify = Callable[[Session, Names, bool], Awaitable[list[str]]]


async def _queue(admin: Session, names: Names, *, durable: bool = True, messages: int = 0) -> None:
    await admin.create_address(names.address, (RoutingType.ANYCAST,))
    await admin.create_queue(names.address, names.queue, routing_type=RoutingType.ANYCAST, durable=durable)
    producer = admin.create_producer(names.address)
    for seq in range(messages):
        await producer.send(message(f"{names.queue}:{seq}", seq))


async def _address(admin: Session, names: Names) -> None:
    await admin.create_address(names.address, (RoutingType.ANYCAST,))


async def _nothing(admin: Session, names: Names) -> None:
    return None


async def _send(user: Session, names: Names, seconds: float) -> None:
    await user.create_producer(names.address).send(message(f"{names.queue}:user", 0))


async def _consume(user: Session, names: Names, seconds: float) -> None:
    consumer = await user.create_consumer(names.queue)
    user.start()
    delivery = await observed(consumer.receive(seconds), seconds, "the delivery to the permitted consumer")
    if delivery is None:
        raise CheckFailed("the permitted consumer got no message")
    await consumer.acknowledge(delivery)


async def _browse(user: Session, names: Names, seconds: float) -> None:
    browser = await user.create_consumer(names.queue, browse_only=True)
    user.start()
    if await observed(browser.receive(seconds), seconds, "the delivery to the permitted browser") is None:
        raise CheckFailed("the permitted browser saw no message")


async def _create_address(user: Session, names: Names, seconds: float) -> None:
    await user.create_address(names.address, (RoutingType.ANYCAST,))


def _create_queue(durable: bool) -> Attempt:
    async def attempt(user: Session, names: Names, seconds: float) -> None:
        await user.create_queue(names.address, names.queue, routing_type=RoutingType.ANYCAST, durable=durable)
    return attempt


async def _delete_queue(user: Session, names: Names, seconds: float) -> None:
    await user.delete_queue(names.queue)


async def _count_is(admin: Session, names: Names, allowed: bool, *, if_allowed: int, if_refused: int) -> list[str]:
    expected = if_allowed if allowed else if_refused
    found = await settled_count(admin, names.queue, expected, COUNT_S)
    return [] if found == expected else [f"{found} message(s) on {names.queue}, expected {expected}"]


async def _sent(admin: Session, names: Names, allowed: bool) -> list[str]:
    return await _count_is(admin, names, allowed, if_allowed=1, if_refused=0)


async def _consumed(admin: Session, names: Names, allowed: bool) -> list[str]:
    problems = await _count_is(admin, names, allowed, if_allowed=0, if_refused=1)
    consumers = (await admin.queue_query(names.queue)).consumer_count
    if not allowed and consumers:
        problems.append(f"{consumers} consumer(s) on {names.queue} after the refusal")
    return problems


async def _browsed(admin: Session, names: Names, allowed: bool) -> list[str]:
    return await _count_is(admin, names, allowed, if_allowed=1, if_refused=1)


async def _address_exists(admin: Session, names: Names, allowed: bool) -> list[str]:
    exists = (await admin.binding_query(names.address)).exists
    return [] if exists is allowed else [f"address {names.address} {'does not exist' if allowed else 'exists'}"]


def _queue_exists(durable: bool) -> Verify:
    async def verify(admin: Session, names: Names, allowed: bool) -> list[str]:
        answer = await admin.queue_query(names.queue)
        if answer.exists is not allowed:
            return [f"queue {names.queue} {'does not exist' if allowed else 'exists'}"]
        if allowed and answer.durable is not durable:
            return [f"queue {names.queue} is {'' if answer.durable else 'not '}durable"]
        return []
    return verify


async def _queue_gone(admin: Session, names: Names, allowed: bool) -> list[str]:
    exists = (await admin.queue_query(names.queue)).exists
    return [] if exists is not allowed else [f"queue {names.queue} {'still exists' if allowed else 'is gone'}"]


@dataclass(frozen=True)
class Operation:
    what: str
    prepare: Prepare
    attempt: Attempt
    verify: Verify


async def _durable_queue(admin: Session, names: Names) -> None:
    await _queue(admin, names, durable=True)


async def _non_durable_queue(admin: Session, names: Names) -> None:
    await _queue(admin, names, durable=False)


async def _one_message(admin: Session, names: Names) -> None:
    await _queue(admin, names, messages=1)


def _reply_queue(names: Names) -> str:
    """Where the management answer goes: under the rules' answers block, which lets every case role send there."""
    return f"{ANSWERS}.{names.queue.removeprefix(PREFIX + '.')}"


async def _managed_queue(admin: Session, names: Names) -> None:
    """A queue holding one message, whose count the user asks for, and the queue the answer is to go to."""
    await _queue(admin, names, messages=1)
    await _queue(admin, Names(_reply_queue(names), _reply_queue(names)))


async def _manage(user: Session, names: Names, seconds: float) -> None:
    # the management message API: read the queue's messageCount, the answer to go to the reply queue (a durable
    # send, so the broker answers it and a refusal reaches the client)
    api = management_names(user.core.server_version)
    request = CoreMessage(durable=True, properties=TypedProperties.typed(
        (api.resource_key, PropertyType.STRING, f"{api.queue_prefix}{names.queue}"),
        (api.attribute_key, PropertyType.STRING, "messageCount"),
        (REPLY_TO_KEY, PropertyType.STRING, _reply_queue(names))))
    await user.create_producer(api.address).send(request)


async def _managed(admin: Session, names: Names, allowed: bool) -> list[str]:
    """Allowed: one answer on the reply queue, succeeded, saying the queue holds one message; refused: no answer
    (and the queue keeps its message either way)."""
    reply = _reply_queue(names)
    problems = await _count_is(admin, names, allowed, if_allowed=1, if_refused=1)
    answers = await settled_count(admin, reply, 1 if allowed else 0, COUNT_S)
    if not allowed:
        return problems + ([f"{answers} management answer(s) on {reply} to a refused request"] if answers else [])
    if answers != 1:
        return [*problems, f"{answers} management answer(s) on {reply}, expected 1"]
    consumer = await admin.create_consumer(reply)
    admin.start()
    delivery = await consumer.receive(RECEIVE_S)
    if delivery is None:
        return [*problems, f"the management answer on {reply} was not delivered to the administrator"]
    await consumer.acknowledge(delivery)
    answer, succeeded = delivery.message, management_names(admin.core.server_version).succeeded_key
    if answer.properties.get(succeeded) is not True:
        problems.append(f"the answer says {succeeded}={answer.properties.get(succeeded)!r}: {answer.text!r}")
    elif answer.text is None or json.loads(answer.text) != [1]:
        problems.append(f"the answer's body is {answer.text!r}, expected [1] (the queue's one message)")
    return problems


OPERATIONS: dict[str, Operation] = {
    "send": Operation("a durable send to an existing anycast queue", _durable_queue, _send, _sent),
    "consume": Operation("a consumer on a queue holding one message", _one_message, _consume, _consumed),
    "browse": Operation("a browse-only consumer on a queue holding one message", _one_message, _browse, _browsed),
    "createAddress": Operation("CREATE_ADDRESS of a new anycast address", _nothing, _create_address,
                               _address_exists),
    "createDurableQueue": Operation("CREATE_QUEUE of a durable queue on an existing address", _address,
                                    _create_queue(True), _queue_exists(True)),
    "createNonDurableQueue": Operation("CREATE_QUEUE of a non-durable queue on an existing address", _address,
                                       _create_queue(False), _queue_exists(False)),
    "deleteDurableQueue": Operation("DELETE_QUEUE of a durable queue", _durable_queue, _delete_queue, _queue_gone),
    "deleteNonDurableQueue": Operation("DELETE_QUEUE of a non-durable queue", _non_durable_queue, _delete_queue,
                                       _queue_gone),
    "manage": Operation("a management request (a durable send to the management address reading a queue's "
                        "messageCount, the answer to a reply queue)", _managed_queue, _manage, _managed),
}
AUTHORIZATION = tuple(
    Case(f"security.authz.{n}", "security.authorization",
         f"{OPERATIONS[permission].what} by a user whose only role is granted {permission!r}" if allowed else
         f"{OPERATIONS[permission].what} by a user whose roles are granted every permission but {permission!r}",
         "the operation is done" if allowed else
         "SECURITY_EXCEPTION (105) answers it and nothing of it is done",
         params={"permission": permission, "allowed": allowed}, needs=(CONFIG,))
    for n, (permission, allowed) in enumerate(((p, a) for p in PERMISSIONS for a in (True, False)), 1)
)

MATCHES = tuple(
    Case(f"security.match.{n}", "security.match",
         f"a durable send to {PREFIX}.match.{suffix} by a user whose role is granted send on {PREFIX}.match.#, "
         f"only consume on {PREFIX}.match.narrow.# and {PREFIX}.match.star.*, and send again on "
         f"{PREFIX}.match.narrow.exact",
         f"{'accepted' if allowed else 'refused with SECURITY_EXCEPTION'}: {why}",
         params={"suffix": suffix, "allowed": allowed}, needs=(CONFIG,))
    for n, (suffix, allowed, why) in enumerate((
        ("plain", True, "only the # block matches"),
        ("narrow.one", False, "the more specific narrow.# block decides and grants no send"),
        ("narrow.exact", True, "the exact block is more specific than narrow.#"),
        ("star.one", False, "star.* matches one word and is more specific than match.#"),
        ("star.one.two", True, "star.* does not match two words, so match.# decides"),
    ), 1)
)


FQQN = tuple(
    Case(f"security.fqqn.{n}", "security.fqqn",
         f"a consumer on queue {queue} of multicast address {FQQN_ADDRESS} (holding a message) by a user whose "
         f"role is granted consume only on {FQQN_ADDRESS}::{FQQN_QUEUES[0]}",
         "the consumer is created and gets the message" if allowed else
         "SECURITY_EXCEPTION answers it; no consumer, the message stays",
         params={"queue": queue, "allowed": allowed}, needs=(CONFIG,))
    for n, (queue, allowed) in enumerate(((FQQN_QUEUES[0], True), (FQQN_QUEUES[1], False)), 1)
)
PER_SESSION = (
    Case("security.auth.7", "security.authentication",
         "one connection: a session with the administrator's credentials, then CREATESESSION with a wrong "
         "password on the same connection, then the first session sends",
         "the second session is refused with SECURITY_EXCEPTION; the first keeps working (credentials are "
         "checked per session, and a refusal ends no other session)", needs=(CONFIG,)),
)


async def _user_session(connection: Connection, user: User) -> Session:
    return await connection.create_session(username=user.name, password=user.password)


@cases(*AUTHORIZATION)
def test_authorization(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                       evidence: CaseEvidence) -> None:
    permission, allowed = case.params["permission"], case.params["allowed"]
    operation = OPERATIONS[permission]
    target = secured(cck_make_target)
    enforced(target, permission)
    base = unique(f"{PREFIX}.authz.{permission}")
    names = Names(base, f"{base}.q")
    user = only(permission) if allowed else all_but(permission)

    async def scenario() -> None:
        connection, admin = await admin_session(target)
        async with connection:
            await operation.prepare(admin, names)
            session = await _user_session(connection, user)
            attempt = operation.attempt(session, names, cck_settings.deadline(RECEIVE_S))
            await _decided(attempt, allowed, cck_settings.deadline(ANSWER_S), f"{permission} by {user.name}", evidence)
            problems = await operation.verify(admin, names, allowed)
            assert not problems, "; ".join(problems)

    run(cck_settings, scenario())


@cases(*MATCHES)
def test_most_specific_match(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                             evidence: CaseEvidence) -> None:
    suffix, allowed = case.params["suffix"], case.params["allowed"]
    target = secured(cck_make_target)
    # a name of its own per run, but for the exact address (its queue may hold earlier runs' messages)
    address = f"{PREFIX}.match.{suffix}".replace(".one", "." + unique("one").replace(".", "-"))
    names = Names(address, address)

    async def scenario() -> None:
        connection, admin = await admin_session(target)
        async with connection:
            if not (await admin.queue_query(address)).exists:
                await _queue(admin, names)
            before = (await admin.queue_query(address)).message_count
            session = await _user_session(connection, MATCHER)
            attempt = _send(session, names, 0.0)
            await _decided(attempt, allowed, cck_settings.deadline(ANSWER_S), "the send", evidence)
            problems = await _count_is(admin, names, allowed, if_allowed=before + 1, if_refused=before)
            assert not problems, "; ".join(problems)

    run(cck_settings, scenario())


@cases(*FQQN)
def test_fully_qualified_queue_name(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                    evidence: CaseEvidence) -> None:
    queue, allowed = case.params["queue"], case.params["allowed"]
    target = secured(cck_make_target, FQQN_SECURED)
    names = Names(FQQN_ADDRESS, queue)

    async def scenario() -> None:
        connection, admin = await admin_session(target)
        async with connection:
            if not (await admin.binding_query(FQQN_ADDRESS)).exists:
                await admin.create_address(FQQN_ADDRESS, (RoutingType.MULTICAST,))
            for each in FQQN_QUEUES:
                if not (await admin.queue_query(each)).exists:
                    await admin.create_queue(FQQN_ADDRESS, each, routing_type=RoutingType.MULTICAST, durable=True)
            prior = (await admin.queue_query(queue)).message_count  # earlier runs' messages may be there
            await admin.create_producer(FQQN_ADDRESS).send(message(f"{case.id}:0", 0))
            before = await settled_count(admin, queue, prior + 1, cck_settings.deadline(COUNT_S))
            assert before == prior + 1, f"the administrator's message did not reach {queue} ({before} there)"
            session = await _user_session(connection, FQQN_USER)
            attempt = _consume(session, names, cck_settings.deadline(RECEIVE_S))
            await _decided(attempt, allowed, cck_settings.deadline(ANSWER_S), f"the consumer on {queue}", evidence)
            expected = before - 1 if allowed else before
            found = await settled_count(admin, queue, expected, cck_settings.deadline(COUNT_S))
            after = await admin.queue_query(queue)
            assert found == expected, f"{found} message(s) on {queue} after the case, expected {expected}"
            assert allowed or not after.consumer_count, (
                f"{after.consumer_count} consumer(s) on {queue} after the refusal")

    run(cck_settings, scenario())


@cases(*PER_SESSION)
def test_credentials_per_session(case: Case, cck_make_target: MakeTarget, cck_settings: Settings,
                                 evidence: CaseEvidence) -> None:
    target = secured(cck_make_target)
    address = unique(f"{PREFIX}.authz.per-session")

    async def scenario() -> None:
        connection, admin = await admin_session(target)
        async with connection:
            await _queue(admin, Names(address, address))
            refused = await _refusal(connection.create_session(username=ADMIN.name, password=WRONG_PASSWORD),
                                     cck_settings.deadline(ANSWER_S), "the second CREATESESSION")
            evidence.note("refusal", refused.broker_message)
            await observed(admin.create_producer(address).send(message(f"{case.id}:0", 0)),
                           cck_settings.deadline(ANSWER_S), "the first session's send after the refusal")
            found = await settled_count(admin, address, 1, cck_settings.deadline(COUNT_S))
            assert found == 1, f"{found} message(s) on {address}: the first session's message is missing"

    run(cck_settings, scenario())
