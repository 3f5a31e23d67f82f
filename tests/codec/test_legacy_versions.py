"""The codec at the versions of the older core servers the kit runs (124: HornetQ 2.4.7, 128: Artemis 1.5.6).

Vectors are Artemis's (``fixtures/vectors/packets.jsonl``, written by Artemis 2.44's classes): the version gates
in those classes are ``>= 129`` (address change) and ``>= 130`` (consumer priority, correlation IDs), so a
vector written at 121, 128 or 129 is what the same class writes at every version on the same side of the gate.
"""

from __future__ import annotations

import pytest

from cck.codec import (
    HORNETQ_PREAMBLE,
    PREAMBLE,
    SessionCreateConsumerMessage,
    decode_frame,
    encode_packet,
)

from .vectors import artemis_bytes


def test_the_hornetq_preamble_is_as_long_as_artemis_s() -> None:
    # HornetQ 2.4's acceptor and Artemis's both look at the first 8 bytes and skip exactly 7.
    assert (HORNETQ_PREAMBLE, len(HORNETQ_PREAMBLE)) == (b"HORNETQ", len(PREAMBLE))


@pytest.mark.parametrize("version", [0, 121, 124, 128, 129])
def test_a_consumer_priority_is_not_written_before_2_7(version: int) -> None:
    """Artemis writes the priority only when ``isVersionSupportConsumerPriority`` (>= 130; 0 counts as old)."""
    packet = SessionCreateConsumerMessage(0, "q1", None, False, True, priority=4)
    assert encode_packet(packet, 10, version=version) == artemis_bytes("SESS_CREATECONSUMER/no-priority@129")


@pytest.mark.parametrize("version", [124, 128, 130, 136])
def test_a_consumer_priority_is_read_whenever_it_is_there(version: int) -> None:
    """Decoders read it if bytes remain (what a 2.7+ client wrote reaches an old-version reader intact)."""
    written = encode_packet(SessionCreateConsumerMessage(0, "q1", priority=4), 10, version=136)
    assert decode_frame(written, version=version).packet == SessionCreateConsumerMessage(0, "q1", priority=4)
    plain = decode_frame(artemis_bytes("SESS_CREATECONSUMER/no-priority@129"), version=version).packet
    assert plain == SessionCreateConsumerMessage(0, "q1", priority=None)


@pytest.mark.parametrize("version", [122, 124, 126, 128])
def test_the_1x_send_and_receive_layouts_hold_for_every_version_before_129(version: int) -> None:
    """Artemis's SessionSendMessage_1X / SessionReceiveMessage_1X vectors (written at 121 and at 128, the same
    bytes) decode and re-encode unchanged at the versions between."""
    for name in ("SESS_SEND/text-durable", "SESS_SEND/empty-body", "SESS_RECEIVE_MSG/notes"):
        data = artemis_bytes(f"{name}@128")
        assert artemis_bytes(f"{name}@121") == data
        frame = decode_frame(data, version=version)
        assert encode_packet(frame.packet, frame.channel_id, version=version) == data


def test_a_decoder_expecting_a_preamble_skips_either_one() -> None:
    """An acceptor (and the kit's fault proxy) reads a HornetQ client's stream as it reads an Artemis client's."""
    from cck.codec import HORNETQ_PREAMBLE, PREAMBLE, FrameDecoder, Ping, encode_packet

    frame = encode_packet(Ping(connection_ttl=60_000))
    for preamble in (PREAMBLE, HORNETQ_PREAMBLE):
        decoder = FrameDecoder(expect_preamble=True)
        decoder.feed(preamble + frame)
        decoded = decoder.next_frame()
        assert decoder.saw_preamble
        assert isinstance(decoded.packet, Ping)  # type: ignore[union-attr]


HORNETQ, ARTEMIS = "org.hornetq.", "org.apache.activemq.artemis."


@pytest.mark.parametrize(
    ("version", "package"),
    [(124, HORNETQ), (125, HORNETQ), (126, ARTEMIS), (128, ARTEMIS), (136, ARTEMIS), (None, ARTEMIS)],
)
def test_a_connector_names_the_netty_factory_of_the_server_s_family(version: int | None, package: str) -> None:
    """HornetQ's servers load connectors by class name and only know their own package's factory."""
    from cck.codec import TransportConfiguration, netty_connector_factory

    factory = netty_connector_factory(version)
    assert factory == f"{package}core.remoting.impl.netty.NettyConnectorFactory"
    assert TransportConfiguration.netty("h", 1, factory=factory).factory_class_name == factory


@pytest.mark.parametrize(("version", "name"), [(124, "_HQ_DUPL_ID"), (125, "_HQ_DUPL_ID"), (126, "_AMQ_DUPL_ID"),
                                               (136, "_AMQ_DUPL_ID"), (None, "_AMQ_DUPL_ID")])
def test_the_duplicate_id_travels_in_the_property_of_the_server_s_family(version: int | None, name: str) -> None:
    """A HornetQ server detects duplicates by ``_HQ_DUPL_ID`` only; Artemis renamed it in 1.0.0."""
    from cck.codec import duplicate_id_property

    assert duplicate_id_property(version) == name
