"""The XA part of the exploration's oracle: pure functions of the history and the log of the workload's XA calls.

The runner writes one :class:`XaCall` per XA call it makes (and per send and acknowledgement inside a branch),
each with what came back: ``ok``, ``error`` with the XA code, or ``unknown`` (no answer: a cut, a timeout).  A
branch's state is certain only while every call on it was answered; a call whose answer never came makes it
``unknown`` from then on, and nothing about it is judged.  Receipts are judged only in the final drain (a fresh
connection straight to the broker, after the workload's sessions are closed): a workload consumer's buffer may
hold a copy the broker already gave back, the drain's cannot.

Counted (each rule's clause in brackets):

* forget of an Xid the broker cannot know (never started, or completed by an answered commit or rollback) is
  answered with anything but XAER_NOTA (-4) [dtx.completed-forgotten: nothing heuristic is ever made, so nothing
  is left to forget];
* recover leaves out a branch whose prepare was answered XA_OK and that was not completed since, or lists one
  that is certainly not prepared (never prepared, completed, or aborted by a restart) [dtx.prepared-survives:
  SESS_XA_INDOUBT_XIDS returns the prepared branches];
* a branch prepared and never completed: the drain receives one of its sends (messages sent inside it are not
  routed until commit) or a message it acknowledged [dtx.prepared-survives, dtx.prepared-acks-held];
* a branch committed (answered OK): the drain receives a message it acknowledged [dtx.one-phase-durable and the
  transaction's atomicity: an acknowledgement committed is never undone];
* a branch rolled back (answered OK): a message it acknowledged is never received again although the drain was
  complete (rolled back acknowledgements put the message back) [dtx.rollback-after-restart, without the restart].

Its sends' fates go into the history itself (commit OK: ``ok``, rollback OK: ``fail``, else ``info``), where the
history checker judges lost and unexpected messages as it does for local transactions.

When a dropped counted frame desynchronised the command numbering, a reattach may replay a command the broker
already had; then nothing here is counted, only noted.

A ``restart`` marker in the log is where the broker was restarted: active and ended branches are aborted by it
[dtx.unprepared-aborted], prepared ones survive it [dtx.prepared-survives]; :func:`across_restart` says what must
hold after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cck.conformance.oracles import Op

__all__ = [
    "XAER_NOTA",
    "XA_OK",
    "BranchState",
    "RestartExpectation",
    "XaCall",
    "XaVerdict",
    "across_restart",
    "branch_states",
    "judge_xa",
]

#: XA codes (XAException): the branch is unknown to the resource manager; the prepare vote "ok".
XAER_NOTA = -4
XA_OK = 0

CallKind = Literal[
    "start", "end", "prepare", "commit", "commit-one-phase", "rollback", "forget", "recover", "send", "ack", "restart"
]
Answer = Literal["ok", "error", "unknown"]
BranchState = Literal["none", "active", "ended", "prepared", "done", "unknown"]
_COMPLETIONS = frozenset({"commit", "commit-one-phase", "rollback"})


@dataclass(frozen=True, slots=True)
class XaCall:
    """One XA call (or a send or acknowledgement inside a branch) and what came back.  ``branch``: the branch's
    label (one per Xid the run made); ``at``: the history's length when the answer came (receipts at or after
    it came later); ``code``: the XA code of an error, or a prepare's vote; ``key``: the message of a send or
    an acknowledgement; ``durable``: a send's; ``listed``: the labels a recover returned (an Xid of this run the
    runner never made is listed by its hex)."""

    call: CallKind
    branch: str = ""
    answer: Answer = "ok"
    at: int = 0
    code: int | None = None
    key: str | None = None
    durable: bool = True
    listed: tuple[str, ...] = ()

    def describe(self) -> str:
        what = f"{self.call} {self.branch}".strip() + (f" {self.key}" if self.key else "")
        if self.call == "recover" and self.answer == "ok":
            return f"{what} -> [{', '.join(self.listed)}]"
        return what + (
            "" if self.answer == "ok" else f" -> {self.answer}" + ("" if self.code is None else f" {self.code}")
        )


@dataclass(frozen=True, slots=True)
class XaVerdict:
    """What the XA rules found: counted findings, notes (observed, not counted, and why), the keys involved."""

    findings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    keys: tuple[str, ...] = field(default=())


def _step(state: BranchState, call: XaCall) -> BranchState:
    """A branch's state after ``call`` on it, given its state before."""
    if call.call in ("send", "ack"):
        return state
    if call.answer != "ok":
        return "unknown"
    if call.call == "start":
        return "active"
    if call.call == "end":
        return "ended" if state in ("active", "ended") else "unknown"
    if call.call == "prepare":
        # XA_RDONLY (or any other vote) completes the branch at once, but neither broker votes so: not judged
        return "prepared" if call.code in (None, XA_OK) and state in ("ended", "active") else "unknown"
    if call.call in _COMPLETIONS:
        return "done"
    return state


