"""Scapy layers for the Artemis core protocol, built on the codec.

The layers do not define the wire formats a second time: frame bodies are
dissected by :func:`codec.decode_body` and built by :func:`codec.encode_body`
(or :func:`codec.encode_packet`), discovery datagrams by
:func:`codec.decode_discovery` / :func:`codec.encode_discovery`.  Only the fixed
13-byte frame header is spelled out as scapy fields, so that scapy can show,
filter and edit it.

Layers::

    TCP / ArtemisPreamble / ArtemisCore / ArtemisCore / ... / ArtemisIncomplete
    UDP / ArtemisDiscovery

* :class:`ArtemisCore` is one frame: ``length``, ``type`` (``PacketType`` names),
  ``channel`` and ``body``.  ``body`` holds a layer generated from the codec's
  packet dataclass (one scapy field per dataclass field, e.g. ``SESS_SEND``), or
  :class:`ArtemisMalformedBody` (the raw bytes plus the :class:`~codec.CodecError`
  text) when the codec rejects the body.  Further frames in the same segment are
  the payload; a frame cut off at the end of the segment is an
  :class:`ArtemisIncomplete` layer.
* :class:`ArtemisPreamble` is the 7-byte ``ARTEMIS`` a client sends first.
* :class:`ArtemisDiscovery` is a broadcast group's UDP datagram.

Importing this module binds TCP port 61616 (both directions) and UDP port 9876
(destination); :func:`bind_ports` adds others.  ``ArtemisCore.tcp_reassemble``
lets ``sniff(session=TCPSession)`` reassemble frames that span segments.

This is the only module of :mod:`codec` that imports scapy (an optional
dependency: ``pip install core-conformance-kit[scapy]``).
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Final

from scapy import fields as _scapy_fields
from scapy import packet as _scapy_packet
from scapy.config import conf
from scapy.layers.inet import TCP, UDP

from ._constants import CURRENT_VERSION, PacketType
from ._discovery import DEFAULT_DISCOVERY_PORT, DiscoveryDatagram, decode_discovery, encode_discovery
from ._errors import CodecError
from ._frame import DEFAULT_MAX_FRAME_SIZE, HEADER_SIZE, PREAMBLE, decode_body, encode_body, encode_packet
from ._packets._base import Packet as CodecPacket
from ._registry import PACKET_CLASSES
from ._structures import TransportConfiguration, TypedProperties

__all__ = [
    "BODY_LAYERS",
    "DEFAULT_CORE_PORT",
    "ArtemisBody",
    "ArtemisCore",
    "ArtemisDiscovery",
    "ArtemisIncomplete",
    "ArtemisMalformedBody",
    "ArtemisMalformedFrame",
    "ArtemisPreamble",
    "bind_ports",
    "frames",
]

#: The default acceptor port (notes §2.1).
DEFAULT_CORE_PORT: Final = 61616

# scapy's Packet and fields carry inline types that mypy cannot follow through
# the Packet metaclass (and that reject ``None`` defaults for auto-filled
# fields); the layers below are typed against ``Any``.
_F: Any = _scapy_fields
_Layer: Any = _scapy_packet.Packet
_Field: Any = _F.Field
bind_layers: Any = _scapy_packet.bind_layers
bind_bottom_up: Any = _scapy_packet.bind_bottom_up

_LENGTH = struct.Struct(">i")
_TYPE = struct.Struct(">b")
_BYTES_SHOWN = 48


# ============================================================== showing codec values


def _format_bytes(value: bytes) -> str:
    if len(value) <= _BYTES_SHOWN:
        return repr(value)
    return f"{value[:_BYTES_SHOWN]!r}... ({len(value)} bytes)"


def _format_scalar(value: Any) -> str | None:
    """A one-line rendering of a plain value, or None for a structure."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _format_bytes(bytes(value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (tuple, list)) and all(_format_scalar(v) is not None for v in value):
        inner = ", ".join(str(_format_scalar(v)) for v in value)
        return f"[{inner}]"
    return None


