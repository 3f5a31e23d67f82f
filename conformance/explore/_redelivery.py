"""The oracle's rules on transactions that end without a commit: what they received must come back, and a
message a rolled-back transaction had acknowledged comes back counted.

The history vocabulary they read (besides ``send``, ``receive`` and ``ack``, which the history checker judges):

* ``tx-ack``: a transacted session acknowledged a message inside its transaction (``invoke`` with the key, then
  ``ok`` when the broker answered, ``info`` otherwise); it consumes nothing until a commit, so it is not an
  ``ack`` (the checker would count a redelivery after it as a duplicate);
* ``commit`` and ``rollback``: the transacted session ended its transaction (``invoke``, then ``ok`` when
  answered, ``info`` when its outcome is unknown); no key.

A process that records any of these is a transacted one.

Rule 1 (``ack-rolled-back-lost``; clause ``rollback.redelivery`` and ``failover.redelivery``: an aborted
transaction recovers what it consumed).  A message a transacted session received, with no commit invoked on that
session afterwards, was never consumed: its transaction ended by a rollback, by a failure of the session or by the
session's close, and each puts it back (whether or not its acknowledgement reached the broker: an unacknowledged
delivery is returned too).  So its last receipt cannot be that one: it must be received again later, by the
workload or the final drain.  Judged only when the drain was complete, no counted frame was dropped (a reattach
may then replay a delivery of a message already consumed), no acknowledgement of it was confirmed before that
receipt, and its delivery count cannot have reached the broker's max-delivery-attempts (10 by default in Artemis
and the reference broker: a message returned that often goes to the dead-letter address instead).

Rule 2 (``count-not-incremented``; clause ``rollback.redelivery``: the acknowledged messages go back with the
delivery count their delivery gave them).  A message a transacted session received with delivery count ``c``
and acknowledged in the transaction (answered), then rolled back (answered) with no commit invoked in between, is
in the transaction's acknowledgements at the rollback, whichever session incarnation it is: a rolled-back,
failed or closed transaction puts its acknowledged messages back without decrementing their count (only
unacknowledged deliveries cancelled cleanly are decremented, by one, and each such delivery had first counted
one).  Every later delivery is a new hand-over, which counts one before the client sees it, so each later receipt
carries a count of at least ``c + 1``; cut connections and deliveries the client never saw only raise the count.
Not judged when a counted frame was dropped: a reattach may then replay the old delivery frame, count and all.

Rule 3 (``failed-close-count``; clause ``failover.redelivery``: only a failed close keeps the count of the
deliveries it cancels).  ``settled-failure`` (process ``connection``, ``ok``, no key) records that the workload's
first connection was cut and that the broker had closed its sessions before any reconnect reached it
(``_settle``): a failed close, which puts every delivery of those sessions back with its count as it was, acknowledged
in a transaction or not acknowledged at all.  So a message received with delivery count ``c`` before it, with no
rollback or commit invoked on that session in between and no confirmed acknowledgement (a consumed message does
not come back at all), carries a count of at least ``c + 1`` on every later receipt.  Not judged when a counted
frame was dropped (a replay of the old delivery frame).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cck.conformance.oracles import Op

__all__ = [
    "COMMIT",
    "SETTLED",
    "MAX_DELIVERY_ATTEMPTS",
    "ROLLBACK",
    "TX_ACK",
    "RedeliveryFinding",
    "RedeliveryKind",
    "RedeliveryVerdict",
    "judge_redelivery",
]

RedeliveryKind = Literal["ack-rolled-back-lost", "count-not-incremented", "failed-close-count"]

TX_ACK = "tx-ack"
COMMIT = "commit"
ROLLBACK = "rollback"
SETTLED = "settled-failure"
#: Artemis's (and the reference broker's) default max-delivery-attempts: a rollback or failure that returns a
#: message with this count sends it to the dead-letter address instead of its queue.
MAX_DELIVERY_ATTEMPTS = 10
_TX_OPS = frozenset({TX_ACK, COMMIT, ROLLBACK})


@dataclass(frozen=True, slots=True)
class RedeliveryFinding:
    """One counted finding of these rules: its kind, the message's key and a line that says why."""

    kind: RedeliveryKind
    key: str
    text: str


