"""What one exploration example is: a client configuration, a workload and a fault schedule, as frozen values.

Every value has ``to_dict`` / ``from_dict`` (plain JSON) so a minimal failing example can be written as
evidence and replayed exactly, and ``describe()``: one line a person reads in the progress output.

Operations name a queue by its index into :data:`QUEUES`; producers and consumers are made on first use, so
any subsequence of a workload (what shrinking produces) is still a valid workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "CONNECTION_TTLS_MS",
    "CUT_FRAME_TYPES",
    "DELAY_TYPES",
    "Direction",
    "DROP_TYPES",
    "DUPLICATE_TYPES",
    "INITIAL_CONNECT_ATTEMPTS",
    "MAX_REFUSE_INITIAL",
    "MAX_RETRY_INTERVALS_MS",
    "RECONNECT_ATTEMPTS",
    "RETRY_INTERVAL_MULTIPLIERS",
    "RETRY_INTERVALS_MS",
    "MAX_BATCH",
    "MAX_CUT_AFTER",
    "QUEUES",
    "WINDOWS",
    "ClientConfig",
    "Commit",
    "CreateConsumer",
    "CreateExistingQueue",
    "CreateProducer",
    "CutAfterCommands",
    "CutHalfOpen",
    "CutAtFrame",
    "CutSettled",
    "DelayFrames",
    "DropFrames",
    "DuplicateFrames",
    "Example",
    "ExampleError",
    "IDLE_MS",
    "MAX_OPERATIONS",
    "Idle",
    "Fault",
    "FaultSchedule",
    "Operation",
    "Receive",
    "RefuseConnects",
    "ResetReattach",
    "RestartBroker",
    "Rollback",
    "Send",
    "Workload",
    "XA_ACTIONS",
    "XIDS",
    "Xa",
]

#: The queues a workload uses (the runner makes each example's names unique on the broker).
QUEUES = ("q0", "q1", "q2")
#: the most messages one send operation sends: enough to keep many durable writes in flight at a cut
MAX_BATCH = 40
#: The most operations a workload has (what shrinking and the shapes work within).
MAX_OPERATIONS = 12
#: the latest a cut-after-commands fault cuts: past a whole batch and the credit requests between its sends
MAX_CUT_AFTER = 2 * MAX_BATCH
#: Confirmation window sizes: -1 (no window: no reattach, the session is recreated), 0 (a confirmation per
#: command; the broker keeps no such session after a drop, so it is recreated too), small, Artemis-like.
WINDOWS = (-1, 0, 1024, 10 * 1024, 64 * 1024)
#: connection-ttl (ms) the client asks for; the failure-check period is a quarter of it.
CONNECTION_TTLS_MS = (2_000, 10_000, 60_000)
#: The client's reconnection schedule (notes §11): each table's first entry is the exploration's fixed schedule
#: before these were varied (reconnect forever, every 50 ms), so shrinking goes there and older examples mean
#: what they meant.  Intervals stay short (an example's reconnection takes at most a few seconds) but reach past
#: what the timing tolerance blurs (the oracle tells a 500 ms wait from a 650 ms one, not 50 ms from 65 ms).
RETRY_INTERVALS_MS = (50, 100, 250, 500)
RETRY_INTERVAL_MULTIPLIERS = (1.0, 2.0, 1.5, 3.0)
MAX_RETRY_INTERVALS_MS = (50, 150, 400, 1_000)
#: -1: forever; a finite count gives up after that many failed reconnect attempts.
RECONNECT_ATTEMPTS = (-1, 1, 2, 3)
INITIAL_CONNECT_ATTEMPTS = (1, 2, 3)
#: The most connections refused before the workload's first connect (:attr:`FaultSchedule.refuse_initial`).
MAX_REFUSE_INITIAL = 3

Direction = Literal["c2s", "s2c"]
_DIRECTIONS: tuple[Direction, ...] = ("c2s", "s2c")

#: Frame types a cut can wait for, per direction (the fault proxy's Artemis type names).
CUT_FRAME_TYPES: Mapping[str, tuple[str, ...]] = {
    "c2s": ("SESS_SEND", "SESS_INDIVIDUAL_ACKNOWLEDGE", "SESS_COMMIT", "SESS_ROLLBACK", "SESS_CREATECONSUMER",
            "SESS_FLOWTOKEN", "PACKETS_CONFIRMED", "SESS_XA_PREPARE", "SESS_XA_COMMIT"),
    "s2c": ("NULL_RESPONSE", "SESS_RECEIVE_MSG", "PACKETS_CONFIRMED", "SESS_PRODUCER_CREDITS", "SESS_XA_RESP"),
}
#: Frame types a drop may remove (a dropped confirmable frame desynchronises the two ends' numbering).
DROP_TYPES = CUT_FRAME_TYPES
#: Frame types a delay may hold.
DELAY_TYPES = CUT_FRAME_TYPES
#: Frame types a duplicate may copy: only frames the confirmation window does not count (PING and
#: PACKETS_CONFIRMED), so that the copy changes no numbering and stores no message twice; a duplicated
#: SESS_SEND would make a conforming broker store a message twice.
DUPLICATE_TYPES: Mapping[str, tuple[str, ...]] = {"c2s": ("PING", "PACKETS_CONFIRMED"),
                                                  "s2c": ("PING", "PACKETS_CONFIRMED")}
#: Types the confirmation window does not count: dropping them leaves both ends' numbering in step.
UNCOUNTED_TYPES = frozenset({"PING", "PACKETS_CONFIRMED"})


class ExampleError(ValueError):
    """An example (or a part of one) that is malformed: bad JSON, an unknown kind, a value out of range."""


# ---------------------------------------------------------------------------------------------------- checks


def _int(data: Mapping[str, Any], name: str, low: int, high: int) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ExampleError(f"{name!r} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _bool(data: Mapping[str, Any], name: str) -> bool:
    value = data.get(name)
    if not isinstance(value, bool):
        raise ExampleError(f"{name!r} must be true or false, got {value!r}")
    return value


def _choice(data: Mapping[str, Any], name: str, choices: tuple[Any, ...]) -> Any:
    value = data.get(name)
    if value not in choices or isinstance(value, bool):
        raise ExampleError(f"{name!r} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def _fields(data: Any, what: str, names: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ExampleError(f"{what} must be a JSON object, got {data!r}")
    unknown = set(data) - set(names) - {"kind"}
    if unknown:
        raise ExampleError(f"{what}: unknown field(s) {sorted(unknown)}; known: {sorted(names)}")
    return data


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ExampleError(f"{name} must be in [{low}, {high}], got {value}")


def _check_type(direction: str, type_name: str, table: Mapping[str, tuple[str, ...]], what: str) -> None:
    if direction not in _DIRECTIONS:
        raise ExampleError(f"{what}: direction must be c2s or s2c, got {direction!r}")
    if type_name not in table[direction]:
        raise ExampleError(f"{what}: packet type {type_name!r} is not one of {', '.join(table[direction])} "
                           f"({direction})")


# ---------------------------------------------------------------------------------------------------- the client


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """The client's settings that the exploration varies."""

    window: int = 64 * 1024
    connection_ttl_ms: int = 60_000
    retry_interval_ms: int = RETRY_INTERVALS_MS[0]
    retry_interval_multiplier: float = RETRY_INTERVAL_MULTIPLIERS[0]
    max_retry_interval_ms: int = MAX_RETRY_INTERVALS_MS[0]
    reconnect_attempts: int = RECONNECT_ATTEMPTS[0]
    initial_connect_attempts: int = INITIAL_CONNECT_ATTEMPTS[0]

    def __post_init__(self) -> None:
        if self.window not in WINDOWS:
            raise ExampleError(f"window must be one of {WINDOWS}, got {self.window}")
        if self.connection_ttl_ms not in CONNECTION_TTLS_MS:
            raise ExampleError(f"connection_ttl_ms must be one of {CONNECTION_TTLS_MS}, got {self.connection_ttl_ms}")
        for name, table in _RECONNECTION_TABLES.items():
            if getattr(self, name) not in table or isinstance(getattr(self, name), bool):
                raise ExampleError(f"{name} must be one of {table}, got {getattr(self, name)!r}")

    @property
    def reconnection_varied(self) -> bool:
        """Whether the reconnection schedule is not the first choice of every table."""
        return any(getattr(self, name) != table[0] for name, table in _RECONNECTION_TABLES.items())

    def to_dict(self) -> dict[str, Any]:
        # the reconnection settings only where they differ from the first choice: examples written before they
        # were varied read the same
        return {"window": self.window, "connection_ttl_ms": self.connection_ttl_ms,
                **{name: getattr(self, name) for name, table in _RECONNECTION_TABLES.items()
                   if getattr(self, name) != table[0]}}

    @classmethod
    def from_dict(cls, data: Any) -> ClientConfig:
        fields = _fields(data, "client config", ("window", "connection_ttl_ms", *_RECONNECTION_TABLES))
        reconnection = {name: _choice(fields, name, table) for name, table in _RECONNECTION_TABLES.items()
                        if name in fields}
        if "retry_interval_multiplier" in reconnection:
            reconnection["retry_interval_multiplier"] = float(reconnection["retry_interval_multiplier"])
        return cls(_choice(fields, "window", WINDOWS), _choice(fields, "connection_ttl_ms", CONNECTION_TTLS_MS),
                   **reconnection)

    def describe(self) -> str:
        text = f"window={self.window} ttl={self.connection_ttl_ms}ms"
        if self.reconnection_varied:
            text += (f" retry={self.retry_interval_ms}ms x{self.retry_interval_multiplier:g}"
                     f" max={self.max_retry_interval_ms}ms reconnects={self.reconnect_attempts}"
                     f" initial={self.initial_connect_attempts}")
        return text