def format_value(value: Any, indent: str = "  ") -> str:
    """Render a codec value readably: scalars on one line, dataclasses and
    sequences of them as indented blocks (one line per field)."""
    scalar = _format_scalar(value)
    if scalar is not None:
        return scalar
    if isinstance(value, TypedProperties):
        if not value.entries:
            return "{}"
        lines = [f"{indent}{e.key!r}: {format_value(e.value, indent)} ({e.type.name})" for e in value.entries]
        return "{\n" + "\n".join(lines) + "\n}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
        rendered = [(name, format_value(v, indent)) for name, v in parts]
        one_line = f"{type(value).__name__}(" + ", ".join(f"{n}={r}" for n, r in rendered) + ")"
        if len(one_line) <= 100 and "\n" not in one_line:
            return one_line
        body = "\n".join(f"{indent}{n}={r.replace(chr(10), chr(10) + indent)}" for n, r in rendered)
        return f"{type(value).__name__}(\n{body}\n)"
    if isinstance(value, (tuple, list)):
        items = [format_value(v, indent).replace("\n", "\n" + indent) for v in value]
        return "[\n" + "\n".join(f"{indent}{item}" for item in items) + "\n]"
    return repr(value)


class _ValueField(_Field):  # type: ignore[misc]
    """A field holding a decoded codec value; it has no wire bytes of its own
    (the layer's wire form comes from the codec as a whole)."""

    def __init__(self, name: str, default: Any) -> None:
        super().__init__(name, default, fmt="0s")

    def addfield(self, pkt: Any, s: bytes, val: Any) -> bytes:
        return s

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, Any]:
        return s, self.default

    def i2len(self, pkt: Any, x: Any) -> int:
        return 0

    def any2i(self, pkt: Any, x: Any) -> Any:
        return x

    def i2h(self, pkt: Any, x: Any) -> Any:
        return x

    def i2repr(self, pkt: Any, x: Any) -> str:
        return format_value(x)


class _CodecLayer(_Layer):  # type: ignore[misc]
    """A layer whose wire bytes are produced and parsed by the codec as a whole."""

    def __iter__(self) -> Iterator[Any]:
        # Field values are codec values (tuples, dataclasses), never scapy
        # generators: do not let scapy expand e.g. a 2-tuple into a range.
        yield self

    def do_build(self) -> bytes:
        data: bytes = self.self_build()
        return data + bytes(self.do_build_payload())

    def self_build(self) -> bytes:
        if self.raw_packet_cache is not None:
            return bytes(self.raw_packet_cache)
        return self.encode()

    def encode(self) -> bytes:
        raise NotImplementedError

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        return b"", s or None


# =========================================================================== bodies


class ArtemisBody(_CodecLayer):
    """Base of the generated body layers, one per codec packet class.

    Its fields are the dataclass's fields, in order; the wire form is
    :func:`codec.encode_body` of :meth:`to_codec`, or the dissected bytes
    unchanged while no field was modified.
    """

    name = "Artemis packet body"
    codec_class: ClassVar[type[CodecPacket]]
    fields_desc: ClassVar[list[Any]] = []

    @classmethod
    def from_codec(cls, packet: CodecPacket, *, wire: bytes | None = None) -> Any:
        """The layer for ``packet``; ``wire`` (its encoded body) is kept as the raw form."""
        layer = cls(**{f.name: getattr(packet, f.name) for f in dataclasses.fields(packet)})  # type: ignore[arg-type]
        if wire is not None:
            layer.raw_packet_cache = wire
            layer.raw_packet_cache_fields = {}
            layer.explicit = 1
        return layer

    def to_codec(self) -> CodecPacket:
        """The codec dataclass with this layer's field values."""
        values = {f.name: self.getfieldval(f.name) for f in self.fields_desc}
        return self.codec_class(**values)

    def do_dissect(self, s: bytes) -> bytes:
        packet = decode_body(int(self.codec_class.TYPE), s, version=ArtemisCore.protocol_version)
        for f in dataclasses.fields(packet):  # type: ignore[arg-type]
            self.fields[f.name] = getattr(packet, f.name)
        self.raw_packet_cache = s
        self.raw_packet_cache_fields = dict[str, Any]()
        self.explicit = 1
        return b""

    def encode(self) -> bytes:
        return encode_body(self.to_codec(), version=ArtemisCore.protocol_version)


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _make_body_layer(codec_class: type[CodecPacket]) -> type[ArtemisBody]:
    fields_desc = [
        _ValueField(f.name, _field_default(f))
        for f in dataclasses.fields(codec_class)  # type: ignore[arg-type]
    ]
    namespace = {
        "name": f"{codec_class.TYPE.name} ({codec_class.__name__})",
        "codec_class": codec_class,
        "fields_desc": fields_desc,
        "__module__": __name__,
        "__doc__": f"Body of a {codec_class.TYPE.name} frame, dissected by the codec as "
        f":class:`codec.{codec_class.__name__}`.",
    }
    layer: type[ArtemisBody] = type(f"Artemis_{codec_class.__name__}", (ArtemisBody,), namespace)
    return layer


