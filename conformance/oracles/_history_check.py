"""The history checker: what a queue's history says about delivery guarantees, in one linear pass.

It extends Jepsen's ``total-queue`` checker (lost / unexpected / duplicated / recovered) with the
checks a JMS-style broker owes on top: per-producer order, redelivered flag and delivery count, and
acknowledgements that do not stick. Memory and time are O(n): a few dicts keyed by message key,
no sorting and no nested loop over the history, so a million operations check in seconds.

Findings are counted exactly; only the first ``max_examples`` of each kind are kept as examples.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from ._history import ACK, RECEIVE, SEND, HistoryError, Op

__all__ = [
    "Lost",
    "Duplicate",
    "Unexpected",
    "OrderViolation",
    "RedeliveryMismatch",
    "AckLost",
    "Findings",
    "HistoryResult",
    "check",
]


@dataclass(frozen=True, slots=True)
class Lost:
    """A send the broker confirmed (``ok``) that no consumer ever received."""

    key: str
    process: str
    producer: str | None
    seq: int | None
    #: When the confirmation was recorded.
    confirmed_ns: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A receipt of a key already received that is not a legitimate redelivery."""

    key: str
    process: str
    time_ns: int
    #: ``after_ack``: the key's ack had been confirmed. ``not_redelivered``: neither the redelivered
    #: flag nor a higher delivery count marks it as a redelivery.
    reason: Literal["after_ack", "not_redelivered"]
    first_process: str
    delivery_count: int | None
    redelivered: bool | None
    node: str | None


@dataclass(frozen=True, slots=True)
class Unexpected:
    """A received key that should not exist: never sent, or its send definitely failed."""

    key: str
    process: str
    time_ns: int
    reason: Literal["never_sent", "send_failed"]


@dataclass(frozen=True, slots=True)
class OrderViolation:
    """Two messages of one producer that one consumer received out of send order."""

    consumer: str
    producer: str
    earlier_key: str
    earlier_seq: int
    later_key: str
    later_seq: int
    #: When the out-of-order (later received, lower seq) message arrived.
    time_ns: int


@dataclass(frozen=True, slots=True)
class RedeliveryMismatch:
    """A receipt whose redelivered flag or delivery count contradicts its delivery history."""

    key: str
    process: str
    time_ns: int
    reason: Literal[
        "first_delivery_count",      # first receipt with delivery_count != 1
        "first_flagged_redelivered",  # first receipt flagged redelivered
        "flag_without_count",        # redelivered=True but delivery_count == 1
        "count_without_flag",        # redelivered=False but delivery_count >= 2
        "count_not_increased",       # a redelivery whose delivery_count did not grow
    ]
    delivery_count: int | None
    redelivered: bool | None
    #: The highest delivery count seen for this key before this receipt.
    previous_count: int | None


@dataclass(frozen=True, slots=True)
class AckLost:
    """An acknowledgement the broker confirmed, and the same message delivered again afterwards."""

    key: str
    ack_process: str
    ack_ns: int
    process: str
    time_ns: int


_F = TypeVar("_F", Lost, Duplicate, Unexpected, OrderViolation, RedeliveryMismatch, AckLost)


@dataclass(frozen=True, slots=True)
class Findings(Generic[_F]):
    """An exact count and the first few examples of one kind of anomaly."""

    count: int = 0
    examples: tuple[_F, ...] = ()

    def __bool__(self) -> bool:
        return self.count > 0

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "truncated": self.count > len(self.examples),
                "examples": [asdict(example) for example in self.examples]}


class _Collector(Generic[_F]):
    """Counts every finding, keeps the first ``cap`` (a history with a million losses stays small)."""

    __slots__ = ("cap", "count", "examples")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.count = 0
        self.examples: list[_F] = []

    def add(self, finding: _F) -> None:
        self.count += 1
        if len(self.examples) < self.cap:
            self.examples.append(finding)

    def freeze(self) -> Findings[_F]:
        return Findings(self.count, tuple(self.examples))