_RECONNECTION_TABLES: dict[str, tuple[Any, ...]] = {
    "retry_interval_ms": RETRY_INTERVALS_MS,
    "retry_interval_multiplier": RETRY_INTERVAL_MULTIPLIERS,
    "max_retry_interval_ms": MAX_RETRY_INTERVALS_MS,
    "reconnect_attempts": RECONNECT_ATTEMPTS,
    "initial_connect_attempts": INITIAL_CONNECT_ATTEMPTS,
}


# ---------------------------------------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class CreateProducer:
    """A producer on ``queue`` (in the transacted session with ``tx``); sends make one on first use anyway."""

    queue: int
    tx: bool = False
    kind: Literal["create-producer"] = field(default="create-producer", init=False)

    def __post_init__(self) -> None:
        _check_range("queue", self.queue, 0, len(QUEUES) - 1)

    def describe(self) -> str:
        return f"producer({QUEUES[self.queue]}{', tx' if self.tx else ''})"


@dataclass(frozen=True, slots=True)
class CreateConsumer:
    """A consumer on ``queue``; receives make one on first use anyway."""

    queue: int
    tx: bool = False
    kind: Literal["create-consumer"] = field(default="create-consumer", init=False)

    def __post_init__(self) -> None:
        _check_range("queue", self.queue, 0, len(QUEUES) - 1)

    def describe(self) -> str:
        return f"consumer({QUEUES[self.queue]}{', tx' if self.tx else ''})"


