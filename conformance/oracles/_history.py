"""Jepsen-style operation histories of a messaging run (design §3 "Oracles").

A history is the ordered list of what clients did and saw: each operation is *invoked* and then
completes ``ok`` (definitely happened), ``fail`` (definitely did not) or ``info`` (unknown, e.g. the
connection died before the broker answered). A consumer's receipt is a single ``ok`` ``receive``
operation: nothing is in doubt once the message is in hand.

Message keys are unique per message: a producer that retries a message reuses its key, which is
what lets the checker tell a retry from a new message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

__all__ = ["OpType", "Op", "History", "HistoryError", "SEND", "RECEIVE", "ACK"]

OpType = Literal["invoke", "ok", "fail", "info"]
_OP_TYPES = frozenset(("invoke", "ok", "fail", "info"))

#: The operation names (``f``) the checker understands; others (``commit``, ``drain``...) may appear
#: in a history and are carried along but not judged.
SEND = "send"
RECEIVE = "receive"
ACK = "ack"


class HistoryError(ValueError):
    """A history (or one operation in it) that is malformed: the kit's bug, not the broker's."""


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a history. ``slots``: a million of these must fit comfortably in memory."""

    #: Who did it: a client thread or connection, as the case names it.
    process: str
    type: OpType
    #: What was done: ``send``, ``receive``, ``ack`` or a case-specific name.
    f: str
    #: The message key (None on a completion that refers to its process's pending invoke).
    value: str | None
    #: ``time.monotonic_ns()`` when the operation was recorded.
    time_ns: int
    #: The producer that sent the message, and its sequence number within that producer.
    producer: str | None = None
    seq: int | None = None
    #: On receipts: the redelivered flag and Artemis's delivery count (1 on a first delivery).
    redelivered: bool | None = None
    delivery_count: int | None = None
    #: The broker node the operation went to, for cluster cases.
    node: str | None = None

    def __post_init__(self) -> None:
        # The one check cheap enough for every op: everything else is validated in from_dict,
        # where untrusted input (evidence files) comes in.
        if self.type not in _OP_TYPES:
            raise HistoryError(f"Op.type must be one of invoke/ok/fail/info, got {self.type!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; optional fields that are None are left out."""
        out: dict[str, Any] = {"process": self.process, "type": self.type, "f": self.f, "value": self.value,
                               "time_ns": self.time_ns}
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Op:
        """Inverse of :meth:`to_dict`; a wrong or unknown field raises HistoryError naming it."""
        unknown = set(data) - _ALL_FIELDS
        if unknown:
            raise HistoryError(f"unknown op field(s) {sorted(unknown)}; known: {sorted(_ALL_FIELDS)}")
        for name in _REQUIRED:
            if name not in data:
                raise HistoryError(f"op is missing required field {name!r}: {dict(data)!r}")
        for name, kinds in _FIELD_TYPES.items():
            value = data.get(name)
            # bool is an int subclass; a JSON true where a number belongs is a bug to report.
            if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
                raise HistoryError(f"op field {name!r} must be {' or '.join(k.__name__ for k in kinds)}, "
                                   f"got {value!r}")
            if value is None and name in _REQUIRED and name != "value":
                raise HistoryError(f"op field {name!r} must not be null")
        values: dict[str, Any] = {name: data.get(name) for name in _ALL_FIELDS}
        return cls(**values)


_REQUIRED = ("process", "type", "f", "value", "time_ns")
_OPTIONAL = ("producer", "seq", "redelivered", "delivery_count", "node")
_ALL_FIELDS = frozenset(_REQUIRED + _OPTIONAL)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "process": (str,), "type": (str,), "f": (str,), "value": (str,), "time_ns": (int,),
    "producer": (str,), "seq": (int,), "redelivered": (bool,), "delivery_count": (int,), "node": (str,),
}