#: The generated body layer of every codec packet class.
BODY_LAYERS: Final[dict[type[CodecPacket], type[ArtemisBody]]] = {
    cls: _make_body_layer(cls) for cls in PACKET_CLASSES.values()
}


class ArtemisMalformedBody(_Layer):  # type: ignore[misc]
    """A frame body the codec rejected: ``error`` is the CodecError text,
    ``load`` the body bytes, kept unchanged."""

    name = "Artemis malformed body"
    fields_desc: ClassVar[list[Any]] = [_ValueField("error", None), _F.StrField("load", b"")]


def _dissect_body(type_code: int, data: bytes) -> Any:
    try:
        packet = decode_body(type_code, data, version=ArtemisCore.protocol_version)
    except CodecError as exc:
        return ArtemisMalformedBody(error=str(exc), load=data)
    except Exception as exc:  # noqa: BLE001 - a codec bug must not stop dissection of a capture
        return ArtemisMalformedBody(error=f"codec failure {type(exc).__name__}: {exc}", load=data)
    return BODY_LAYERS[type(packet)].from_codec(packet, wire=data)


class _BodyField(_F.PacketLenField):  # type: ignore[misc]
    """The frame body: ``length - 9`` bytes, dissected by the codec."""

    def __init__(self, name: str) -> None:
        super().__init__(name, None, ArtemisMalformedBody, length_from=_body_length)

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, Any]:
        size = _body_length(pkt)
        return s[size:], _dissect_body(int(pkt.type), s[:size])


def _body_length(pkt: Any) -> int:
    length = pkt.length
    return max(int(length) - (HEADER_SIZE - 4), 0) if length is not None else 0


# =========================================================================== frames


def _dispatch(data: bytes | None) -> type[Any] | None:
    """Which layer the bytes at a frame boundary start: a frame, the preamble,
    an incomplete tail or a frame whose length prefix is nonsense."""
    if not data:
        return None
    if data.startswith(PREAMBLE):
        return ArtemisPreamble
    if len(data) < len(PREAMBLE) and PREAMBLE.startswith(data):
        return ArtemisIncomplete
    if len(data) < 4:
        return ArtemisIncomplete
    (length,) = _LENGTH.unpack_from(data)
    if length < HEADER_SIZE - 4:
        return ArtemisMalformedFrame
    if len(data) < HEADER_SIZE or len(data) < length + 4:
        return ArtemisIncomplete
    return None