@dataclass(frozen=True, slots=True)
class Send:
    """``count`` keyed messages to ``queue``: durable or not; each awaited (``blocking``) or answered later."""

    queue: int
    count: int = 1
    durable: bool = True
    blocking: bool = True
    tx: bool = False
    kind: Literal["send"] = field(default="send", init=False)

    def __post_init__(self) -> None:
        _check_range("queue", self.queue, 0, len(QUEUES) - 1)
        _check_range("count", self.count, 1, MAX_BATCH)

    def describe(self) -> str:
        how = ("durable " if self.durable else "") + ("blocking" if self.blocking else "async")
        return f"send({QUEUES[self.queue]} x{self.count} {how}{' tx' if self.tx else ''})"


@dataclass(frozen=True, slots=True)
class Receive:
    """Receive up to ``count`` messages from ``queue``, each acknowledged (blocking, individually) outside a
    transaction; in the transacted session the acknowledgement waits for the commit.  ``ack=False``: none is
    acknowledged (as a CLIENT_ACKNOWLEDGE consumer that has not acknowledged yet, or a transaction that leaves its
    deliveries to the rollback): they stay the session's deliveries until it ends."""

    queue: int
    count: int = 1
    tx: bool = False
    ack: bool = True
    kind: Literal["receive"] = field(default="receive", init=False)

    def __post_init__(self) -> None:
        _check_range("queue", self.queue, 0, len(QUEUES) - 1)
        _check_range("count", self.count, 1, 5)

    def describe(self) -> str:
        return f"receive({QUEUES[self.queue]} x{self.count}{' tx' if self.tx else ''}{'' if self.ack else ' unacked'})"


