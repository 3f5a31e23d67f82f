"""hypothesis strategies for every packet type, derived from each packet's
construct format so a new packet is covered without writing a strategy."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from construct import Computed, IfThenElse, Pass, Renamed, Struct
from hypothesis import strategies as st

from cck.codec import (
    LIVE_FAILOVER_VOTE,
    PACKET_CLASSES,
    PRIMARY_FAILOVER_VOTE,
    AddOperationType,
    BackupRegistrationProblem,
    CoreMessage,
    ExceptionType,
    FederationAddressPolicy,
    FederationPolicySet,
    FederationQueueMatcher,
    FederationQueuePolicy,
    FederationTransformer,
    Packet,
    PrimaryStopping,
    PropertyType,
    QuorumVoteMessage,
    QuorumVoteReplyMessage,
    ReplicationStartSyncMessage,
    ServerConnectVote,
    SyncDataType,
    TransportConfiguration,
    TypedProperties,
    Xid,
)
from cck.codec import _primitives as p
from cck.codec._constants import TransportParamType
from cck.codec._format import DataclassAdapter, Since, Tail, TailSince, Trailing
from cck.codec._packets import messages as m
from cck.codec._structures import (
    MESSAGE_HEADERS_ONLY,
    TRANSPORT_CONFIGURATION,
    TYPED_PROPERTIES,
    XID,
    Property,
    TransportParam,
)

# Mostly short strings; one in ten crosses writeString's 4095-unit boundary (the
# SimpleString form), rarely enough that a packet with many strings stays small.
_long_texts = st.text(min_size=4090, max_size=4100, alphabet="ab\u00e9\u4e2d")
texts = st.integers(0, 9).flatmap(lambda n: _long_texts if n == 9 else st.text(max_size=12))
short_texts = st.text(max_size=12)
int_of = {
    id(p.I8): st.integers(-(2**7), 2**7 - 1),
    id(p.I16): st.integers(-(2**15), 2**15 - 1),
    id(p.U16): st.integers(0, 2**16 - 1),
    id(p.I32): st.integers(-(2**31), 2**31 - 1),
    id(p.I64): st.integers(-(2**63), 2**63 - 1),
}
float32s = st.floats(width=32, allow_nan=False, allow_infinity=False)  # JSON (the Java tool) has no inf
bmp_chars = st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))

_PROPERTY_VALUES: dict[PropertyType, st.SearchStrategy[Any]] = {
    PropertyType.NULL: st.none(),
    PropertyType.BOOLEAN: st.booleans(),
    PropertyType.BYTE: int_of[id(p.I8)],
    PropertyType.BYTES: st.binary(max_size=16),
    PropertyType.SHORT: int_of[id(p.I16)],
    PropertyType.INT: int_of[id(p.I32)],
    PropertyType.LONG: int_of[id(p.I64)],
    PropertyType.FLOAT: float32s,
    PropertyType.DOUBLE: st.floats(allow_nan=False, allow_infinity=False),
    PropertyType.STRING: short_texts,
    PropertyType.CHAR: bmp_chars,
}


@st.composite
def typed_properties(draw: st.DrawFn) -> TypedProperties:
    keys = draw(st.lists(short_texts, unique=True, max_size=5))
    entries = []
    for key in keys:
        tag = draw(st.sampled_from(list(PropertyType)))
        entries.append(Property(key, tag, draw(_PROPERTY_VALUES[tag])))
    return TypedProperties(tuple(entries))


xids = st.builds(Xid, int_of[id(p.I32)], st.binary(max_size=64), st.binary(max_size=64))

_PARAM_VALUES = {
    TransportParamType.BOOLEAN: st.booleans(),
    TransportParamType.INT: int_of[id(p.I32)],
    TransportParamType.LONG: int_of[id(p.I64)],
    TransportParamType.STRING: short_texts,
}


@st.composite
def transport_params(draw: st.DrawFn, extra: bool) -> tuple[TransportParam, ...]:
    keys = draw(st.lists(short_texts.filter(lambda k: not k.startswith("$.EP.")), unique=True, max_size=3))
    out = []
    for key in keys:
        kind = draw(st.sampled_from(list(TransportParamType)))
        out.append(TransportParam(key, kind, draw(_PARAM_VALUES[kind])))
    return tuple(out)


transport_configurations = st.builds(
    TransportConfiguration, short_texts, short_texts, transport_params(False), transport_params(True)
)


def _uuid_v1(raw: bytes) -> bytes:
    # Artemis reads a userID as a time-based UUID and forces its version nibble
    # (1) and RFC 4122 variant bits; Java clients only ever send such UUIDs.
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x10
    b[8] = (b[8] & 0x3F) | 0x80
    return bytes(b)


user_ids = st.binary(min_size=16, max_size=16).map(_uuid_v1)


def core_messages(with_body: bool = True) -> st.SearchStrategy[CoreMessage]:
    return st.builds(
        CoreMessage,
        st.binary(max_size=64) if with_body else st.just(b""),
        int_of[id(p.I64)],
        st.none() | short_texts,
        st.none() | user_ids,
        int_of[id(p.I8)],
        st.booleans(),
        int_of[id(p.I64)],
        int_of[id(p.I64)],
        int_of[id(p.I8)],
        typed_properties(),
    )


def for_construct(con: Any) -> st.SearchStrategy[Any]:
    """A strategy for values of one field's construct."""
    if id(con) in int_of:
        return int_of[id(con)]
    if con is p.F64:
        return st.floats(allow_nan=False, allow_infinity=False)  # JSON (the Java tool) has neither
    if con is p.Bool or con is p.RawBool:
        return st.booleans()
    if con is p.Str or con is p.SimpleStr:
        return texts
    if con is p.Bytes:
        return st.binary(max_size=64)
    if con is p.NullableByte:
        return st.none() | st.integers(-128, 127).filter(lambda v: v != -1)
    if con is XID:
        return xids
    if con is TRANSPORT_CONFIGURATION:
        return transport_configurations
    if con is TYPED_PROPERTIES:
        return typed_properties()
    if con is MESSAGE_HEADERS_ONLY:
        return core_messages(with_body=False)
    if isinstance(con, m._MessageBuffer):
        return core_messages()
    if isinstance(con, p._Nullable):
        return st.none() | for_construct(con.subcon)
    if isinstance(con, (Trailing, TailSince)):
        return st.none() | for_construct(con.subcon)
    if isinstance(con, (Tail, Since)):
        return for_construct(con.subcon)
    if isinstance(con, p._Counted):
        return st.lists(for_construct(con.subcon), max_size=4).map(tuple)
    if isinstance(con, DataclassAdapter) and isinstance(con.subcon, Struct):
        return st.builds(con.cls, **{sub.name: for_construct(sub.subcon) for sub in con.subcon.subcons})
    if isinstance(con, DataclassAdapter):
        return for_construct(con.subcon)
    raise NotImplementedError(f"no strategy for {con!r}")