class ArtemisCore(_Layer):  # type: ignore[misc]
    """One core-protocol frame (notes §2.2): ``i32`` length of what follows,
    ``i8`` packet type, ``i64`` channel ID and the body.

    Build one from a codec packet with :meth:`from_packet`; ``length`` and
    ``type`` left as ``None`` are filled in when building.
    """

    name = "Artemis core frame"
    #: The protocol version the codec decodes and encodes bodies for (the
    #: connection's negotiated version; the newest by default).
    protocol_version: ClassVar[int] = CURRENT_VERSION
    fields_desc: ClassVar[list[Any]] = [
        _F.SignedIntField("length", None),
        _F.EnumField("type", None, {int(t): t.name for t in PacketType}, fmt="b"),
        _F.SignedLongField("channel", 0),
        _BodyField("body"),
    ]

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Any]:
        if cls is ArtemisCore:
            other = _dispatch(_pkt)
            if other is not None:
                return other
        return cls

    @classmethod
    def from_packet(cls, packet: CodecPacket, channel_id: int = 0, *, version: int | None = None) -> Any:
        """The frame :func:`codec.encode_packet` makes for ``packet``; ``raw()`` of
        the result is exactly those bytes."""
        frame = encode_packet(packet, channel_id, version=cls.protocol_version if version is None else version)
        body = BODY_LAYERS[type(packet)].from_codec(packet, wire=frame[HEADER_SIZE:])
        return cls(length=len(frame) - 4, type=int(packet.TYPE), channel=channel_id, body=body)

    @property
    def decoded(self) -> CodecPacket | None:
        """The codec packet of this frame, or None when its body is malformed."""
        body = self.getfieldval("body")
        return body.to_codec() if isinstance(body, ArtemisBody) else None

    @property
    def error(self) -> str | None:
        """The codec's error text when the body is malformed, else None."""
        body = self.getfieldval("body")
        return str(body.error) if isinstance(body, ArtemisMalformedBody) else None

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.length is None:
            pkt = _LENGTH.pack(len(pkt) - 4) + pkt[4:]
        if self.type is None:
            body = self.getfieldval("body")
            if isinstance(body, ArtemisBody):
                pkt = pkt[:4] + _TYPE.pack(int(body.codec_class.TYPE)) + pkt[5:]
        return pkt + pay

    def guess_payload_class(self, payload: bytes) -> type[Any]:
        return ArtemisCore

    def mysummary(self) -> str:
        kind = self.get_field("type").i2repr(self, self.type)
        state = " (malformed)" if isinstance(self.getfieldval("body"), ArtemisMalformedBody) else ""
        return f"Artemis {kind} channel={self.channel}{state}"

    @classmethod
    def tcp_reassemble(cls, data: bytes, metadata: dict[str, Any], session: dict[str, Any]) -> Any:
        """For ``sniff(session=TCPSession)``: the whole frames buffered so far (the
        rest is kept for the next segment), or None while no frame is complete."""
        pos = 0
        if data.startswith(PREAMBLE):
            pos = len(PREAMBLE)
        elif len(data) < len(PREAMBLE) and PREAMBLE.startswith(data) and not metadata.get("tcp_end"):
            return None
        while len(data) - pos >= 4:
            (length,) = _LENGTH.unpack_from(data, pos)
            if length < HEADER_SIZE - 4 or length + 4 > DEFAULT_MAX_FRAME_SIZE:
                return cls(data)  # framing lost: show it all, as malformed
            if len(data) - pos < length + 4:
                break
            pos += length + 4
        if metadata.get("tcp_end") or pos == len(data):
            return cls(data) if data else None
        if pos == 0:
            return None
        result = cls(data[:pos])
        result.lastlayer().add_payload(conf.padding_layer(data[pos:]))
        return result


class ArtemisPreamble(_Layer):  # type: ignore[misc]
    """The ``ARTEMIS`` bytes a core client sends before its first frame (notes §2.1)."""

    name = "Artemis preamble"
    fields_desc: ClassVar[list[Any]] = [_F.StrFixedLenField("magic", PREAMBLE, len(PREAMBLE))]

    def guess_payload_class(self, payload: bytes) -> type[Any]:
        return ArtemisCore


class ArtemisIncomplete(_Layer):  # type: ignore[misc]
    """The start of a frame cut off at the end of the segment (the rest is in
    later segments: use ``TCPSession`` to reassemble).  ``expected`` is the
    whole frame's size when the length prefix is there."""

    name = "Artemis incomplete frame"
    fields_desc: ClassVar[list[Any]] = [_ValueField("expected", None), _F.StrField("load", b"")]

    def post_dissect(self, s: bytes) -> bytes:
        load = bytes(self.fields.get("load", b""))
        if len(load) >= 4 and not PREAMBLE.startswith(load):
            self.fields["expected"] = _LENGTH.unpack_from(load)[0] + 4
        return s

    def mysummary(self) -> str:
        return f"Artemis incomplete frame ({len(self.load)} of {self.expected or '?'} bytes)"