@dataclass(frozen=True, slots=True)
class Commit:
    """Commit the transacted session."""

    kind: Literal["commit"] = field(default="commit", init=False)

    def describe(self) -> str:
        return "commit"


@dataclass(frozen=True, slots=True)
class Rollback:
    """Roll the transacted session back."""

    kind: Literal["rollback"] = field(default="rollback", init=False)

    def describe(self) -> str:
        return "rollback"


@dataclass(frozen=True, slots=True)
class CreateExistingQueue:
    """Ask the broker to create ``queue``, which exists: it refuses with an EXCEPTION, a command its confirmation
    window must not count (clause window.exception-not-counted; what the wire rules judge)."""

    queue: int
    kind: Literal["create-existing-queue"] = field(default="create-existing-queue", init=False)

    def __post_init__(self) -> None:
        _check_range("queue", self.queue, 0, len(QUEUES) - 1)

    def describe(self) -> str:
        return f"create-existing-queue({QUEUES[self.queue]})"


#: How long an idle operation lasts: past the broker's 2 s connection-ttl check and the wire rule's slack, so a
#: partly filled window must be confirmed within it (clause window.flush; ``_wire.CHECK_S``, ``FLUSH_SLACK_S``).
IDLE_MS = 4_000


@dataclass(frozen=True, slots=True)
class Idle:
    """Do nothing with the connection up (the client keeps pinging) until the periodic flushes have confirmed
    everything both ends counted, for at most :data:`IDLE_MS` (the runner's ``_Workload.idle``)."""

    kind: Literal["idle"] = field(default="idle", init=False)

    def describe(self) -> str:
        return f"idle({IDLE_MS / 1000:g}s)"




#: What an XA operation does (sends and receives first: shrinking prefers them).
XA_ACTIONS = ("send", "receive", "start", "end", "prepare", "commit", "commit-one-phase", "rollback", "forget",
              "recover")
#: How many Xids an XA workload names (each start of one makes a fresh branch under it).
XIDS = 3


@dataclass(frozen=True, slots=True)
class Xa:
    """One operation on the XA session, on the branch of Xid ``xid`` (an index; the runner makes the Xids).

    ``send`` / ``receive`` work in the active branch (starting a fresh branch of ``xid`` when none is active);
    ``start`` starts one unless ``xid``'s branch is still open; ``end``, ``prepare``, ``commit`` (two-phase,
    preparing first), ``commit-one-phase`` (of an unprepared branch; two-phase when it is prepared) and
    ``rollback`` act on ``xid``'s open branch, ending it first where needed, and do nothing when there is none;
    ``forget`` forgets an Xid the broker does not know (``xid``'s completed branch, else one never started);
    ``recover`` asks for the in-doubt Xids.  So every subsequence of XA operations is still valid."""

    action: str
    xid: int = 0
    queue: int = 0
    count: int = 1
    durable: bool = True
    kind: Literal["xa"] = field(default="xa", init=False)

    def __post_init__(self) -> None:
        if self.action not in XA_ACTIONS:
            raise ExampleError(f"xa action must be one of {', '.join(XA_ACTIONS)}, got {self.action!r}")
        _check_range("xid", self.xid, 0, XIDS - 1)
        _check_range("queue", self.queue, 0, len(QUEUES) - 1)
        _check_range("count", self.count, 1, 5)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "action": self.action, "xid": self.xid, "queue": self.queue, "count": self.count,
                "durable": self.durable}

    @classmethod
    def from_dict(cls, data: Any) -> Xa:
        f = _fields(data, "xa", ("action", "xid", "queue", "count", "durable"))
        return cls(_choice(f, "action", XA_ACTIONS), _int(f, "xid", 0, XIDS - 1), _int(f, "queue", 0, len(QUEUES) - 1),
                   _int(f, "count", 1, 5), _bool(f, "durable"))

    def describe(self) -> str:
        if self.action == "send":
            return f"xa-send(x{self.xid} {QUEUES[self.queue]} x{self.count}{' durable' if self.durable else ''})"
        if self.action == "receive":
            return f"xa-receive(x{self.xid} {QUEUES[self.queue]} x{self.count})"
        return f"xa-{self.action}" + ("" if self.action == "recover" else f"(x{self.xid})")


Operation: TypeAlias = (CreateProducer | CreateConsumer | Send | Receive | Commit | Rollback | CreateExistingQueue
                        | Idle | Xa)


