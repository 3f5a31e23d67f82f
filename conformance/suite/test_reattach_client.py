"""The client's replay on reattach (spec 000 "100% Transparent session re-attachment", paragraph 5;
artemis-core-notes §9.4): the client half of the ``reattach.cut.*`` cases.

The client sends through the fault proxy, which resets the connection when a chosen confirmable command
arrives (that command never reaches the broker).  The reference broker keeps the session and answers the
client's REATTACH_SESSION with the last command it received; the proxy's wire log then shows what the client
resends on the new connection.  What a client must do: resend exactly the commands after the broker's
last-received one, beginning with the next, each once and in order, before anything new.

Only the kit's client exposes what these cases drive (its sends cut at a chosen command, its failover events);
for the stock client they are UNSUPPORTED.
"""

from __future__ import annotations

from cck.codec import ReattachSessionResponseMessage, SessionSendMessage
from cck.conformance.cases import Case, cases
from cck.conformance.clients import ClientUnderTest
from cck.conformance.evidence import CaseEvidence
from cck.conformance.faults import WireRecord
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.conformance.verdicts import Indeterminate

from ._kit import run
from ._reattach_kit import confirmable_session_frames, proxied_scenario, send_through_a_cut

KIB = 1024

REPLAY = tuple(
    Case(f"reattach.replay-client.{i}", "reattach.replay",
         f"the client makes {total} {'blocking durable' if blocking else 'asynchronous non-durable'} sends of "
         f"100-byte bodies with a {window}-byte window; the proxy resets the connection when confirmable command "
         f"{n + 1} arrives (it never reaches the broker); the broker keeps the session",
         "the client's first confirmable command on the new connection is the one after the broker's last-received "
         "in REATTACH_SESSION_RESP; every command it had sent after that one is resent exactly once, in order, "
         "before any new one; every message reaches the queue once, in send order",
         subject="client", params={"window": window, "cut_after": n, "total": total, "blocking": blocking})
    for i, (window, n, total, blocking) in enumerate((
        (1 * KIB, 5, 30, False),
        (10 * KIB, 20, 60, False),
        (64 * KIB, 10, 20, True),
    ), start=1)
)  # fmt: skip


def _seq(record: WireRecord) -> int | None:
    packet = record.packet
    if not isinstance(packet, SessionSendMessage):
        return None
    return int(str(packet.message.properties.get("seq")))


def _name(record: WireRecord) -> str:
    seq = _seq(record)
    return record.type_name if seq is None else f"{record.type_name} seq {seq}"


def _judge_replay(log: list[WireRecord], channel: int, evidence: CaseEvidence) -> list[str]:
    """The client's resent commands against the broker's last-received; returns the problems found."""
    answers = [r for r in log if isinstance(r.packet, ReattachSessionResponseMessage) and r.direction == "s2c"]
    if not answers:
        raise Indeterminate("no REATTACH_SESSION_RESP on the wire: the reference broker did not answer the reattach")
    answer = answers[-1]
    assert isinstance(answer.packet, ReattachSessionResponseMessage)
    if not answer.packet.reattached:
        raise Indeterminate(f"the reference broker did not keep the session ({answer.packet!r}): no replay to judge")
    last = answer.packet.last_confirmed_command_id
    written = confirmable_session_frames(log, direction="c2s", conn=1, channel=channel,
                                         actions=("forwarded", "delayed", "duplicated", "cut", "dropped"))
    unconfirmed = written[last + 1:]
    if not unconfirmed:
        raise Indeterminate(f"the broker had received all {len(written)} commands the client wrote before the cut: "
                            "nothing to replay")
    later = confirmable_session_frames(log, direction="c2s", conn=answer.conn, channel=channel)
    evidence.note("broker_last_received", last)
    evidence.note("commands_written_before_cut", len(written))
    evidence.note("unconfirmed", [_name(r) for r in unconfirmed])
    evidence.note("first_on_new_connection", [_name(r) for r in later[:len(unconfirmed) + 2]])
    problems: list[str] = []
    if not later or later[0].packet != unconfirmed[0].packet:
        first = later[0].packet if later else None
        problems.append(f"the client's first command on the new connection is {first!r}; the broker had received up "
                        f"to command {last}, so it must be command {last + 1}: {unconfirmed[0].packet!r}")
    head = [r.packet for r in later[:len(unconfirmed)]]
    if head != [r.packet for r in unconfirmed]:
        missing = [i for i, r in enumerate(unconfirmed, start=last + 1) if r.packet not in head]
        problems.append(f"the client's first {len(unconfirmed)} commands on the new connection are not the "
                        f"{len(unconfirmed)} unconfirmed ones in order (commands not resent there: {missing})")
    seqs = [s for r in later if (s := _seq(r)) is not None]
    if seqs != sorted(set(seqs)):
        problems.append(f"sends on the new connection repeated or out of order: {seqs}")
    first_seq = next((s for r in unconfirmed if (s := _seq(r)) is not None), None)
    if first_seq is not None and seqs and seqs != list(range(first_seq, first_seq + len(seqs))):
        problems.append(f"the sends on the new connection are {seqs}, not every one from {first_seq} on")
    return problems


@cases(*REPLAY)
def test_client_replays_what_the_broker_missed(case: Case, cck_client: ClientUnderTest, cck_target: Target,
                                               cck_settings: Settings, evidence: CaseEvidence) -> None:
    cck_client.require_kit("the case cuts the client's sends at a chosen confirmable command and reads its failover "
                           "events, which only the kit's client exposes")
    p = case.params

    async def scenario() -> None:
        async with (proxied_scenario(cck_target, evidence, case.id, durable=p["blocking"], body=b"x" * 100,
                                     confirmation_window_size=p["window"]) as sc,
                    sc.judged(cck_target.url, evidence, cck_settings),
                    sc.connection):
            event = await send_through_a_cut(sc, evidence, cck_settings, cut_after=p["cut_after"], total=p["total"],
                                             blocking=p["blocking"])
            sc.problems += _judge_replay(list(sc.proxy.wire_log), sc.channel, evidence)
            assert event.kind == "reattached", (f"the broker kept the session but the client did not reattach: "
                                                f"{event.kind} {event.detail}")

    run(cck_settings, scenario())