@dataclass(frozen=True, slots=True)
class HistoryResult:
    """The checker's verdict with exact counts, capped examples and a one-paragraph explanation."""

    ok: bool
    ops: int
    #: Distinct keys whose send was invoked, and how those sends ended (per key: any ``ok`` wins,
    #: else an ``info`` or a never-completed invoke makes it indeterminate, else it failed).
    sends: int
    confirmed: int
    failed: int
    indeterminate: int
    receipts: int
    received_keys: int
    acks_confirmed: int
    #: Indeterminate sends that did arrive (Jepsen's "recovered"): fine, reported for the record.
    recovered: int
    #: Confirmed sends not received when the run did not end with a complete drain (not judged).
    unreceived_undrained: int
    final_drain_complete: bool
    duplicates_allowed: bool
    lost: Findings[Lost] = field(default_factory=Findings)
    duplicated: Findings[Duplicate] = field(default_factory=Findings)
    unexpected: Findings[Unexpected] = field(default_factory=Findings)
    order_violations: Findings[OrderViolation] = field(default_factory=Findings)
    redelivery_mismatches: Findings[RedeliveryMismatch] = field(default_factory=Findings)
    ack_lost: Findings[AckLost] = field(default_factory=Findings)
    explanation: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("ok", "ops", "sends", "confirmed", "failed", "indeterminate", "receipts", "received_keys",
                     "acks_confirmed", "recovered", "unreceived_undrained", "final_drain_complete",
                     "duplicates_allowed"):
            out[name] = getattr(self, name)
        for name in _FINDING_NAMES:
            out[name] = getattr(self, name).to_dict()
        out["explanation"] = self.explanation
        return out


_FINDING_NAMES = ("lost", "duplicated", "unexpected", "order_violations", "redelivery_mismatches", "ack_lost")

# Per-key send outcome ranks; the best one seen decides (a retried message that once got "ok" is sent).
_FAILED, _UNKNOWN, _CONFIRMED = 0, 1, 2
_RANK = {"fail": _FAILED, "info": _UNKNOWN, "ok": _CONFIRMED}


