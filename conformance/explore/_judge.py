"""The exploration's oracle: the history checker's findings, of which only those a conforming broker can never
produce under the example's faults are counted.

Under faults a conforming broker may legitimately:

* deliver a message again with delivery count 1 and no redelivered flag (Artemis decrements the count of
  unacknowledged messages when a consumer closes cleanly), so a "not redelivered" duplicate is not counted;
* redeliver out of first-delivery order and with counts that reflect deliveries the client never saw (a delivery
  lost with a cut connection or dropped), so order violations and redelivery-accounting mismatches are not counted;
* once a dropped counted frame has desynchronised the two ends' command numbering, replay on reattach a command or
  a delivery the peer already had (the confirmation window's numbering is all a reattach goes by), so then no
  duplicate at all is counted, not even one after a confirmed acknowledgement.

Counted: a confirmed send never received when the final drain was complete (lost; unless the proxy dropped every
frame that carried it, so it never reached the broker: a transaction's send is confirmed by the commit alone), a
received message that was never sent or whose send definitely failed (unexpected), and, when the numbering stayed
in step, a message delivered again after its acknowledgement was confirmed (duplicated after ack) and a call no
answer ever reached although every failover reattached its sessions (unanswered). A reattached session leaves a
conforming pair no way to lose an answer: the broker answered before the cut, or it replays the answer the client
has not confirmed, or the client replays the request the broker says it has not received. So a call that times out
there is a replay one of the two skipped (or an answer the broker never gives), which the history alone cannot
show: the call's outcome is only "unknown". Where a session was recreated instead, its calls in flight end
unanswered by design, so they are not counted. What a transaction that never committed received must come back,
what a rolled-back one had acknowledged comes back counted once more, and so does what a settled failure of the
connection ended (:mod:`._redelivery`, rules 1 to 3). What is observed but not counted is kept in the notes, with
why."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cck.conformance.oracles import HistoryResult, Op, check

from ._redelivery import judge_redelivery

__all__ = ["Anomaly", "AnomalyKind", "Judgement", "JudgementKind", "Unanswered", "judge"]

JudgementKind = Literal["clean", "finding"]
AnomalyKind = Literal["lost", "duplicated", "unexpected", "unanswered", "ack-rolled-back-lost", "failed-close-count",
                      "count-not-incremented"]


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A call no answer reached: it timed out, or an asynchronous send's answer had not come when the run
    settled.  ``request``: ``send``, ``ack``, ``commit``, ``rollback``, ``create-consumer``, ``credits``;
    ``key``: the message's key for a send or an acknowledgement."""

    request: str
    key: str | None = None

    def describe(self) -> str:
        return f"{self.request} {self.key}" if self.key else self.request


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One counted finding's message: what happened to which key (what a sequence diagram marks)."""

    kind: AnomalyKind
    key: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "key": self.key}


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the oracle made of one history."""

    kind: JudgementKind
    #: Counted findings, one line each (empty when clean).
    findings: tuple[str, ...]
    #: What was observed and not counted, and why.
    notes: tuple[str, ...]
    result: HistoryResult
    #: The counted findings' keys, each with its kind (the first examples the checker kept of each).
    anomalies: tuple[Anomaly, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "findings": list(self.findings), "notes": list(self.notes),
                "anomalies": [a.to_dict() for a in self.anomalies], "checker": self.result.to_dict()}

    def describe(self) -> str:
        if self.findings:
            return "; ".join(self.findings)
        r = self.result
        return (f"clean ({r.sends} sent: {r.confirmed} confirmed, {r.indeterminate} unknown, {r.failed} failed; "
                f"{r.receipts} receipts{'' if r.final_drain_complete else '; drain incomplete: losses not judged'})")


def judge(history: Iterable[Op], *, drain_complete: bool, desynchronised: bool,
          unanswered: Sequence[Unanswered] = (), recreated: bool = False,
          dropped: Collection[str] = frozenset(), gone: Collection[str] = frozenset(),
          restarted: bool = False, failures: int = 0) -> Judgement:
    """Judge a history.  ``drain_complete``: every workload session was closed at the broker and each queue was
    drained to its end (else nothing is judged lost).  ``desynchronised``: the schedule dropped frames the
    confirmation window counts (then neither duplicates nor unanswered calls are judged).  ``unanswered``: the
    calls no answer reached; ``recreated``: some failover recreated a session (or gave up) instead of reattaching
    (then unanswered calls are not judged).  ``dropped``: the keys whose every send frame the proxy dropped (their
    loss is the fault's, not counted).  ``gone``: the keys a broker restart may legitimately have taken (non-durable,
    or on a non-durable queue; not counted lost); ``restarted``: the broker was restarted (an acknowledgement the
    broker confirmed before a kill need not have reached its disk, and the sessions were recreated, so neither
    duplicates after an acknowledgement nor unanswered calls are counted).  Malformed histories raise
    ``HistoryError``.  ``failures``: how many times the workload's connection failed (the transaction rules of
    :mod:`._redelivery` bound by it the count a message may have reached unseen)."""
    history = list(history)
    result = check(history, final_drain_complete=drain_complete, allow_duplicates=True, max_examples=1000)
    findings: list[str] = []
    notes: list[str] = []
    anomalies: list[Anomaly] = []
    lost = [f.key for f in result.lost.examples if f.key not in dropped and f.key not in gone]
    taken = [f.key for f in result.lost.examples if f.key in gone and f.key not in dropped]
    if taken:
        notes.append(f"confirmed, never received: {', '.join(taken)}; not counted: non-durable, or on a non-durable "
                     "queue, and a broker restart came after its send (restart.non-durable-lost)")
    excused = [f.key for f in result.lost.examples if f.key in dropped]
    if excused:
        notes.append(f"confirmed, never received: {', '.join(excused)}; not counted: the proxy dropped every frame "
                     "that carried it, so it never reached the broker")
    if lost:
        count = result.lost.count - len(excused) - len(taken)
        findings.append(f"{count} lost: confirmed, never received ({', '.join(lost)})")
        anomalies.extend(Anomaly("lost", key) for key in lost)
    if result.unexpected.count:
        shown = [f"{f.key} ({f.reason})" for f in result.unexpected.examples]
        findings.append(f"{result.unexpected.count} unexpected: {', '.join(shown)}")
        anomalies.extend(Anomaly("unexpected", f.key) for f in result.unexpected.examples)
    after_ack = [d for d in result.duplicated.examples if d.reason == "after_ack"]
    other = [d for d in result.duplicated.examples if d.reason != "after_ack"]
    if after_ack:
        listed = ", ".join(f"{d.key} (to {d.process}, delivery count {d.delivery_count})" for d in after_ack)
        if desynchronised:
            notes.append(f"delivered again after a confirmed ack: {listed}; not counted: a dropped counted frame "
                         "desynchronised the command numbering, and a reattach may then replay")
        elif restarted:
            notes.append(f"delivered again after a confirmed ack: {listed}; not counted: the broker was restarted, "
                         "and an acknowledgement need not be on its disk when it is confirmed")
        else:
            findings.append(f"{len(after_ack)} duplicated after a confirmed acknowledgement: {listed}")
            anomalies.extend(Anomaly("duplicated", key) for key in dict.fromkeys(d.key for d in after_ack))
    if unanswered:
        listed = ", ".join(u.describe() for u in unanswered[:10]) + (" ..." if len(unanswered) > 10 else "")
        if desynchronised or recreated or restarted:
            why = ("a dropped counted frame desynchronised the command numbering" if desynchronised
                   else "a failover recreated a session, which ends its calls in flight" if recreated
                   else "the broker was restarted, which ends the sessions' calls in flight")
            notes.append(f"{len(unanswered)} call(s) never answered ({listed}); not counted: {why}")
        else:
            findings.append(f"{len(unanswered)} call(s) never answered, with the command numbering in step and no "
                            f"session recreated: {listed}")
            anomalies.extend(Anomaly("unanswered", key) for key in dict.fromkeys(u.key for u in unanswered) if key)
    if other:
        notes.append(f"{len(other)} delivered again without the redelivered flag ({', '.join(d.key for d in other)}); "
                     "not counted: a clean consumer close may reset the delivery count")
    if result.order_violations.count:
        notes.append(f"{result.order_violations.count} per-producer order violation(s); not counted: redeliveries "
                     "after faults reorder")
    if result.redelivery_mismatches.count:
        notes.append(f"{result.redelivery_mismatches.count} redelivered-flag/delivery-count mismatch(es); not "
                     "counted: deliveries lost with a connection still count")
    if restarted:
        # a restarted broker keeps neither delivery counts (unless told to persist them) nor what a killed one had
        # not yet written: the transaction and failed-close rules' premises are gone
        notes.append("the transaction and failed-close redelivery rules not judged: the broker was restarted")
    else:
        redelivery = judge_redelivery(history, drain_complete=drain_complete, desynchronised=desynchronised,
                                      failures=failures)
        for finding in redelivery.findings:
            findings.append(f"{finding.kind}: {finding.key} {finding.text}")
            anomalies.append(Anomaly(finding.kind, finding.key))
        notes.extend(redelivery.notes)
    if not drain_complete:
        notes.append(f"the final drain was not complete: {result.unreceived_undrained} confirmed, unreceived "
                     "message(s) not judged lost")
    return Judgement("finding" if findings else "clean", tuple(findings), tuple(notes), result, tuple(anomalies))
