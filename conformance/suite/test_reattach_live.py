"""A reattach request for a session whose first connection is still alive (spec 000 "100% Transparent session
re-attachment", the confirmation window of -1; artemis-core-notes §9.5).

The cases of ``test_reattach`` reconnect the kit's client only after its old connection is gone, so a broker
that closes a windowless session as soon as it sees the connection fail never has to refuse a reattach of one.
Here the first connection stays open: a second connection, its own raw TCP socket through the fault proxy,
sends REATTACH_SESSION for the first connection's session by name.  A session without a confirmation window
has no resend cache, so whichever connection asks, it cannot be reattached.
"""

from __future__ import annotations

import asyncio
import contextlib

from cck.codec import FrameDecoder, ReattachSessionMessage, ReattachSessionResponseMessage, encode_packet
from cck.conformance.cases import Case, cases
from cck.conformance.evidence import CaseEvidence
from cck.conformance.plugin import Settings
from cck.conformance.targets import Target
from cck.conformance.verdicts import CheckFailed
from cck.reference.client import ClientSettings

from ._kit import REATTACHING, client_settings, observed, run
from ._reattach_kit import proxied_scenario

#: How long the broker may take to answer the second connection's REATTACH_SESSION.
ANSWER_S = 15.0
#: The channel of session setup (CREATESESSION, REATTACH_SESSION and their answers).
SETUP_CHANNEL = 1

LIVE = (
    Case("reattach.no-window.4", "reattach.no-window",
         "connection A opens a session with confirmationWindowSize -1 and makes 3 confirmed durable sends; A stays "
         "open; a second connection B (through the fault proxy) sends REATTACH_SESSION naming A's session",
         "the reattach is refused: B gets REATTACH_SESSION_RESP with reattached=false (no window, no re-attachment, "
         "whether or not the session's first connection is still alive); the confirmed messages stay on the queue",
         params={"sends": 3}),
)


async def _reattach_from(url: str, name: str, settings: ClientSettings) -> ReattachSessionResponseMessage:
    """A fresh TCP connection to ``url`` that writes the preamble (``HORNETQ`` to a HornetQ server) and
    REATTACH_SESSION(``name``, -1) and reads until the broker's REATTACH_SESSION_RESP on the setup channel
    (unbounded: the caller bounds it)."""
    version = settings.version
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    try:
        writer.write(settings.preamble_bytes()
                     + encode_packet(ReattachSessionMessage(name, -1), SETUP_CHANNEL, version=version))
        await writer.drain()
        decoder = FrameDecoder(version=version)
        while True:
            data = await reader.read(65536)
            if not data:
                raise CheckFailed("the broker closed the second connection without answering its REATTACH_SESSION")
            decoder.feed(data)
            for frame in decoder:
                if frame.channel_id == SETUP_CHANNEL and isinstance(frame.packet, ReattachSessionResponseMessage):
                    return frame.packet
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@cases(*LIVE)
def test_reattach_of_a_live_windowless_session(case: Case, cck_target: Target, cck_settings: Settings,
                                               evidence: CaseEvidence) -> None:
    deadline = cck_settings.deadline

    async def scenario() -> None:
        # A does not reconnect: once the answer is in, the kit cuts the proxy's links and A simply ends (a session
        # the broker closed would otherwise hold A's SESS_CLOSE until its call timeout); the final drain
        # reconnects as the reattach cases' client does, not windowless
        async with (proxied_scenario(cck_target, evidence, case.id, durable=True, confirmation_window_size=-1,
                                     reconnect_attempts=0) as sc,
                    sc.judged(cck_target.url, evidence, cck_settings,
                              settings=client_settings(cck_target, REATTACHING)),
                    sc.connection):
            for _ in range(case.params["sends"]):
                await sc.flow.send_blocking()
            name = sc.session.name
            evidence.note("session_name", name)
            answer = await observed(
                _reattach_from(sc.proxy.url, name, sc.settings), deadline(ANSWER_S),
                "the broker's REATTACH_SESSION_RESP to a second connection's REATTACH_SESSION for a live session "
                "with window -1")
            evidence.note("reattach_response", repr(answer))
            evidence.note("first_connection_failed_before_answer", repr(sc.connection.failure))
            sc.proxy.cut_all()
            assert not answer.reattached, (
                f"the broker reattached session {name} (confirmationWindowSize -1) to a second connection: "
                f"{answer!r}")

    run(cck_settings, scenario())