def _operation_to_dict(op: Operation) -> dict[str, Any]:
    if isinstance(op, Xa):
        return op.to_dict()
    out: dict[str, Any] = {"kind": op.kind}
    for name in ("queue", "count", "durable", "blocking", "tx"):
        if hasattr(op, name):
            out[name] = getattr(op, name)
    if isinstance(op, Receive) and not op.ack:
        out["ack"] = False  # written only when not the default, so examples written before it read the same
    return out


def _operation_from_dict(data: Any) -> Operation:
    kind = data.get("kind") if isinstance(data, Mapping) else None
    queue = (0, len(QUEUES) - 1)
    if kind == "create-producer":
        f = _fields(data, kind, ("queue", "tx"))
        return CreateProducer(_int(f, "queue", *queue), _bool(f, "tx"))
    if kind == "create-consumer":
        f = _fields(data, kind, ("queue", "tx"))
        return CreateConsumer(_int(f, "queue", *queue), _bool(f, "tx"))
    if kind == "send":
        f = _fields(data, kind, ("queue", "count", "durable", "blocking", "tx"))
        return Send(_int(f, "queue", *queue), _int(f, "count", 1, MAX_BATCH), _bool(f, "durable"),
                    _bool(f, "blocking"),
                    _bool(f, "tx"))
    if kind == "receive":
        f = _fields(data, kind, ("queue", "count", "tx", "ack"))
        return Receive(_int(f, "queue", *queue), _int(f, "count", 1, 5), _bool(f, "tx"),
                       _bool(f, "ack") if "ack" in f else True)
    if kind == "create-existing-queue":
        f = _fields(data, kind, ("queue",))
        return CreateExistingQueue(_int(f, "queue", *queue))
    if kind == "idle":
        _fields(data, kind, ())
        return Idle()
    if kind == "commit":
        _fields(data, kind, ())
        return Commit()
    if kind == "rollback":
        _fields(data, kind, ())
        return Rollback()
    if kind == "xa":
        return Xa.from_dict(data)
    raise ExampleError(f"unknown operation {data!r}: kind must be create-producer, create-consumer, send, receive, "
                       "commit, rollback, create-existing-queue or idle")


@dataclass(frozen=True, slots=True)
class Workload:
    """The client's configuration and its operations, run in order on one connection through the proxy."""

    config: ClientConfig
    operations: tuple[Operation, ...]
    #: The indices of the queues made non-durable (the rest are durable): what a restart must remove.
    volatile: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.operations) <= MAX_OPERATIONS:
            raise ExampleError(f"a workload has 1 to {MAX_OPERATIONS} operations, got {len(self.operations)}")
        if sorted(set(self.volatile)) != list(self.volatile) or not all(0 <= q < len(QUEUES) for q in self.volatile):
            raise ExampleError(f"volatile must list distinct queue indices in order, got {self.volatile!r}")

    @property
    def transacted(self) -> bool:
        """Whether it uses the transacted session."""
        return any(getattr(op, "tx", False) or isinstance(op, Commit | Rollback) for op in self.operations)

    @property
    def xa(self) -> bool:
        """Whether it uses the XA session."""
        return any(isinstance(op, Xa) for op in self.operations)

    @property
    def preloaded(self) -> dict[int, int]:
        """Queue index -> how many messages the runner puts on it before the workload (straight on the broker):
        for a transacted receive that reads a queue the workload has sent nothing to yet, as many as it asks for.
        Without them such a receive gets nothing, and what a transaction must give back when it ends without a
        commit (rules 1 and 2 of ``_redelivery``) would be judged only where a send to the same queue happened to
        come first."""
        out: dict[int, int] = {}
        sent: set[int] = set()
        for op in self.operations:
            if isinstance(op, Receive) and op.tx and op.queue not in sent:
                out.setdefault(op.queue, op.count)
            elif isinstance(op, Send) or (isinstance(op, Xa) and op.action == "send"):
                sent.add(op.queue)
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"config": self.config.to_dict(),
                               "operations": [_operation_to_dict(op) for op in self.operations]}
        if self.volatile:  # left out when empty: examples written before it existed read the same
            out["volatile"] = list(self.volatile)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Workload:
        fields = _fields(data, "workload", ("config", "operations", "volatile"))
        operations = fields.get("operations")
        if not isinstance(operations, list):
            raise ExampleError(f"workload 'operations' must be a list, got {operations!r}")
        volatile = fields.get("volatile", [])
        if not isinstance(volatile, list) or not all(isinstance(q, int) and not isinstance(q, bool) for q in volatile):
            raise ExampleError(f"workload 'volatile' must be a list of queue indices, got {volatile!r}")
        return cls(ClientConfig.from_dict(fields.get("config")), tuple(map(_operation_from_dict, operations)),
                   tuple(volatile))

    def describe(self) -> str:
        volatile = f" non-durable {','.join(QUEUES[q] for q in self.volatile)}" if self.volatile else ""
        return f"{self.config.describe()}{volatile}: " + ", ".join(op.describe() for op in self.operations)


