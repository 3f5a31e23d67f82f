"""Composite wire structures: TypedProperties, Xid, TransportConfiguration and
the core message buffer (notes §3.6-3.8, §6)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from construct import Construct, Pass, Struct, Switch, this

from ._constants import MessageType, PropertyType, TransportParamType
from ._format import DataclassAdapter, build_format, parse_format
from ._primitives import (
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    N1,
    Bool,
    Bytes,
    Char,
    FieldError,
    RawBool,
    SimpleStr,
    Str,
    Uuid,
    remaining,
)

__all__ = [
    "EMPTY_PROPERTIES",
    "MESSAGE",
    "MESSAGE_HEADERS",
    "TRANSPORT_CONFIGURATION",
    "TYPED_PROPERTIES",
    "XID",
    "CoreMessage",
    "decode_message",
    "decode_xid",
    "encode_message",
    "encode_xid",
    "Property",
    "PropertyValue",
    "TransportConfiguration",
    "TransportParam",
    "TypedProperties",
    "Xid",
]

PropertyValue = bool | int | float | str | bytes | None

_INT_RANGES = {
    PropertyType.BYTE: (-(2**7), 2**7 - 1),
    PropertyType.SHORT: (-(2**15), 2**15 - 1),
    PropertyType.INT: (-(2**31), 2**31 - 1),
    PropertyType.LONG: (-(2**63), 2**63 - 1),
}


# ======================================================================= TypedProperties


@dataclass(frozen=True, slots=True)
class Property:
    """One TypedProperties entry: key, wire type tag and value."""

    key: str
    type: PropertyType
    value: PropertyValue


def _infer_type(value: PropertyValue) -> PropertyType:
    if value is None:
        return PropertyType.NULL
    if isinstance(value, bool):
        return PropertyType.BOOLEAN
    if isinstance(value, int):
        lo, hi = _INT_RANGES[PropertyType.INT]
        return PropertyType.INT if lo <= value <= hi else PropertyType.LONG
    if isinstance(value, float):
        return PropertyType.DOUBLE
    if isinstance(value, str):
        return PropertyType.STRING
    if isinstance(value, (bytes, bytearray)):
        return PropertyType.BYTES
    raise TypeError(f"no TypedProperties type for {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class TypedProperties(Mapping[str, PropertyValue]):
    """Message properties: an immutable mapping that remembers each value's wire type.

    Entries keep their wire order, so decoding and re-encoding reproduces the
    bytes (Artemis writes them in Java ``HashMap`` order, which carries no
    meaning; equality is therefore order-sensitive only for byte fidelity).
    """

    entries: tuple[Property, ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, PropertyValue] | None = None, **kw: PropertyValue) -> TypedProperties:
        """Build from plain values, inferring the type: int → INT (LONG when wider), float → DOUBLE."""
        merged = dict(values or {}, **kw)
        return cls(tuple(Property(k, _infer_type(v), v) for k, v in merged.items()))

    @classmethod
    def typed(cls, *entries: tuple[str, PropertyType, PropertyValue]) -> TypedProperties:
        """Build from explicit ``(key, type, value)`` triples."""
        return cls(tuple(Property(k, PropertyType(t), v) for k, t, v in entries))

    def __getitem__(self, key: str) -> PropertyValue:
        for entry in self.entries:
            if entry.key == key:
                return entry.value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (entry.key for entry in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def type_of(self, key: str) -> PropertyType:
        """The wire type tag of ``key``."""
        for entry in self.entries:
            if entry.key == key:
                return entry.type
        raise KeyError(key)

    def with_value(self, key: str, value: PropertyValue, type: PropertyType | None = None) -> TypedProperties:
        """A copy with ``key`` set (replacing an existing entry in place)."""
        new = Property(key, type if type is not None else _infer_type(value), value)
        kept = [new if e.key == key else e for e in self.entries]
        if not any(e.key == key for e in self.entries):
            kept.append(new)
        return TypedProperties(tuple(kept))


EMPTY_PROPERTIES = TypedProperties()
_FLOAT_MAX = 3.4028234663852886e38


class _PropertyValueCheck(Construct):  # type: ignore[misc]
    """Validates a value against its tag before building, with a clear message."""

    def __init__(self, inner: Construct) -> None:
        super().__init__()
        self.inner = inner

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        return self.inner._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        tag = context.type
        if tag in _INT_RANGES:
            lo, hi = _INT_RANGES[PropertyType(tag)]
            if isinstance(obj, bool) or not isinstance(obj, int) or not lo <= obj <= hi:
                raise FieldError(
                    f"{obj!r} is not a {PropertyType(tag).name} value", path=path, offset=None
                )
        elif tag == PropertyType.FLOAT and isinstance(obj, float) and math.isfinite(obj) and abs(obj) > _FLOAT_MAX:
            raise FieldError(f"{obj!r} overflows a FLOAT", path=path, offset=None)
        return self.inner._build(obj, stream, context, path)


class _UnknownTag(Construct):  # type: ignore[misc]
    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        raise FieldError(
            "unknown TypedProperties type tag",
            path=path,
            offset=stream.tell() - 1,
            expected="a tag in 0, 2..11",
            found=str(context.type),
        )

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        raise FieldError(f"unknown property type {context.type!r}", path=path, offset=None)


_PROPERTY = Struct(
    "key" / SimpleStr,
    "type" / I8,
    "value"
    / _PropertyValueCheck(
        Switch(
            this.type,
            {
                PropertyType.NULL: Pass,
                PropertyType.BOOLEAN: RawBool,
                PropertyType.BYTE: I8,
                PropertyType.BYTES: Bytes,
                PropertyType.SHORT: I16,
                PropertyType.INT: I32,
                PropertyType.LONG: I64,
                PropertyType.FLOAT: F32,
                PropertyType.DOUBLE: F64,
                PropertyType.STRING: SimpleStr,
                PropertyType.CHAR: Char,
            },
            default=_UnknownTag(),
        )
    ),
)


class _TypedPropertiesFormat(Construct):  # type: ignore[misc]
    """``0x00`` when null or empty; else ``0x01``, ``i32`` count, then the entries."""

    def _parse(self, stream: BytesIO, context: Any, path: str) -> TypedProperties:
        if I8._parse(stream, context, path) == 0:
            return EMPTY_PROPERTIES
        count_at = stream.tell()
        count = I32._parse(stream, context, path)
        # Each entry takes at least 5 bytes (key length + tag); a count the
        # remaining bytes cannot hold is rejected before looping.
        if count < 0 or count * 5 > remaining(stream):
            raise FieldError(
                "bad property count",
                path=path,
                offset=count_at,
                expected=f"0..{remaining(stream) // 5}",
                found=str(count),
            )
        entries = []
        for i in range(count):
            c = _PROPERTY._parsereport(stream, context, f"{path} -> [{i}]")
            entries.append(Property(c.key, PropertyType(c.type), c.value))
        return TypedProperties(tuple(entries))

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None or len(obj) == 0:
            stream.write(b"\x00")
            return obj
        if not isinstance(obj, TypedProperties):
            obj = TypedProperties.of(obj)
        stream.write(b"\x01")
        I32._build(len(obj.entries), stream, context, path)
        for i, e in enumerate(obj.entries):
            _PROPERTY._build(
                {"key": e.key, "type": int(e.type), "value": e.value}, stream, context, f"{path} -> [{i}]"
            )
        return obj


TYPED_PROPERTIES = _TypedPropertiesFormat()


# ======================================================================= Xid


@dataclass(frozen=True, slots=True)
class Xid:
    """An XA transaction branch identifier. On the wire the branch qualifier comes first."""

    format_id: int
    global_transaction_id: bytes
    branch_qualifier: bytes


XID = DataclassAdapter(
    Xid,
    Struct(
        "format_id" / I32,
        "branch_qualifier" / Bytes,
        "global_transaction_id" / Bytes,
    ),
)


# ======================================================================= TransportConfiguration

EXTRA_PROPERTY_PREFIX = "$.EP."
NETTY_CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
#: HornetQ's servers name their own package's Netty factory in connectors (topology, discovery datagrams) and
#: cannot load Artemis's: a connector meant for them must name this one.
HORNETQ_NETTY_CONNECTOR_FACTORY = "org.hornetq.core.remoting.impl.netty.NettyConnectorFactory"
#: Artemis 1.0.0 took core protocol version 126; every earlier version is HornetQ's.
FIRST_ARTEMIS_PROTOCOL_VERSION = 126


def netty_connector_factory(protocol_version: int | None) -> str:
    """The Netty connector factory class a server speaking ``protocol_version`` names (Artemis's when unknown)."""
    if protocol_version is not None and protocol_version < FIRST_ARTEMIS_PROTOCOL_VERSION:
        return HORNETQ_NETTY_CONNECTOR_FACTORY
    return NETTY_CONNECTOR_FACTORY


#: The message property a producer's duplicate ID travels in (``Message.HDR_DUPLICATE_DETECTION_ID``): Artemis's
#: name from 1.0.0, and HornetQ's, which a HornetQ server alone looks for.
DUPLICATE_ID_PROPERTY = "_AMQ_DUPL_ID"
HORNETQ_DUPLICATE_ID_PROPERTY = "_HQ_DUPL_ID"


def duplicate_id_property(protocol_version: int | None) -> str:
    """The duplicate-ID property a server speaking ``protocol_version`` detects duplicates by (Artemis's when
    unknown)."""
    if protocol_version is not None and protocol_version < FIRST_ARTEMIS_PROTOCOL_VERSION:
        return HORNETQ_DUPLICATE_ID_PROPERTY
    return DUPLICATE_ID_PROPERTY


@dataclass(frozen=True, slots=True)
class TransportParam:
    """One connector parameter with the type byte it travels with."""

    key: str
    type: TransportParamType
    value: bool | int | str


@dataclass(frozen=True, slots=True)
class TransportConfiguration:
    """A connector description (``TransportConfiguration``): name, factory, params.

    ``params`` and ``extra_props`` keep wire order; extra properties travel with
    the ``$.EP.`` key prefix, which is not part of their key here.
    """

    name: str
    factory_class_name: str = NETTY_CONNECTOR_FACTORY
    params: tuple[TransportParam, ...] = ()
    extra_props: tuple[TransportParam, ...] = ()

    @classmethod
    def netty(cls, host: str, port: int, name: str = "netty", *,
              factory: str = NETTY_CONNECTOR_FACTORY) -> TransportConfiguration:
        """A Netty connector as broker.xml URIs write it (host and port as strings); ``factory`` names the
        server family's Netty factory class (:func:`netty_connector_factory`)."""
        return cls(
            name,
            factory,
            (
                TransportParam("host", TransportParamType.STRING, host),
                TransportParam("port", TransportParamType.STRING, str(port)),
            ),
        )

    def param(self, key: str, default: bool | int | str | None = None) -> bool | int | str | None:
        """Value of parameter ``key`` (``default`` when absent)."""
        for p in self.params:
            if p.key == key:
                return p.value
        return default

    @property
    def host(self) -> str | None:
        value = self.param("host")
        return None if value is None else str(value)

    @property
    def port(self) -> int | None:
        """The port, whether it travelled as an int or as a string."""
        value = self.param("port")
        return None if value is None else int(value)


_PARAM_VALUES: dict[TransportParamType, Any] = {
    TransportParamType.BOOLEAN: Bool,
    TransportParamType.INT: I32,
    TransportParamType.LONG: I64,
    TransportParamType.STRING: Str,
}


class _TransportConfigurationFormat(Construct):  # type: ignore[misc]
    def _parse(self, stream: BytesIO, context: Any, path: str) -> TransportConfiguration:
        name = Str._parse(stream, context, f"{path} -> name")
        factory = Str._parse(stream, context, f"{path} -> factory_class_name")
        count_at = stream.tell()
        count = I32._parse(stream, context, f"{path} -> count")
        if count < 0 or count * 5 > remaining(stream):
            raise FieldError(
                "bad parameter count",
                path=path,
                offset=count_at,
                expected=f"0..{remaining(stream) // 5}",
                found=str(count),
            )
        params: list[TransportParam] = []
        extra: list[TransportParam] = []
        for i in range(count):
            where = f"{path} -> params[{i}]"
            key = Str._parse(stream, context, where)
            type_at = stream.tell()
            tag = I8._parse(stream, context, where)
            if tag not in _PARAM_VALUES:
                raise FieldError(
                    "unknown parameter type",
                    path=where,
                    offset=type_at,
                    expected="0..3",
                    found=str(tag),
                )
            value = _PARAM_VALUES[TransportParamType(tag)]._parse(stream, context, where)
            if key.startswith(EXTRA_PROPERTY_PREFIX):
                extra.append(TransportParam(key[len(EXTRA_PROPERTY_PREFIX) :], TransportParamType(tag), value))
            else:
                params.append(TransportParam(key, TransportParamType(tag), value))
        return TransportConfiguration(name, factory, tuple(params), tuple(extra))

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if not isinstance(obj, TransportConfiguration):
            raise FieldError(
                f"expected TransportConfiguration, got {type(obj).__name__}", path=path, offset=None
            )
        Str._build(obj.name, stream, context, path)
        Str._build(obj.factory_class_name, stream, context, path)
        I32._build(len(obj.params) + len(obj.extra_props), stream, context, path)
        for prefix, group in (("", obj.params), (EXTRA_PROPERTY_PREFIX, obj.extra_props)):
            for p in group:
                Str._build(prefix + p.key, stream, context, path)
                I8._build(int(p.type), stream, context, path)
                _PARAM_VALUES[TransportParamType(p.type)]._build(p.value, stream, context, path)
        return obj


TRANSPORT_CONFIGURATION = _TransportConfigurationFormat()


# ======================================================================= core message

#: ``E`` in the message buffer is the body length plus this legacy header size.
BODY_OFFSET = 13


@dataclass(frozen=True, slots=True)
class CoreMessage:
    """A core message as it travels in SESS_SEND / SESS_RECEIVE_MSG (notes §6.1).

    ``message_id`` is 0 from a client; the broker assigns one.  ``user_id`` is
    16 raw UUID bytes or ``None``.  ``type`` is a :class:`MessageType` value.
    """

    body: bytes = b""
    message_id: int = 0
    address: str | None = None
    user_id: bytes | None = None
    type: int = MessageType.DEFAULT
    durable: bool = False
    expiration: int = 0
    timestamp: int = 0
    priority: int = 4
    properties: TypedProperties = field(default=EMPTY_PROPERTIES)

    @staticmethod
    def text_body(text: str | None) -> bytes:
        """The body of a JMS TextMessage: a nullable SimpleString."""
        if text is None:
            return b"\x00"
        data = text.encode("utf-16-le", "surrogatepass")
        return b"\x01" + len(data).to_bytes(4, "big") + data

    @property
    def text(self) -> str | None:
        """The text of a TEXT message body (``None`` for a null text)."""
        return _TEXT_BODY.parse(self.body)  # type: ignore[no-any-return]


_TEXT_BODY = N1(SimpleStr)

MESSAGE_HEADERS = Struct(
    "message_id" / I64,
    "address" / N1(SimpleStr),
    "user_id" / N1(Uuid),
    "type" / I8,
    "durable" / RawBool,
    "expiration" / I64,
    "timestamp" / I64,
    "priority" / I8,
    "properties" / TYPED_PROPERTIES,
)


class _MessageFormat(Construct):  # type: ignore[misc]
    """``i32 E`` (= body length + 13), body, then the headers; or headers only."""

    def __init__(self, with_body: bool) -> None:
        super().__init__()
        self.with_body = with_body

    def _parse(self, stream: BytesIO, context: Any, path: str) -> CoreMessage:
        body = b""
        if self.with_body:
            e_at = stream.tell()
            end = I32._parse(stream, context, f"{path} -> body")
            if end < BODY_OFFSET or end - BODY_OFFSET > remaining(stream):
                raise FieldError(
                    "bad end-of-body position",
                    path=f"{path} -> body",
                    offset=e_at,
                    expected=f"13..{13 + remaining(stream)}",
                    found=str(end),
                )
            body = stream.read(end - BODY_OFFSET)
        h = MESSAGE_HEADERS._parsereport(stream, context, path)
        return CoreMessage(
            body, h.message_id, h.address, h.user_id, h.type, h.durable,
            h.expiration, h.timestamp, h.priority, h.properties,
        )  # fmt: skip

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if not isinstance(obj, CoreMessage):
            raise FieldError(f"expected CoreMessage, got {type(obj).__name__}", path=path, offset=None)
        if self.with_body:
            I32._build(len(obj.body) + BODY_OFFSET, stream, context, path)
            stream.write(obj.body)
        MESSAGE_HEADERS._build(
            {
                "message_id": obj.message_id, "address": obj.address, "user_id": obj.user_id,
                "type": int(obj.type), "durable": obj.durable, "expiration": obj.expiration,
                "timestamp": obj.timestamp, "priority": obj.priority, "properties": obj.properties,
            },
            stream, context, path,
        )  # fmt: skip
        return obj


#: The full message buffer (SESS_SEND, SESS_RECEIVE_MSG).
MESSAGE = _MessageFormat(with_body=True)


def encode_xid(xid: Xid) -> bytes:
    """An Xid as it travels in the XA packets (for storing it)."""
    data: bytes = build_format(XID, xid, what="Xid", version=136)
    return data


def decode_xid(data: bytes) -> Xid:
    """Inverse of :func:`encode_xid`."""
    xid: Xid = parse_format(XID, data, what="Xid", version=136)
    return xid


def encode_message(message: CoreMessage) -> bytes:
    """A message's buffer exactly as it travels inside SESS_SEND (for storing it)."""
    data: bytes = build_format(MESSAGE, message, what="message", version=136)
    return data


def decode_message(data: bytes) -> CoreMessage:
    """Inverse of :func:`encode_message`; raises :class:`~codec.CodecError` when malformed."""
    message: CoreMessage = parse_format(MESSAGE, data, what="message", version=136)
    return message
#: Headers and properties only (SESS_SEND_LARGE, SESS_RECEIVE_LARGE_MSG).
MESSAGE_HEADERS_ONLY = _MessageFormat(with_body=False)