def branch_states(calls: Iterable[XaCall], upto: int | None = None) -> dict[str, BranchState]:
    """Each branch's state after the first ``upto`` calls (all by default); a branch no call named is absent
    (``none``).  A restart aborts active and ended branches and keeps prepared ones."""
    states: dict[str, BranchState] = {}
    for index, call in enumerate(calls):
        if upto is not None and index >= upto:
            break
        if call.call == "restart":
            states = {b: ("done" if s in ("active", "ended") else s) for b, s in states.items()}
        elif call.call in ("forget", "recover"):
            continue
        elif call.branch:
            states[call.branch] = _step(states.get(call.branch, "none"), call)
    return states


def _drain_receipts(history: Sequence[Op], since: int) -> dict[str, int]:
    """The keys the drain received at or after history index ``since``, each with its first such index."""
    out: dict[str, int] = {}
    for index in range(since, len(history)):
        op = history[index]
        if op.process == "drain" and op.f == "receive" and op.value is not None:
            out.setdefault(op.value, index)
    return out


def _received_after(history: Sequence[Op], key: str, since: int) -> bool:
    return any(op.f == "receive" and op.value == key for op in history[since:])


def judge_xa(
    history: Sequence[Op], calls: Sequence[XaCall], *, drain_complete: bool, desynchronised: bool
) -> XaVerdict:
    """Judge the XA calls of one run against its history (see the module's docstring for the rules)."""
    findings: list[str] = []
    notes: list[str] = []
    keys: list[str] = []
    drained = _drain_receipts(history, 0)
    final = branch_states(calls)
    # who did what in which branch: acknowledgements answered OK, and every send
    acks: dict[str, list[XaCall]] = {}
    sends: dict[str, list[XaCall]] = {}
    for call in calls:
        if call.call == "ack" and call.answer == "ok" and call.key:
            acks.setdefault(call.branch, []).append(call)
        elif call.call == "send" and call.key:
            sends.setdefault(call.branch, []).append(call)
    completion = {c.branch: c for c in calls if c.call in _COMPLETIONS and c.answer == "ok"}

    def count(rule: str, what: str, involved: Iterable[str] = ()) -> None:
        if desynchronised:
            notes.append(
                f"{what}; not counted: a dropped counted frame desynchronised the command numbering, "
                f"and a reattach may then replay ({rule})"
            )
        else:
            findings.append(f"{what} ({rule})")
            keys.extend(involved)

    for index, call in enumerate(calls):
        if call.call == "forget":
            known = branch_states(calls, index).get(call.branch, "none")
            if known not in ("none", "done"):
                continue  # the runner forgets only unknown Xids; one it may know is not judged
            if call.answer == "unknown":
                notes.append(f"forget {call.branch}: no answer, not judged")
            elif call.answer == "ok" or call.code != XAER_NOTA:
                got = "OK" if call.answer == "ok" else f"XA code {call.code}"
                count(
                    "dtx.completed-forgotten",
                    f"forget of {call.branch}, an Xid the broker does not know "
                    f"({'completed' if known == 'done' else 'never started'}), answered {got}, not XAER_NOTA",
                )
        elif call.call == "recover":
            if call.answer != "ok":
                notes.append(
                    "recover: no answer, not judged"
                    if call.answer == "unknown"
                    else f"recover answered XA code {call.code}; not judged"
                )
                continue
            states = branch_states(calls, index)
            listed = set(call.listed)
            missing = sorted(b for b, s in states.items() if s == "prepared" and b not in listed)
            extra = sorted(b for b in listed if states.get(b, "none") in ("none", "active", "ended", "done"))
            if missing:
                count("dtx.prepared-survives", f"recover left out prepared, unresolved branch(es) {', '.join(missing)}")
            if extra:
                count("dtx.prepared-survives", f"recover listed branch(es) not prepared: {', '.join(extra)}")
    for branch, state in final.items():
        if state == "prepared":
            shown = [c.key for c in sends.get(branch, ()) if c.key in drained]
            if shown:
                count(
                    "dtx.prepared-survives",
                    f"{len(shown)} send(s) of {branch}, prepared and never completed, "
                    f"delivered: {', '.join(map(str, shown))}",
                    map(str, shown),
                )
            held = [c.key for c in acks.get(branch, ()) if c.key in _drain_receipts(history, c.at)]
            if held:
                count(
                    "dtx.prepared-acks-held",
                    f"{len(held)} message(s) acknowledged in {branch}, prepared and "
                    f"never completed, delivered again: {', '.join(map(str, held))}",
                    map(str, held),
                )
        elif state == "done" and branch in completion:
            done = completion[branch]
            if done.call == "rollback":
                back = [c.key for c in acks.get(branch, ()) if c.key and not _received_after(history, c.key, done.at)]
                if back and drain_complete:
                    count(
                        "dtx.rollback-after-restart",
                        f"{len(back)} message(s) acknowledged in {branch}, rolled "
                        f"back, never delivered again: {', '.join(back)}",
                        back,
                    )
                elif back:
                    notes.append(
                        f"{len(back)} message(s) acknowledged in {branch}, rolled back, not received "
                        "again; not judged: the final drain was not complete"
                    )
            else:
                again = [c.key for c in acks.get(branch, ()) if c.key and c.key in _drain_receipts(history, done.at)]
                if again:
                    count(
                        "dtx.one-phase-durable",
                        f"{len(again)} message(s) acknowledged in {branch}, committed "
                        f"({done.call}), delivered again: {', '.join(again)}",
                        again,
                    )
    unknown = sorted(b for b, s in final.items() if s == "unknown")
    if unknown:
        notes.append(
            f"branch(es) {', '.join(unknown)}: an XA call got no answer or an error, so their outcome is "
            "unknown and not judged"
        )
    if findings:
        # the evidence of an XA finding: the calls and their answers, which the history does not hold
        shown = [c.describe() for c in calls if c.call not in ("send", "ack")]
        notes.append("XA calls: " + ", ".join(shown[:40]) + (" ..." if len(shown) > 40 else ""))
    return XaVerdict(tuple(findings), tuple(notes), tuple(dict.fromkeys(keys)))


