"""A minimal blocking core client over a real socket, built straight on the codec
(for tests that must see exactly which requests the broker confirmed)."""

from __future__ import annotations

import socket
from collections.abc import Callable

from cck.codec import (
    PREAMBLE,
    ActiveMQExceptionMessage,
    CoreMessage,
    CreateQueueMessage_V2,
    CreateSessionMessage_V2,
    Frame,
    FrameDecoder,
    NullResponseMessage,
    Packet,
    RoutingType,
    SessionConsumerFlowCreditMessage,
    SessionCreateConsumerMessage,
    SessionIndividualAcknowledgeMessage,
    SessionReceiveMessage,
    SessionSendMessage,
    SessionStart,
    SubscribeClusterTopologyUpdatesMessageV2,
    TypedProperties,
    encode_packet,
)

CHANNEL = 10


class WireError(Exception):
    """The connection failed or the broker refused a request."""


class WireClient:
    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.decoder = FrameDecoder(version=136)
        self.pending: list[Frame] = []
        self.deliveries: list[SessionReceiveMessage] = []
        self.correlation = -1
        self.sock.sendall(PREAMBLE + encode_packet(SubscribeClusterTopologyUpdatesMessageV2(False, 136), 0))
        self._call(CreateSessionMessage_V2("wire-" + str(id(self)), CHANNEL, 136), channel=1,
                   done=lambda p: p.type_name() == "CREATESESSION_RESP")

    def close(self) -> None:
        self.sock.close()

    def _next(self) -> Frame:
        while not self.pending:
            try:
                data = self.sock.recv(65536)
            except OSError as exc:
                raise WireError(str(exc)) from exc
            if not data:
                raise WireError("connection closed by the broker")
            self.decoder.feed(data)
            self.pending.extend(self.decoder)
        return self.pending.pop(0)

    def _call(self, packet: Packet, *, channel: int = CHANNEL, done: Callable[[Packet], bool]) -> Packet:
        self.sock.sendall(encode_packet(packet, channel))
        while True:
            frame = self._next()
            if isinstance(frame.packet, ActiveMQExceptionMessage):
                raise WireError(f"refused: {frame.packet}")
            if done(frame.packet):
                return frame.packet
            if isinstance(frame.packet, SessionReceiveMessage):
                self.deliveries.append(frame.packet)

    def create_queue(self, name: str) -> None:
        self._call(CreateQueueMessage_V2(name, name, routing_type=RoutingType.ANYCAST),
                   done=lambda p: isinstance(p, NullResponseMessage))

    def send_durable(self, address: str, seq: int) -> None:
        """Returns once the broker confirmed the send (NULL_RESPONSE with our correlation)."""
        self.correlation -= 1
        correlation = self.correlation
        message = CoreMessage(b"payload", address=address, durable=True, properties=TypedProperties.of(seq=seq))
        self._call(SessionSendMessage(message, True, correlation, 0),
                   done=lambda p: isinstance(p, NullResponseMessage) and p.correlation_id == correlation)

    def consume(self, queue: str) -> None:
        self.deliveries = []
        self._call(SessionCreateConsumerMessage(0, queue), done=lambda p: p.type_name().startswith("SESS_QUEUEQUERY"))
        self.sock.sendall(encode_packet(SessionConsumerFlowCreditMessage(0, -1), CHANNEL)
                          + encode_packet(SessionStart(), CHANNEL))

    def receive(self) -> SessionReceiveMessage:
        while not self.deliveries:
            frame = self._next()
            if isinstance(frame.packet, SessionReceiveMessage):
                self.deliveries.append(frame.packet)
        return self.deliveries.pop(0)

    def ack(self, delivery: SessionReceiveMessage) -> None:
        """Returns once the broker confirmed the individual acknowledgement."""
        self._call(SessionIndividualAcknowledgeMessage(0, delivery.message.message_id, True),
                   done=lambda p: isinstance(p, NullResponseMessage))