# ---------------------------------------------------------------------------------------------------- faults


def _check_cut_after(n: int, direction: str, at: int) -> None:
    """The bounds a cut after ``n`` confirmable commands keeps (``CutAfterCommands``, ``CutHalfOpen``)."""
    _check_range("n", n, 0, MAX_CUT_AFTER)
    _check_range("at", at, 0, 12)
    if direction not in _DIRECTIONS:
        raise ExampleError(f"direction must be c2s or s2c, got {direction!r}")


@dataclass(frozen=True, slots=True)
class CutAfterCommands:
    """Reset the connection when confirmable session command ``n + 1`` of ``direction`` arrives (the proxy's
    ``CutAfter``); fires once."""

    n: int
    direction: Direction = "c2s"
    at: int = 0
    kind: Literal["cut-after-commands"] = field(default="cut-after-commands", init=False)

    def __post_init__(self) -> None:
        _check_cut_after(self.n, self.direction, self.at)

    def describe(self) -> str:
        return f"cut after {self.n} confirmable {self.direction}" + _at(self.at)


@dataclass(frozen=True, slots=True)
class CutHalfOpen:
    """As :class:`CutAfterCommands`, but only the client's side is reset: the broker's stays open and silent, as
    behind a firewall that dropped the connection, so the client's reattach reaches a broker that has not yet seen
    the connection fail (it finds out by its connection-ttl)."""

    n: int
    direction: Direction = "c2s"
    at: int = 0
    kind: Literal["cut-half-open"] = field(default="cut-half-open", init=False)

    def __post_init__(self) -> None:
        _check_cut_after(self.n, self.direction, self.at)

    def describe(self) -> str:
        return f"cut the client's side after {self.n} confirmable {self.direction}" + _at(self.at)


@dataclass(frozen=True, slots=True)
class CutAtFrame:
    """Let ``n`` frames of ``packet_type`` pass in ``direction``, reset the connection when the next arrives."""

    n: int
    direction: Direction
    packet_type: str
    at: int = 0
    kind: Literal["cut-at-frame"] = field(default="cut-at-frame", init=False)

    def __post_init__(self) -> None:
        _check_range("n", self.n, 0, 20)
        _check_range("at", self.at, 0, 12)
        _check_type(self.direction, self.packet_type, CUT_FRAME_TYPES, "cut-at-frame")

    def describe(self) -> str:
        return f"cut at {self.direction} {self.packet_type} #{self.n + 1}" + _at(self.at)


@dataclass(frozen=True, slots=True)
class CutSettled:
    """As :class:`CutAtFrame`, then the client's new connections are refused until the broker shows no consumer on
    the example's queues (asked straight of the broker, for at most ``Limits.settle_hold_s``): a cut of the first
    connection settled so is a failure the broker handled before any reconnect reached it, so it ended the
    sessions as failed (clause ``failover.redelivery``: a reattach arriving first can make Artemis close them as
    a clean close instead)."""

    n: int
    direction: Direction
    packet_type: str
    at: int = 0
    kind: Literal["cut-settled"] = field(default="cut-settled", init=False)

    def __post_init__(self) -> None:
        _check_range("n", self.n, 0, 20)
        _check_range("at", self.at, 0, 12)
        _check_type(self.direction, self.packet_type, CUT_FRAME_TYPES, "cut-settled")

    def describe(self) -> str:
        return f"cut at {self.direction} {self.packet_type} #{self.n + 1}, settled" + _at(self.at)


