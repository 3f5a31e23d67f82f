"""What the core asks of its transport: bytes to write per connection, and connections to close.

Rules of this module:
* A confirmable packet sent on a session channel enters the session's resend cache as it is queued,
  so the cache's order is the wire's order.
* Replies that confirm nothing stored (a credit grant, ``needs_no_sync``) may go out before the
  journal sync the rest waits for -- but only while no counted packet is queued ahead of them on
  that connection, so the counted packets stay in cache order on the wire.
* A connection asked to close is closed by the transport after the output taken with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from cck.codec import CURRENT_VERSION, ActiveMQExceptionMessage, Packet, PacketsConfirmedMessage, encode_packet

from ._connection import Connection
from ._session import Session

__all__ = ["Outbox"]


class Outbox:
    """Queues packets into the connections' buffers and keeps the set of connections to close."""

    def __init__(self) -> None:
        self._closing: set[int] = set()
        self._handing: set[int] = set()

    # ---------------------------------------------------------------- packets

    def send(self, conn: Connection, channel_id: int, packet: Packet, session: Session | None = None, *,
             needs_no_sync: bool = False) -> bytes:
        """Queue a packet; a confirmable one on a session channel enters its resend cache.  Returns the frame
        (consumer credits are counted in frame bytes)."""
        frame = encode_packet(packet, channel_id, version=conn.version or CURRENT_VERSION)
        counted = session is not None and packet.requires_confirmations()
        if needs_no_sync and not conn.outbox_counted:
            conn.early += frame
        else:
            conn.outbox += frame
            conn.outbox_counted = conn.outbox_counted or counted
        if counted:
            assert session is not None
            session.send_window.sent(frame)
        return frame

    def replay(self, conn: Connection, frames: Iterable[bytes]) -> None:
        """Frames already in a resend cache, sent again as they are (a reattach)."""
        for frame in frames:
            conn.outbox += frame

    def exception(self, conn: Connection, channel: int, code: int, message: str,
                  correlation: int | None = None) -> None:
        self.send(conn, channel, ActiveMQExceptionMessage(int(code), message, correlation), conn.sessions.get(channel))

    def confirm(self, session: Session, size: int) -> None:
        """A confirmable packet of ``size`` bytes was processed: confirm once the window says so."""
        index = session.receive_window.processed(size)
        if index is not None:
            self.send(session.connection, session.channel_id, PacketsConfirmedMessage(index))

    def flush_confirmations(self, session: Session) -> None:
        """Confirm everything processed so far (TTL checks, a close, a shutdown); not to a detached session."""
        if session.detached_at_ms is not None:
            return
        index = session.receive_window.flush()
        if index is not None:
            self.send(session.connection, session.channel_id, PacketsConfirmedMessage(index))

    # ---------------------------------------------------------------- closing

    def close_after_output(self, conn: Connection) -> None:
        conn.closing = True
        self._closing.add(conn.conn_id)

    def closing(self, conn_id: int) -> bool:
        return conn_id in self._closing

    def hand_over(self, conn: Connection) -> None:
        """The connection leaves the core once its output is written: from then on another part of the server
        speaks on it (a backup's journal replication)."""
        conn.closing = True  # the core reads nothing more from it
        self._handing.add(conn.conn_id)

    def take_handed(self) -> set[int]:
        handed, self._handing = self._handing, set()
        return handed

    def forget(self, conn_id: int) -> None:
        """The connection is gone already: nothing to close."""
        self._closing.discard(conn_id)
        self._handing.discard(conn_id)

    def take_closing(self) -> set[int]:
        closing, self._closing = self._closing, set()
        return closing

    # ---------------------------------------------------------------- taking output

    @staticmethod
    def take(connections: Iterable[Connection]) -> tuple[dict[int, bytes], dict[int, bytes], frozenset[int]]:
        """``(early, held, counted)``: bytes that need no journal sync, bytes that must wait for it, and the
        connections whose held bytes include a counted (resend-cached) packet."""
        early: dict[int, bytes] = {}
        held: dict[int, bytes] = {}
        counted: set[int] = set()
        for conn in connections:
            if conn.early:
                early[conn.conn_id] = bytes(conn.early)
                conn.early.clear()
            if conn.outbox:
                held[conn.conn_id] = bytes(conn.outbox)
                conn.outbox.clear()
                if conn.outbox_counted:
                    counted.add(conn.conn_id)
                conn.outbox_counted = False
        return early, held, frozenset(counted)