@dataclass(frozen=True, slots=True)
class RedeliveryVerdict:
    findings: tuple[RedeliveryFinding, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Receipt:
    index: int
    process: str
    count: int | None


def judge_redelivery(
    history: Sequence[Op], *, drain_complete: bool, desynchronised: bool, failures: int = 0
) -> RedeliveryVerdict:
    """Rules 1 and 2 (see the module's docstring) over a whole history.  ``failures``: how many times the
    workload's connection failed (each may have returned a delivery counted; bounds the count a message can
    have reached unseen)."""
    transacted = {op.process for op in history if op.f in _TX_OPS}
    if not transacted and not any(op.f == SETTLED for op in history):
        return RedeliveryVerdict((), ())
    receipts: dict[str, list[_Receipt]] = {}
    confirmed_ack: dict[str, int] = {}  # key -> index of its first confirmed acknowledgement
    commits: dict[str, list[int]] = {}  # process -> indices of its commit invokes
    rollbacks_invoked: dict[str, list[int]] = {}
    rollbacks_answered: dict[str, list[int]] = {}
    tx_acks: dict[tuple[str, str], list[int]] = {}  # (process, key) -> indices of answered tx-acks
    settled: list[int] = []
    for index, op in enumerate(history):
        if op.f == SETTLED and op.type == "ok":
            settled.append(index)
        elif op.f == "receive" and op.type == "ok" and op.value is not None:
            receipts.setdefault(op.value, []).append(_Receipt(index, op.process, op.delivery_count))
        elif op.f == "ack" and op.type == "ok" and op.value is not None:
            confirmed_ack.setdefault(op.value, index)
        elif op.f == COMMIT and op.type == "invoke":
            commits.setdefault(op.process, []).append(index)
        elif op.f == ROLLBACK:
            if op.type == "invoke":
                rollbacks_invoked.setdefault(op.process, []).append(index)
            elif op.type == "ok":
                rollbacks_answered.setdefault(op.process, []).append(index)
        elif op.f == TX_ACK and op.type == "ok" and op.value is not None:
            tx_acks.setdefault((op.process, op.value), []).append(index)
    if desynchronised:
        judged = [key for key, got in receipts.items() if any(r.process in transacted for r in got)]
        if not judged:
            return RedeliveryVerdict((), ())
        return RedeliveryVerdict(
            (),
            (
                f"{len(judged)} message(s) received in a transaction: whether each came back "
                "(counted) after its transaction ended not judged: a dropped counted frame "
                "desynchronised the command numbering, and a reattach may then replay an old "
                "delivery",
            ),
        )
    findings: list[RedeliveryFinding] = []
    notes: list[str] = []
    for key, got in receipts.items():
        lost = _never_returned(key, got, transacted, commits, rollbacks_invoked, confirmed_ack, failures)
        if lost is not None:
            if drain_complete:
                findings.append(RedeliveryFinding("ack-rolled-back-lost", key, lost))
            else:
                notes.append(f"{key}: {lost}; not counted: the final drain was not complete")
        findings.extend(_counts_after_rollback(key, got, transacted, commits, rollbacks_answered, tx_acks))
        if settled and confirmed_ack.get(key, settled[0]) >= settled[0]:  # an ack before: consumed, not back
            findings.extend(_counts_after_failure(key, got, settled[0], commits, rollbacks_invoked))
    return RedeliveryVerdict(tuple(findings), tuple(notes))


def _after(indices: Sequence[int], start: int, end: int | None = None) -> list[int]:
    return [i for i in indices if i > start and (end is None or i < end)]


def _never_returned(
    key: str,
    got: Sequence[_Receipt],
    transacted: set[str],
    commits: dict[str, list[int]],
    rollbacks: dict[str, list[int]],
    confirmed_ack: dict[str, int],
    failures: int,
) -> str | None:
    """Rule 1: what to say when the last receipt of ``key`` is by a transacted session that never committed
    after it; None when the rule does not apply or holds."""
    last = got[-1]
    if (
        last.process not in transacted
        or confirmed_ack.get(key, last.index) < last.index
        or _after(commits.get(last.process, ()), last.index)
    ):
        return None
    # Each rollback after it and each connection failure may return it once more, counted, without the client
    # seeing it; beyond the broker's max-delivery-attempts it goes to the dead-letter address.
    reached = (last.count or 1) + len(_after(rollbacks.get(last.process, ()), last.index)) + failures
    if reached >= MAX_DELIVERY_ATTEMPTS:
        return None
    return (
        f"received by {last.process} (delivery count {last.count}) in a transaction that never committed "
        "afterwards, and never delivered again (rollback.redelivery: an aborted transaction recovers what it "
        "consumed)"
    )


def _counts_after_rollback(
    key: str,
    got: Sequence[_Receipt],
    transacted: set[str],
    commits: dict[str, list[int]],
    rollbacks: dict[str, list[int]],
    tx_acks: dict[tuple[str, str], list[int]],
) -> list[RedeliveryFinding]:
    """Rule 2: after an answered rollback of the transaction that had acknowledged ``key`` (answered), each later
    receipt counts at least one more; the first receipt that does not, per rolled-back delivery."""
    out: list[RedeliveryFinding] = []
    for position, receipt in enumerate(got):
        if receipt.process not in transacted or receipt.count is None:
            continue
        following = got[position + 1].index if position + 1 < len(got) else None
        acked = _after(tx_acks.get((receipt.process, key), ()), receipt.index, following)
        if not acked:
            continue
        rolled_back = _after(rollbacks.get(receipt.process, ()), acked[0])
        if not rolled_back or _after(commits.get(receipt.process, ()), receipt.index, rolled_back[0]):
            continue
        for later in got[position + 1 :]:
            if later.index > rolled_back[0] and later.count is not None and later.count <= receipt.count:
                out.append(
                    RedeliveryFinding(
                        "count-not-incremented",
                        key,
                        f"received by {receipt.process} with delivery count {receipt.count}, acknowledged in its "
                        f"transaction, rolled back; delivered again to {later.process} with delivery count "
                        f"{later.count} (rollback.redelivery: at least {receipt.count + 1})",
                    )
                )
                break
    return out


def _counts_after_failure(
    key: str, got: Sequence[_Receipt], failure: int, commits: dict[str, list[int]], rollbacks: dict[str, list[int]]
) -> list[RedeliveryFinding]:
    """Rule 3: each receipt after the settled failure at ``failure`` counts at least one more than every receipt
    before it whose delivery the failure ended (none of its session's rollbacks or commits in between)."""
    ended = [
        r
        for r in got
        if r.index < failure
        and r.count is not None
        and not _after(rollbacks.get(r.process, ()), r.index, failure)
        and not _after(commits.get(r.process, ()), r.index, failure)
    ]
    if not ended:
        return []
    before = max(ended, key=lambda r: r.count or 0)
    assert before.count is not None
    for later in got:
        if later.index > failure and later.count is not None and later.count <= before.count:
            return [
                RedeliveryFinding(
                    "failed-close-count",
                    key,
                    f"received by {before.process} with delivery count {before.count}, its connection then failed "
                    f"and the broker closed the session before any reconnect; delivered again to {later.process} "
                    f"with delivery count {later.count} (failover.redelivery: a failed close keeps the count, so at "
                    f"least {before.count + 1})",
                )
            ]
    return []