@dataclass(frozen=True, slots=True)
class DropFrames:
    """Drop the next ``count`` frames of ``packet_type`` in ``direction``."""

    direction: Direction
    packet_type: str
    count: int = 1
    at: int = 0
    kind: Literal["drop"] = field(default="drop", init=False)

    def __post_init__(self) -> None:
        _check_range("count", self.count, 1, 3)
        _check_range("at", self.at, 0, 12)
        _check_type(self.direction, self.packet_type, DROP_TYPES, "drop")

    @property
    def desynchronises(self) -> bool:
        """Whether it drops frames the confirmation window counts (the two ends then number differently)."""
        return self.packet_type not in UNCOUNTED_TYPES

    def describe(self) -> str:
        return f"drop {self.count} {self.direction} {self.packet_type}" + _at(self.at)


@dataclass(frozen=True, slots=True)
class DelayFrames:
    """Hold every frame of ``packet_type`` in ``direction`` for ``millis`` ms (later frames queue behind)."""

    direction: Direction
    packet_type: str
    millis: int = 100
    at: int = 0
    kind: Literal["delay"] = field(default="delay", init=False)

    def __post_init__(self) -> None:
        _check_range("millis", self.millis, 1, 500)
        _check_range("at", self.at, 0, 12)
        _check_type(self.direction, self.packet_type, DELAY_TYPES, "delay")

    def describe(self) -> str:
        return f"delay {self.direction} {self.packet_type} {self.millis}ms" + _at(self.at)


@dataclass(frozen=True, slots=True)
class DuplicateFrames:
    """Write the next ``count`` frames of ``packet_type`` in ``direction`` twice."""

    direction: Direction
    packet_type: str
    count: int = 1
    at: int = 0
    kind: Literal["duplicate"] = field(default="duplicate", init=False)

    def __post_init__(self) -> None:
        _check_range("count", self.count, 1, 3)
        _check_range("at", self.at, 0, 12)
        _check_type(self.direction, self.packet_type, DUPLICATE_TYPES, "duplicate")

    def describe(self) -> str:
        return f"duplicate {self.count} {self.direction} {self.packet_type}" + _at(self.at)


@dataclass(frozen=True, slots=True)
class ResetReattach:
    """Reset the connection instead of forwarding the next ``count`` REATTACH_SESSION."""

    count: int = 1
    at: int = 0
    kind: Literal["reset-reattach"] = field(default="reset-reattach", init=False)

    def __post_init__(self) -> None:
        _check_range("count", self.count, 1, 3)
        _check_range("at", self.at, 0, 12)

    def describe(self) -> str:
        return f"reset {self.count} REATTACH_SESSION" + _at(self.at)


@dataclass(frozen=True, slots=True)
class RefuseConnects:
    """Accept and reset the next ``count`` new connections (the client's reconnect attempts)."""

    count: int = 1
    at: int = 0
    kind: Literal["refuse-connects"] = field(default="refuse-connects", init=False)

    def __post_init__(self) -> None:
        _check_range("count", self.count, 1, 3)
        _check_range("at", self.at, 0, 12)

    def describe(self) -> str:
        return f"refuse {self.count} connect(s)" + _at(self.at)


@dataclass(frozen=True, slots=True)
class RestartBroker:
    """Kill (SIGKILL; ``graceful``: stop) the broker under test and start it again with its data, before
    operation ``at`` (``at`` past the last operation: after the workload, before its sessions close).  Only a
    target the kit runs can do it; the client's connection fails and it reconnects once the broker is back."""

    graceful: bool = False
    at: int = 0
    kind: Literal["restart"] = field(default="restart", init=False)

    def __post_init__(self) -> None:
        _check_range("at", self.at, 0, 12)

    def describe(self) -> str:
        return f"restart({'stop' if self.graceful else 'kill'})" + _at(self.at)


Fault: TypeAlias = (CutAfterCommands | CutAtFrame | DropFrames | DelayFrames | DuplicateFrames | ResetReattach
                    | RefuseConnects | RestartBroker | CutSettled | CutHalfOpen)


def _at(at: int) -> str:
    return f" @op{at}" if at else ""


_FAULT_FIELDS: dict[str, tuple[type[Any], tuple[str, ...]]] = {
    "cut-after-commands": (CutAfterCommands, ("n", "direction", "at")),
    "cut-at-frame": (CutAtFrame, ("n", "direction", "packet_type", "at")),
    "drop": (DropFrames, ("direction", "packet_type", "count", "at")),
    "delay": (DelayFrames, ("direction", "packet_type", "millis", "at")),
    "duplicate": (DuplicateFrames, ("direction", "packet_type", "count", "at")),
    "reset-reattach": (ResetReattach, ("count", "at")),
    "refuse-connects": (RefuseConnects, ("count", "at")),
    "restart": (RestartBroker, ("graceful", "at")),
    "cut-settled": (CutSettled, ("n", "direction", "packet_type", "at")),
    "cut-half-open": (CutHalfOpen, ("n", "direction", "at")),
}