@st.composite
def packets_of(draw: st.DrawFn, cls: type[Packet]) -> Packet:
    """A random, well-formed instance of ``cls``."""
    if cls in _WHOLE_PACKETS:
        return draw(_WHOLE_PACKETS[cls](cls))
    fmt: Struct = cls.FORMAT
    values: dict[str, Any] = {}
    for sub in fmt.subcons:
        assert isinstance(sub, Renamed)
        con = sub.subcon
        if isinstance(con, IfThenElse) and con.elsesubcon is Pass:  # absent when exit / continues
            values[sub.name] = None if _cond_false(values) else draw(for_construct(con.thensubcon))
        elif isinstance(con, IfThenElse):  # `last`: False when exit
            values[sub.name] = False if values.get("exit") else draw(st.booleans())
        elif isinstance(con, Computed):
            values[sub.name] = con.func
        elif sub.name in _ENUM_FIELDS:
            values[sub.name] = draw(_ENUM_FIELDS[sub.name](con))
        else:
            values[sub.name] = draw(for_construct(con))
    # A Tail field can be written as null and read back as null; but a Trailing
    # field that is None must be the last one present.
    return cls(**values)


def _routing_type(con: Any) -> st.SearchStrategy[Any]:
    values = st.sampled_from([0, 1])
    return st.none() | values if con is p.NullableByte else values


def _unique(items: st.SearchStrategy[Any], **unique: Any) -> st.SearchStrategy[tuple[Any, ...]]:
    # A Java set or map on the Artemis side: no repeats (of the whole item, or of its key).
    return st.lists(items, max_size=3, **(unique or {"unique": True})).map(tuple)


_nullable_texts = st.none() | short_texts
_queue_matchers = _unique(st.builds(FederationQueueMatcher, _nullable_texts, _nullable_texts))
# FEDERATION_DOWNSTREAM_CONNECT policies and transformers: HashMaps keyed by name on the Artemis side.
federation_policies = _unique(
    st.one_of(
        st.builds(FederationQueuePolicy, name=short_texts, include_federated=st.booleans(),
                  priority_adjustment=st.none() | int_of[id(p.I32)], transformer_ref=_nullable_texts,
                  includes=_queue_matchers, excludes=_queue_matchers),
        st.builds(FederationAddressPolicy, name=short_texts, auto_delete=st.none() | st.booleans(),
                  auto_delete_delay=st.none() | int_of[id(p.I64)],
                  auto_delete_message_count=st.none() | int_of[id(p.I64)],
                  max_hops=int_of[id(p.I32)], transformer_ref=_nullable_texts, includes=_unique(texts),
                  excludes=_unique(short_texts), enable_divert_bindings=st.booleans()),
        st.builds(FederationPolicySet, name=short_texts, policy_refs=_unique(short_texts)),
    ),
    unique_by=lambda policy: policy.name,
)
federation_transformers = _unique(
    st.builds(FederationTransformer, name=short_texts, class_name=short_texts,
              properties=_unique(st.tuples(short_texts, short_texts), unique_by=lambda kv: kv[0])),
    unique_by=lambda transformer: transformer.name,
)


