"""One client connection as the broker core sees it."""

from __future__ import annotations

from dataclasses import dataclass, field

from cck.codec import FrameDecoder

from ._session import Session

__all__ = ["Connection"]

#: TTL before the client's first PING tells us its own (Artemis's default).
DEFAULT_TTL_MS = 60000


@dataclass(eq=False)
class Connection:
    conn_id: int
    created_at_ms: int
    decoder: FrameDecoder = field(default_factory=lambda: FrameDecoder(version=0, expect_preamble=True))
    version: int = 0
    ttl_ms: int = DEFAULT_TTL_MS
    last_check_at_ms: int = 0
    received_since_check: bool = True
    outbox: bytearray = field(default_factory=bytearray)
    #: Replies that depend on nothing stored (credit grants), queued while ``outbox`` held no counted packet: the
    #: transport may write them before the journal sync the outbox waits for without changing the order of counted
    #: packets on the wire, which must stay the resend cache's order.
    early: bytearray = field(default_factory=bytearray)
    outbox_counted: bool = False
    sessions: dict[int, Session] = field(default_factory=dict)
    used_channels: set[int] = field(default_factory=set)
    client_id: str | None = None
    closing: bool = False
    closed: bool = False
    remote: str = ""
    topology_subscribed: bool = False  # hears of members joining later
    #: the client certificate the peer presented in the TLS handshake (DER), if any
    peer_certificate: bytes | None = None

    def set_version(self, version: int) -> None:
        self.version = version
        self.decoder.version = version
