"""Cutting one direction's byte stream into frames without changing a byte.

The codec's :class:`~codec.FrameDecoder` says where frames end; the splitter
keeps its own copy of the bytes so that what the proxy forwards is exactly what
it received (never a re-encoding).  On the first decoding error the rest of the
stream is handed on as raw bytes: once a frame is in doubt, its boundary and
everything after it is too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from cck.codec import (
    CURRENT_VERSION,
    DEFAULT_MAX_FRAME_SIZE,
    NEED_DATA,
    ClusterTopologyChangeMessage_V4,
    CodecError,
    CreateSessionMessage,
    CreateSessionMessage_V2,
    CreateSessionResponseMessage,
    Frame,
    FrameDecoder,
    Packet,
    SubscribeClusterTopologyUpdatesMessageV2,
)

__all__ = ["FrameSplitter", "Unit", "VersionTracker"]

#: Compact the splitter's buffer once this much of it has been handed out.
_COMPACT_AT = 64 * 1024


@dataclass(frozen=True, slots=True)
class Unit:
    """A piece of the stream: a decoded frame, the ``ARTEMIS`` preamble, or undecoded bytes."""

    data: bytes
    kind: Literal["frame", "preamble", "raw"]
    frame: Frame | None = None
    error: str | None = None


class FrameSplitter:
    """Sans-IO: ``feed(bytes)`` yields the units now complete, in stream order."""

    def __init__(self, *, expect_preamble: bool, version: int, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._decoder = FrameDecoder(expect_preamble=expect_preamble, version=version, max_frame_size=max_frame_size)
        self._buffer = bytearray()
        self._start = 0  # bytes of _buffer already handed out
        self._handed = 0  # bytes of the stream handed out
        self.raw_since: int | None = None  # stream offset of the first undecodable byte

    @property
    def version(self) -> int:
        return self._decoder.version

    @version.setter
    def version(self, value: int) -> None:
        # Takes effect from the next frame: the generator decodes lazily, one frame per step.
        self._decoder.version = value

    def feed(self, data: bytes) -> Iterator[Unit]:
        if self.raw_since is not None:
            if data:
                yield Unit(data, "raw", error=f"not decoded: the stream is undecodable from offset {self.raw_since}")
            return
        self._buffer += data
        self._decoder.feed(data)
        while True:
            had_preamble = self._decoder.saw_preamble
            try:
                result = self._decoder.next_frame()
            except CodecError as exc:
                yield from self._preamble(had_preamble)
                self.raw_since = self._handed
                rest = self._take(len(self._buffer) - self._start)
                self._decoder = FrameDecoder()  # drop its copy of the bytes; it is never fed again
                if rest:
                    yield Unit(rest, "raw", error=str(exc))
                return
            yield from self._preamble(had_preamble)
            if result is NEED_DATA:
                return
            assert isinstance(result, Frame)
            yield Unit(self._take(result.size), "frame", frame=result)

    def _preamble(self, had_preamble: bool) -> Iterator[Unit]:
        if not had_preamble and self._decoder.saw_preamble:
            yield Unit(self._take(7), "preamble")

    def _take(self, size: int) -> bytes:
        chunk = bytes(self._buffer[self._start : self._start + size])
        self._start += size
        self._handed += size
        if self._start >= _COMPACT_AT and self._start * 2 >= len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0
        return chunk


class VersionTracker:
    """Keeps both splitters at the version each end decodes with (notes §4.2).

    The broker starts at 0 and takes the client's version from SUBSCRIBE_TOPOLOGY_V2 (always) or
    CREATESESSION (while still 0); the client decodes with its own version until it adopts the
    broker's from CREATESESSION_RESP or CLUSTER_TOPOLOGY_V4.
    """

    def __init__(self, c2s: FrameSplitter, s2c: FrameSplitter) -> None:
        self._c2s = c2s
        self._s2c = s2c
        c2s.version = 0
        s2c.version = CURRENT_VERSION
        self._client_adopted = False

    def saw(self, direction: Literal["c2s", "s2c"], packet: Packet) -> None:
        if direction == "c2s":
            announced: int | None = None
            if isinstance(packet, SubscribeClusterTopologyUpdatesMessageV2):
                announced = packet.client_version
                self._c2s.version = announced
            elif isinstance(packet, CreateSessionMessage | CreateSessionMessage_V2):
                announced = packet.version
                if self._c2s.version == 0:
                    self._c2s.version = announced
            if announced is not None and not self._client_adopted:
                self._s2c.version = announced
        elif isinstance(packet, CreateSessionResponseMessage | ClusterTopologyChangeMessage_V4):
            self._s2c.version = packet.server_version
            self._client_adopted = True