def _fault_to_dict(fault: Fault) -> dict[str, Any]:
    _, names = _FAULT_FIELDS[fault.kind]
    return {"kind": fault.kind, **{name: getattr(fault, name) for name in names}}


def _fault_from_dict(data: Any) -> Fault:
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if kind not in _FAULT_FIELDS:
        raise ExampleError(f"unknown fault {data!r}: kind must be one of {', '.join(_FAULT_FIELDS)}")
    cls, names = _FAULT_FIELDS[kind]
    fields = _fields(data, kind, names)
    missing = [name for name in names if name not in fields]
    if missing:
        raise ExampleError(f"{kind}: missing field(s) {missing}")
    for name in names:
        value = fields[name]
        if name in ("direction", "packet_type"):
            if not isinstance(value, str):
                raise ExampleError(f"{kind}: {name!r} must be a string, got {value!r}")
        elif name == "graceful":
            _bool(fields, name)
        elif not isinstance(value, int) or isinstance(value, bool):
            raise ExampleError(f"{kind}: {name!r} must be an integer, got {value!r}")
    fault: Fault = cls(**{name: fields[name] for name in names})
    return fault


@dataclass(frozen=True, slots=True)
class FaultSchedule:
    """The faults installed on the proxy: each before workload operation ``at`` (0: before the first).
    ``refuse_initial``: how many connections the proxy refuses before the workload's first connect (the client's
    initial connect attempts; as many as it makes, or more, and the connect fails: nothing else is run)."""

    faults: tuple[Fault, ...] = ()
    refuse_initial: int = 0

    def __post_init__(self) -> None:
        if len(self.faults) > 4:
            raise ExampleError(f"a schedule has at most 4 faults, got {len(self.faults)}")
        _check_range("refuse_initial", self.refuse_initial, 0, MAX_REFUSE_INITIAL)

    @property
    def desynchronises(self) -> bool:
        """Whether a fault can leave the two ends numbering commands differently (a dropped counted frame):
        a later reattach may then replay a command the broker already has, so a conforming broker can store a
        message twice."""
        return any(isinstance(f, DropFrames) and f.desynchronises for f in self.faults)

    @property
    def restarts(self) -> tuple[RestartBroker, ...]:
        """The broker restarts it asks for (a target that cannot restart its broker cannot run them)."""
        return tuple(f for f in self.faults if isinstance(f, RestartBroker))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"faults": [_fault_to_dict(f) for f in self.faults]}
        if self.refuse_initial:  # only when used: older examples read the same
            out["refuse_initial"] = self.refuse_initial
        return out

    @classmethod
    def from_dict(cls, data: Any) -> FaultSchedule:
        fields = _fields(data, "fault schedule", ("faults", "refuse_initial"))
        faults = fields.get("faults")
        if not isinstance(faults, list):
            raise ExampleError(f"schedule 'faults' must be a list, got {faults!r}")
        refuse = _int(fields, "refuse_initial", 0, MAX_REFUSE_INITIAL) if "refuse_initial" in fields else 0
        return cls(tuple(map(_fault_from_dict, faults)), refuse)

    def describe(self) -> str:
        text = "; ".join(f.describe() for f in self.faults) or "no faults"
        return f"refuse {self.refuse_initial} initial connect(s); {text}" if self.refuse_initial else text


@dataclass(frozen=True, slots=True)
class Example:
    """One exploration example: a workload and the schedule of faults over it."""

    workload: Workload
    schedule: FaultSchedule

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload.to_dict(), "schedule": self.schedule.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> Example:
        fields = _fields(data, "example", ("workload", "schedule"))
        return cls(Workload.from_dict(fields.get("workload")), FaultSchedule.from_dict(fields.get("schedule")))

    def describe(self) -> str:
        return f"{self.workload.describe()} | {self.schedule.describe()}"

    @property
    def size(self) -> tuple[int, int]:
        """(faults, operations): what a minimal example keeps small."""
        return len(self.schedule.faults), len(self.workload.operations)