# Fields that are enums (or sets of them) on the Artemis side: only their
# defined values mean anything there, and a set has no order or repeats.
_ENUM_FIELDS: dict[str, Any] = {
    "routing_type": _routing_type,
    "routing_types": lambda con: st.sampled_from([(), (0,), (1,), (0, 1)]),
    "reason": lambda con: st.none() | st.integers(0, 5),
    "code": lambda con: st.sampled_from(ARTEMIS_ROUND_TRIP_CODES),
    # BACKUP_REGISTRATION_FAILED: Artemis's decoder makes null of a code its enum lacks.
    "problem": lambda con: st.sampled_from([int(b) for b in BackupRegistrationProblem]),
    # REPLICATION_APPEND: Artemis reads an unknown operation byte as ADD (and has no boolean for EVENT below 131);
    # REPLICATION_SCHEDULED_FAILOVER: every code but 0 as FAIL_OVER.
    "operation": lambda con: st.sampled_from([int(o) for o in AddOperationType]),
    "primary_stopping": lambda con: st.sampled_from([int(s) for s in PrimaryStopping]),
    # FEDERATION_DOWNSTREAM_CONNECT: a Java set on the Artemis side (order compared sorted, see tests/artemis).
    "policy_refs": lambda con: st.lists(short_texts, max_size=4, unique=True).map(tuple),
    "policies": lambda con: federation_policies,
    "transformers": lambda con: federation_transformers,
}


# A quorum vote's fields depend on each other: a typed ServerConnectVote under the server-connect handler names; under
# any other handler the vote's bytes, here those of the colocated RequestBackupVote (i32, nullable string, boolean:
# Artemis's Java tool builds those votes by that class) or, in a name Artemis has no handler for, any bytes.
_request_backup_votes = st.builds(
    lambda size, node, available: (p.I32.build(size) + p.N1(p.Str).build(node) + p.Bool.build(available)),
    int_of[id(p.I32)], _nullable_texts, st.booleans(),
)


def _quorum_votes(cls: type[Packet]) -> st.SearchStrategy[Packet]:
    server_connect = st.builds(
        cls, st.sampled_from([PRIMARY_FAILOVER_VOTE, LIVE_FAILOVER_VOTE]),
        st.builds(ServerConnectVote, st.booleans(), texts, _nullable_texts),
    )
    request_backup = st.builds(cls, st.just("RequestBackupQuorumVote"), st.none(), _request_backup_votes)
    other_handlers = short_texts.filter(lambda h: not h.endswith("QuorumVote"))
    other = st.builds(cls, other_handlers, st.none(), st.binary(max_size=16))
    return server_connect | request_backup | other


# REPLICATION_START_FINISH_SYNC: the data type and its IDs are one trailer, on the wire or not (Artemis refuses a data
# type its enum lacks).
_sync_trailers = st.none() | st.tuples(
    st.sampled_from([int(t) for t in SyncDataType]), st.lists(int_of[id(p.I64)], max_size=4).map(tuple)
)


def _start_syncs(cls: type[Packet]) -> st.SearchStrategy[Packet]:
    return st.builds(
        lambda finished, fail_back, node, trailer: cls(finished, fail_back, node, *(trailer or (None, None))),
        st.booleans(), st.booleans(), texts, _sync_trailers,
    )


_WHOLE_PACKETS: dict[type[Packet], Callable[[type[Packet]], st.SearchStrategy[Packet]]] = {
    QuorumVoteMessage: _quorum_votes,
    QuorumVoteReplyMessage: _quorum_votes,
    ReplicationStartSyncMessage: _start_syncs,
}


# Artemis turns an exception code it does not know into GENERIC_EXCEPTION (999),
# and so it does for the native journal errors (200-209) and 213, whose decoded
# message also gains ", code:<NAME>": those codes do not survive Artemis's decoder.
ARTEMIS_ROUND_TRIP_CODES = [int(t) for t in ExceptionType if not (200 <= t <= 209 or t == 213)]


def _cond_false(values: dict[str, Any]) -> bool:
    if "exit" in values:
        return bool(values["exit"])
    return bool(values.get("continues"))


def any_packet() -> st.SearchStrategy[Packet]:
    return st.one_of([packets_of(cls) for cls in PACKET_CLASSES.values()])


def float32(value: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", value))[0])
