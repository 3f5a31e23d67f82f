"""The codec's error hierarchy.

Every failure to decode (or to encode a value that cannot be represented) is a
:class:`CodecError`.  Each instance carries *where* (byte offset from the start of
the frame or datagram, and the field path), *what* (packet type) and *why*
(expected versus found), and renders them in one message shape::

    malformed SESS_SEND at offset 17 (message -> address): expected length <= 12, found 4294967295
"""

from __future__ import annotations

__all__ = [
    "CodecError",
    "EncodeError",
    "FrameTooLarge",
    "MalformedFrame",
    "UnknownPacketType",
    "UnsupportedVersion",
]


class CodecError(Exception):
    """Base class of every error the codec raises.

    Attributes:
        offset: byte offset, from the start of the frame (or datagram), where the
            problem was found; ``None`` when it does not apply.
        field_path: the field being decoded, outermost first, as ``"a -> b"``.
        packet_type: the Artemis packet type name (``"SESS_SEND"``) or the name of
            the structure (``"discovery datagram"``) being decoded.
        expected: what a well-formed input has at that place.
        found: what was there instead.
    """

    kind = "malformed"

    def __init__(
        self,
        reason: str = "",
        *,
        offset: int | None = None,
        field_path: str = "",
        packet_type: str | None = None,
        expected: str | None = None,
        found: str | None = None,
    ) -> None:
        self.reason = reason
        self.offset = offset
        self.field_path = field_path
        self.packet_type = packet_type
        self.expected = expected
        self.found = found
        super().__init__(self._render())

    def _render(self) -> str:
        subject = f"{self.kind} {self.packet_type or 'input'}"
        if self.offset is not None:
            subject += f" at offset {self.offset}"
        if self.field_path:
            subject += f" ({self.field_path})"
        details: list[str] = []
        if self.reason:
            details.append(self.reason)
        if self.expected is not None or self.found is not None:
            details.append(f"expected {self.expected}, found {self.found}")
        return subject + (": " + "; ".join(details) if details else "")

    def located(self, *, base_offset: int = 0, packet_type: str | None = None) -> CodecError:
        """Return a copy whose offset is shifted by ``base_offset`` and whose packet type is set."""
        return type(self)(
            self.reason,
            offset=None if self.offset is None else self.offset + base_offset,
            field_path=self.field_path,
            packet_type=packet_type or self.packet_type,
            expected=self.expected,
            found=self.found,
        )


class MalformedFrame(CodecError):
    """The bytes do not follow the layout of the packet (or structure) they claim to be."""


class UnknownPacketType(CodecError):
    """The frame's type byte names no packet the codec knows."""

    kind = "unknown packet type in"


class FrameTooLarge(CodecError):
    """The frame's length prefix exceeds the decoder's ``max_frame_size``."""

    kind = "oversized"


class UnsupportedVersion(CodecError):
    """The packet has no known layout at the requested protocol version."""

    kind = "unsupported version for"


class EncodeError(CodecError):
    """A value cannot be represented on the wire (out of range, wrong type, too long)."""

    kind = "cannot encode"