def check(
    history: Iterable[Op],
    *,
    final_drain_complete: bool = True,
    allow_duplicates: bool = False,
    max_examples: int = 100,
) -> HistoryResult:
    """Check a queue history in one pass (streaming: any iterable of ops, e.g. read from JSON Lines).

    ``final_drain_complete``: the run ended by consuming everything left, so a confirmed send that
    nobody received is *lost*; without a drain such sends are only counted. ``allow_duplicates``:
    the case's semantics are at-least-once, so duplicates are reported but do not fail the check
    (acks that did not stick still do). Malformed input raises HistoryError naming the op index.
    """
    if max_examples < 0:
        raise ValueError(f"max_examples must be >= 0, got {max_examples}")
    lost: _Collector[Lost] = _Collector(max_examples)
    duplicated: _Collector[Duplicate] = _Collector(max_examples)
    unexpected: _Collector[Unexpected] = _Collector(max_examples)
    order: _Collector[OrderViolation] = _Collector(max_examples)
    mismatches: _Collector[RedeliveryMismatch] = _Collector(max_examples)
    ack_lost: _Collector[AckLost] = _Collector(max_examples)

    # Send side, per key: the first invoke (who, producer, seq), invokes minus completions, best outcome.
    send_invoke: dict[str, Op] = {}
    send_open: dict[str, int] = {}
    send_rank: dict[str, int] = {}
    send_confirmed: dict[str, Op] = {}
    # Jepsen completions may omit the value: they then complete their process's pending invoke.
    # One dict per f, keyed by process (no tuple per op on the hot path).
    pending_send: dict[str, Op] = {}
    pending_ack: dict[str, Op] = {}
    # Receive side, per key: the first receipt and the highest delivery count seen (0 = unknown).
    first_receipt: dict[str, Op] = {}
    max_count: dict[str, int] = {}
    acked: dict[str, Op] = {}
    # Per (consumer, producer): the last first-delivery seen, for the order check.
    last_in_order: dict[tuple[str, str], tuple[int, str]] = {}
    receipts = acks_confirmed = ops = 0

    for index, op in enumerate(history):
        ops += 1
        f, kind = op.f, op.type
        if f == RECEIVE:
            if kind != "ok":
                continue  # an invoked or failed poll says nothing about any message
            key = op.value
            if key is None:
                raise HistoryError(f"history op {index}: a receive ok must carry the message key as value")
            receipts += 1
            count, flag = op.delivery_count, op.redelivered
            first = first_receipt.get(key)
            if first is None:
                first_receipt[key] = op
                max_count[key] = count or 0
                if count is not None and count != 1:
                    mismatches.add(RedeliveryMismatch(key, op.process, op.time_ns, "first_delivery_count",
                                                      count, flag, None))
                elif flag:
                    mismatches.add(RedeliveryMismatch(key, op.process, op.time_ns, "first_flagged_redelivered",
                                                      count, flag, None))
                if not (flag or (count is not None and count > 1)):
                    # A redelivery is out of send order by nature: only first deliveries are ordered.
                    _check_order(op, key, send_invoke.get(key), last_in_order, order)
                continue
            previous = max_count[key]
            ack = acked.get(key)
            if ack is not None:
                duplicated.add(Duplicate(key, op.process, op.time_ns, "after_ack", first.process, count, flag,
                                         op.node))
                ack_lost.add(AckLost(key, ack.process, ack.time_ns, op.process, op.time_ns))
            elif not (flag or (count is not None and count > max(previous, 1))):
                duplicated.add(Duplicate(key, op.process, op.time_ns, "not_redelivered", first.process, count,
                                         flag, op.node))
            elif count is not None and count < 2:
                mismatches.add(RedeliveryMismatch(key, op.process, op.time_ns, "flag_without_count", count, flag,
                                                  previous or None))
            elif count is not None and count <= previous:
                mismatches.add(RedeliveryMismatch(key, op.process, op.time_ns, "count_not_increased", count, flag,
                                                  previous))
            elif flag is False and count is not None:
                # count > previous >= 1 here: a redelivery by its count whose flag denies it.
                mismatches.add(RedeliveryMismatch(key, op.process, op.time_ns, "count_without_flag", count, flag,
                                                  previous or None))
            if count is not None and count > previous:
                max_count[key] = count
        elif f == SEND:
            if kind == "invoke":
                key = op.value
                if key is None:
                    raise HistoryError(f"history op {index}: a send invoke must carry the message key as value")
                pending_send[op.process] = op
                if key not in send_invoke:
                    send_invoke[key] = op
                    send_rank[key] = _FAILED
                    send_open[key] = 0
                send_open[key] += 1
                continue
            key = _completed_key(op, pending_send, index)
            if key not in send_invoke:
                raise HistoryError(f"history op {index}: send {kind} of {key!r} by {op.process!r} has no invoke")
            send_open[key] -= 1
            rank = _RANK[kind]
            if rank > send_rank[key]:
                send_rank[key] = rank
            if rank == _CONFIRMED and key not in send_confirmed:
                send_confirmed[key] = op
        elif f == ACK:
            if kind == "invoke":
                pending_ack[op.process] = op
                continue
            key = _completed_key(op, pending_ack, index)
            if kind == "ok":
                acks_confirmed += 1
                acked.setdefault(key, op)
                if key not in first_receipt:
                    # Acking a message never received is the client's doing, not the broker's.
                    raise HistoryError(f"history op {index}: ack of {key!r} by {op.process!r} before any receipt")

    confirmed = failed = indeterminate = recovered = unreceived = 0
    for key, rank in send_rank.items():
        received = key in first_receipt
        if rank == _CONFIRMED:
            confirmed += 1
            if not received:
                if final_drain_complete:
                    ok_op = send_confirmed[key]
                    invoke = send_invoke[key]
                    lost.add(Lost(key, ok_op.process, invoke.producer, invoke.seq, ok_op.time_ns))
                else:
                    unreceived += 1
        elif rank == _UNKNOWN or send_open[key] > 0:
            indeterminate += 1
            recovered += received
        else:
            failed += 1
    for key, receipt in first_receipt.items():
        rank_or_none = send_rank.get(key)
        if rank_or_none is None:
            unexpected.add(Unexpected(key, receipt.process, receipt.time_ns, "never_sent"))
        elif rank_or_none == _FAILED and send_open[key] <= 0:
            unexpected.add(Unexpected(key, receipt.process, receipt.time_ns, "send_failed"))

    result = HistoryResult(
        ok=not (lost.count or unexpected.count or order.count or mismatches.count or ack_lost.count
                or (duplicated.count and not allow_duplicates)),
        ops=ops, sends=len(send_rank), confirmed=confirmed, failed=failed, indeterminate=indeterminate,
        receipts=receipts, received_keys=len(first_receipt), acks_confirmed=acks_confirmed, recovered=recovered,
        unreceived_undrained=unreceived, final_drain_complete=final_drain_complete,
        duplicates_allowed=allow_duplicates,
        lost=lost.freeze(), duplicated=duplicated.freeze(), unexpected=unexpected.freeze(),
        order_violations=order.freeze(), redelivery_mismatches=mismatches.freeze(), ack_lost=ack_lost.freeze(),
    )
    return _with_explanation(result)