@dataclass(frozen=True, slots=True)
class RestartExpectation:
    """What a restart at some point of the XA log obliges the broker to keep.

    ``survivors``: branches prepared (answered XA_OK) and not completed before it, which recover must list
    after it [dtx.prepared-survives]; ``aborted``: branches active or ended at it, which it aborts
    [dtx.unprepared-aborted]; ``held``: messages those prepared branches acknowledged, never delivered before
    the branch is completed [dtx.prepared-acks-held]; ``held_sends``: their sends, never delivered before a
    commit; ``persisted``: durable sends of branches committed (answered OK, one phase or two) before it,
    delivered after it [dtx.one-phase-durable]; ``consumed``: messages those committed branches acknowledged,
    never delivered again."""

    survivors: frozenset[str]
    aborted: frozenset[str]
    held: frozenset[str]
    held_sends: frozenset[str]
    persisted: frozenset[str]
    consumed: frozenset[str]


def across_restart(calls: Sequence[XaCall], restart: int) -> RestartExpectation:
    """What must hold after a restart marked at index ``restart`` of ``calls`` (the calls before it are what the
    broker had answered when it was killed; a call unanswered there leaves its branch unknown and out of every
    set)."""
    states = branch_states(calls, restart)
    before = calls[:restart]
    committed = {
        c.branch
        for c in before
        if c.call in ("commit", "commit-one-phase") and c.answer == "ok" and states.get(c.branch) == "done"
    }
    prepared = frozenset(b for b, s in states.items() if s == "prepared")

    def keys(kind: str, branches: Iterable[str], durable_only: bool = False) -> frozenset[str]:
        chosen = set(branches)
        # an acknowledgement counts once answered; a send must not be delivered if it may be in the branch,
        # and must be if it certainly is (it did not raise)
        return frozenset(
            c.key
            for c in before
            if c.call == kind
            and c.branch in chosen
            and c.key
            and (c.answer == "ok" or (kind == "send" and not durable_only))
            and (c.durable or not durable_only)
        )

    return RestartExpectation(
        survivors=prepared,
        aborted=frozenset(b for b, s in states.items() if s in ("active", "ended")),
        held=keys("ack", prepared),
        held_sends=keys("send", prepared),
        persisted=keys("send", committed, durable_only=True),
        consumed=keys("ack", committed),
    )