class History:
    """An append-only history with helpers for the operations the checker understands.

    ``clock`` is injected (``time.monotonic_ns`` by default) so tests can build histories with
    chosen times; every helper also takes an explicit ``time_ns``.
    """

    def __init__(self, ops: Iterable[Op] = (), *, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._ops: list[Op] = list(ops)
        self._clock = clock

    # -- the sequence ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Op]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    @overload
    def __getitem__(self, index: int) -> Op: ...
    @overload
    def __getitem__(self, index: slice) -> list[Op]: ...
    def __getitem__(self, index: int | slice) -> Op | list[Op]:
        return self._ops[index]

    def append(self, op: Op) -> Op:
        self._ops.append(op)
        return op

    # -- generic operations ------------------------------------------------------------------------

    def op(self, process: str, type: OpType, f: str, value: str | None, *, time_ns: int | None = None,
           producer: str | None = None, seq: int | None = None, redelivered: bool | None = None,
           delivery_count: int | None = None, node: str | None = None) -> Op:
        return self.append(Op(process, type, f, value, self._clock() if time_ns is None else time_ns,
                              producer, seq, redelivered, delivery_count, node))

    def invoke(self, process: str, f: str, value: str | None, **extra: Any) -> Op:
        return self.op(process, "invoke", f, value, **extra)

    def ok(self, process: str, f: str, value: str | None = None, **extra: Any) -> Op:
        """Completion: it definitely happened (the broker confirmed a send, an ack...)."""
        return self.op(process, "ok", f, value, **extra)

    def fail(self, process: str, f: str, value: str | None = None, **extra: Any) -> Op:
        """Completion: it definitely did not happen (the broker refused it)."""
        return self.op(process, "fail", f, value, **extra)

    def info(self, process: str, f: str, value: str | None = None, **extra: Any) -> Op:
        """Completion: unknown whether it happened (timeout, connection lost before the answer)."""
        return self.op(process, "info", f, value, **extra)

    # -- messaging helpers -------------------------------------------------------------------------

    def invoke_send(self, process: str, key: str, producer: str | None = None, seq: int | None = None,
                    **extra: Any) -> Op:
        return self.op(process, "invoke", SEND, key, producer=producer, seq=seq, **extra)

    def send(self, process: str, key: str, producer: str | None = None, seq: int | None = None, *,
             outcome: OpType = "ok", node: str | None = None) -> Op:
        """An invoke and its completion in one call (for blocking sends)."""
        if outcome == "invoke":
            raise HistoryError("send outcome must be ok, fail or info")
        self.invoke_send(process, key, producer, seq, node=node)
        return self.op(process, outcome, SEND, key, producer=producer, seq=seq, node=node)

    def received(self, process: str, key: str, delivery_count: int | None = None, redelivered: bool | None = None,
                 **extra: Any) -> Op:
        """A consumer got the message (an ``ok`` ``receive``)."""
        return self.op(process, "ok", RECEIVE, key, delivery_count=delivery_count, redelivered=redelivered,
                       **extra)

    def invoke_ack(self, process: str, key: str, **extra: Any) -> Op:
        return self.op(process, "invoke", ACK, key, **extra)

    def ack(self, process: str, key: str, *, outcome: OpType = "ok", node: str | None = None) -> Op:
        """An acknowledgement invoke and its completion (``ok`` = the broker confirmed it)."""
        if outcome == "invoke":
            raise HistoryError("ack outcome must be ok, fail or info")
        self.invoke_ack(process, key, node=node)
        return self.op(process, outcome, ACK, key, node=node)

    # -- serialisation -----------------------------------------------------------------------------

    def to_dicts(self) -> list[dict[str, Any]]:
        return [op.to_dict() for op in self._ops]

    @classmethod
    def from_dicts(cls, rows: Iterable[Mapping[str, Any]]) -> History:
        ops: list[Op] = []
        for index, row in enumerate(rows):
            try:
                ops.append(Op.from_dict(row))
            except HistoryError as exc:
                raise HistoryError(f"history op {index}: {exc}") from None
        return cls(ops)