class ArtemisMalformedFrame(_Layer):  # type: ignore[misc]
    """Bytes at a frame boundary whose length prefix cannot start a frame; the
    frame boundaries after it are lost, so it takes the rest of the segment."""

    name = "Artemis malformed frame"
    fields_desc: ClassVar[list[Any]] = [_ValueField("error", None), _F.StrField("load", b"")]

    def post_dissect(self, s: bytes) -> bytes:
        load = bytes(self.fields.get("load", b""))
        if len(load) >= 4:
            self.fields["error"] = (
                f"malformed frame: length prefix {_LENGTH.unpack_from(load)[0]} "
                f"is smaller than a frame header ({HEADER_SIZE - 4})"
            )
        return s


# ======================================================================== discovery


class ArtemisDiscovery(_CodecLayer):
    """A broadcast group's UDP datagram (notes §12.1), dissected by
    :func:`codec.decode_discovery`.  When the codec rejects it, ``error`` holds
    the text and ``load`` the datagram's bytes."""

    name = "Artemis discovery datagram"
    fields_desc: ClassVar[list[Any]] = [
        _ValueField("node_id", ""),
        _ValueField("unique_id", ""),
        _ValueField("connectors", ()),
        _ValueField("error", None),
        _ValueField("load", None),
    ]

    @classmethod
    def from_datagram(cls, datagram: DiscoveryDatagram) -> Any:
        return cls(node_id=datagram.node_id, unique_id=datagram.unique_id, connectors=datagram.connectors)

    @property
    def datagram(self) -> DiscoveryDatagram | None:
        if self.getfieldval("error") is not None:
            return None
        connectors: tuple[TransportConfiguration, ...] = tuple(self.getfieldval("connectors"))
        return DiscoveryDatagram(self.getfieldval("node_id"), self.getfieldval("unique_id"), connectors)

    def do_dissect(self, s: bytes) -> bytes:
        try:
            datagram = decode_discovery(s)
        except CodecError as exc:
            self.fields.update(node_id=None, unique_id=None, connectors=(), error=str(exc), load=s)
        else:
            self.fields.update(
                node_id=datagram.node_id,
                unique_id=datagram.unique_id,
                connectors=datagram.connectors,
                error=None,
                load=None,
            )
        self.raw_packet_cache = s
        self.raw_packet_cache_fields = dict[str, Any]()
        self.explicit = 1
        return b""

    def encode(self) -> bytes:
        load = self.getfieldval("load")
        if self.getfieldval("error") is not None and load is not None:
            return bytes(load)
        datagram = self.datagram
        assert datagram is not None
        return encode_discovery(datagram)

    def mysummary(self) -> str:
        if self.getfieldval("error") is not None:
            return "Artemis discovery (malformed)"
        return f"Artemis discovery node={self.node_id} connectors={len(self.connectors)}"


# ========================================================================= bindings


def _ports(value: int | Iterable[int] | None) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return list(value)


def bind_ports(tcp: int | Iterable[int] | None = None, udp: int | Iterable[int] | None = None) -> None:
    """Also dissect TCP ``tcp`` port(s) (either direction) as core frames and UDP
    datagrams to ``udp`` port(s) as discovery datagrams.  Only dissection is
    bound: ``TCP()/ArtemisCore()`` still defaults to port 61616."""
    for port in _ports(tcp):
        bind_bottom_up(TCP, ArtemisCore, sport=port)
        bind_bottom_up(TCP, ArtemisCore, dport=port)
    for port in _ports(udp):
        bind_bottom_up(UDP, ArtemisDiscovery, dport=port)


bind_layers(TCP, ArtemisCore, sport=DEFAULT_CORE_PORT)
bind_layers(TCP, ArtemisCore, dport=DEFAULT_CORE_PORT)
bind_layers(UDP, ArtemisDiscovery, dport=DEFAULT_DISCOVERY_PORT)


def frames(packet: Any) -> list[Any]:
    """The ArtemisCore layers of a dissected packet, in order."""
    result = []
    layer = packet.getlayer(ArtemisCore)
    while layer is not None:
        result.append(layer)
        layer = layer.payload.getlayer(ArtemisCore) if layer.payload else None
    return result
