"""Deliberately malformed frames, for tests that probe a peer's error handling.

The normal encoder always writes a consistent frame; these helpers let a test
choose every header field itself::

    from cck.codec import raw
    raw.frame(type_code=99, body=b"", channel_id=10)        # unknown packet type
    raw.frame(type_code=10, body=b"\\x00", length=2**31 - 1)  # a lying length
"""

from __future__ import annotations

import struct

from ._constants import CURRENT_VERSION
from ._frame import PREAMBLE, encode_body
from ._packets._base import Packet

__all__ = ["PREAMBLE", "body", "frame", "truncated"]


def frame(type_code: int, body: bytes = b"", *, channel_id: int = 0, length: int | None = None) -> bytes:
    """A frame with any type byte and body; ``length`` overrides the length prefix."""
    actual = len(body) + 9 if length is None else length
    return struct.pack(">ibq", actual, type_code, channel_id) + body


def body(packet: Packet, *, version: int = CURRENT_VERSION) -> bytes:
    """The body a well-formed frame of ``packet`` would carry (to tamper with)."""
    return encode_body(packet, version=version)


def truncated(packet: Packet, cut: int, *, channel_id: int = 0, version: int = CURRENT_VERSION) -> bytes:
    """A frame of ``packet`` whose body lost its last ``cut`` bytes but whose length
    prefix still matches what is sent (so the peer must notice inside the body)."""
    data = encode_body(packet, version=version)
    data = data[: max(0, len(data) - cut)]
    return frame(int(packet.TYPE), data, channel_id=channel_id)