def _completed_key(op: Op, pending: dict[str, Op], index: int) -> str:
    """The key a completion refers to: its own value, else its process's pending invoke of that f.

    A completion closes the pending invoke it matches, so a second value-less completion cannot
    complete the same invoke twice; a valued completion of another key (async sends with several
    in flight) leaves the pending one alone.
    """
    invoke = pending.get(op.process)
    if op.value is not None:
        if invoke is not None and invoke.value == op.value:
            del pending[op.process]
        return op.value
    if invoke is not None:
        del pending[op.process]
    if invoke is None or invoke.value is None:
        raise HistoryError(f"history op {index}: {op.f} {op.type} by {op.process!r} has no value and no "
                           "pending invoke to complete")
    return invoke.value


def _check_order(op: Op, key: str, invoke: Op | None, last_in_order: dict[tuple[str, str], tuple[int, str]],
                 order: _Collector[OrderViolation]) -> None:
    """First deliveries of one producer's messages to one consumer must come in send order."""
    # The receipt's own producer/seq (read from the message) win; else what the send recorded.
    producer, seq = op.producer, op.seq
    if (producer is None or seq is None) and invoke is not None:
        producer = producer if producer is not None else invoke.producer
        seq = seq if seq is not None else invoke.seq
    if producer is None or seq is None:
        return
    slot = (op.process, producer)
    last = last_in_order.get(slot)
    if last is not None and seq <= last[0]:
        order.add(OrderViolation(op.process, producer, last[1], last[0], key, seq, op.time_ns))
        return  # keep the highest seq as the reference, so one stray message is one violation
    last_in_order[slot] = (seq, key)


def _with_explanation(result: HistoryResult) -> HistoryResult:
    head = (f"{result.ops} ops: {result.sends} messages sent ({result.confirmed} confirmed, {result.failed} failed, "
            f"{result.indeterminate} indeterminate), {result.receipts} receipts of {result.received_keys} "
            f"distinct messages, {result.acks_confirmed} acks confirmed.")
    problems = []
    for name, label in (("lost", "lost (confirmed, never received)"),
                        ("unexpected", "unexpected (received but never sent, or sent and failed)"),
                        ("duplicated", "duplicated (received again without being a redelivery)"),
                        ("ack_lost", "acks lost (delivered again after a confirmed ack)"),
                        ("order_violations", "per-producer order violations"),
                        ("redelivery_mismatches", "redelivered-flag/delivery-count mismatches")):
        findings: Findings[Any] = getattr(result, name)
        if findings.count:
            example = findings.examples[0] if findings.examples else None
            problems.append(f"{findings.count} {label}" + (f", first: {_describe(example)}" if example else ""))
    notes = []
    if result.recovered:
        notes.append(f"{result.recovered} indeterminate sends arrived (recovered)")
    if not result.final_drain_complete:
        notes.append(f"no final drain, so {result.unreceived_undrained} confirmed but unreceived messages "
                     "were not judged as lost")
    if result.duplicated.count and result.duplicates_allowed:
        notes.append("duplicates are allowed (at-least-once) and do not fail the check")
    verdict = ("OK: no anomaly." if not problems else
               ("OK with findings: " if result.ok else "FAIL: ") + "; ".join(problems) + ".")
    text = " ".join([head, verdict] + ([("Note: " + "; ".join(notes) + ".")] if notes else []))
    return replace(result, explanation=text)


def _describe(finding: Any) -> str:
    if isinstance(finding, Lost):
        return f"{finding.key!r} (producer {finding.producer}, seq {finding.seq}) confirmed to {finding.process}"
    if isinstance(finding, Duplicate):
        return (f"{finding.key!r} received by {finding.process} after {finding.first_process} "
                f"({finding.reason}, delivery_count={finding.delivery_count}, redelivered={finding.redelivered})")
    if isinstance(finding, Unexpected):
        return f"{finding.key!r} received by {finding.process} ({finding.reason})"
    if isinstance(finding, OrderViolation):
        return (f"{finding.consumer} got {finding.producer}'s seq {finding.later_seq} ({finding.later_key!r}) "
                f"after seq {finding.earlier_seq} ({finding.earlier_key!r})")
    if isinstance(finding, RedeliveryMismatch):
        return (f"{finding.key!r} at {finding.process}: {finding.reason} (delivery_count={finding.delivery_count}, "
                f"redelivered={finding.redelivered}, previous count={finding.previous_count})")
    if isinstance(finding, AckLost):
        return f"{finding.key!r} acked by {finding.ack_process}, delivered again to {finding.process}"
    return repr(finding)
